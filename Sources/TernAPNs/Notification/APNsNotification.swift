import Foundation

/// One notification for one device: token, header metadata and the rendered payload bytes.
///
/// The payload is kept as bytes so a fan-out renders it once and shares it across recipients.
public struct APNsNotification: Sendable {
    public var deviceToken: DeviceToken
    public var metadata: APNsRequestMetadata
    public var payload: [UInt8]

    /// A notification from a payload built with ``APNsPayload``; push-type rules are checked against it.
    public init(deviceToken: DeviceToken, metadata: APNsRequestMetadata, payload: APNsPayload) throws {
        self.deviceToken = deviceToken
        self.metadata = metadata
        self.payload = try payload.encoded()
        try Self.validate(metadata: metadata, payload: payload, size: self.payload.count)
    }

    /// A notification with a raw JSON payload. It must be a JSON object with an `aps` dictionary.
    public init(deviceToken: DeviceToken, metadata: APNsRequestMetadata, rawPayload: [UInt8]) throws {
        self.deviceToken = deviceToken
        self.metadata = metadata
        self.payload = rawPayload
        try metadata.validate()
        try Self.checkSize(rawPayload.count, pushType: metadata.pushType)
        guard let object = try? JSONValue(parsing: Data(rawPayload)), case .object(let members) = object else {
            throw APNsValidationError(.invalidPayload, field: "payload", "payload must be a JSON object")
        }
        guard case .object = members["aps"] ?? .object([:]) else {
            throw APNsValidationError(.invalidPayload, field: "payload.aps", "'aps' must be a JSON object")
        }
    }

    /// Skips all checks. For senders that already validated, and for tests that need a bad request on purpose.
    public init(unchecked deviceToken: DeviceToken, metadata: APNsRequestMetadata, payload: [UInt8]) {
        self.deviceToken = deviceToken
        self.metadata = metadata
        self.payload = payload
    }

    static func checkSize(_ size: Int, pushType: APNsPushType) throws {
        guard size > 0 else {
            throw APNsValidationError(.payloadEmpty, field: "payload", "payload is empty")
        }
        guard size <= pushType.maximumPayloadSize else {
            throw APNsValidationError(
                .payloadTooLarge, field: "payload",
                "payload is \(size) bytes; a \(pushType) push allows at most \(pushType.maximumPayloadSize)")
        }
    }

    /// The rules that tie headers and payload together (spec §1.2, §2).
    public static func validate(metadata: APNsRequestMetadata, payload: APNsPayload, size: Int) throws {
        try metadata.validate()
        try checkSize(size, pushType: metadata.pushType)
        let pushType = metadata.pushType
        if pushType == .background {
            guard payload.contentAvailable, !payload.isUserVisible else {
                throw APNsValidationError(
                    .invalidPayload, field: "aps",
                    "a background push carries content-available only: no alert, badge or sound")
            }
        }
        if metadata.priority == .immediate, payload.contentAvailable, !payload.isUserVisible {
            throw APNsValidationError(
                .invalidPriority, field: "apns-priority",
                "a content-available-only push must use priority 5; priority 10 must alert, sound or badge")
        }
        if pushType == .liveactivity {
            guard let event = payload.event else {
                throw APNsValidationError(.invalidPayload, field: "aps.event", "a Live Activity push needs an event")
            }
            guard payload.timestamp != nil else {
                throw APNsValidationError(.invalidPayload, field: "aps.timestamp", "a Live Activity push needs a timestamp")
            }
            switch event {
            case .start:
                guard payload.attributesType != nil, payload.attributes != nil, payload.alert != nil else {
                    throw APNsValidationError(
                        .invalidPayload, field: "aps.attributes",
                        "a Live Activity start needs attributes-type, attributes and alert")
                }
            default:
                guard payload.contentState != nil else {
                    throw APNsValidationError(
                        .invalidPayload, field: "aps.content-state", "a Live Activity \(event.rawValue) needs content-state")
                }
            }
        } else if case .object(let aps) = payload.aps, let key = liveActivityKeys.first(where: { aps[$0] != nil }) {
            throw APNsValidationError(
                .invalidPayload, field: "aps.\(key)", "Live Activity key '\(key)' needs push type liveactivity, not \(pushType)")
        }
    }

    /// The `aps` keys only a Live Activity push carries (spec §2), in the order an error names them.
    static let liveActivityKeys = [
        "event", "timestamp", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        "input-push-token", "input-push-channel",
    ]
}
