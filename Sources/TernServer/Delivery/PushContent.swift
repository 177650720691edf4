import Foundation
import TernAPNs
import TernWeb

/// The `notification` object of a push request: the common `aps` keys and custom data beside `aps`.
struct NotificationInput: Codable, Sendable {
    var title: String?
    var subtitle: String?
    var body: String?
    var badge: Int?
    var sound: String?
    var category: String?
    var threadID: String?
    var contentAvailable: Bool?
    var mutableContent: Bool?
    var interruptionLevel: String?
    /// Keys beside `aps`.
    var data: [String: JSONValue]?
}

/// The `apns` object of a push request.
struct APNsOptionsInput: Codable, Sendable {
    /// `alert` (default), `background`, `voip`, … (the `apns-push-type` values).
    var pushType: String?
    /// 10, 5 or 1.
    var priority: Int?
    /// Epoch seconds after which APNs stops trying; 0: deliver now or never.
    var expiration: Int64?
    /// At most 64 bytes. Default: the push id, so a recipient sent twice (a crash mid-push) shows one notification.
    var collapseID: String?
}

/// A push's notification as stored: rendered and checked once at request time, shared by every recipient.
struct PushContent: Codable, Sendable, Equatable {
    var payload: Data
    var pushType: String
    var priority: Int
    var expiration: Int64?
    var collapseID: String?

    /// Renders and checks a request's `notification` or raw `payload` with its `apns` options for `topic`.
    /// - Throws: a 400 naming the field at fault.
    static func render(
        notification: NotificationInput?, payload: JSONValue?, options: APNsOptionsInput?, topic: String
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
            guard value >= 0 else { throw .badRequest(field: "apns.expiration", "expiration is epoch seconds, 0 or more") }
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
                rendered = try APNsNotification(deviceToken: sample, metadata: metadata, payload: try build(notification))
            case (nil, let payload?):
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

    private static func build(_ input: NotificationInput) throws -> APNsPayload {
        var payload = APNsPayload()
        if input.title != nil || input.subtitle != nil || input.body != nil {
            payload.alert = APNsAlert(title: input.title, subtitle: input.subtitle, body: input.body)
        }
        payload.badge = input.badge
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
        guard payload.isUserVisible || payload.contentAvailable || payload.mutableContent || !payload.custom.isEmpty else {
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

    /// The notification for one recipient, with a fresh `apns-id`.
    func notification(to token: DeviceToken, topic: String, pushID: String) -> APNsNotification {
        let pushType = (try? APNsPushType(headerValue: self.pushType)) ?? .alert
        let expiration = self.expiration.flatMap { try? APNsExpiration(headerValue: String($0)) } ?? .none
        let metadata = APNsRequestMetadata(
            topic: topic + (pushType.topicSuffix ?? ""), pushType: pushType, priority: try? APNsPriority(priority),
            expiration: expiration, collapseID: collapseID ?? pushID)
        return APNsNotification(unchecked: token, metadata: metadata, payload: Array(payload))
    }
}
