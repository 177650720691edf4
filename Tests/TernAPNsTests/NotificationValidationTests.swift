import Foundation
import Testing

@testable import TernAPNs

private let bundleID = "com.example.app"

private func metadata(_ pushType: APNsPushType = .alert, priority: APNsPriority? = nil) -> APNsRequestMetadata {
    APNsRequestMetadata(topic: pushType.topic(forBundleID: bundleID), pushType: pushType, priority: priority)
}

private func token() throws -> DeviceToken { try DeviceToken(hex: token32Hex) }

/// A payload whose rendering is exactly `size` bytes, padded with `filler` (1 or more UTF-8 bytes each).
private func payload(ofSize size: Int, filler: String = "x") throws -> APNsPayload {
    let overhead = try APNsPayload(alert: .string("")).encoded().count
    let fillerBytes = filler.utf8.count
    #expect((size - overhead) % fillerBytes == 0, "size must leave room for whole fillers")
    let payload = APNsPayload(alert: .string(String(repeating: filler, count: (size - overhead) / fillerBytes)))
    #expect(try payload.encoded().count == size)
    return payload
}

/// Raw JSON bytes of exactly `size` bytes: `{"aps":{},"pad":"xxx…"}`.
private func rawPayload(ofSize size: Int) -> [UInt8] {
    let overhead = #"{"aps":{},"pad":""}"#.utf8.count
    return Array((#"{"aps":{},"pad":""# + String(repeating: "x", count: size - overhead) + #""}"#).utf8)
}

/// A Live Activity payload; `build` fills in or removes keys.
private func liveActivity(_ event: APNsLiveActivityEvent, _ build: (inout APNsPayload) -> Void = { _ in }) -> APNsPayload {
    var payload = APNsPayload()
    payload.event = event
    payload.timestamp = 1_700_000_000
    switch event {
    case .start:
        payload.alert = APNsAlert(title: "Kick-off", body: "Lions vs Tigers")
        payload.attributesType = "MatchAttributes"
        payload.attributes = ["home": "Lions", "away": "Tigers"]
        payload.contentState = ["home": 0, "away": 0]
    default:
        payload.contentState = ["home": 1, "away": 0]
    }
    build(&payload)
    return payload
}

@Suite("APNsNotification size limits")
struct NotificationSizeTests {
    @Test("An alert payload of exactly 4096 bytes is accepted and kept byte for byte")
    func payloadOf4096BytesIsAccepted() throws {
        let payload = try payload(ofSize: 4096)
        let notification = try APNsNotification(deviceToken: try token(), metadata: metadata(), payload: payload)
        #expect(notification.payload == (try payload.encoded()))
        #expect(notification.payload.count == 4096)
    }

    @Test("A payload over 4096 bytes is rejected with payloadTooLarge", arguments: [APNsPushType.alert, .background, .liveactivity, .mdm, .widgets])
    func payloadOver4096BytesIsRejected(pushType: APNsPushType) throws {
        let payload = try payload(ofSize: 4097)
        expectValidationError(.payloadTooLarge, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(pushType), payload: payload)
        }
    }

    @Test("The limit counts UTF-8 bytes, not characters")
    func sizeCountsUTF8Bytes() throws {
        // Two-byte characters: 4096 bytes is fewer than 4096 characters, 4098 bytes still too many.
        let fits = try payload(ofSize: 4096, filler: "é")
        _ = try APNsNotification(deviceToken: try token(), metadata: metadata(), payload: fits)
        let tooLarge = try payload(ofSize: 4098, filler: "é")
        expectValidationError(.payloadTooLarge, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), payload: tooLarge)
        }
    }

    @Test("A VoIP push allows up to 5120 bytes but not 5121")
    func voipAllows5120ButNot5121() throws {
        _ = try APNsNotification(deviceToken: try token(), metadata: metadata(.voip), payload: try payload(ofSize: 4097))
        _ = try APNsNotification(deviceToken: try token(), metadata: metadata(.voip), payload: try payload(ofSize: 5120))
        let tooLarge = try payload(ofSize: 5121)
        expectValidationError(.payloadTooLarge, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.voip), payload: tooLarge)
        }
    }

    @Test("Raw payloads follow the same limits: 4096, and 5120 for VoIP")
    func rawPayloadLimits() throws {
        _ = try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: rawPayload(ofSize: 4096))
        expectValidationError(.payloadTooLarge, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: rawPayload(ofSize: 4097))
        }
        _ = try APNsNotification(deviceToken: try token(), metadata: metadata(.voip), rawPayload: rawPayload(ofSize: 5120))
        expectValidationError(.payloadTooLarge, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.voip), rawPayload: rawPayload(ofSize: 5121))
        }
    }
}

@Suite("APNsNotification raw payloads")
struct RawPayloadTests {
    @Test("An empty raw payload is rejected with payloadEmpty")
    func emptyRawPayloadIsRejected() {
        expectValidationError(.payloadEmpty, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: [])
        }
    }

    @Test("A raw payload that is not a JSON object is rejected with invalidPayload", arguments: [
        "[1,2]", #""aps""#, "42", "null", "not json", #"{"aps":"#, #"{"aps":{}"#, " ",
    ])
    func nonObjectRawPayloadIsRejected(text: String) {
        expectValidationError(.invalidPayload, field: "payload") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: Array(text.utf8))
        }
    }

    @Test("A raw payload whose aps is not an object is rejected", arguments: [#"{"aps":1}"#, #"{"aps":"alert"}"#, #"{"aps":[]}"#])
    func nonObjectApsIsRejected(text: String) {
        expectValidationError(.invalidPayload, field: "payload.aps") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: Array(text.utf8))
        }
    }

    @Test("A raw JSON object is kept byte for byte, and an MDM payload needs no aps")
    func rawObjectIsKeptVerbatim() throws {
        let text = #"{"aps":{"alert":"Hi"},"z":1, "a":2}"#
        let notification = try APNsNotification(deviceToken: try token(), metadata: metadata(), rawPayload: Array(text.utf8))
        #expect(utf8(notification.payload) == text)
        let mdm = APNsRequestMetadata(topic: "com.apple.mgmt.External.1234", pushType: .mdm)
        _ = try APNsNotification(deviceToken: try token(), metadata: mdm, rawPayload: Array(#"{"mdm":"magic"}"#.utf8))
    }

    @Test("Raw payloads are checked against the header rules too")
    func rawPayloadChecksHeaders() {
        let metadata = APNsRequestMetadata(topic: bundleID, pushType: .voip)
        expectValidationError(.invalidTopic, field: "apns-topic") {
            try APNsNotification(deviceToken: try token(), metadata: metadata, rawPayload: Array(#"{"aps":{}}"#.utf8))
        }
    }
}

@Suite("APNsNotification push-type rules")
struct PushTypeRuleTests {
    @Test("A background push with content-available only and priority 5 is accepted")
    func backgroundPushIsAccepted() throws {
        let notification = try APNsNotification(
            deviceToken: try token(), metadata: metadata(.background), payload: .background(custom: ["sync": "inbox"]))
        #expect(notification.metadata.priority == .throttled)
        #expect(utf8(notification.payload) == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
    }

    @Test("A background push with priority 10 is rejected")
    func backgroundPushWithPriority10IsRejected() {
        expectValidationError(.invalidPriority, field: "apns-priority") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(.background, priority: .immediate), payload: .background())
        }
    }

    @Test("A background push that alerts, sounds or badges is rejected", arguments: [
        APNsPayload(alert: .string("Hi"), contentAvailable: true),
        APNsPayload(badge: 1, contentAvailable: true),
        APNsPayload(sound: .default, contentAvailable: true),
    ])
    func userVisibleBackgroundPushIsRejected(payload: APNsPayload) {
        expectValidationError(.invalidPayload, field: "aps") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.background), payload: payload)
        }
    }

    @Test("A background push without content-available is rejected")
    func backgroundPushWithoutContentAvailableIsRejected() {
        expectValidationError(.invalidPayload, field: "aps") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.background), payload: APNsPayload())
        }
    }

    @Test("A content-available-only push may not use priority 10 on any push type", arguments: [APNsPushType.alert, .voip, .widgets])
    func contentAvailableOnlyWithPriority10IsRejected(pushType: APNsPushType) throws {
        expectValidationError(.invalidPriority, field: "apns-priority") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(pushType, priority: .immediate), payload: .background())
        }
        _ = try APNsNotification(
            deviceToken: try token(), metadata: metadata(pushType, priority: .throttled), payload: .background())
    }

    @Test("Priority 10 is fine when content-available comes with an alert")
    func contentAvailableWithAlertMayUsePriority10() throws {
        _ = try APNsNotification(
            deviceToken: try token(), metadata: metadata(.alert, priority: .immediate),
            payload: APNsPayload(alert: .string("Hi"), contentAvailable: true))
    }

    @Test("Header rules and payload rules are checked when building a notification")
    func headerAndPayloadRulesAreChecked() {
        expectValidationError(.invalidTopic, field: "apns-topic") {
            try APNsNotification(
                deviceToken: try token(), metadata: APNsRequestMetadata(topic: bundleID, pushType: .liveactivity),
                payload: liveActivity(.update))
        }
        expectValidationError(.invalidPayload, field: "aps.badge") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(), payload: APNsPayload(badge: -1))
        }
    }

    @Test("init(unchecked:) keeps a request that breaks the rules, for tests that need one")
    func uncheckedInitSkipsValidation() throws {
        let notification = APNsNotification(
            unchecked: try token(), metadata: metadata(.background, priority: .immediate), payload: [])
        #expect(notification.payload.isEmpty)
        #expect(notification.metadata.priority == .immediate)
    }
}

@Suite("APNsNotification Live Activity rules")
struct LiveActivityRuleTests {
    @Test("Complete start, update and end pushes are accepted", arguments: [
        APNsLiveActivityEvent.start, .update, .end,
    ])
    func completeLiveActivityPushesAreAccepted(event: APNsLiveActivityEvent) throws {
        for priority in [APNsPriority.immediate, .throttled] {
            _ = try APNsNotification(
                deviceToken: try token(), metadata: metadata(.liveactivity, priority: priority), payload: liveActivity(event))
        }
    }

    @Test("An end may carry a dismissal date; a start may ask for an update token")
    func optionalLiveActivityKeysAreAccepted() throws {
        _ = try APNsNotification(
            deviceToken: try token(), metadata: metadata(.liveactivity),
            payload: liveActivity(.end) { $0.dismissalDate = 1_700_000_600 })
        _ = try APNsNotification(
            deviceToken: try token(), metadata: metadata(.liveactivity),
            payload: liveActivity(.start) { $0.inputPushToken = true })
    }

    @Test("A Live Activity push needs an event")
    func liveActivityNeedsEvent() {
        expectValidationError(.invalidPayload, field: "aps.event") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(.liveactivity),
                payload: liveActivity(.update) { $0.event = nil })
        }
    }

    @Test("A Live Activity push needs a timestamp", arguments: [APNsLiveActivityEvent.start, .update, .end])
    func liveActivityNeedsTimestamp(event: APNsLiveActivityEvent) {
        expectValidationError(.invalidPayload, field: "aps.timestamp") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(.liveactivity),
                payload: liveActivity(event) { $0.timestamp = nil })
        }
    }

    @Test("Update and end need content-state", arguments: [APNsLiveActivityEvent.update, .end])
    func updateAndEndNeedContentState(event: APNsLiveActivityEvent) {
        expectValidationError(.invalidPayload, field: "aps.content-state") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(.liveactivity),
                payload: liveActivity(event) { $0.contentState = nil })
        }
    }

    @Test("A start needs attributes-type, attributes and alert", arguments: ["attributes-type", "attributes", "alert"])
    func startNeedsAttributesAndAlert(missing: String) {
        let payload = liveActivity(.start) {
            switch missing {
            case "attributes-type": $0.attributesType = nil
            case "attributes": $0.attributes = nil
            default: $0.alert = nil
            }
        }
        expectValidationError(.invalidPayload, field: "aps.attributes") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.liveactivity), payload: payload)
        }
    }

    @Test("A Live Activity push with priority 1 is rejected")
    func liveActivityPriority1IsRejected() {
        expectValidationError(.invalidPriority, field: "apns-priority") {
            try APNsNotification(
                deviceToken: try token(), metadata: metadata(.liveactivity, priority: .powerConsiderate),
                payload: liveActivity(.update))
        }
    }

    /// One Live Activity key (spec §2) alone on an otherwise valid alert push, and the field the error must name.
    struct StrayKey: Sendable, CustomTestStringConvertible {
        let field: String
        let payload: APNsPayload
        var testDescription: String { field }

        init(_ field: String, _ build: (inout APNsPayload) -> Void) {
            var payload = APNsPayload(alert: .string("Hi"))
            build(&payload)
            self.field = field
            self.payload = payload
        }
    }

    static let strayKeys: [StrayKey] = [
        StrayKey("aps.event") { $0.event = .update },
        StrayKey("aps.timestamp") { $0.timestamp = 1_700_000_000 },
        StrayKey("aps.content-state") { $0.contentState = ["score": 1] },
        StrayKey("aps.stale-date") { $0.staleDate = 1_700_003_600 },
        StrayKey("aps.dismissal-date") { $0.dismissalDate = 1_700_003_600 },
        StrayKey("aps.attributes-type") { $0.attributesType = "MatchAttributes" },
        StrayKey("aps.attributes") { $0.attributes = ["home": "Lions"] },
        StrayKey("aps.input-push-token") { $0.inputPushToken = true },
        StrayKey("aps.input-push-channel") { $0.inputPushChannel = "dHJ1ZQ==" },
    ]

    @Test("Live Activity keys on a push that is not liveactivity are rejected, naming the key", arguments: strayKeys)
    func liveActivityKeysNeedLiveActivityPushType(stray: StrayKey) {
        expectValidationError(.invalidPayload, field: stray.field) {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.alert), payload: stray.payload)
        }
    }

    @Test("The stray-key cases cover every Live Activity key the payload renders")
    func strayKeysCoverAllLiveActivityKeys() {
        #expect(Self.strayKeys.map { String($0.field.dropFirst("aps.".count)) } == APNsNotification.liveActivityKeys)
        for stray in Self.strayKeys {
            #expect(stray.payload.aps[String(stray.field.dropFirst("aps.".count))] != nil, "\(stray.field) renders")
        }
    }

    @Test("A whole Live Activity update sent as an alert push is rejected at its event")
    func liveActivityUpdateAsAlertPushIsRejected() {
        expectValidationError(.invalidPayload, field: "aps.event") {
            try APNsNotification(deviceToken: try token(), metadata: metadata(.alert), payload: liveActivity(.update))
        }
    }
}
