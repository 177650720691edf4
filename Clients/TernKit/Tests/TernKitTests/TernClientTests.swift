import Foundation
import Testing

@testable import TernKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP client against scripted answers: what it sends (only the fields the API names) and how every kind of
/// bad answer becomes a typed error naming what was wrong. The integration suite runs it against a real server.
struct TernClientTests {
    private let configuration = TernConfiguration(serverURL: URL(string: "https://push.example.com/tern")!, appID: "shop", appKey: "tak_public")
    private let device = DeviceCredentials(deviceID: "6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01", secret: "tds_secret")
    private let answer =
        #"{"active":true,"createdAt":"2026-11-24T07:34:03.525Z","deviceId":"6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01","environment":"production","lastRegisteredAt":"2026-11-24T07:34:03.525Z","tags":["a"],"token":"abab"}"#

    @Test func aRegistrationSendsTheAPIsFieldsAndNothingElse() async throws {
        let http = ScriptedHTTP([.status(200, answer)])
        let client = TernClient(configuration: configuration, transport: http)
        let facts = RegistrationFacts(token: "abab", environment: "production", appVersion: nil, locale: "ko-KR")
        let device = try await client.register(deviceID: device.deviceID, secret: nil, facts: facts)
        #expect(device.tags == ["a"] && device.deviceSecret == nil && device.active)
        let request = try #require(http.requests.first)
        #expect(request.httpMethod == "PUT")
        #expect(request.url?.absoluteString == "https://push.example.com/tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer tak_public")
        #expect(request.value(forHTTPHeaderField: "X-Tern-Device-Secret") == nil)
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/json")
        // Absent values are left out, not sent as null (the server refuses fields it does not take).
        #expect(http.bodies == [["token": .string("abab"), "environment": .string("production"), "locale": .string("ko-KR")]])
    }

    @Test func callsAboutTheDeviceCarryItsSecretAndItsId() async throws {
        let http = ScriptedHTTP([
            .status(200, #"{"messages":[],"unread":0}"#), .status(200, #"{"marked":2,"unread":1}"#), .status(204, ""), .status(204, ""),
            .status(404, #"{"error":"notFound","message":"device … was sent no push …"}"#),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        _ = try await client.inbox(device, after: "12", limit: 5)
        #expect(try await client.markRead(device, upTo: "9409c256-ca71-4d2c-803f-9f0e5e6bb894") == ReadResult(marked: 2, unread: 1))
        try await client.deleteInboxMessage(device, id: "9409c256-ca71-4d2c-803f-9f0e5e6bb894")
        #expect(try await client.reportOpen(device, messageID: "75f7e009-0893-555a-98ad-b527bf108e29"))
        #expect(try await !client.reportOpen(device, pushID: "4c6e7812-5b50-4a02-807a-011d4ba548a3"), "a push the device was not sent")
        let requests = http.requests
        #expect(requests.allSatisfy { $0.value(forHTTPHeaderField: "X-Tern-Device-Secret") == "tds_secret" })
        #expect(
            requests.map { "\($0.httpMethod!) \($0.url!.path)" } == [
                "GET /tern/v1/apps/shop/inbox", "POST /tern/v1/apps/shop/inbox/read",
                "DELETE /tern/v1/apps/shop/inbox/9409c256-ca71-4d2c-803f-9f0e5e6bb894",
                "POST /tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/opens",
                "POST /tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/opens",
            ])
        #expect(requests[0].url?.query == "deviceId=6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01&after=12&limit=5")
        #expect(http.bodies[1] == ["upTo": .string("9409c256-ca71-4d2c-803f-9f0e5e6bb894")])
        #expect(http.bodies[3] == ["messageId": .string("75f7e009-0893-555a-98ad-b527bf108e29")])
        #expect(http.bodies[4] == ["pushId": .string("4c6e7812-5b50-4a02-807a-011d4ba548a3")])
    }

    @Test func receiptsAcknowledgeMessagesByIdOrAPushByItsId() async throws {
        let http = ScriptedHTTP([.status(200, #"{"acked":2}"#), .status(200, #"{"acked":1}"#)])
        let client = TernClient(configuration: configuration, transport: http)
        #expect(try await client.acknowledge(device, messageIDs: ["75f7e009-0893-555a-98ad-b527bf108e29", "8c693256-6f6b-4bc2-bf74-5a7267737671"]) == 2)
        #expect(try await client.acknowledge(device, pushID: "4c6e7812-5b50-4a02-807a-011d4ba548a3") == 1)
        #expect(http.requests.map { $0.url!.path } == Array(repeating: "/tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/acks", count: 2))
        #expect(http.bodies == [
            ["ids": .array([.string("75f7e009-0893-555a-98ad-b527bf108e29"), .string("8c693256-6f6b-4bc2-bf74-5a7267737671")])],
            ["pushId": .string("4c6e7812-5b50-4a02-807a-011d4ba548a3")],
        ])
    }

    @Test func anActivitysTokenIsSetAndRemovedUnderTheActivitysIdWithTheDevicesSecret() async throws {
        let http = ScriptedHTTP([
            .status(
                200,
                #"{"activityId":"match-7","token":"0a0bff","startedAt":"2026-11-24T07:34:03.525Z","registeredAt":"2026-11-24T08:00:00.000Z","expiresAt":"2026-11-24T19:34:03.525Z"}"#
            ),
            .status(204, ""), .status(404, #"{"error":"notFound","message":"device … has no token for activity match-7"}"#),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        let set = try await client.setActivityToken(device, activity: "match-7", token: Data([0x0a, 0x0b, 0xff]))
        #expect(set.activityID == "match-7" && set.token == "0a0bff")
        #expect(abs(set.startedAt.timeIntervalSince1970 - 1_795_505_643.525) < 0.001)
        #expect(abs(set.registeredAt.timeIntervalSince(set.startedAt) - 1556.475) < 0.001)
        #expect(abs(set.expiresAt.timeIntervalSince(set.startedAt) - 12 * 3600) < 0.001)
        #expect(try await client.removeActivityToken(device, activity: "match-7"))
        #expect(try await !client.removeActivityToken(device, activity: "match-7"), "a 404: the device had no token for it")
        let requests = http.requests
        #expect(
            requests.map { "\($0.httpMethod!) \($0.url!.path)" } == [
                "PUT /tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/activities/match-7",
                "DELETE /tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/activities/match-7",
                "DELETE /tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/activities/match-7",
            ])
        #expect(requests.allSatisfy { $0.value(forHTTPHeaderField: "X-Tern-Device-Secret") == "tds_secret" })
        #expect(requests.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "Bearer tak_public" })
        #expect(http.bodies == [["token": .string("0a0bff")], [:], [:]])
    }

    @Test func anActivityTokensRefusalNamesTheFieldAndAnAnswerForAnotherActivityIsBad() async throws {
        let http = ScriptedHTTP([
            .status(400, #"{"error":"badRequest","field":"token","message":"token must be the activity's push token in hex"}"#),
            .status(
                200,
                #"{"activityId":"match-8","token":"0a","startedAt":"2026-11-24T07:34:03.525Z","registeredAt":"2026-11-24T07:34:03.525Z","expiresAt":"2026-11-24T19:34:03.525Z"}"#
            ),
            .status(200, #"{"activityId":"match-7","token":"0a","startedAt":"yesterday","registeredAt":"2026-11-24T07:34:03.525Z","expiresAt":"2026-11-24T19:34:03.525Z"}"#),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        let refused = await #expect(throws: TernError.self) { try await client.setActivityToken(device, activity: "match-7", token: Data()) }
        #expect(refused?.kind == .refused && refused?.status == 400 && refused?.field == "token" && refused?.isTemporary == false)
        let other = await #expect(throws: TernError.self) { try await client.setActivityToken(device, activity: "match-7", token: Data([10])) }
        #expect(other?.kind == .badAnswer && other?.message.contains("answered activity match-8") == true)
        let date = await #expect(throws: TernError.self) { try await client.setActivityToken(device, activity: "match-7", token: Data([10])) }
        #expect(date?.kind == .badAnswer && date?.message.contains("'startedAt'") == true)
    }

    @Test(arguments: ["", String(repeating: "a", count: 129), "match 7", "a/b", "..%2F", "matché", "match#7", "한국", ".", ".."])
    func anActivityIdTheServerWouldRefuseNeverLeaves(id: String) async throws {
        let http = ScriptedHTTP([])
        let client = TernClient(configuration: configuration, transport: http)
        #expect(!RegisteredActivityToken.isValidActivityID(id))
        let set = await #expect(throws: TernError.self) { try await client.setActivityToken(device, activity: id, token: Data([1])) }
        #expect(set?.kind == .invalidArgument)
        let remove = await #expect(throws: TernError.self) { try await client.removeActivityToken(device, activity: id) }
        #expect(remove?.kind == .invalidArgument)
        #expect(http.requests.isEmpty)
    }

    @Test(arguments: ["m", "match-7", "Order_42.eu:1", "0", String(repeating: "Z", count: 128)])
    func anActivityIdOfLettersDigitsAndDotUnderscoreColonDashIsSent(id: String) async throws {
        let http = ScriptedHTTP([.status(204, "")])
        #expect(RegisteredActivityToken.isValidActivityID(id))
        #expect(try await TernClient(configuration: configuration, transport: http).removeActivityToken(device, activity: id))
        // As it is: the server takes the path's text as the id, without decoding it.
        #expect(http.requests.first?.url?.absoluteString == "https://push.example.com/tern/v1/apps/shop/devices/\(device.deviceID)/activities/\(id)")
    }

    @Test func theChannelsAddressIsAWebSocketOneWithTheResumePoint() throws {
        let client = TernClient(configuration: configuration, transport: ScriptedHTTP([]))
        let request = try client.channelRequest(device, after: 41)
        #expect(
            request.url?.absoluteString == "wss://push.example.com/tern/v1/apps/shop/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/connect?after=41")
        #expect(request.value(forHTTPHeaderField: "X-Tern-Device-Secret") == "tds_secret")
        let plain = TernClient(
            configuration: TernConfiguration(serverURL: URL(string: "http://127.0.0.1:8080")!, appID: "demo", appKey: "k"),
            transport: ScriptedHTTP([]))
        #expect(
            try plain.channelRequest(device, after: nil).url?.absoluteString
                == "ws://127.0.0.1:8080/v1/apps/demo/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01/connect")
        // Schemes are case-insensitive: an upper-case HTTPS is TLS too, and the upgrade carries the device's secret.
        let shouted = TernClient(
            configuration: TernConfiguration(serverURL: URL(string: "HTTPS://push.example.com")!, appID: "demo", appKey: "k"),
            transport: ScriptedHTTP([]))
        #expect(try shouted.channelRequest(device, after: nil).url?.scheme == "wss")
    }

    @Test func aRefusalIsTypedWithTheServersStatusErrorFieldAndWait() async throws {
        let http = ScriptedHTTP([
            .status(
                403, #"{"error":"forbidden","field":"X-Tern-Device-Secret","message":"X-Tern-Device-Secret is not this device's secret"}"#),
            .status(429, #"{"error":"tooManyRequests","message":"too many wrong secrets"}"#, headers: ["Retry-After": "42"]),
            .status(502, "<html>Bad Gateway</html>"),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        let facts = RegistrationFacts(token: "abab", environment: "production")
        let forbidden = await #expect(throws: TernError.self) {
            try await client.register(deviceID: device.deviceID, secret: "tds_old", facts: facts)
        }
        #expect(forbidden?.status == 403 && forbidden?.serverError == "forbidden" && forbidden?.field == "X-Tern-Device-Secret")
        #expect(forbidden?.isTemporary == false)
        #expect(forbidden?.description.contains("tds_old") == false)
        let busy = await #expect(throws: TernError.self) { try await client.inbox(device) }
        #expect(busy?.retryAfter == 42 && busy?.isTemporary == true)
        let gateway = await #expect(throws: TernError.self) { try await client.inbox(device) }
        #expect(gateway?.kind == .refused && gateway?.status == 502 && gateway?.message == "reading the inbox: HTTP 502")
    }

    /// A `Retry-After` comes from whatever answers, a proxy or CDN in front of Tern included: `inf`, `nan` or `1e300`
    /// once reached an integer conversion that traps, on every launch.
    @Test(arguments: [
        ("42", 42.0), (" 7 ", 7), ("0", 0), ("99999999999999999", 3600), ("99999999999999999999999", 3600), ("inf", nil), ("nan", nil),
        ("1e300", nil), ("-5", nil), ("1.5", nil), ("Wed, 21 Oct 2015 07:28:00 GMT", nil), ("", nil),
    ] as [(String, TimeInterval?)])
    func aRetryAfterIsWholeSecondsUpToAnHourAndAnythingElseIsNone(header: String, seconds: TimeInterval?) async throws {
        #expect(TernClient.retryAfter(header) == seconds)
        let http = ScriptedHTTP([.status(503, "", headers: ["Retry-After": header])])
        let refused = await #expect(throws: TernError.self) {
            try await TernClient(configuration: configuration, transport: http).inbox(device)
        }
        #expect(refused?.retryAfter == seconds && refused?.isTemporary == true)
    }

    @Test func aWaitFromAnyNumberIsAWaitAndNeverATrap() {
        for seconds in [TimeInterval.nan, .infinity, -.infinity, -1, 1e300, .greatestFiniteMagnitude] {
            #expect(Duration.wait(seconds: seconds) <= .seconds(3600), "\(seconds)")
        }
        #expect(Duration.wait(seconds: 1.5) == .milliseconds(1500))
        #expect(Duration.wait(seconds: .nan) == .zero)
    }

    @Test func anAnswerThatCannotBeReadNamesWhatIsWrong() async throws {
        let http = ScriptedHTTP([
            .status(200, #"{"active":true,"tags":[]}"#), .status(200, #"{"messages":[{"id":"x"}],"unread":0}"#), .status(200, "not json"),
            .status(200, answer.replacingOccurrences(of: "6f1c1f9e", with: "00000000")),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        let facts = RegistrationFacts(token: "abab", environment: "production")
        let missing = await #expect(throws: TernError.self) { try await client.register(deviceID: device.deviceID, secret: nil, facts: facts) }
        #expect(missing?.kind == .badAnswer && missing?.message.contains("'deviceId' is missing") == true)
        let nested = await #expect(throws: TernError.self) { try await client.inbox(device) }
        #expect(nested?.message.contains("'messages.[0].sequence' is missing") == true)
        let garbage = await #expect(throws: TernError.self) { try await client.markRead(device, ids: ["a"]) }
        #expect(garbage?.message.contains("not JSON") == true)
        let another = await #expect(throws: TernError.self) { try await client.register(deviceID: device.deviceID, secret: nil, facts: facts) }
        #expect(another?.message.contains("answered device 00000000") == true)
    }

    @Test func noAnswerIsATemporaryErrorAndBadArgumentsNeverLeave() async throws {
        let http = ScriptedHTTP([.unreachable])
        let client = TernClient(configuration: configuration, transport: http)
        let unreachable = await #expect(throws: TernError.self) { try await client.inbox(device) }
        #expect(unreachable?.kind == .unreachable && unreachable?.isTemporary == true)
        await #expect(throws: TernError.self) { try await client.markRead(device, ids: []) }
        #expect(http.requests.count == 1)
    }

    @Test func theChannelsRefusalIsReadFromThePlainRequest() async throws {
        let http = ScriptedHTTP([
            .status(426, #"{"error":"upgradeRequired","message":"connect with a WebSocket upgrade"}"#),
            .status(404, #"{"error":"notFound","message":"no device 6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01"}"#),
        ])
        let client = TernClient(configuration: configuration, transport: http)
        #expect(try await client.channelRefusal(device) == nil)
        #expect(try await client.channelRefusal(device)?.status == 404)
    }

    @Test func credentialsNeverPrintTheirSecret() {
        #expect(!"\(device)".contains("tds_secret"))
        let identity = DeviceIdentity(deviceID: "d", deviceSecret: "tds_kept")
        #expect(!"\(identity)".contains("tds_kept") && !String(reflecting: identity).contains("tds_kept"))
        #expect("\(identity)".contains("d"))
        let registered = RegisteredDevice(deviceID: "d", alias: nil, tags: [], active: true, deviceSecret: "tds_new")
        #expect(!"\(registered)".contains("tds_new"))
    }
}
