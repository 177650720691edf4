import Foundation
import Testing

@testable import TernAPNs

/// Spec §1.4, copied by hand: every documented `reason`, its status, and what a sender should do with it.
let documentedReasons: [(reason: String, status: Int, outcome: APNsOutcomeClass)] = [
    ("BadCollapseId", 400, .requestInvalid),
    ("BadDeviceToken", 400, .tokenInvalid),
    ("BadExpirationDate", 400, .requestInvalid),
    ("BadMessageId", 400, .requestInvalid),
    ("BadPriority", 400, .requestInvalid),
    ("BadTopic", 400, .requestInvalid),
    ("DeviceTokenNotForTopic", 400, .tokenInvalid),
    ("DuplicateHeaders", 400, .requestInvalid),
    ("IdleTimeout", 400, .retryLater),
    ("InvalidPushType", 400, .requestInvalid),
    ("MissingDeviceToken", 400, .requestInvalid),
    ("MissingTopic", 400, .requestInvalid),
    ("PayloadEmpty", 400, .requestInvalid),
    ("TopicDisallowed", 400, .credentialsInvalid),
    ("BadCertificate", 403, .credentialsInvalid),
    ("BadCertificateEnvironment", 403, .credentialsInvalid),
    ("ExpiredProviderToken", 403, .retryLater),
    ("Forbidden", 403, .credentialsInvalid),
    ("InvalidProviderToken", 403, .credentialsInvalid),
    ("MissingProviderToken", 403, .credentialsInvalid),
    ("UnrelatedKeyIdInToken", 403, .credentialsInvalid),
    ("BadEnvironmentKeyIdInToken", 403, .credentialsInvalid),
    ("BadPath", 404, .requestInvalid),
    ("MethodNotAllowed", 405, .requestInvalid),
    ("ExpiredToken", 410, .tokenInvalid),
    ("Unregistered", 410, .tokenInvalid),
    ("PayloadTooLarge", 413, .requestInvalid),
    ("TooManyProviderTokenUpdates", 429, .retryLater),
    ("TooManyRequests", 429, .retryLater),
    ("InternalServerError", 500, .retryLater),
    ("ServiceUnavailable", 503, .retryLater),
    ("Shutdown", 503, .retryLater),
    // Broadcasts and channel management (spec §7).
    ("FeatureNotEnabled", 400, .credentialsInvalid),
    ("MissingChannelId", 400, .requestInvalid),
    ("BadChannelId", 400, .requestInvalid),
    ("ChannelNotRegistered", 400, .requestInvalid),
    ("BadRequestParams", 400, .requestInvalid),
    ("BadRequestPayload", 400, .requestInvalid),
    ("MissingPushType", 400, .requestInvalid),
    ("CannotCreateChannelConfig", 400, .requestInvalid),
    ("TopicMismatch", 403, .credentialsInvalid),
]

@Suite("APNsReason")
struct ReasonTests {
    @Test("allKnown is exactly the documented reasons")
    func allKnownIsTheDocumentedSet() {
        #expect(APNsReason.allKnown.count == documentedReasons.count)
        #expect(Set(APNsReason.allKnown.map(\.rawValue)) == Set(documentedReasons.map(\.reason)))
    }

    @Test("Every known reason round-trips through its raw value", arguments: APNsReason.allKnown)
    func knownReasonRoundTrips(reason: APNsReason) {
        #expect(APNsReason(rawValue: reason.rawValue) == reason)
        #expect(reason.description == reason.rawValue)
    }

    @Test("Every documented reason decodes to a known case with the documented status", arguments: documentedReasons)
    func documentedReasonHasDocumentedStatus(reason: String, status: Int, outcome: APNsOutcomeClass) {
        let decoded = APNsReason(rawValue: reason)
        #expect(decoded != .unknown(reason))
        #expect(APNsReason.allKnown.contains(decoded))
        #expect(decoded.rawValue == reason)
        #expect(decoded.status == status)
    }

    @Test("Both spellings of the environment key reason decode to one case that renders the documented spelling")
    func environmentKeyReasonAcceptsBothSpellings() {
        #expect(APNsReason(rawValue: "BadEnvironmentKeyIdInToken") == .badEnvironmentKeyIdInToken)
        #expect(APNsReason(rawValue: "BadEnvironmentKeyInToken") == .badEnvironmentKeyIdInToken)
        #expect(APNsReason.badEnvironmentKeyIdInToken.rawValue == "BadEnvironmentKeyIdInToken")
        #expect(APNsReason.badEnvironmentKeyIdInToken.status == 403)
    }

    @Test("An unknown reason is kept as unknown, with no status", arguments: ["SomethingNew", "badtopic", "", "Bad Topic"])
    func unknownReasonIsKept(raw: String) {
        let reason = APNsReason(rawValue: raw)
        #expect(reason == .unknown(raw))
        #expect(reason.rawValue == raw)
        #expect(reason.status == nil)
    }
}

@Suite("APNsResponse")
struct ResponseTests {
    @Test("A 200 with no body is a delivered success")
    func successDecodes() {
        let response = APNsResponse(
            status: 200, apnsID: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", apnsUniqueID: "a-unique-id", body: [])
        #expect(response.status == 200)
        #expect(response.apnsID == UUID(uuidString: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"))
        #expect(response.apnsUniqueID == "a-unique-id")
        #expect(response.reason == nil)
        #expect(response.timestamp == nil)
        #expect(response.isSuccess)
        #expect(response.outcomeClass == .delivered)
        #expect(response.body == [])
    }

    @Test("An error body's reason is decoded")
    func errorReasonDecodes() {
        let response = APNsResponse(
            status: 400, apnsID: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", apnsUniqueID: nil,
            body: Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        #expect(response.reason == .badDeviceToken)
        #expect(response.timestamp == nil)
        #expect(!response.isSuccess)
        #expect(response.outcomeClass == .tokenInvalid)
    }

    @Test("A 410 timestamp is read as epoch milliseconds")
    func goneTimestampIsEpochMilliseconds() throws {
        let response = APNsResponse(
            status: 410, apnsID: nil, apnsUniqueID: nil,
            body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(response.reason == .unregistered)
        let timestamp = try #require(response.timestamp)
        #expect(timestamp == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(Int64((timestamp.timeIntervalSince1970 * 1000).rounded()) == 1_700_000_000_123)
        #expect(response.outcomeClass == .tokenInvalid)
    }

    @Test("An error body that is not JSON becomes a reason of printable ASCII, at most 200 bytes")
    func unreadableBodiesBecomePrintableReasons() {
        let body: [UInt8] = [0xFF, 0xFE] + Array("garbage\n\u{1B}[31m".utf8) + [UInt8](repeating: 0x41, count: 300)
        let response = APNsResponse(status: 410, apnsID: nil, apnsUniqueID: nil, body: body)
        guard case .unknown(let text)? = response.reason else { Issue.record("\(String(describing: response.reason))"); return }
        #expect(text.hasPrefix("??garbage??[31m"))
        #expect(text.utf8.count == 200)
        #expect(text.utf8.allSatisfy { (0x20..<0x7F).contains($0) })
    }

    @Test("A 410 timestamp no token can have (before 1970, after 9999, past a double) is no timestamp",
          arguments: ["1e300", "-5", "253402300800000", "99999999999999999999999", "1.7976931348623157e308"])
    func impossibleTimestampsAreDropped(timestamp: String) {
        let response = APNsResponse(
            status: 410, apnsID: nil, apnsUniqueID: nil, body: Array(#"{"reason":"Unregistered","timestamp":\#(timestamp)}"#.utf8))
        #expect(response.reason == .unregistered)
        #expect(response.timestamp == nil)
        #expect(response.outcomeClass == .tokenInvalid)
    }

    @Test("A 410 timestamp in whole seconds' worth of milliseconds lands on the exact second")
    func goneTimestampWholeSeconds() {
        let response = APNsResponse(
            status: 410, apnsID: nil, apnsUniqueID: nil, body: Array(#"{"reason":"ExpiredToken","timestamp":1650000000000}"#.utf8))
        #expect(response.reason == .expiredToken)
        #expect(response.timestamp == Date(timeIntervalSince1970: 1_650_000_000))
    }

    @Test("A non-JSON error body yields an unknown reason holding the text", arguments: [
        (503, "upstream connect error", APNsOutcomeClass.retryLater),
        (400, "<html>Bad Request</html>", .requestInvalid),
        (403, "denied", .credentialsInvalid),
    ])
    func nonJSONErrorBodyYieldsUnknown(status: Int, text: String, outcome: APNsOutcomeClass) {
        let response = APNsResponse(status: status, apnsID: nil, apnsUniqueID: nil, body: Array(text.utf8))
        #expect(response.status == status)
        #expect(response.reason == .unknown(text))
        #expect(response.outcomeClass == outcome)
    }

    @Test("A JSON error body without a string reason yields an unknown reason")
    func jsonBodyWithoutReasonYieldsUnknown() {
        let body = #"{"error":"x"}"#
        let response = APNsResponse(status: 400, apnsID: nil, apnsUniqueID: nil, body: Array(body.utf8))
        #expect(response.reason == .unknown(body))
    }

    @Test("An apns-id that is not a UUID is dropped rather than trusted")
    func badApnsIDIsDropped() {
        let response = APNsResponse(status: 200, apnsID: "not-a-uuid", apnsUniqueID: nil, body: [])
        #expect(response.apnsID == nil)
    }

    @Test("body renders {\"reason\":…} and, with a timestamp, epoch milliseconds")
    func bodyRendersExactJSON() {
        let gone = APNsResponse(
            status: 410, reason: .unregistered, timestamp: Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(utf8(gone.body) == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        #expect(utf8(APNsResponse(status: 400, reason: .badTopic).body) == #"{"reason":"BadTopic"}"#)
        #expect(utf8(APNsResponse(status: 403, reason: .badEnvironmentKeyIdInToken).body)
            == #"{"reason":"BadEnvironmentKeyIdInToken"}"#)
        #expect(APNsResponse(status: 200).body == [])
    }

    @Test("body decodes back to the same response", arguments: documentedReasons)
    func bodyRoundTrips(reason: String, status: Int, outcome: APNsOutcomeClass) {
        let original = APNsResponse(
            status: status, apnsID: UUID(), reason: APNsReason(rawValue: reason),
            timestamp: status == 410 ? Date(timeIntervalSince1970: 1_700_000_000.5) : nil)
        let decoded = APNsResponse(
            status: status, apnsID: original.apnsID?.apnsString, apnsUniqueID: nil, body: original.body)
        #expect(decoded == original)
    }

    @Test("Each documented reason gets the documented outcome class", arguments: documentedReasons)
    func documentedReasonOutcome(reason: String, status: Int, outcome: APNsOutcomeClass) {
        let response = APNsResponse(
            status: status, apnsID: nil, apnsUniqueID: nil, body: Array(#"{"reason":"\#(reason)"}"#.utf8))
        #expect(response.outcomeClass == outcome)
    }

    @Test("Spec groups: dead tokens, bad requests, bad credentials, retry later")
    func outcomeGroups() {
        func outcome(_ reason: APNsReason) -> APNsOutcomeClass {
            APNsResponse(status: reason.status ?? 0, reason: reason).outcomeClass
        }
        for reason in [APNsReason.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic] {
            #expect(outcome(reason) == .tokenInvalid, "\(reason)")
        }
        for reason in [APNsReason.badTopic, .payloadTooLarge, .badPriority, .badCollapseId, .missingTopic, .badPath] {
            #expect(outcome(reason) == .requestInvalid, "\(reason)")
        }
        for reason in [APNsReason.invalidProviderToken, .badCertificate, .badCertificateEnvironment, .forbidden,
                       .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken] {
            #expect(outcome(reason) == .credentialsInvalid, "\(reason)")
        }
        for reason in [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
                       .expiredProviderToken, .tooManyProviderTokenUpdates] {
            #expect(outcome(reason) == .retryLater, "\(reason)")
        }
    }

    @Test("An unknown reason is classified by its status", arguments: [
        (410, APNsOutcomeClass.tokenInvalid),
        (403, .credentialsInvalid),
        (429, .retryLater),
        (500, .retryLater),
        (502, .retryLater),
        (503, .retryLater),
        (400, .requestInvalid),
        (404, .requestInvalid),
        (413, .requestInvalid),
    ])
    func unknownReasonClassifiedByStatus(status: Int, outcome: APNsOutcomeClass) {
        let decoded = APNsResponse(
            status: status, apnsID: nil, apnsUniqueID: nil, body: Array(#"{"reason":"BrandNewReason"}"#.utf8))
        #expect(decoded.reason == .unknown("BrandNewReason"))
        #expect(decoded.outcomeClass == outcome)
        #expect(APNsResponse(status: status).outcomeClass == outcome, "no body at all")
    }

    @Test("A 200 is delivered whatever the body says")
    func status200IsDelivered() {
        let response = APNsResponse(status: 200, apnsID: nil, apnsUniqueID: nil, body: Array("garbage".utf8))
        #expect(response.reason == nil)
        #expect(response.outcomeClass == .delivered)
    }
}
