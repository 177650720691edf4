import Foundation

/// What a sender should do with an APNs answer.
public enum APNsOutcomeClass: String, Hashable, Sendable {
    /// Accepted by APNs.
    case delivered
    /// The device token is dead or not for this app/environment: prune it (for a 410, only if the token was not
    /// registered again after the response's timestamp).
    case tokenInvalid
    /// The request itself is wrong (payload, headers, topic). Retrying the same request fails again.
    case requestInvalid
    /// The certificate or provider key is wrong, revoked or not allowed for the topic. Fix configuration.
    case credentialsInvalid
    /// Try again later: throttling, APNs trouble, an expired provider token (renew it first), a closed connection.
    case retryLater
}

/// An APNs answer to one request.
public struct APNsResponse: Hashable, Sendable {
    public var status: Int
    /// `apns-id` as APNs echoed or generated it.
    public var apnsID: UUID?
    /// `apns-unique-id`, sent by the development environment only.
    public var apnsUniqueID: String?
    /// nil on success.
    public var reason: APNsReason?
    /// For 410: the last time APNs confirmed the token was no longer valid for the topic.
    public var timestamp: Date?

    public init(status: Int, apnsID: UUID? = nil, apnsUniqueID: String? = nil, reason: APNsReason? = nil, timestamp: Date? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestamp = timestamp
    }

    /// Decodes an answer from its status, `apns-id`/`apns-unique-id` headers and JSON body.
    /// A body that is not the documented JSON keeps the status and gets reason `unknown(<body text>)`.
    public init(status: Int, apnsID: String?, apnsUniqueID: String?, body: [UInt8]) {
        self.status = status
        self.apnsID = apnsID.flatMap { UUID(apnsText: $0) }
        self.apnsUniqueID = apnsUniqueID
        guard !body.isEmpty else { return }
        let decoded = try? JSONValue(parsing: Data(body))
        if case .string(let reason)? = decoded?["reason"] {
            self.reason = APNsReason(rawValue: reason)
        } else if status != 200 {
            // Kept as printable ASCII: the text goes on into token events, the API and webhook bodies.
            self.reason = .unknown(String(decoding: body.prefix(200).map { (0x20..<0x7F).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self))
        }
        let milliseconds: Double? =
            switch decoded?["timestamp"] {
            case .int(let milliseconds)?: Double(milliseconds)
            case .double(let milliseconds)?: milliseconds
            default: nil
            }
        // A moment no token can have been unregistered at (before 1970, after 9999, not a number) is no timestamp.
        if let milliseconds, (0...Self.latestTimestamp).contains(milliseconds) {
            self.timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
        }
    }

    /// The latest 410 timestamp taken, in epoch milliseconds: the end of the year 9999.
    static let latestTimestamp: Double = 253_402_300_799_999

    /// The error body APNs sends: `{"reason":"…"}`, plus `"timestamp"` in epoch milliseconds for a 410.
    public var body: [UInt8] {
        guard let reason else { return [] }
        var object: [String: JSONValue] = ["reason": .string(reason.rawValue)]
        if let timestamp { object["timestamp"] = .int(Int((timestamp.timeIntervalSince1970 * 1000).rounded())) }
        return (try? JSONValue.object(object).serialized()) ?? []
    }

    /// 200 for a notification or a broadcast; a channel's management also answers 201 (made) and 204 (deleted).
    public var isSuccess: Bool { (200..<300).contains(status) }

    public var outcomeClass: APNsOutcomeClass {
        if isSuccess { return .delivered }
        switch reason {
        case .unregistered?, .expiredToken?, .badDeviceToken?, .deviceTokenNotForTopic?:
            return .tokenInvalid
        case .badCertificate?, .badCertificateEnvironment?, .forbidden?, .invalidProviderToken?, .missingProviderToken?,
            .unrelatedKeyIdInToken?, .badEnvironmentKeyIdInToken?, .topicDisallowed?, .topicMismatch?, .featureNotEnabled?:
            return .credentialsInvalid
        case .expiredProviderToken?, .tooManyProviderTokenUpdates?, .tooManyRequests?, .idleTimeout?,
            .internalServerError?, .serviceUnavailable?, .shutdown?:
            return .retryLater
        case .unknown?, nil:
            switch status {
            case 410: return .tokenInvalid
            case 403: return .credentialsInvalid
            case 429, 500...599: return .retryLater
            default: return .requestInvalid
            }
        default:
            return .requestInvalid
        }
    }
}
