import Foundation

/// Whose inbox a message is in: a user (an alias), or a device that has no alias.
public enum InboxOwner: Hashable, Sendable {
    case alias(String)
    case device(String)

    /// The inbox of a device: its user's, or its own while it has no alias.
    public init(deviceID: String, alias: String?) {
        self = alias.map(InboxOwner.alias) ?? .device(deviceID)
    }

    /// The owner as one text key, as stored: `a:` and the alias, or `d:` and the device id.
    public var key: String {
        switch self {
        case .alias(let alias): "a:" + alias
        case .device(let deviceID): "d:" + deviceID
        }
    }

    public init?(key: String) {
        if key.hasPrefix("a:") {
            self = .alias(String(key.dropFirst(2)))
        } else if key.hasPrefix("d:") {
            self = .device(String(key.dropFirst(2)))
        } else {
            return nil
        }
    }
}

/// A message kept for the app to pull: one per push that asked for it, shared by every inbox it is in.
public struct InboxMessage: Sendable, Equatable {
    /// The push's id.
    public var id: String
    public var appID: String
    public var title: String?
    public var body: String?
    /// The push's custom data (the keys beside `aps`) as a JSON object, or nil.
    public var data: String?
    public var createdAt: Date
    /// After this moment the message is in no listing, and the sweeper deletes it.
    public var expiresAt: Date
    /// The title and body in the push's other languages, as a JSON object by language (`{"ko": {"title": …, "body":
    /// …}}`), for each reader to get its own; nil when the push had none.
    public var localizations: String?

    public init(
        id: String, appID: String, title: String?, body: String?, data: String?, createdAt: Date, expiresAt: Date, localizations: String? = nil
    ) {
        self.id = id
        self.appID = appID
        self.title = title
        self.body = body
        self.data = data
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.localizations = localizations
    }
}

/// A message as one inbox holds it.
public struct InboxItem: Sendable, Equatable {
    /// The message's place in this inbox: increasing in the order messages arrived (the listing's cursor).
    public var sequence: Int64
    public var message: InboxMessage
    public var readAt: Date?

    public init(sequence: Int64, message: InboxMessage, readAt: Date?) {
        self.sequence = sequence
        self.message = message
        self.readAt = readAt
    }
}

/// How a push sets the badge of the devices it reaches.
public enum BadgeChange: Sendable, Equatable, Codable {
    /// The owner's unread, unexpired inbox messages at the moment of sending.
    case unread
    /// The owner's stored counter plus N (once per push and owner), at most ``largest``.
    case increment(Int)
    /// N, which also becomes the owner's stored counter.
    case set(Int)

    /// The largest badge: a number the API takes, and where a counter stops (a payload checked with this badge's
    /// width cannot outgrow APNs' limit as the counter climbs).
    public static let largest = 99_999
}
