import Foundation
import TernAPNs
import TernStore
import TernWeb

/// The `notification` object of a push request: the common `aps` keys and custom data beside `aps`.
struct NotificationInput: Codable, Sendable {
    var title: String?
    var subtitle: String?
    var body: String?
    var badge: BadgeInput?
    var sound: String?
    var category: String?
    var threadID: String?
    var contentAvailable: Bool?
    var mutableContent: Bool?
    var interruptionLevel: String?
    /// Keys beside `aps`.
    var data: [String: JSONValue]?
    /// The title, subtitle and body in other languages, by language tag: each device gets the one its registered
    /// locale picks (``Localizations``), or these fields when none does.
    var localizations: [String: LocalizedTexts]?
}

/// `notification.badge`: a number (sets it), `"unread"` (the user's unread inbox messages when sent) or `"+N"` (the
/// user's stored counter plus N).
enum BadgeInput: Codable, Sendable, Equatable {
    case change(BadgeChange)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(Int.self) {
            guard (0...BadgeChange.largest).contains(number) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "badge must be 0-99999")
            }
            self = .change(.set(number))
            return
        }
        if let text = try? container.decode(String.self) {
            if text == "unread" {
                self = .change(.unread)
                return
            }
            if text.hasPrefix("+"), let step = Int(text.dropFirst()), (1...BadgeChange.largest).contains(step) {
                self = .change(.increment(step))
                return
            }
        }
        throw DecodingError.dataCorruptedError(in: container, debugDescription: "badge is a number, \"unread\" or \"+N\" (N 1-99999)")
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .change(.set(let number)): try container.encode(number)
        case .change(.unread): try container.encode("unread")
        case .change(.increment(let step)): try container.encode("+\(step)")
        }
    }

    var change: BadgeChange {
        switch self { case .change(let change): change }
    }
}

extension BadgeChange {
    /// Whether each recipient's value is known only when it is sent (not written in the push's payload).
    var isPerRecipient: Bool {
        switch self {
        case .unread, .increment: true
        case .set: false
        }
    }
}

/// The `inbox` object of a push request: keep the message for the app to pull.
struct InboxInput: Codable, Sendable {
    /// Seconds to keep it: default 72 hours, at most the app's `inboxMaxTTL`.
    var ttl: Int?
}

/// What a push keeps in its recipients' inboxes.
struct InboxContent: Codable, Sendable, Equatable {
    var ttl: Int
    var title: String?
    var body: String?
    /// The custom data as a JSON object, or nil.
    var data: String?
    /// The title and body in the push's other languages, as the inbox keeps them (``TernStore/InboxMessage/localizations``).
    var localizations: String?
}

/// The `apns` object of a push request.
struct APNsOptionsInput: Codable, Sendable {
    /// `alert` (default), `background`, `voip`, … (the `apns-push-type` values).
    var pushType: String?
    /// 10, 5 or 1.
    var priority: Int?
    /// Epoch seconds after which APNs stops trying; 0: deliver now or never. At most ``latestExpiration``.
    var expiration: Int64?
    /// At most 64 bytes. Default: the push id, so a recipient sent twice (a crash mid-push) shows one notification.
    var collapseID: String?

    /// The latest `expiration`: 2^32 - 1 seconds (February 2106), what the binary protocol's expiry field holds.
    static let latestExpiration: Int64 = 4_294_967_295
}

/// A push's notification as stored: rendered and checked once at request time, shared by every recipient.
struct PushContent: Codable, Sendable, Equatable {
    var payload: Data
    /// The payload in each of the push's other languages (`notification.localizations`), by ``Localizations/key(_:)``;
    /// nil when it has none.
    var localizedPayloads: [String: Data]?
    var pushType: String
    var priority: Int
    var expiration: Int64?
    var collapseID: String?
    /// How each recipient's badge is set, when the server computes it (`unread`, `+N`) or stores it (a number, also
    /// in the payload). Nil: the payload says.
    var badge: BadgeChange?
    /// The message to keep in the recipients' inboxes, if the push asked for it.
    var inbox: InboxContent?
    /// How the push uses the devices' own connections; nil: through APNs only (`delivery` `apns`).
    var online: OnlineDelivery?
    /// The name of the broadcast channel whose APNs id a start carries in `aps.input-push-channel` (the push's
    /// `broadcastChannel`): while the push is scheduled, the channel is not deleted.
    var broadcastChannel: String?

    /// The key beside `aps` that carries the push's id, and its inbox message's if it has one:
    /// `{"tern": {"pushId": "…", "messageId": "…"}}`. Only in a payload rendered from `notification`: a raw payload is
    /// sent as it was given.
    static let customKey = "tern"
    /// The push id a preview (the console's composer) renders with, before the push has one: as long as any.
    static let previewPushID = "00000000-0000-4000-8000-000000000000"

    /// Renders and checks a request's `notification` or raw `payload` with its `apns` options for `topic`.
    /// - Throws: a 400 naming the field at fault.
    static func render(
        notification: NotificationInput?, payload: JSONValue?, options: APNsOptionsInput?, topic: String,
        inbox: InboxInput?, pushID: String, app: AppRecord
    ) throws(JSONAPIError) -> PushContent {
        var inboxContent: InboxContent?
        if let inbox {
            guard let notification else {
                throw .badRequest(field: "inbox", "an inbox message needs a notification (title, body, data), not a raw payload")
            }
            let maxTTL = app.inboxMaxTTL
            let ttl = inbox.ttl ?? min(AppRecord.defaultInboxTTL, maxTTL)
            guard (1...maxTTL).contains(ttl) else {
                throw .badRequest(field: "inbox.ttl", "inbox.ttl is 1-\(maxTTL) seconds (the app's inboxMaxTTL)")
            }
            var data: String?
            if let custom = notification.data, !custom.isEmpty {
                data = (try? JSONValue.object(custom).serialized()).map { String(decoding: $0, as: UTF8.self) }
            }
            inboxContent = InboxContent(ttl: ttl, title: notification.title, body: notification.body, data: data)
        }
        if notification?.data?[customKey] != nil {
            throw .badRequest(
                field: "notification.data.\(customKey)", "'\(customKey)' carries Tern's ids (the push's, and its inbox message's): use another key")
        }
        // The push's id, for the app to report the user's open (`POST …/opens` with `pushId`); the inbox message's id
        // (the same), for the app to find it in the inbox.
        var ids: [String: JSONValue] = ["pushId": .string(pushID)]
        if inboxContent != nil { ids["messageId"] = .string(pushID) }
        var content = try renderPayload(notification: notification, ids: ids, payload: payload, options: options, topic: topic)
        if let notification, let localizations = notification.localizations {
            var inboxTexts: [String: JSONValue] = [:]
            var payloads: [String: Data] = [:]
            for language in try checked(localizations) {
                let localized = language.texts.applied(to: notification)
                do {
                    payloads[language.key] = try renderPayload(notification: localized, ids: ids, payload: nil, options: options, topic: topic).payload
                } catch {
                    throw .badRequest(field: "notification.localizations.\(language.tag)", error.message)
                }
                if language.texts.title != nil || language.texts.body != nil {
                    var texts: [String: JSONValue] = [:]
                    if let title = localized.title { texts["title"] = .string(title) }
                    if let body = localized.body { texts["body"] = .string(body) }
                    inboxTexts[language.key] = .object(texts)
                }
            }
            content.localizedPayloads = payloads
            if !inboxTexts.isEmpty, let serialized = try? JSONValue.object(inboxTexts).serialized() {
                inboxContent?.localizations = String(decoding: serialized, as: UTF8.self)
            }
        }
        content.inbox = inboxContent
        content.badge = notification?.badge?.change
        return content
    }

    /// `notification.localizations`, checked: their tags, one language once, each with a text. - Returns: each
    /// language with its tag as given and as looked up, in the order of the tags.
    private static func checked(
        _ localizations: [String: LocalizedTexts]
    ) throws(JSONAPIError) -> [(tag: String, key: String, texts: LocalizedTexts)] {
        guard localizations.count <= Localizations.limit else {
            throw .badRequest(field: "notification.localizations", "at most \(Localizations.limit) languages in one push")
        }
        var languages: [(tag: String, key: String, texts: LocalizedTexts)] = []
        var tagByKey: [String: String] = [:]
        for (tag, texts) in localizations.sorted(by: { $0.key < $1.key }) {
            let field = "notification.localizations.\(tag.prefix(LanguageTags.longestTag))"
            guard LanguageTags.isValidTag(tag) else { throw .badRequest(field: field, "'\(tag.prefix(LanguageTags.longestTag))' is not \(LanguageTags.tagRule)") }
            let key = LanguageTags.key(tag)
            if let other = tagByKey[key] { throw .badRequest(field: field, "\(other) and \(tag) name one language: give it once") }
            tagByKey[key] = tag
            guard texts.title != nil || texts.subtitle != nil || texts.body != nil else {
                throw .badRequest(field: field, "give the language's title, subtitle or body")
            }
            languages.append((tag, key, texts))
        }
        return languages
    }

    /// - Parameter ids: what goes under ``customKey`` in a payload rendered from `notification`.
    private static func renderPayload(
        notification: NotificationInput?, ids: [String: JSONValue], payload: JSONValue?, options: APNsOptionsInput?, topic: String
    ) throws(JSONAPIError) -> PushContent {
        let pushType: APNsPushType
        do {
            pushType = try APNsPushType(headerValue: options?.pushType ?? (notification?.contentAvailable == true
                && notification?.title == nil && notification?.body == nil ? "background" : "alert"))
        } catch {
            throw .badRequest(field: "apns.pushType", "\(error)")
        }
        var priority: APNsPriority?
        if let value = options?.priority {
            do {
                priority = try APNsPriority(value)
            } catch {
                throw .badRequest(field: "apns.priority", "priority must be 10, 5 or 1")
            }
        }
        var expiration = APNsExpiration.none
        if let value = options?.expiration {
            // At most 2^32 - 1 (the year 2106), the largest the binary protocol's expiry holds.
            guard (0...APNsOptionsInput.latestExpiration).contains(value) else {
                throw .badRequest(field: "apns.expiration", "expiration is epoch seconds, 0-\(APNsOptionsInput.latestExpiration) (0: now or never)")
            }
            expiration = (try? APNsExpiration(headerValue: String(value))) ?? .none
        }
        let metadata = APNsRequestMetadata(
            topic: topic + (pushType.topicSuffix ?? ""), pushType: pushType, priority: priority, expiration: expiration,
            collapseID: options?.collapseID)
        let sample = try! DeviceToken(bytes: [UInt8](repeating: 0, count: 32))
        let rendered: APNsNotification
        do {
            switch (notification, payload) {
            case (let notification?, nil):
                var built = try build(notification)
                built.custom[customKey] = .object(ids)
                // A badge the server computes per recipient goes in at sending: check the size with the widest one.
                if let change = notification.badge?.change, change.isPerRecipient {
                    built.badge = BadgeChange.largest
                    _ = try APNsNotification(deviceToken: sample, metadata: metadata, payload: built)
                    built.badge = nil
                }
                rendered = try APNsNotification(deviceToken: sample, metadata: metadata, payload: built)
            case (nil, let payload?):
                try checkRaw(payload, pushType: pushType, priority: priority)
                rendered = try APNsNotification(deviceToken: sample, metadata: metadata, rawPayload: try payload.serialized())
            case (nil, nil):
                throw JSONAPIError.badRequest(field: "notification", "give notification (title, body, badge, …) or a raw payload")
            case (.some, .some):
                throw JSONAPIError.badRequest(field: "payload", "give either notification or payload, not both")
            }
        } catch let error as JSONAPIError {
            throw error
        } catch let error as APNsValidationError {
            throw .badRequest(field: fieldName(error.field, raw: payload != nil), error.message)
        } catch {
            throw .badRequest(field: "payload", "the payload cannot be rendered: \(error)")
        }
        return PushContent(
            payload: Data(rendered.payload), pushType: pushType.rawValue, priority: rendered.metadata.priority.rawValue,
            expiration: options?.expiration, collapseID: options?.collapseID)
    }

    /// A raw payload must be what its push type sends: an object, with an `aps` object; an alert that alerts,
    /// sounds, badges or at least wakes the app; a background push with `content-available` and nothing visible.
    private static func checkRaw(_ payload: JSONValue, pushType: APNsPushType, priority: APNsPriority?) throws(JSONAPIError) {
        guard case .object(let members) = payload else { throw .badRequest(field: "payload", "a raw payload is a JSON object") }
        let aps: [String: JSONValue]?
        switch members["aps"] {
        case .object(let object)?: aps = object
        case nil: aps = nil
        default: throw .badRequest(field: "payload.aps", "aps is an object")
        }
        let visible = ["alert", "sound", "badge"].contains { aps?[$0] != nil }
        let wakes = aps?["content-available"] == .int(1)
        switch pushType {
        case .alert:
            guard visible || wakes else {
                throw .badRequest(field: "payload.aps", "an alert push needs aps with alert, sound, badge or content-available")
            }
            if !visible, (priority ?? .immediate) == .immediate {
                throw .badRequest(field: "apns.priority", "a content-available-only push must use priority 5; priority 10 must alert, sound or badge")
            }
        case .background:
            guard wakes, !visible else {
                throw .badRequest(field: "payload.aps", "a background push is aps {\"content-available\": 1} with no alert, sound or badge")
            }
        case .voip, .liveactivity, .complication, .pushtotalk, .widgets, .controls:
            guard aps != nil else { throw .badRequest(field: "payload.aps", "an apns-push-type \(pushType.rawValue) push needs an aps object") }
        default:
            break
        }
    }

    private static func build(_ input: NotificationInput) throws -> APNsPayload {
        var payload = APNsPayload()
        if input.title != nil || input.subtitle != nil || input.body != nil {
            payload.alert = APNsAlert(title: input.title, subtitle: input.subtitle, body: input.body)
        }
        if case .change(.set(let number))? = input.badge { payload.badge = number }
        payload.sound = input.sound.map(APNsSound.named)
        payload.category = input.category
        payload.threadID = input.threadID
        payload.contentAvailable = input.contentAvailable ?? false
        payload.mutableContent = input.mutableContent ?? false
        if let level = input.interruptionLevel {
            guard let value = try? APNsInterruptionLevel(level) else {
                throw JSONAPIError.badRequest(
                    field: "notification.interruptionLevel", "interruptionLevel must be passive, active, time-sensitive or critical")
            }
            payload.interruptionLevel = value
        }
        payload.custom = input.data ?? [:]
        if payload.custom["aps"] != nil {
            throw JSONAPIError.badRequest(field: "notification.data.aps", "data goes beside aps: it cannot have an aps key")
        }
        // A badge worked out per recipient is content too, though it goes in only at sending.
        guard payload.isUserVisible || payload.contentAvailable || payload.mutableContent || !payload.custom.isEmpty
            || input.badge != nil
        else {
            throw JSONAPIError.badRequest(field: "notification", "nothing to send: give title, body, badge, sound, contentAvailable or data")
        }
        return payload
    }

    /// The API's name for a protocol-core field: the `apns` options by name, the rest of the payload as
    /// `notification` (or `payload…` for a raw payload).
    private static func fieldName(_ field: String, raw: Bool) -> String {
        switch field {
        case "apns-topic": "topic"
        case "apns-push-type": "apns.pushType"
        case "apns-priority": "apns.priority"
        case "apns-expiration": "apns.expiration"
        case "apns-collapse-id": "apns.collapseID"
        case let other where other.hasPrefix("aps") || other.hasPrefix("payload"):
            raw ? (other.hasPrefix("payload") ? other : "payload.\(other)") : "notification"
        default: field
        }
    }

    /// The payload in `language` (one of ``localizedPayloads``; nil: the notification's own), with `aps.badge` set to
    /// `badge` if there is one.
    func payload(language: String? = nil, badge: Int?) -> [UInt8] {
        let payload = payload(in: language)
        guard let badge else { return Array(payload) }
        guard case .object(var root)? = try? JSONValue(parsing: payload) else { return Array(payload) }
        guard case .object(var aps)? = root["aps"] ?? .object([:]) else { return Array(payload) }
        aps["badge"] = .int(badge)
        root["aps"] = .object(aps)
        return (try? JSONValue.object(root).serialized()) ?? Array(payload)
    }

    /// The payload of an `auto` push that falls back to APNs: `tern.id` and `tern.sequence` name the device's
    /// message, so the app sees it once whichever way it came; in the recipient's language, with its badge, if it has
    /// them.
    func fallbackPayload(messageID: String, sequence: Int64, language: String? = nil, badge: Int?) -> [UInt8] {
        let payload = payload(in: language)
        guard case .object(var root)? = try? JSONValue(parsing: payload) else { return Array(payload) }
        if let badge, case .object(var aps)? = root["aps"] ?? .object([:]) {
            aps["badge"] = .int(badge)
            root["aps"] = .object(aps)
        }
        var tern: [String: JSONValue] = [:]
        if case .object(let existing)? = root[Self.customKey] { tern = existing }
        tern["id"] = .string(messageID)
        tern["sequence"] = .int(Int(sequence))
        root[Self.customKey] = .object(tern)
        return (try? JSONValue.object(root).serialized()) ?? Array(payload)
    }

    /// The size of the largest payload a recipient of this push can get, in any of its languages: its fallback's for
    /// an `auto` push, else the payload with the widest per-recipient badge, if it has one.
    var widestPayloadSize: Int {
        if online?.mode == .auto { return widestFallbackSize }
        let badge = badge?.isPerRecipient == true ? BadgeChange.largest : nil
        return languages.map { payload(language: $0, badge: badge).count }.max() ?? 0
    }

    /// The size of the largest ``fallbackPayload(messageID:sequence:language:badge:)`` this push can have: a message id
    /// as long as any, the largest sequence, and the widest per-recipient badge, in any of its languages.
    var widestFallbackSize: Int {
        languages.map { language in
            fallbackPayload(
                messageID: "00000000-0000-5000-8000-000000000000", sequence: .max, language: language,
                badge: badge?.isPerRecipient == true ? BadgeChange.largest : nil
            ).count
        }.max() ?? 0
    }

    /// The payload in `language`, one of ``localizedPayloads``; nil (or one the push does not have): the notification's own.
    private func payload(in language: String?) -> Data {
        language.flatMap { localizedPayloads?[$0] } ?? payload
    }

    /// The push's languages: nil for the notification's own texts, then each of ``localizedPayloads``.
    private var languages: [String?] {
        [nil] + (localizedPayloads?.keys.sorted() ?? [])
    }

    /// What every recipient's notification of a push shares, worked out once per chunk rather than per recipient.
    func template(topic: String, pushID: String) -> NotificationTemplate {
        let pushType = (try? APNsPushType(headerValue: self.pushType)) ?? .alert
        let expiration = self.expiration.flatMap { try? APNsExpiration(headerValue: String($0)) } ?? .none
        let metadata = APNsRequestMetadata(
            topic: topic + (pushType.topicSuffix ?? ""), pushType: pushType, priority: try? APNsPriority(priority),
            expiration: expiration, collapseID: collapseID ?? pushID)
        return NotificationTemplate(metadata: metadata, payload: Array(self.payload))
    }
}

extension PushRecord {
    /// What the push sends, as stored when it was made; nil if it cannot be read.
    var content: PushContent? {
        try? JSONDecoder().decode(PushContent.self, from: Data(notification))
    }
}

/// A push's headers and payload, ready to address to each recipient.
struct NotificationTemplate: Sendable {
    var metadata: APNsRequestMetadata
    var payload: [UInt8]

    /// The notification for one recipient, with an `apns-id` of its own (APNs names the notification by it in its
    /// answers; the client keeps it across retries).
    /// - Parameters:
    ///   - payload: the recipient's own payload (its badge), if it has one.
    ///   - ids: where the `apns-id` comes from: one generator per chunk, since Foundation's `UUID()` costs three
    ///     system calls per notification.
    func notification(to token: DeviceToken, payload: [UInt8]? = nil, ids: inout FastUUIDGenerator) -> APNsNotification {
        var metadata = metadata
        metadata.apnsID = ids.nextUUID()
        return APNsNotification(unchecked: token, metadata: metadata, payload: payload ?? self.payload)
    }
}

/// A push's `delivery` when it is `online` or `auto` (README, "The online channel").
///
/// - `online`: a transparent message kept for each device (``TernStore/DeviceMessage``), sent over its connection
///   if it has one, else when it connects, for `ttl` seconds; with `wake`, a device that is offline also gets a
///   silent `content-available` push so the app can connect and fetch.
/// - `auto`: online first; a device that is offline, or that has not acknowledged within `ackTimeout`, gets the
///   push through APNs instead, once (``TernStore/TernStore/fallBack(app:ids:at:)``).
struct OnlineDelivery: Codable, Sendable, Equatable {
    enum Mode: String, Codable, Sendable {
        case online
        case auto
    }

    var mode: Mode
    var wake: Bool
    var ackTimeoutMilliseconds: Int
    /// Seconds a message is kept for a device that has not acknowledged it.
    var ttl: Int
    /// What the device's frame carries: the notification as the app sees it (a JSON object), and the custom data.
    var notification: String?
    var data: String?
    /// The notification in each of the push's other languages, by ``Localizations/key(_:)``; nil when it has none.
    var localizedNotifications: [String: String]?

    static let defaultAckTimeout = 5.0

    /// - Returns: nil for `apns` (or no `delivery`). - Throws: a 400 naming the field.
    static func render(
        delivery: String?, wake: Bool?, ackTimeout: Double?, notification: NotificationInput?, payload: JSONValue?, inbox: InboxInput?,
        app: AppRecord
    ) throws(JSONAPIError) -> OnlineDelivery? {
        let mode: Mode?
        switch delivery ?? "apns" {
        case "apns": mode = nil
        case "online": mode = .online
        case "auto": mode = .auto
        default: throw .badRequest(field: "delivery", "delivery is apns, online or auto, not '\(delivery!.prefix(32))'")
        }
        guard let mode else {
            if wake != nil { throw .badRequest(field: "wake", "wake goes with delivery online") }
            if ackTimeout != nil { throw .badRequest(field: "ackTimeout", "ackTimeout goes with delivery auto") }
            return nil
        }
        if wake != nil, mode != .online { throw .badRequest(field: "wake", "wake goes with delivery online (auto sends an offline device the push itself)") }
        if ackTimeout != nil, mode != .auto { throw .badRequest(field: "ackTimeout", "ackTimeout goes with delivery auto") }
        let timeout = ackTimeout ?? defaultAckTimeout
        guard timeout.isFinite, (0.1...60).contains(timeout) else { throw .badRequest(field: "ackTimeout", "ackTimeout is 0.1-60 seconds") }
        let ttl = min(inbox?.ttl ?? AppRecord.defaultInboxTTL, app.inboxMaxTTL)
        var shown: String?
        var data: String?
        var localized: [String: String]?
        if let notification {
            shown = Self.shown(notification)
            if let custom = notification.data, !custom.isEmpty { data = Self.text(.object(custom)) }
            // Checked by the payload's rendering, which comes first.
            localized = notification.localizations.map { localizations in
                Dictionary(
                    localizations.map { tag, texts in (LanguageTags.key(tag), Self.shown(texts.applied(to: notification))) },
                    uniquingKeysWith: { first, _ in first }
                ).compactMapValues { $0 }
            }
        } else if let payload {
            data = Self.text(payload)
        }
        return OnlineDelivery(
            mode: mode, wake: wake ?? false, ackTimeoutMilliseconds: Int((timeout * 1000).rounded()), ttl: ttl, notification: shown, data: data,
            localizedNotifications: localized)
    }

    /// The notification as the app sees it in its frame: a JSON object of what the user sees; nil for none.
    private static func shown(_ notification: NotificationInput) -> String? {
        var fields: [String: JSONValue] = [:]
        if let title = notification.title { fields["title"] = .string(title) }
        if let subtitle = notification.subtitle { fields["subtitle"] = .string(subtitle) }
        if let body = notification.body { fields["body"] = .string(body) }
        if let sound = notification.sound { fields["sound"] = .string(sound) }
        if let category = notification.category { fields["category"] = .string(category) }
        if let thread = notification.threadID { fields["threadId"] = .string(thread) }
        if case .change(.set(let badge))? = notification.badge { fields["badge"] = .int(badge) }
        return fields.isEmpty ? nil : Self.text(.object(fields))
    }

    private static func text(_ value: JSONValue) -> String? {
        (try? value.serialized()).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The device's notification in its language (one of ``localizedNotifications``; nil: the notification's own), with
    /// its badge for this push (worked out per recipient).
    func notification(language: String? = nil, badge: Int?) -> String? {
        let notification = language.flatMap { localizedNotifications?[$0] } ?? self.notification
        guard let badge else { return notification }
        var fields: [String: JSONValue] = [:]
        if let notification, case .object(let object)? = try? JSONValue(parsing: Data(notification.utf8)) { fields = object }
        fields["badge"] = .int(badge)
        return Self.text(.object(fields))
    }

    /// The silent push that tells an offline device to connect (`wake`).
    static let wakePayload: [UInt8] = Array(#"{"aps":{"content-available":1},"tern":{"wake":true}}"#.utf8)
}
