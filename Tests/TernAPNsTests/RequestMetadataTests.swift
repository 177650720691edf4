import Foundation
import Testing

@testable import TernAPNs

/// Spec §1.3: every documented `apns-push-type` and the `apns-topic` suffix it needs (nil: not derived from the
/// bundle id, as for `mdm`).
let documentedPushTypes: [(headerValue: String, topicSuffix: String?)] = [
    ("alert", ""),
    ("background", ""),
    ("voip", ".voip"),
    ("complication", ".complication"),
    ("fileprovider", ".pushkit.fileprovider"),
    ("mdm", nil),
    ("location", ".location-query"),
    ("liveactivity", ".push-type.liveactivity"),
    ("pushtotalk", ".voip-ptt"),
    ("widgets", ".push-type.widgets"),
    ("controls", ".push-type.controls"),
]

@Suite("Push types")
struct PushTypeTests {
    @Test("Every documented push type parses from its header value and has the documented topic suffix",
          arguments: documentedPushTypes)
    func documentedPushTypeParsesWithTopicSuffix(headerValue: String, topicSuffix: String?) throws {
        let pushType = try APNsPushType(headerValue: headerValue)
        #expect(pushType.rawValue == headerValue)
        #expect(pushType.description == headerValue)
        #expect(pushType.topicSuffix == topicSuffix)
        #expect(APNsPushType.allKnown.contains(pushType))
    }

    @Test("allKnown lists exactly the eleven documented push types, each once")
    func allKnownIsExactlyTheDocumentedSet() {
        #expect(APNsPushType.allKnown.map(\.rawValue) == documentedPushTypes.map(\.headerValue))
        #expect(Set(APNsPushType.allKnown).count == 11)
    }

    @Test("Unknown and wrong-case push types are rejected with invalidPushType", arguments: [
        "", "Alert", "ALERT", "VoIP", "liveActivity", "push", "alert ", " alert", "mdm2", "broadcast",
    ])
    func unknownOrWrongCasePushTypeIsRejected(headerValue: String) {
        expectValidationError(.invalidPushType, field: "apns-push-type") {
            try APNsPushType(headerValue: headerValue)
        }
    }

    @Test("topic(forBundleID:) appends the type's suffix", arguments: documentedPushTypes)
    func topicForBundleIDAppendsSuffix(headerValue: String, topicSuffix: String?) throws {
        let pushType = try APNsPushType(headerValue: headerValue)
        #expect(pushType.topic(forBundleID: "com.example.app") == "com.example.app" + (topicSuffix ?? ""))
    }

    @Test("topic(forBundleID:) gives the exact topics of the spec table")
    func topicForBundleIDSpotChecks() {
        #expect(APNsPushType.alert.topic(forBundleID: "com.example.app") == "com.example.app")
        #expect(APNsPushType.voip.topic(forBundleID: "com.example.app") == "com.example.app.voip")
        #expect(APNsPushType.liveactivity.topic(forBundleID: "com.example.app") == "com.example.app.push-type.liveactivity")
        #expect(APNsPushType.fileprovider.topic(forBundleID: "com.example.app") == "com.example.app.pushkit.fileprovider")
        #expect(APNsPushType.mdm.topic(forBundleID: "com.apple.mgmt.External.1234") == "com.apple.mgmt.External.1234")
    }

    @Test("bundleID(fromTopic:) strips the suffix and round-trips with topic(forBundleID:)", arguments: documentedPushTypes)
    func bundleIDFromTopicRoundTrips(headerValue: String, topicSuffix: String?) throws {
        let pushType = try APNsPushType(headerValue: headerValue)
        let topic = pushType.topic(forBundleID: "com.example.app")
        #expect(pushType.bundleID(fromTopic: topic) == "com.example.app")
    }

    @Test("bundleID(fromTopic:) is nil when the topic lacks the suffix or is only the suffix")
    func bundleIDFromTopicRejectsMissingSuffix() {
        #expect(APNsPushType.voip.bundleID(fromTopic: "com.example.app") == nil)
        #expect(APNsPushType.voip.bundleID(fromTopic: ".voip") == nil)
        #expect(APNsPushType.voip.bundleID(fromTopic: "com.example.app.voip-ptt") == nil)
        #expect(APNsPushType.pushtotalk.bundleID(fromTopic: "com.example.app.voip") == nil)
        #expect(APNsPushType.liveactivity.bundleID(fromTopic: "com.example.app.push-type.widgets") == nil)
        #expect(APNsPushType.alert.bundleID(fromTopic: "") == nil)
        #expect(APNsPushType.mdm.bundleID(fromTopic: "") == nil)
        #expect(APNsPushType.alert.bundleID(fromTopic: "com.example.app") == "com.example.app")
    }

    @Test("The payload limit is 4096 bytes, 5120 for VoIP")
    func maximumPayloadSizeIs4096Or5120ForVoIP() {
        for pushType in APNsPushType.allKnown {
            #expect(pushType.maximumPayloadSize == (pushType == .voip ? 5120 : 4096), "\(pushType)")
        }
    }

    @Test("Allowed priorities: background only 5; location and liveactivity 5 or 10; others 10, 5 or 1")
    func allowedPrioritiesFollowTheSpec() {
        let expected: [String: Set<Int>] = [
            "alert": [10, 5, 1], "background": [5], "voip": [10, 5, 1], "complication": [10, 5, 1],
            "fileprovider": [10, 5, 1], "mdm": [10, 5, 1], "location": [10, 5], "liveactivity": [10, 5],
            "pushtotalk": [10, 5, 1], "widgets": [10, 5, 1], "controls": [10, 5, 1],
        ]
        for pushType in APNsPushType.allKnown {
            #expect(Set(pushType.allowedPriorities.map(\.rawValue)) == expected[pushType.rawValue], "\(pushType)")
        }
    }
}

@Suite("Priority, expiration, apns-id")
struct HeaderValueTests {
    @Test("Priorities 10, 5 and 1 parse", arguments: [("10", 10), ("5", 5), ("1", 1)])
    func documentedPrioritiesParse(headerValue: String, expected: Int) throws {
        let priority = try APNsPriority(headerValue: headerValue)
        #expect(priority.rawValue == expected)
        #expect(priority.description == headerValue)
        #expect(try APNsPriority(expected) == priority)
    }

    @Test("A priority read from a slice of a longer text, or with leading zeros, parses the same")
    func priorityFromSlicesAndLeadingZeros() throws {
        let header = "apns-priority: 10; 5; 1"
        let values = header.split(separator: " ").dropFirst().map { $0.prefix(while: { $0 != ";" }) }
        #expect(try values.map { try APNsPriority(headerValue: $0) } == [.immediate, .throttled, .powerConsiderate])
        #expect(try APNsPriority(headerValue: "010") == .immediate)
        #expect(try APNsPriority(headerValue: "05") == .throttled)
    }

    @Test("Named priorities have the documented values")
    func namedPrioritiesHaveDocumentedValues() {
        #expect(APNsPriority.immediate.rawValue == 10)
        #expect(APNsPriority.throttled.rawValue == 5)
        #expect(APNsPriority.powerConsiderate.rawValue == 1)
    }

    @Test("Other priority header values are rejected with invalidPriority", arguments: [
        "0", "3", "11", "-5", "abc", "", "10.0", " 10", "1 ", "15", "19", "50", "5x", "100", "99999999999999999999",
    ])
    func otherPriorityHeaderValuesAreRejected(headerValue: String) {
        expectValidationError(.invalidPriority, field: "apns-priority") { try APNsPriority(headerValue: headerValue) }
    }

    @Test("Other priority numbers are rejected with invalidPriority", arguments: [0, 2, 3, 4, 6, 9, 11, 100, -1])
    func otherPriorityNumbersAreRejected(value: Int) {
        expectValidationError(.invalidPriority, field: "apns-priority") { try APNsPriority(value) }
    }

    @Test("Expiration 0 means immediately and renders back as 0")
    func expirationZeroMeansImmediately() throws {
        let expiration = try APNsExpiration(headerValue: "0")
        #expect(expiration == .immediately)
        #expect(expiration.headerValue == "0")
        #expect(expiration.deadline == Date(timeIntervalSince1970: 0))
    }

    @Test("A positive expiration is a UNIX-seconds moment and renders back unchanged")
    func positiveExpirationIsAMoment() throws {
        let expiration = try APNsExpiration(headerValue: "1700003600")
        #expect(expiration == .at(Date(timeIntervalSince1970: 1_700_003_600)))
        #expect(expiration.headerValue == "1700003600")
        #expect(expiration.deadline == Date(timeIntervalSince1970: 1_700_003_600))
    }

    @Test("A moment past what 64 bits hold renders clamped, never traps; before 1970 it is 1",
          arguments: [1e300, 9.3e18, 9_223_372_036_854_775_808.0, .infinity, .nan])
    func farMomentsAreClamped(seconds: Double) {
        let expiration = APNsExpiration.at(Date(timeIntervalSince1970: seconds))
        #expect(expiration.headerValue == "9223372036854775807")
        #expect(APNsExpiration.wholeSeconds(Date(timeIntervalSince1970: seconds)) == .max)
        let notification = APNsNotification(unchecked: try! DeviceToken(bytes: [1, 2]), metadata: APNsRequestMetadata(topic: "t", expiration: expiration), payload: [])
        #expect(LegacyNotification(notification).expiration == .max)
    }

    @Test("A moment before 1970 renders as 1, not 0 (which means do not store)")
    func momentsBefore1970RenderAsOne() {
        #expect(APNsExpiration.at(Date(timeIntervalSince1970: -5)).headerValue == "1")
        #expect(APNsExpiration.at(Date(timeIntervalSince1970: -.infinity)).headerValue == "1")
        #expect(APNsExpiration.at(Date(timeIntervalSince1970: 9_223_372_036_854_774_784)).headerValue == "9223372036854774784")
    }

    @Test("No expiration sends no header; fractional moments are truncated to whole seconds")
    func expirationHeaderValues() {
        #expect(APNsExpiration.none.headerValue == nil)
        #expect(APNsExpiration.none.deadline == nil)
        #expect(APNsExpiration.at(Date(timeIntervalSince1970: 1_700_000_000.9)).headerValue == "1700000000")
    }

    @Test("Negative or non-numeric expirations are rejected with invalidExpiration", arguments: [
        "-1", "-1700000000", "abc", "", "1.5", "1e9", "tomorrow", "12 34", "99999999999999999999",
    ])
    func badExpirationIsRejected(headerValue: String) {
        expectValidationError(.invalidExpiration, field: "apns-expiration") {
            try APNsExpiration(headerValue: headerValue)
        }
    }

    @Test("apns-id parses in either case and renders lowercase", arguments: [
        "3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0f",
        "3F1C2A7E-0B4D-4E2A-9C1D-5A6B7C8D9E0F",
        "3F1c2A7e-0b4D-4E2a-9C1d-5a6B7c8D9e0F",
    ])
    func apnsIDParsesInEitherCase(value: String) throws {
        let id = try UUID(apnsID: value)
        #expect(id.apnsString == "3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0f")
    }

    @Test("apnsString is the lowercase 8-4-4-4-12 form")
    func apnsStringIsLowercase() throws {
        let id = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(id.apnsString == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
    }

    @Test("Anything but a canonical UUID is rejected with invalidMessageID", arguments: [
        "",
        "not-a-uuid",
        "3f1c2a7e0b4d4e2a9c1d5a6b7c8d9e0f",  // no dashes
        "{3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0f}",  // braces
        "3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0f ",  // trailing space
        "3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0",  // one digit short
        "3f1c2a7e-0b4d-4e2a-9c1d-5a6b7c8d9e0g",  // non-hex digit
        "3f1c2a7e0-b4d-4e2a-9c1d-5a6b7c8d9e0f",  // dash in the wrong place
        "12345",
    ])
    func nonUUIDApnsIDIsRejected(value: String) {
        expectValidationError(.invalidMessageID, field: "apns-id") { try UUID(apnsID: value) }
    }
}

@Suite("APNsRequestMetadata")
struct RequestMetadataTests {
    @Test("Default priority is 5 for background pushes and 10 for every other type",
          arguments: APNsPushType.allKnown)
    func defaultPriorityDependsOnPushType(pushType: APNsPushType) {
        let metadata = APNsRequestMetadata(topic: nil, pushType: pushType)
        #expect(metadata.priority.rawValue == (pushType == .background ? 5 : 10))
    }

    @Test("Default push type is alert, with no expiration and no collapse id")
    func defaults() {
        let metadata = APNsRequestMetadata(topic: "com.example.app")
        #expect(metadata.pushType == .alert)
        #expect(metadata.priority == .immediate)
        #expect(metadata.expiration == .none)
        #expect(metadata.collapseID == nil)
    }

    @Test("A topic built with topic(forBundleID:) passes validation for every push type",
          arguments: APNsPushType.allKnown)
    func derivedTopicValidates(pushType: APNsPushType) throws {
        try APNsRequestMetadata(topic: pushType.topic(forBundleID: "com.example.app"), pushType: pushType).validate()
    }

    @Test("A topic without the push type's suffix is rejected with invalidTopic",
          arguments: APNsPushType.allKnown.filter { ($0.topicSuffix ?? "").isEmpty == false })
    func topicLackingSuffixIsRejected(pushType: APNsPushType) {
        expectValidationError(.invalidTopic, field: "apns-topic") {
            try APNsRequestMetadata(topic: "com.example.app", pushType: pushType).validate()
        }
    }

    @Test("A VoIP push whose topic lacks .voip is rejected")
    func voipPushNeedsVoipTopic() throws {
        expectValidationError(.invalidTopic, field: "apns-topic") {
            try APNsRequestMetadata(topic: "com.example.app", pushType: .voip).validate()
        }
        try APNsRequestMetadata(topic: "com.example.app.voip", pushType: .voip).validate()
    }

    @Test("Empty topics and topics with whitespace are rejected", arguments: [
        "", " ", "com.example app", "com.example.app\n", "\tcom.example.app",
    ])
    func blankOrSpacedTopicIsRejected(topic: String) {
        expectValidationError(.invalidTopic, field: "apns-topic") {
            try APNsRequestMetadata(topic: topic, pushType: .alert).validate()
        }
    }

    @Test("No topic is allowed (certificate connections with a single topic)")
    func missingTopicIsAllowed() throws {
        try APNsRequestMetadata(topic: nil, pushType: .voip).validate()
    }

    @Test("validate rejects a priority the push type does not allow", arguments: [
        (APNsPushType.background, 10), (.background, 1), (.location, 1), (.liveactivity, 1),
    ])
    func disallowedPriorityIsRejected(pushType: APNsPushType, priority: Int) throws {
        let metadata = APNsRequestMetadata(
            topic: pushType.topic(forBundleID: "com.example.app"), pushType: pushType, priority: try APNsPriority(priority))
        expectValidationError(.invalidPriority, field: "apns-priority") { try metadata.validate() }
    }

    @Test("validate accepts every priority the push type allows", arguments: APNsPushType.allKnown)
    func allowedPrioritiesValidate(pushType: APNsPushType) throws {
        for priority in pushType.allowedPriorities {
            try APNsRequestMetadata(
                topic: pushType.topic(forBundleID: "com.example.app"), pushType: pushType, priority: priority
            ).validate()
        }
    }

    @Test("A collapse id of 64 bytes is accepted")
    func collapseIDOf64BytesIsAccepted() throws {
        try APNsRequestMetadata(topic: "com.example.app", collapseID: String(repeating: "c", count: 64)).validate()
        // 32 two-byte characters: 64 UTF-8 bytes.
        try APNsRequestMetadata(topic: "com.example.app", collapseID: String(repeating: "é", count: 32)).validate()
        // 16 four-byte characters: 64 UTF-8 bytes.
        try APNsRequestMetadata(topic: "com.example.app", collapseID: String(repeating: "😀", count: 16)).validate()
    }

    @Test("A collapse id over 64 UTF-8 bytes is rejected with invalidCollapseID, counting bytes not characters",
          arguments: [
              String(repeating: "c", count: 65),
              String(repeating: "c", count: 63) + "é",  // 64 characters, 65 bytes
              String(repeating: "é", count: 33),  // 33 characters, 66 bytes
              String(repeating: "😀", count: 17),  // 17 characters, 68 bytes
          ])
    func collapseIDOver64BytesIsRejected(collapseID: String) {
        #expect(collapseID.utf8.count > 64)
        expectValidationError(.invalidCollapseID, field: "apns-collapse-id") {
            try APNsRequestMetadata(topic: "com.example.app", collapseID: collapseID).validate()
        }
    }

    @Test("A collapse id that is empty or has a control character is rejected: HTTP/2 refuses NUL, CR and LF in a header",
          arguments: ["", "a\nb", "a\rb", "a\u{0}b", "tab\there", "del\u{7F}"])
    func collapseIDWithControlCharactersIsRejected(collapseID: String) {
        expectValidationError(.invalidCollapseID, field: "apns-collapse-id") {
            try APNsRequestMetadata(topic: "com.example.app", collapseID: collapseID).validate()
        }
    }

    @Test("A topic with a control character is rejected", arguments: ["com.example\u{0}x", "com.example\u{1}", "com.\u{7F}app"])
    func topicWithControlCharactersIsRejected(topic: String) {
        expectValidationError(.invalidTopic, field: "apns-topic") { try APNsRequestMetadata(topic: topic).validate() }
    }

    @Test("headers lists push type, lowercase apns-id, priority, topic, expiration and collapse id in order")
    func headersListEveryHeaderInStableOrder() throws {
        let metadata = APNsRequestMetadata(
            topic: "com.example.app.voip", pushType: .voip, priority: .throttled,
            expiration: .at(Date(timeIntervalSince1970: 1_700_000_000)), collapseID: "game-42",
            apnsID: try UUID(apnsID: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(metadata.headers.map { "\($0.name): \($0.value)" } == [
            "apns-push-type: voip",
            "apns-id: e621e1f8-c36c-495a-93fc-0c247a3e6e5f",
            "apns-priority: 5",
            "apns-topic: com.example.app.voip",
            "apns-expiration: 1700000000",
            "apns-collapse-id: game-42",
        ])
        // The client's list, with room for its authorization header, is the same list.
        #expect(metadata.headers(reservingRoomFor: 1).map { "\($0.name): \($0.value)" } == metadata.headers.map { "\($0.name): \($0.value)" })
    }

    @Test("headers omits the topic, expiration and collapse id when they are not set")
    func headersOmitUnsetValues() throws {
        let metadata = APNsRequestMetadata(
            topic: nil, apnsID: try UUID(apnsID: "00000000-0000-0000-0000-0000000000aa"))
        #expect(metadata.headers.map { "\($0.name): \($0.value)" } == [
            "apns-push-type: alert",
            "apns-id: 00000000-0000-0000-0000-0000000000aa",
            "apns-priority: 10",
        ])
    }

    @Test("headers sends apns-expiration 0 for immediately")
    func headersSendZeroExpirationForImmediately() {
        let metadata = APNsRequestMetadata(topic: "com.example.app", expiration: .immediately)
        #expect(metadata.headers.filter { $0.name == "apns-expiration" }.map(\.value) == ["0"])
        #expect(Set(metadata.headers.map(\.name)).count == metadata.headers.count, "no header is repeated")
    }

    @Test("Each metadata gets its own apns-id by default")
    func defaultApnsIDIsUnique() {
        let a = APNsRequestMetadata(topic: "com.example.app")
        let b = APNsRequestMetadata(topic: "com.example.app")
        #expect(a.apnsID != b.apnsID)
    }
}

@Suite("APNsEnvironment")
struct EnvironmentTests {
    @Test("production, development and the synonym sandbox parse in any case", arguments: [
        ("production", "production"), ("Production", "production"), ("development", "development"),
        ("sandbox", "development"), ("SANDBOX", "development"),
    ])
    func environmentNamesParse(input: String, expected: String) throws {
        #expect(try APNsEnvironment(input).rawValue == expected)
    }

    @Test("Other environment names are rejected with invalidEnvironment and the caller's field",
          arguments: ["", "prod", "staging", "dev"])
    func otherEnvironmentNamesAreRejected(input: String) {
        expectValidationError(.invalidEnvironment, field: "apns.environment") {
            try APNsEnvironment(input, field: "apns.environment")
        }
    }

    @Test("Each environment names Apple's host for it")
    func environmentHosts() {
        #expect(APNsEnvironment.production.host == "api.push.apple.com")
        #expect(APNsEnvironment.development.host == "api.sandbox.push.apple.com")
    }

    @Test("Environments encode as their name and decode from any accepted spelling")
    func environmentCodable() throws {
        #expect(String(decoding: try JSONEncoder().encode([APNsEnvironment.development]), as: UTF8.self) == #"["development"]"#)
        #expect(try JSONDecoder().decode([APNsEnvironment].self, from: Data(#"["sandbox","production"]"#.utf8))
            == [.development, .production])
        #expect(throws: APNsValidationError.self) {
            try JSONDecoder().decode([APNsEnvironment].self, from: Data(#"["staging"]"#.utf8))
        }
    }
}
