import Foundation

/// A notification's payload as TernKit reads it: what Tern put beside `aps`, and the rest. Made from the `userInfo`
/// that UIKit and UserNotifications hand over (synchronously, where it arrives, so nothing that is not `Sendable`
/// crosses into TernKit's tasks).
///
/// Tern marks its notifications with a `tern` key beside `aps`:
/// - `{"tern": {"id", "sequence"}}`: an `auto` push that fell back to APNs; the same message (same id) is also in
///   the device's queue on the online channel, so TernKit shows it once whichever way it arrives first.
/// - `{"tern": {"pushId"}}`: the push's id, in every push Tern made from a notification; the open is reported with it.
/// - `{"tern": {"messageId"}}`: the push is in the user's inbox under that id.
/// - `{"tern": {"wake": true}}`: the server has messages for the device: connect and fetch them.
public struct TernPayload: Sendable, Equatable {
    /// The device message id (`tern.id`): the same id as the channel frame of this message.
    public var messageID: String?
    /// The device message's place in the device's order (`tern.sequence`).
    public var sequence: Int64?
    /// The inbox message id (`tern.messageId`): the push's id.
    public var inboxMessageID: String?
    /// The push's id (`tern.pushId`).
    public var pushID: String?
    /// A wake push: there are messages waiting on the online channel.
    public var isWake: Bool
    /// `aps.badge`, if the notification sets the icon's badge.
    public var badge: Int?
    /// What the notification shows (from `aps.alert`), with its badge, sound, category and thread.
    public var notification: TernNotification?
    /// The custom keys beside `aps` (without `tern`).
    public var data: [String: TernJSON]
    /// The whole payload.
    public var json: [String: TernJSON]

    /// Whether Tern sent this notification (it has a `tern` key).
    public var isFromTern: Bool { messageID != nil || pushID != nil || inboxMessageID != nil || isWake }

    /// Reads a notification's `userInfo`. Keys that are not strings and values that are not JSON are left out.
    public init(userInfo: [AnyHashable: Any]) {
        var object: [String: TernJSON] = [:]
        for (key, value) in userInfo {
            guard let key = key as? String, let json = TernJSON(foundationObject: value) else { continue }
            object[key] = json
        }
        self.init(json: object)
    }

    /// Reads a payload as JSON (`{"aps": {...}, "tern": {...}, ...}`).
    public init(json: [String: TernJSON]) {
        self.json = json
        let tern = json["tern"]
        // Ids are UUIDs; anything else is not Tern's, and would not be taken back in an ack.
        messageID = tern?["id"]?.stringValue.flatMap(UUID.init(uuidString:))?.uuidString.lowercased()
        sequence = tern?["sequence"]?.intValue
        inboxMessageID = tern?["messageId"]?.stringValue.flatMap(UUID.init(uuidString:))?.uuidString.lowercased()
        pushID = tern?["pushId"]?.stringValue.flatMap(UUID.init(uuidString:))?.uuidString.lowercased()
        isWake = tern?["wake"]?.boolValue == true
        let aps = json["aps"]
        badge = aps?["badge"]?.intValue.map { Int(clamping: $0) }
        notification = TernNotification(aps: aps)
        data = json.filter { $0.key != "aps" && $0.key != "tern" }
    }

    /// The message this notification carries as the app's message stream gives it, if Tern sent it as a device
    /// message (`tern.id`).
    func message() -> TernMessage? {
        guard let messageID else { return nil }
        return TernMessage(
            id: messageID, sequence: sequence, pushID: pushID ?? inboxMessageID, notification: notification, data: data.isEmpty ? nil : .object(data),
            createdAt: nil, source: .apns)
    }
}

/// What a message shows: a notification's visible part. From a channel frame's `notification`, or from a
/// notification's `aps`.
public struct TernNotification: Sendable, Equatable, Decodable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    /// The icon's badge with this message, when the push set it (a number, or the server's count).
    public var badge: Int?
    public var sound: String?
    public var category: String?
    public var threadID: String?

    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil, badge: Int? = nil, sound: String? = nil, category: String? = nil,
        threadID: String? = nil
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.badge = badge
        self.sound = sound
        self.category = category
        self.threadID = threadID
    }

    enum CodingKeys: String, CodingKey {
        case title, subtitle, body, badge, sound, category
        case threadID = "threadId"
    }

    /// From `aps`: `alert` as a string (the body) or `{title, subtitle, body}`, `badge`, `sound` (a name, or
    /// `{name}` for a critical alert), `category`, `thread-id`. Nil when `aps` shows nothing.
    init?(aps: TernJSON?) {
        guard let aps else { return nil }
        let alert = aps["alert"]
        title = alert?["title"]?.stringValue
        subtitle = alert?["subtitle"]?.stringValue
        body = alert?.stringValue ?? alert?["body"]?.stringValue
        badge = aps["badge"]?.intValue.map { Int(clamping: $0) }
        sound = aps["sound"]?.stringValue ?? aps["sound"]?["name"]?.stringValue
        category = aps["category"]?.stringValue
        threadID = aps["thread-id"]?.stringValue
        if title == nil, subtitle == nil, body == nil, badge == nil, sound == nil { return nil }
    }
}
