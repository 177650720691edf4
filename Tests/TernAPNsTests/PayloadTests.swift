import Foundation
import Testing

@testable import TernAPNs

/// One `aps` key: a payload that sets only it, and the exact JSON it must render to.
struct ApsKeyCase: Sendable, CustomTestStringConvertible {
    let key: String
    let payload: APNsPayload
    let json: String
    var testDescription: String { key }

    init(_ key: String, _ json: String, _ build: (inout APNsPayload) -> Void) {
        var payload = APNsPayload()
        build(&payload)
        self.key = key
        self.payload = payload
        self.json = json
    }
}

let apsKeyCases: [ApsKeyCase] = [
    ApsKeyCase("alert (string form)", #"{"aps":{"alert":"Hello"}}"#) { $0.alert = .string("Hello") },
    ApsKeyCase("badge", #"{"aps":{"badge":7}}"#) { $0.badge = 7 },
    ApsKeyCase("badge 0 clears", #"{"aps":{"badge":0}}"#) { $0.badge = 0 },
    ApsKeyCase("sound (name)", #"{"aps":{"sound":"default"}}"#) { $0.sound = .default },
    ApsKeyCase("sound (file)", #"{"aps":{"sound":"chime.caf"}}"#) { $0.sound = .named("chime.caf") },
    ApsKeyCase("sound (critical)", #"{"aps":{"sound":{"critical":1,"name":"alarm.caf","volume":0.5}}}"#) {
        $0.sound = .critical(name: "alarm.caf", volume: 0.5)
    },
    ApsKeyCase("thread-id", #"{"aps":{"thread-id":"chat-7"}}"#) { $0.threadID = "chat-7" },
    ApsKeyCase("category", #"{"aps":{"category":"MESSAGE"}}"#) { $0.category = "MESSAGE" },
    ApsKeyCase("content-available", #"{"aps":{"content-available":1}}"#) { $0.contentAvailable = true },
    ApsKeyCase("mutable-content", #"{"aps":{"mutable-content":1}}"#) { $0.mutableContent = true },
    ApsKeyCase("target-content-id", #"{"aps":{"target-content-id":"window-1"}}"#) { $0.targetContentID = "window-1" },
    ApsKeyCase("interruption-level", #"{"aps":{"interruption-level":"time-sensitive"}}"#) {
        $0.interruptionLevel = .timeSensitive
    },
    ApsKeyCase("relevance-score", #"{"aps":{"relevance-score":0.75}}"#) { $0.relevanceScore = 0.75 },
    ApsKeyCase("filter-criteria", #"{"aps":{"filter-criteria":"work"}}"#) { $0.filterCriteria = "work" },
    ApsKeyCase("event", #"{"aps":{"event":"update"}}"#) { $0.event = .update },
    ApsKeyCase("timestamp", #"{"aps":{"timestamp":1700000000}}"#) { $0.timestamp = 1_700_000_000 },
    ApsKeyCase("content-state", #"{"aps":{"content-state":{"score":3,"team":"A"}}}"#) {
        $0.contentState = ["team": "A", "score": 3]
    },
    ApsKeyCase("stale-date", #"{"aps":{"stale-date":1700003600}}"#) { $0.staleDate = 1_700_003_600 },
    ApsKeyCase("dismissal-date", #"{"aps":{"dismissal-date":1700007200}}"#) { $0.dismissalDate = 1_700_007_200 },
    ApsKeyCase("attributes-type", #"{"aps":{"attributes-type":"MatchAttributes"}}"#) {
        $0.attributesType = "MatchAttributes"
    },
    ApsKeyCase("attributes", #"{"aps":{"attributes":{"home":"Lions"}}}"#) { $0.attributes = ["home": "Lions"] },
    ApsKeyCase("input-push-token", #"{"aps":{"input-push-token":1}}"#) { $0.inputPushToken = true },
    ApsKeyCase("input-push-channel", #"{"aps":{"input-push-channel":"dHJ1ZQ=="}}"#) {
        $0.inputPushChannel = "dHJ1ZQ=="
    },
]

@Suite("APNsPayload rendering")
struct PayloadRenderingTests {
    @Test("Each aps key renders under its exact APNs name", arguments: apsKeyCases)
    func apsKeyRendersWithExactName(keyCase: ApsKeyCase) throws {
        #expect(utf8(try keyCase.payload.encoded()) == keyCase.json)
    }

    @Test("An empty payload renders an empty aps dictionary")
    func emptyPayloadRendersEmptyAps() throws {
        #expect(utf8(try APNsPayload().encoded()) == #"{"aps":{}}"#)
    }

    @Test("An alert with only a body uses the dictionary form unless the string form is asked for")
    func alertBodyOnlyUsesDictionaryUnlessStringForm() throws {
        #expect(utf8(try APNsPayload(alert: APNsAlert(body: "Hello")).encoded()) == #"{"aps":{"alert":{"body":"Hello"}}}"#)
        #expect(utf8(try APNsPayload(alert: .string("Hello")).encoded()) == #"{"aps":{"alert":"Hello"}}"#)
    }

    @Test("The string form falls back to a dictionary once other alert keys are set")
    func stringFormFallsBackToDictionary() throws {
        var alert = APNsAlert.string("Hello")
        alert.title = "Greeting"
        #expect(utf8(try APNsPayload(alert: alert).encoded()) == #"{"aps":{"alert":{"body":"Hello","title":"Greeting"}}}"#)
    }

    @Test("The alert dictionary renders every localisation key with its exact name")
    func alertDictionaryRendersAllKeys() throws {
        let alert = APNsAlert(
            title: "T", subtitle: "S", body: "B", launchImage: "Launch.png",
            titleLocKey: "TITLE_KEY", titleLocArgs: ["t1"],
            subtitleLocKey: "SUBTITLE_KEY", subtitleLocArgs: ["s1", "s2"],
            locKey: "BODY_KEY", locArgs: ["b1", "b2", "b3"])
        let expected =
            #"{"aps":{"alert":{"body":"B","launch-image":"Launch.png","loc-args":["b1","b2","b3"],"loc-key":"BODY_KEY","#
            + #""subtitle":"S","subtitle-loc-args":["s1","s2"],"subtitle-loc-key":"SUBTITLE_KEY","title":"T","#
            + #""title-loc-args":["t1"],"title-loc-key":"TITLE_KEY"}}}"#
        #expect(utf8(try APNsPayload(alert: alert).encoded()) == expected)
    }

    @Test("A critical sound at full volume renders volume 1")
    func criticalSoundFullVolume() throws {
        let payload = APNsPayload(sound: .critical(name: "default", volume: 1))
        let data = Data(try payload.encoded())
        #expect(utf8(Array(data)) == #"{"aps":{"sound":{"critical":1,"name":"default","volume":1}}}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let sound = try #require((object["aps"] as? [String: Any])?["sound"] as? [String: Any])
        #expect((sound["volume"] as? NSNumber)?.doubleValue == 1.0)
    }

    @Test("A Live Activity start renders all its keys in one aps dictionary")
    func liveActivityStartRendersAllKeys() throws {
        var payload = APNsPayload(alert: APNsAlert(title: "Kick-off", body: "Lions vs Tigers"))
        payload.event = .start
        payload.timestamp = 1_700_000_000
        payload.attributesType = "MatchAttributes"
        payload.attributes = ["home": "Lions", "away": "Tigers"]
        payload.contentState = ["home": 0, "away": 0]
        payload.staleDate = 1_700_003_600
        payload.relevanceScore = 75
        payload.inputPushToken = true
        let expected =
            #"{"aps":{"alert":{"body":"Lions vs Tigers","title":"Kick-off"},"attributes":{"away":"Tigers","home":"Lions"},"#
            + #""attributes-type":"MatchAttributes","content-state":{"away":0,"home":0},"event":"start","#
            + #""input-push-token":1,"relevance-score":75,"stale-date":1700003600,"timestamp":1700000000}}"#
        #expect(utf8(try payload.encoded()) == expected)
    }

    @Test("Custom keys sit beside aps, sorted, after aps")
    func customKeysSitBesideAps() throws {
        let payload = APNsPayload(
            alert: .string("Hi"),
            custom: ["messageId": "m-42", "n": 3, "a": true, "nested": ["list": [1, 2.5, nil, "x"], "flag": false]])
        #expect(utf8(try payload.encoded())
            == #"{"aps":{"alert":"Hi"},"a":true,"messageId":"m-42","n":3,"nested":{"flag":false,"list":[1,2.5,null,"x"]}}"#)
    }

    @Test("The background factory renders content-available 1 and its custom keys")
    func backgroundFactoryRendersContentAvailableOnly() throws {
        let payload = APNsPayload.background(custom: ["sync": "inbox"])
        #expect(utf8(try payload.encoded()) == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
        #expect(payload.contentAvailable)
        #expect(!payload.isUserVisible)
    }

    @Test("isUserVisible is true for an alert, a sound or a badge, and false otherwise")
    func isUserVisibleMeansAlertSoundOrBadge() {
        #expect(APNsPayload(alert: .string("x")).isUserVisible)
        #expect(APNsPayload(badge: 0).isUserVisible)
        #expect(APNsPayload(sound: .default).isUserVisible)
        #expect(!APNsPayload(threadID: "t", category: "c", contentAvailable: true, mutableContent: true).isUserVisible)
    }

    @Test("The same payload renders to the same bytes every time, whatever the insertion order")
    func renderingIsDeterministic() throws {
        var first = APNsPayload(alert: .string("x"), badge: 1)
        var second = APNsPayload(alert: .string("x"), badge: 1)
        let keys = (0..<40).map { "key\($0)" }
        for key in keys { first.custom[key] = .string(key) }
        for key in keys.reversed() { second.custom[key] = .string(key) }
        first.custom["obj"] = .object(Dictionary(uniqueKeysWithValues: keys.map { ($0, JSONValue.int(1)) }))
        second.custom["obj"] = .object(Dictionary(uniqueKeysWithValues: keys.reversed().map { ($0, JSONValue.int(1)) }))
        let bytes = try first.encoded()
        #expect(try first.encoded() == bytes)
        #expect(try second.encoded() == bytes)
        let text = utf8(bytes)
        #expect(text.hasPrefix(#"{"aps":{"alert":"x","badge":1},"key0":"key0","key1":"key1","key10":"key10","#))
    }
}

@Suite("APNsPayload rules")
struct PayloadRuleTests {
    @Test("aps is reserved and rejected as a custom key")
    func apsAsCustomKeyIsRejected() {
        let payload = APNsPayload(custom: ["aps": ["badge": 1]])
        expectValidationError(.invalidPayload, field: "custom.aps") { try payload.encoded() }
    }

    @Test("A negative badge is rejected", arguments: [-1, Int.min])
    func negativeBadgeIsRejected(badge: Int) {
        expectValidationError(.invalidPayload, field: "aps.badge") { try APNsPayload(badge: badge).encoded() }
    }

    @Test("Relevance score must be within 0…1 on an ordinary notification", arguments: [-0.01, 1.01, 2, -1, .nan])
    func outOfRangeRelevanceIsRejected(score: Double) {
        var payload = APNsPayload(alert: .string("x"))
        payload.relevanceScore = score
        expectValidationError(.invalidPayload, field: "aps.relevance-score") { try payload.encoded() }
    }

    @Test("Relevance scores 0 and 1 are accepted", arguments: [(0.0, "0"), (1.0, "1")])
    func relevanceBoundsAreAccepted(score: Double, rendered: String) throws {
        var payload = APNsPayload()
        payload.relevanceScore = score
        #expect(utf8(try payload.encoded()) == #"{"aps":{"relevance-score":\#(rendered)}}"#)
    }

    @Test("A Live Activity may use any relevance score")
    func liveActivityRelevanceIsUnbounded() throws {
        var payload = APNsPayload()
        payload.event = .update
        payload.relevanceScore = 150.5
        #expect(utf8(try payload.encoded()) == #"{"aps":{"event":"update","relevance-score":150.5}}"#)
    }

    @Test("Critical sound volume must be within 0…1", arguments: [-0.1, 1.5, .nan, .infinity])
    func outOfRangeVolumeIsRejected(volume: Double) {
        let payload = APNsPayload(sound: .critical(name: "alarm.caf", volume: volume))
        expectValidationError(.invalidPayload, field: "aps.sound.volume") { try payload.encoded() }
    }

    @Test("content-state and attributes must be JSON objects")
    func liveActivityStateMustBeObjects() {
        var state = APNsPayload()
        state.contentState = [1, 2]
        expectValidationError(.invalidPayload, field: "aps.content-state") { try state.encoded() }
        var attributes = APNsPayload()
        attributes.attributes = "Lions"
        expectValidationError(.invalidPayload, field: "aps.attributes") { try attributes.encoded() }
    }

    @Test("Non-finite doubles are rejected wherever they appear", arguments: [Double.nan, .infinity, -.infinity])
    func nonFiniteDoublesAreRejected(value: Double) {
        expectValidationError(.invalidPayload, field: "payload") {
            try APNsPayload(custom: ["x": .double(value)]).encoded()
        }
        expectValidationError(.invalidPayload, field: "payload") {
            try APNsPayload(custom: ["deep": ["list": [1, .double(value)]]]).encoded()
        }
        var liveActivity = APNsPayload()
        liveActivity.event = .update
        liveActivity.contentState = ["progress": .double(value)]
        expectValidationError(.invalidPayload, field: "payload") { try liveActivity.encoded() }
        expectValidationError(.invalidPayload, field: "payload") { try JSONValue.double(value).serialized() }
    }

    @Test("Interruption levels parse from their documented values only")
    func interruptionLevelsParse() throws {
        #expect(try APNsInterruptionLevel("passive") == .passive)
        #expect(try APNsInterruptionLevel("active") == .active)
        #expect(try APNsInterruptionLevel("time-sensitive") == .timeSensitive)
        #expect(try APNsInterruptionLevel("critical") == .critical)
        #expect(APNsInterruptionLevel.all.map(\.rawValue) == ["passive", "active", "time-sensitive", "critical"])
        for bad in ["", "urgent", "Critical", "timeSensitive"] {
            expectValidationError(.invalidPayload, field: "aps.interruption-level") { try APNsInterruptionLevel(bad) }
        }
    }

    @Test("Live Activity events parse from start, update and end only")
    func liveActivityEventsParse() throws {
        #expect(try APNsLiveActivityEvent("start") == .start)
        #expect(try APNsLiveActivityEvent("update") == .update)
        #expect(try APNsLiveActivityEvent("end") == .end)
        for bad in ["", "Start", "stop", "update "] {
            expectValidationError(.invalidPayload, field: "aps.event") { try APNsLiveActivityEvent(bad) }
        }
    }
}

@Suite("JSON writer")
struct JSONWriterTests {
    static let awkward = "quote\" back\\ slash/ nl\n cr\r tab\t nul\u{0} bell\u{7} us\u{1F} del\u{7F} é 漢字 😀 \u{2028} end"

    @Test("Strings are escaped exactly: quote, backslash, named controls, \\u00XX for the rest; UTF-8 passes through")
    func stringEscapingIsExact() throws {
        let bytes = try JSONValue.string(Self.awkward).serialized()
        #expect(utf8(bytes)
            == #""quote\" back\\ slash/ nl\n cr\r tab\t nul\u0000 bell\u0007 us\u001f del"# + "\u{7F} é 漢字 😀 \u{2028} end\"")
    }

    @Test("Escaped strings round-trip through JSONDecoder and JSONSerialization, in values and in keys")
    func escapedStringsRoundTrip() throws {
        let payload = APNsPayload(alert: .string(Self.awkward), custom: [Self.awkward: .string(Self.awkward)])
        let data = Data(try payload.encoded())

        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((object["aps"] as? [String: Any])?["alert"] as? String == Self.awkward)
        #expect(object[Self.awkward] as? String == Self.awkward)

        struct Aps: Decodable { let alert: String }
        struct Body: Decodable { let aps: Aps }
        #expect(try JSONDecoder().decode(Body.self, from: data).aps.alert == Self.awkward)
        #expect(try JSONValue(parsing: data)[Self.awkward] == .string(Self.awkward))
    }

    @Test("Every control character from U+0000 to U+001F round-trips")
    func everyControlCharacterRoundTrips() throws {
        let controls = String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) })
        let data = Data(try JSONValue.array([.string(controls)]).serialized())
        #expect(!data.contains(where: { $0 < 0x20 }), "no raw control byte in the output")
        #expect(try JSONDecoder().decode([String].self, from: data) == [controls])
    }

    @Test("Numbers render compactly: whole doubles as integers, others in shortest form")
    func numbersRenderCompactly() throws {
        let value: JSONValue = [0.1, 2.0, -3.5, 1e20, .int(Int.max), .int(Int.min), 0, -0.0]
        let text = utf8(try value.serialized())
        #expect(text == "[0.1,2,-3.5,1e+20,9223372036854775807,-9223372036854775808,0,0]")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [NSNumber])
        #expect(parsed.map(\.doubleValue) == [0.1, 2.0, -3.5, 1e20, Double(Int.max), Double(Int.min), 0, 0])
    }

    @Test("Parsed JSON keeps integers, doubles, booleans and null apart")
    func parsingKeepsTypesApart() throws {
        let value = try JSONValue(parsing: Data(#"{"i":1,"d":1.5,"t":true,"f":false,"z":0,"n":null,"s":"1","a":[1,"x"]}"#.utf8))
        #expect(value == ["i": 1, "d": 1.5, "t": true, "f": false, "z": 0, "n": nil, "s": "1", "a": [1, "x"]])
        #expect(value["i"] == .int(1))
        #expect(value["t"] == .bool(true))
        #expect(value["missing"] == nil)
        #expect(value.isObject)
        #expect(!JSONValue.array([]).isObject)
    }

    @Test("Parsing then serialising gives compact JSON with sorted keys")
    func parseThenSerialiseIsCompactAndSorted() throws {
        let value = try JSONValue(parsing: Data(#"{ "b" : [ 1 , 2 ] , "a" : { "y" : "z" , "x" : null } }"#.utf8))
        #expect(utf8(try value.serialized()) == #"{"a":{"x":null,"y":"z"},"b":[1,2]}"#)
    }
}
