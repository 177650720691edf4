import Foundation
import NIOHTTP1
import TernAPNs
import TernTestSupport
import Testing

/// Every endpoint checks its secret, and bad input is a 4xx naming the field with nothing stored.
@Suite(.serialized) struct AuthAndInputTests {
    /// An app's endpoints, with who may call them.
    static let masterOnly: [(HTTPMethod, String, String?)] = [
        (.POST, "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#)),
        (.GET, "/v1/apps/demo/pushes", nil),
        (.GET, "/v1/apps/demo/pushes/00000000-0000-4000-8000-000000000000", nil),
        (.POST, "/v1/apps/demo/pushes/00000000-0000-4000-8000-000000000000/cancel", nil),
        (.GET, "/v1/apps/demo/token-events", nil),
        (.GET, "/v1/apps/demo/devices?alias=u", nil),
        (.GET, "/v1/apps/demo/devices/\(Fixture.device(1))/tokens", nil),
        (.GET, "/v1/apps/demo/devices/\(Fixture.device(1))", nil),
        (.DELETE, "/v1/apps/demo/devices/\(Fixture.device(1))/alias", nil),
        (.PUT, "/v1/apps/demo/broadcast-channels/match", #"{"storage": "none"}"#),
        (.GET, "/v1/apps/demo/broadcast-channels", nil),
        (.DELETE, "/v1/apps/demo/broadcast-channels/match", nil),
        (.POST, "/v1/apps/demo/broadcast-channels/match/broadcasts", #"{"payload": {}}"#),
    ]

    @Test func everyAppEndpointRefusesAMissingOrWrongSecretAndAnotherAppsKey() async throws {
        try await RouterHarness.withServer { server in
            let other = try await server.admin.post("/v1/apps", #"{"id": "other", "topic": "com.example.other", "environment": "simulator"}"#)
            #expect(other.status == 201)
            let otherMaster = try other.json()["masterSecret"]?.string
            let endpoints = Self.masterOnly + [(.PUT, "/v1/apps/demo/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1)))]
            for (method, path, body) in endpoints {
                for bearer in [nil, "tms_wrong", otherMaster, RunningServer.adminToken] {
                    let response = try await server.api.with(bearer: bearer).send(method, path, body: body)
                    #expect(response.status == 401, "\(method) \(path) with \(bearer ?? "no secret") answered \(response.status)")
                    #expect(try response.json()["error"]?.string == "unauthorized")
                }
            }
            #expect(try await server.arrivals().isEmpty)
        }
    }

    @Test func theAppKeyCannotDoWhatNeedsTheMasterSecret() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            for (method, path, body) in Self.masterOnly where !path.hasSuffix("/alias") && !path.hasSuffix(Fixture.device(1)) {
                let response = try await server.device.send(method, path, body: body)
                #expect(response.status == 403, "\(method) \(path) with the app key answered \(response.status)")
            }
            // A device acts as itself with its secret, and only as itself.
            let registered = try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "v")
            let secret = try #require(registered["deviceSecret"]?.string)
            let own = try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(2))", headers: [("X-Tern-Device-Secret", secret)])
            #expect(own.status == 200)
            let otherDevice = try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(1))", headers: [("X-Tern-Device-Secret", secret)])
            #expect(otherDevice.status == 403)
            let noSecret = try await server.device.get("/v1/apps/demo/devices/\(Fixture.device(2))")
            #expect(noSecret.status == 403)
            #expect(try await server.arrivals().isEmpty)
        }
    }

    @Test func appManagementNeedsTheAdminToken() async throws {
        try await RouterHarness.withServer { server in
            let bearers: [String?] = [nil, "tat_wrong", server.master.bearer, server.device.bearer]
            for bearer in bearers {
                let client = server.api.with(bearer: bearer)
                let list = try await client.get("/v1/apps")
                let create = try await client.post("/v1/apps", #"{"id": "x", "topic": "t", "environment": "simulator"}"#)
                let delete = try await client.delete("/v1/apps/demo")
                let statuses: [Int] = [list.status, create.status, delete.status]
                #expect(statuses == [401, 401, 401])
            }
            let still = try await server.admin.get("/v1/apps/demo")
            #expect(still.status == 200)
        }
    }

    @Test func wrongAdminTokensFromOneAddressAreLimitedTogetherWithTheConsolesSignIns() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            // Nine wrong admin tokens on the API and one wrong sign-in in the console: one count per address.
            let guesser = server.api.with(bearer: "tat_guess-0000000000")
            for _ in 0..<9 { #expect(try await guesser.get("/v1/apps").status == 401) }
            #expect(try await ConsoleBrowser(server).signIn("tat_guess-0000000001").status == 401)
            // Then even the right token is refused, before it is looked at: a guess tells nothing until the minute is over.
            let limited = try await server.admin.get("/v1/apps")
            #expect(limited.status == 429)
            #expect(try limited.json()["error"]?.string == "tooManyAttempts")
            #expect(try limited.json()["field"]?.string == "Authorization")
            #expect(Int(limited.headers.first(name: "Retry-After") ?? "") == 60)
            #expect(try await ConsoleBrowser(server).signIn(RunningServer.adminToken).status == 429)
            // No secret at all is not a guess; the app's own calls are not limited by the admin's count.
            #expect(try await server.master.get("/v1/apps/demo/pushes").status == 200)

            clock.advance(by: .seconds(60))
            #expect(try await server.admin.get("/v1/apps").status == 200)
        }
    }

    /// Behind a load balancer every connection comes from the balancer: counted by it, ten wrong admin tokens a minute
    /// from anyone on the internet would lock the admin out of the API and the console.
    @Test("behind a trusted proxy wrong admin tokens are counted per forwarded client, and an untrusted peer's X-Forwarded-For is not believed")
    func wrongSecretsAreCountedPerForwardedClient() async throws {
        let wrong = "tat_guess-0000000000"
        try await ServerHarness.withServer(configure: { $0.http.trustedProxies = ["127.0.0.0/8"] }) { server async throws in
            let guesser = [("X-Forwarded-For", "203.0.113.7")]
            for _ in 0..<10 { #expect(try await server.api.with(bearer: wrong).send(.GET, "/v1/apps", headers: guesser).status == 401) }
            #expect(try await server.admin.send(.GET, "/v1/apps", headers: guesser).status == 429)
            // Another client behind the same balancer, and the balancer itself, are not held up.
            #expect(try await server.admin.send(.GET, "/v1/apps", headers: [("X-Forwarded-For", "198.51.100.9")]).status == 200)
            #expect(try await server.admin.get("/v1/apps").status == 200)
            // The guesser naming another client itself: its balancer appends the address it saw, which is the one counted.
            #expect(try await server.admin.send(.GET, "/v1/apps", headers: [("X-Forwarded-For", "198.51.100.9, 203.0.113.7")]).status == 429)
        }
        try await ServerHarness.withServer { server async throws in
            // No proxy trusted: the header is anyone's to write, and each connection is counted by its peer.
            for number in 0..<10 {
                let spoofed = [("X-Forwarded-For", "203.0.113.\(number)")]
                #expect(try await server.api.with(bearer: wrong).send(.GET, "/v1/apps", headers: spoofed).status == 401)
            }
            #expect(try await server.admin.send(.GET, "/v1/apps", headers: [("X-Forwarded-For", "198.51.100.9")]).status == 429)
        }
    }

    @Test(arguments: [
        (#"{"token": "xyz", "environment": "production"}"#, "token"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "staging"}"#, "environment"),
        (#"{"token": "\#(Fixture.token(1))"}"#, "environment"),
        (#"{"environment": "production"}"#, "token"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "alias": "\#(String(repeating: "a", count: 129))"}"#, "alias"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "tags": ["ok", "not ok"]}"#, "tags[1]"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "locale": "\#(String(repeating: "x", count: 36))"}"#, "locale"),
        // A NUL would end the text early in the database (the answer and the record would differ); control and
        // bidi characters rewrite what a terminal or console shows.
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "locale": "en\u0000X"}"#, "locale"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "timezone": "\u202Eevil\r\n"}"#, "timezone"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "appVersion": "1\u001B[31m"}"#, "appVersion"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production", "alias": "\u212Aate"}"#, "alias"),
        (#"{"token": 12, "environment": "production"}"#, "token"),
        (#"{"token": "\#(Fixture.token(1))", "environment": "production""#, "body"),
        ("", "body"),
    ])
    func aBadRegistrationIsA400NamingTheFieldAndStoresNothing(_ body: String, _ field: String) async throws {
        try await RouterHarness.withServer { server in
            let response = try await server.device.send(.PUT, "/v1/apps/demo/devices/\(Fixture.device(1))", body: body)
            #expect(response.status == 400, "\(response.text)")
            #expect(try response.json()["field"]?.string == field, "\(response.text)")
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").status == 404)
        }
    }

    @Test func unknownAppsAndMalformedIdsAreClearErrors() async throws {
        try await RouterHarness.withServer { server in
            let unknown = try await server.device.put("/v1/apps/nope/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1)))
            // As a wrong secret for an app that exists: app ids cannot be probed without credentials.
            #expect(unknown.status == 401)
            let badID = try await server.device.put("/v1/apps/demo/devices/not-a-uuid", Fixture.registration(token: Fixture.token(1)))
            #expect(badID.status == 400)
            #expect(try badID.json()["field"]?.string == "deviceId")
        }
    }

    @Test(arguments: [
        (#"{"audience": {"aliases": ["u"], "all": true}, "notification": {"title": "x"}}"#, "audience"),
        (#"{"audience": {}, "notification": {"title": "x"}}"#, "audience"),
        (#"{"audience": {"tokens": ["zz"]}, "notification": {"title": "x"}}"#, "audience.tokens[0]"),
        (#"{"audience": {"devices": ["nope"]}, "notification": {"title": "x"}}"#, "audience.devices[0]"),
        (#"{"audience": {"tags": ["a"], "match": "most"}, "notification": {"title": "x"}}"#, "audience.match"),
        (#"{"audience": {"all": true}}"#, "notification"),
        (#"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"priority": 7}}"#, "apns.priority"),
        (#"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"pushType": "fax"}}"#, "apns.pushType"),
        (#"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"collapseID": "\#(String(repeating: "c", count: 65))"}}"#, "apns.collapseID"),
        (#"{"audience": {"all": true}, "notification": {"body": "\#(String(repeating: "b", count: 5000))"}}"#, "notification"),
        (#"{"audience": {"all": true}, "payload": {"aps": 3}}"#, "payload.aps"),
        (#"{"audience": {"all": true}, "notification": {"title": "x"}, "idempotencyKey": ""}"#, "idempotencyKey"),
    ])
    func aBadPushIsA400NamingTheFieldAndSendsNothing(_ body: String, _ field: String) async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            let response = try await server.master.post("/v1/apps/demo/pushes", body)
            #expect(response.status == 400, "\(response.text)")
            #expect(try response.json()["field"]?.string == field, "\(response.text)")
            // No wait proves that nothing was sent; a good push after it does. Pushes to one device leave in the order
            // they were made (delivery.ordering), so had the bad one been kept, its notification would come first.
            let good = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#, title: "the good one"))
            #expect(good["status"]?.string == "completed")
            let titles = try await server.arrivals().map { arrival in
                try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.alert.title"]?.string
            }
            #expect(titles == ["the good one"], "only the good push was sent")
        }
    }
    @Test func aDeviceHasAtMostAHundredTagsHoweverTheyAreAdded() async throws {
        try await RouterHarness.withServer { server in
            let device = Fixture.device(1)
            try await server.register(device, token: Fixture.token(1), tags: (0..<60).map { "a\($0)" })
            let path = "/v1/apps/demo/devices/\(device)/tags"
            func change(_ add: [String], remove: [String] = []) async throws -> HTTPTestResponse {
                let body = JSONValue.object(["add": .array(add.map(JSONValue.string)), "remove": .array(remove.map(JSONValue.string))])
                return try await server.device.send(.PATCH, path, body: String(decoding: try body.serialized(), as: UTF8.self), headers: server.asDevice(device))
            }
            #expect(try await change((0..<40).map { "b\($0)" }).status == 200)
            let past = try await change(["c0"])
            #expect(past.status == 409, "\(past.text)")
            #expect(try past.json()["error"]?.string == "tooManyTags")
            #expect(try past.json()["field"]?.string == "add")
            // Nothing of a refused change is kept; one that removes as many as it adds stays within the limit.
            let tags = { try await server.master.get("/v1/apps/demo/devices/\(device)").json()["tags"] }
            guard case .array(let kept)? = try await tags() else { Issue.record("no tags"); return }
            #expect(kept.count == 100 && !kept.contains(.string("c0")))
            #expect(try await change(["c0", "c1"], remove: ["a0", "a1"]).status == 200)
            guard case .array(let after)? = try await tags() else { Issue.record("no tags"); return }
            #expect(after.count == 100 && after.contains(.string("c1")) && !after.contains(.string("a1")))
            // The backend is held to it too.
            #expect(try await server.master.patch(path, #"{"add": ["d0"]}"#).status == 409)
        }
    }
}
