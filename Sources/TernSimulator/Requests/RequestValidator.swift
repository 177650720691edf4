import Foundation
import NIOHPACK
import TernAPNs

/// A request that passed every protocol and auth check.
struct AcceptedRequest {
    var token: String
    var topic: String
    var bundleID: String
    var pushType: APNsPushType
    var priority: APNsPriority
    var expiration: Int64?
    var collapseID: String?
    var apnsID: String
    var payload: [UInt8]
    /// The identifier a legacy binary notification carried (nil for HTTP/2).
    var legacyIdentifier: UInt32? = nil
}

/// How one connection authenticates, and what it has shown so far.
///
/// APNs binds state to a connection: the first valid provider token sets its team, a token string is verified once
/// and reused, and changing the token within 20 minutes is refused.
struct ConnectionAuthentication {
    enum Mode {
        case token
        case certificate(PushCertificateIdentity)
        /// A client certificate from our CA that is not a push certificate (names no app).
        case unreadableCertificate
    }

    let mode: Mode
    private(set) var currentToken: String?
    private(set) var verified: VerifiedProviderToken?
    private(set) var tokenSetAt: Date?
    private(set) var firstKey: ProviderTokenKey?

    init(mode: Mode) {
        self.mode = mode
    }

    var isTokenConnection: Bool {
        if case .token = mode { return true }
        return false
    }

    /// The provider-token rules of spec §3.1. Returns the rejection reason, or nil when the token is good.
    /// Byte comparison with `memcmp`: `==` on strings is Unicode-aware and `elementsEqual` walks a substring's view
    /// index by index; both were visible costs at 100k requests/s.
    private static func sameBytes(_ text: Substring, _ other: String) -> Bool {
        let compared = text.utf8.withContiguousStorageIfAvailable { lhs in
            other.utf8.withContiguousStorageIfAvailable { rhs in
                lhs.count == rhs.count && (lhs.isEmpty || memcmp(lhs.baseAddress!, rhs.baseAddress!, lhs.count) == 0)
            }
        }
        if let compared, let compared { return compared }
        return text.utf8.elementsEqual(other.utf8)
    }

    mutating func checkToken(
        authorization: Substring?, bundleID: String, verifier: ProviderTokenVerifier, environment: APNsEnvironment, now: Date
    ) -> APNsReason? {
        guard let authorization, authorization.hasPrefix("bearer ") else { return .missingProviderToken }
        let token = authorization.dropFirst("bearer ".count)
        guard !token.isEmpty else { return .missingProviderToken }

        let verifiedToken: VerifiedProviderToken
        if let currentToken, let verified, Self.sameBytes(token, currentToken) {
            // The connection's token ages while it is reused.
            if let reason = Self.ageRejection(verified, verifier: verifier, now: now) { return reason }
            verifiedToken = verified
        } else {
            // A token string is verified once per connection, as APNs does; later requests with the same string reuse it.
            guard let candidate = try? verifier.verifySignature(token), let key = verifier.keys[candidate.keyID] else {
                return .invalidProviderToken
            }
            if let keyEnvironment = key.environment, keyEnvironment != environment {
                return .badEnvironmentKeyIdInToken
            }
            if let first = firstKey {
                if first.teamID != key.teamID { return .invalidProviderToken }
                if first.keyID != key.keyID, first.bundleIDs != nil, first.bundleIDs != key.bundleIDs {
                    return .unrelatedKeyIdInToken
                }
            }
            // An expired token is refused before it binds the connection: it is not the valid token that lifts the
            // one-stream limit, and the fresh token that replaces it is not a second update.
            if let reason = Self.ageRejection(candidate, verifier: verifier, now: now) { return reason }
            if let tokenSetAt, now.timeIntervalSince(tokenSetAt) < ProviderTokenCache.minimumRenewalInterval {
                return .tooManyProviderTokenUpdates
            }
            currentToken = String(token)
            verified = candidate
            tokenSetAt = now
            if firstKey == nil { firstKey = key }
            verifiedToken = candidate
        }
        if let bundleIDs = verifier.keys[verifiedToken.keyID]?.bundleIDs, !bundleIDs.contains(bundleID) {
            return .invalidProviderToken
        }
        return nil
    }

    private static func ageRejection(_ token: VerifiedProviderToken, verifier: ProviderTokenVerifier, now: Date) -> APNsReason? {
        do {
            try verifier.checkAge(token, now: now)
            return nil
        } catch {
            return error.rule == .expired ? .expiredProviderToken : .invalidProviderToken
        }
    }
}

/// Validates requests the way APNs does, in the order of spec §1.4 (the order Pushy's mock server uses):
/// apns-id, method, topic present, collapse-id length, priority, push type, path and token, expiration, auth,
/// topic and priority rules for the push type, then the payload.
struct RequestValidator {
    let verifier: ProviderTokenVerifier
    let environment: APNsEnvironment
    let clock: any WallClock

    struct Rejection: Error {
        var reason: APNsReason
        /// The `apns-id` to answer with: the request's if it was valid.
        var apnsID: String?
    }

    /// - Returns: the accepted request, or the rejection to answer with. `tokenAccepted` is set the first time a
    ///   valid provider token is seen on the connection.
    func validate(
        headers: HPACKHeaders, body: [UInt8], bodyTooLarge: Bool, auth: inout ConnectionAuthentication,
        ids: inout FastUUIDGenerator
    ) -> Result<AcceptedRequest, Rejection> {
        var method: String?
        var path: String?
        var authorization: String?
        var apnsIDHeader: String?
        var topicHeader: String?
        var pushTypeHeader: String?
        var priorityHeader: String?
        var expirationHeader: String?
        var collapseIDHeader: String?
        // Bit per header APNs reads; a second occurrence of any of them is `DuplicateHeaders`.
        var seen: UInt16 = 0
        var duplicate = false
        func mark(_ bit: UInt16) {
            if seen & bit != 0 { duplicate = true }
            seen |= bit
        }
        for (name, value, _) in headers {
            // Dispatch on length first: most names are compared once instead of against every case.
            switch name.utf8.count {
            case 5: if name == ":path" { mark(1 << 1); path = value }
            case 7:
                if name == ":method" { mark(1 << 0); method = value }
                else if name == ":scheme" { mark(1 << 2) }
                else if name == "apns-id" { mark(1 << 5); apnsIDHeader = value }
            case 10:
                if name == ":authority" { mark(1 << 3) }
                else if name == "apns-topic" { mark(1 << 6); topicHeader = value }
            case 13:
                if name == "authorization" { mark(1 << 4); authorization = value }
                else if name == "apns-priority" { mark(1 << 8); priorityHeader = value }
            case 14: if name == "apns-push-type" { mark(1 << 7); pushTypeHeader = value }
            case 15: if name == "apns-expiration" { mark(1 << 9); expirationHeader = value }
            case 16: if name == "apns-collapse-id" { mark(1 << 10); collapseIDHeader = value }
            default: break
            }
        }
        if duplicate { return .failure(Rejection(reason: .duplicateHeaders, apnsID: nil)) }

        // apns-id: echo a valid one, generate one otherwise.
        let apnsID: String
        if let apnsIDHeader {
            guard let uuid = try? UUID(apnsID: apnsIDHeader) else {
                // Echoed as sent: a client matching answers by apns-id must find this one.
                return .failure(Rejection(reason: .badMessageId, apnsID: apnsIDHeader))
            }
            apnsID = uuid.apnsString
        } else {
            apnsID = ids.next()
        }
        func reject(_ reason: APNsReason) -> Result<AcceptedRequest, Rejection> {
            .failure(Rejection(reason: reason, apnsID: apnsID))
        }

        guard method == "POST" else { return reject(.methodNotAllowed) }

        let topic: String
        if let topicHeader, !topicHeader.isEmpty {
            topic = topicHeader
        } else if case .certificate(let identity) = auth.mode, identity.topics.count == 1 {
            topic = identity.topics[0]
        } else {
            return reject(.missingTopic)
        }

        if let collapseIDHeader, collapseIDHeader.utf8.count > APNsRequestMetadata.maximumCollapseIDLength {
            return reject(.badCollapseId)
        }

        var priority: APNsPriority?
        if let priorityHeader {
            guard let parsed = try? APNsPriority(headerValue: priorityHeader) else { return reject(.badPriority) }
            priority = parsed
        }

        // A missing push type is tolerated (Apple requires it on watchOS only) and taken as alert.
        var pushType = APNsPushType.alert
        if let pushTypeHeader {
            guard let parsed = try? APNsPushType(headerValue: pushTypeHeader) else { return reject(.invalidPushType) }
            pushType = parsed
        }

        let devicePrefix = "/3/device/"
        guard let path, path.hasPrefix(devicePrefix) else { return reject(.badPath) }
        let tokenText = path.dropFirst(devicePrefix.count)
        guard !tokenText.isEmpty else { return reject(.missingDeviceToken) }
        // One pass over the token: a further path segment or query is a bad path; on the wire a token is plain
        // hex (no spaces or brackets) of 1-100 bytes.
        var uppercase = false
        var notHex = false
        for byte in tokenText.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            case UInt8(ascii: "A")...UInt8(ascii: "F"): uppercase = true
            case UInt8(ascii: "/"), UInt8(ascii: "?"): return reject(.badPath)
            default: notHex = true
            }
        }
        let digits = tokenText.utf8.count
        guard !notHex, digits % 2 == 0, digits <= 2 * DeviceToken.maximumByteCount else { return reject(.badDeviceToken) }
        let token = uppercase ? tokenText.lowercased() : String(tokenText)

        var expiration: Int64?
        if let expirationHeader {
            guard let parsed = try? APNsExpiration(headerValue: expirationHeader) else { return reject(.badExpirationDate) }
            expiration = parsed.headerValue.flatMap { Int64($0) }
        }

        let bundleID = pushType.bundleID(fromTopic: topic)
        switch auth.mode {
        case .token:
            if let reason = auth.checkToken(
                authorization: authorization.map { Substring($0) }, bundleID: bundleID ?? topic, verifier: verifier,
                environment: environment, now: clock.now)
            {
                return reject(reason)
            }
        case .unreadableCertificate:
            return reject(.badCertificate)
        case .certificate(let identity):
            guard identity.environments.contains(environment) else { return reject(.badCertificateEnvironment) }
            guard identity.topics.contains(topic) else { return reject(.topicDisallowed) }
            if pushType == .location || pushType == .liveactivity { return reject(.topicDisallowed) }
        }

        guard let bundleID else { return reject(.badTopic) }
        let effectivePriority = priority ?? (pushType == .background ? .throttled : .immediate)
        guard pushType.allowedPriorities.contains(effectivePriority) else { return reject(.badPriority) }

        // An oversized body is not kept (`body` is then empty): it is too large, not empty.
        guard !body.isEmpty || bodyTooLarge else { return reject(.payloadEmpty) }
        guard !bodyTooLarge, body.count <= pushType.maximumPayloadSize else { return reject(.payloadTooLarge) }
        // Priority 10 must alert, sound or badge: a payload with only content-available may not use it.
        if effectivePriority == .immediate, Self.isContentAvailableOnly(body) { return reject(.badPriority) }

        return .success(
            AcceptedRequest(
                token: token, topic: topic, bundleID: bundleID, pushType: pushType, priority: effectivePriority,
                expiration: expiration, collapseID: collapseIDHeader, apnsID: apnsID, payload: body))
    }

    private static let contentAvailableKey = Array("content-available".utf8)

    /// Whether the payload's `aps` has `content-available` and no alert, sound or badge. Only payloads that mention
    /// the key are parsed, so the common alert costs no JSON parse.
    static func isContentAvailableOnly(_ body: [UInt8]) -> Bool {
        guard mentions(contentAvailableKey, in: body),
            case .object(let aps)? = (try? JSONValue(parsing: Data(body)))?["aps"]
        else { return false }
        let flag: Bool = switch aps["content-available"] {
        case .int(let value)?: value != 0
        case .double(let value)?: value != 0
        default: false
        }
        return flag && aps["alert"] == nil && aps["sound"] == nil && aps["badge"] == nil
    }

    /// Whether `key`'s bytes occur in `body`. Every request's payload is searched, so this is a plain scan over the
    /// bytes: Foundation's generic `firstRange(of:)` took 8% of a 1,000,000-notification push's CPU here.
    static func mentions(_ key: [UInt8], in body: [UInt8]) -> Bool {
        guard let first = key.first, body.count >= key.count else { return key.isEmpty }
        return body.withUnsafeBufferPointer { body in
            key.withUnsafeBufferPointer { key in
                let lastStart = body.count - key.count
                var start = 0
                while start <= lastStart {
                    if body[start] == first {
                        var matched = 1
                        while matched < key.count, body[start + matched] == key[matched] { matched += 1 }
                        if matched == key.count { return true }
                    }
                    start += 1
                }
                return false
            }
        }
    }
}
