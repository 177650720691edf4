import Foundation

/// A notification payload: the `aps` dictionary plus custom keys beside it.
///
/// Build it with plain property assignments, then ``encoded()`` renders compact JSON once:
/// ```swift
/// var payload = APNsPayload(alert: .init(title: "Hi", body: "You have mail"), badge: 3)
/// payload.custom["messageId"] = "m-42"
/// let bytes = try payload.encoded()
/// ```
public struct APNsPayload: Hashable, Sendable {
    public var alert: APNsAlert?
    /// `0` clears the badge.
    public var badge: Int?
    public var sound: APNsSound?
    public var threadID: String?
    public var category: String?
    /// `content-available: 1`: a background (silent) update.
    public var contentAvailable: Bool
    /// `mutable-content: 1`: the notification service extension runs first.
    public var mutableContent: Bool
    public var targetContentID: String?
    public var interruptionLevel: APNsInterruptionLevel?
    /// 0…1 for notifications; any number for Live Activities.
    public var relevanceScore: Double?
    public var filterCriteria: String?

    // Live Activity keys.
    public var event: APNsLiveActivityEvent?
    /// UNIX seconds when the update was produced. Required on every Live Activity push.
    public var timestamp: Int64?
    public var contentState: JSONValue?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var attributesType: String?
    public var attributes: JSONValue?
    /// iOS 18 push-to-start: ask for an update token (`input-push-token: 1`).
    public var inputPushToken: Bool
    /// iOS 18 push-to-start on a broadcast channel.
    public var inputPushChannel: String?

    /// Keys beside `aps`. APNs ignores custom keys inside `aps`, so they live here.
    public var custom: [String: JSONValue]

    public init(
        alert: APNsAlert? = nil, badge: Int? = nil, sound: APNsSound? = nil,
        threadID: String? = nil, category: String? = nil,
        contentAvailable: Bool = false, mutableContent: Bool = false,
        custom: [String: JSONValue] = [:]
    ) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
        self.threadID = threadID
        self.category = category
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.custom = custom
        self.inputPushToken = false
    }

    /// A background update: `{"aps":{"content-available":1}}` plus custom keys.
    public static func background(custom: [String: JSONValue] = [:]) -> APNsPayload {
        APNsPayload(contentAvailable: true, custom: custom)
    }

    /// Whether the notification shows something to the user (alert, sound or badge).
    public var isUserVisible: Bool { alert != nil || sound != nil || badge != nil }

    /// The `aps` dictionary as a JSON value.
    public var aps: JSONValue {
        var aps: [String: JSONValue] = [:]
        if let alert { aps["alert"] = alert.jsonValue }
        if let badge { aps["badge"] = .int(badge) }
        if let sound { aps["sound"] = sound.jsonValue }
        if let threadID { aps["thread-id"] = .string(threadID) }
        if let category { aps["category"] = .string(category) }
        if contentAvailable { aps["content-available"] = 1 }
        if mutableContent { aps["mutable-content"] = 1 }
        if let targetContentID { aps["target-content-id"] = .string(targetContentID) }
        if let interruptionLevel { aps["interruption-level"] = .string(interruptionLevel.rawValue) }
        if let relevanceScore { aps["relevance-score"] = .double(relevanceScore) }
        if let filterCriteria { aps["filter-criteria"] = .string(filterCriteria) }
        if let event { aps["event"] = .string(event.rawValue) }
        if let timestamp { aps["timestamp"] = .int(Int(timestamp)) }
        if let contentState { aps["content-state"] = contentState }
        if let staleDate { aps["stale-date"] = .int(Int(staleDate)) }
        if let dismissalDate { aps["dismissal-date"] = .int(Int(dismissalDate)) }
        if let attributesType { aps["attributes-type"] = .string(attributesType) }
        if let attributes { aps["attributes"] = attributes }
        if inputPushToken { aps["input-push-token"] = 1 }
        if let inputPushChannel { aps["input-push-channel"] = .string(inputPushChannel) }
        return .object(aps)
    }

    /// Checks the payload's own rules (independent of push type): custom keys, value ranges.
    public func validate() throws {
        if custom["aps"] != nil {
            throw APNsValidationError(.invalidPayload, field: "custom.aps", "'aps' is reserved; custom keys go beside it")
        }
        if let badge, badge < 0 {
            throw APNsValidationError(.invalidPayload, field: "aps.badge", "badge must be 0 or more, not \(badge)")
        }
        if case .critical(_, let volume) = sound, !(0...1).contains(volume) {
            throw APNsValidationError(.invalidPayload, field: "aps.sound.volume", "critical sound volume must be between 0 and 1")
        }
        if let relevanceScore, event == nil, !(0...1).contains(relevanceScore) {
            throw APNsValidationError(.invalidPayload, field: "aps.relevance-score", "relevance score must be between 0 and 1")
        }
        if let contentState, !contentState.isObject {
            throw APNsValidationError(.invalidPayload, field: "aps.content-state", "content-state must be a JSON object")
        }
        if let attributes, !attributes.isObject {
            throw APNsValidationError(.invalidPayload, field: "aps.attributes", "attributes must be a JSON object")
        }
    }

    /// Renders compact JSON: `{"aps":{…},<custom keys>}`.
    public func encoded() throws -> [UInt8] {
        try validate()
        var members: [(key: String, value: JSONValue)] = [("aps", aps)]
        members.append(contentsOf: custom.sorted(by: { $0.key < $1.key }).map { ($0.key, $0.value) })
        var writer = JSONWriter()
        try writer.writeObject(members)
        return writer.bytes
    }
}
