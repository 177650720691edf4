import Foundation

/// Everything about a notification that travels in HTTP/2 headers rather than the payload.
public struct APNsRequestMetadata: Hashable, Sendable {
    /// The largest `apns-collapse-id`, in UTF-8 bytes.
    public static let maximumCollapseIDLength = 64

    /// `apns-topic`: the bundle id plus the push type's suffix. Optional only on certificate connections whose
    /// certificate names a single topic.
    public var topic: String?
    public var pushType: APNsPushType
    public var priority: APNsPriority
    public var expiration: APNsExpiration
    /// `apns-collapse-id`: notifications with the same value replace each other on the device.
    public var collapseID: String?
    /// `apns-id`: echoed by APNs. Kept the same across retries so a retry is recognisable as the same push.
    public var apnsID: UUID

    public init(
        topic: String?,
        pushType: APNsPushType = .alert,
        priority: APNsPriority? = nil,
        expiration: APNsExpiration = .none,
        collapseID: String? = nil,
        apnsID: UUID = .random()
    ) {
        self.topic = topic
        self.pushType = pushType
        self.priority = priority ?? (pushType == .background ? .throttled : .immediate)
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
    }

    /// Checks the header-level rules: topic suffix for the push type, priority allowed for the type,
    /// collapse id length.
    public func validate() throws {
        if let topic {
            guard !topic.isEmpty, !topic.contains(where: { $0.isWhitespace || $0.isNewline }), !Self.hasControlCharacter(topic) else {
                throw APNsValidationError(.invalidTopic, field: "apns-topic", "topic must be a bundle id with no spaces")
            }
            if pushType.bundleID(fromTopic: topic) == nil {
                throw APNsValidationError(
                    .invalidTopic, field: "apns-topic",
                    "a \(pushType) push needs a topic ending in '\(pushType.topicSuffix ?? "")', got '\(topic)'")
            }
        }
        guard pushType.allowedPriorities.contains(priority) else {
            let allowed = pushType.allowedPriorities.map(\.rawValue).sorted(by: >).map(String.init).joined(separator: " or ")
            throw APNsValidationError(
                .invalidPriority, field: "apns-priority",
                "a \(pushType) push must have priority \(allowed), not \(priority)")
        }
        if let collapseID {
            guard collapseID.utf8.count <= Self.maximumCollapseIDLength else {
                throw APNsValidationError(
                    .invalidCollapseID, field: "apns-collapse-id",
                    "collapse id is \(collapseID.utf8.count) bytes; the limit is \(Self.maximumCollapseIDLength)")
            }
            // HTTP/2 refuses NUL, CR and LF in a header value (RFC 9113 §8.2.1); an empty one collapses nothing.
            guard !collapseID.isEmpty, !Self.hasControlCharacter(collapseID) else {
                throw APNsValidationError(
                    .invalidCollapseID, field: "apns-collapse-id", "collapse id must be 1-64 bytes of text without control characters")
            }
        }
    }

    /// Whether `text` has a C0 control character or DEL, which no header value of APNs' may carry (nor a host name).
    public static func hasControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// The request headers APNs expects, in a stable order, without `:path` or `authorization`.
    public var headers: [(name: String, value: String)] { headers(reservingRoomFor: 0) }

    /// ``headers``, in an array with room for `extra` more (a client adds `authorization`), so the list is
    /// allocated once per request.
    public func headers(reservingRoomFor extra: Int) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(6 + extra)  // the six below, at most
        headers.append(("apns-push-type", pushType.rawValue))
        headers.append(("apns-id", apnsID.apnsString))
        headers.append(("apns-priority", priority.description))
        if let topic { headers.append(("apns-topic", topic)) }
        if let value = expiration.headerValue { headers.append(("apns-expiration", value)) }
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        return headers
    }
}

extension UUID {
    /// The canonical lowercase 8-4-4-4-12 form APNs documents for `apns-id`.
    public var apnsString: String {
        let (high, low) = words
        return UUIDText.format(high: high, low: low)
    }

    /// Parses an `apns-id` header value (either case, as one APNs reply has been seen in uppercase).
    public init(apnsID value: some StringProtocol) throws {
        guard let uuid = UUID(apnsText: value) else {
            throw APNsValidationError(.invalidMessageID, field: "apns-id", "apns-id must be a UUID (8-4-4-4-12 hex), not '\(value)'")
        }
        self = uuid
    }
}
