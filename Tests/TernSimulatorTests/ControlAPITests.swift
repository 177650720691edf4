import Foundation
import TernAPNs
import TernSimulator
import Testing

/// `GET /notifications` answers one page of the arrival log.
private struct NotificationPage: Decodable {
    var items: [RecordedNotification]
    var next: UInt64
}

/// A control request the API must refuse with 400, naming the field.
struct BadControlInput: Sendable, CustomTestStringConvertible {
    let name: String
    let method: String
    let path: String
    let body: String?
    let field: String

    init(_ name: String, _ method: String, _ path: String, _ body: String? = nil, field: String) {
        self.name = name
        self.method = method
        self.path = path
        self.body = body
        self.field = field
    }

    var testDescription: String { "\(name): \(method) \(path) → field \(field)" }
}

@Suite("The HTTP/1.1 control API")
struct ControlAPITests {
    // MARK: Scenarios

    // The control API sets the scenarios; what each scenario does to pushes is SimulatorScenarioTests' part. Here,
    // each request changes the simulator's state as it says, and GET /scenario shows it.

    @Test func putAndDeleteFaultsSetTheScenario() async throws {
        try await withSimulator { sim in
            let put = try await sim.control.put(
                "/scenario/faults", #"[{"status":503,"count":2},{"status":429,"rate":0},{"status":503,"reason":"Shutdown","rate":1}]"#)
            #expect(put.status == 204)
            #expect(sim.state.scenarios().faults == [
                .init(status: 503, count: 2), .init(status: 429, rate: 0), .init(status: 503, reason: "Shutdown", rate: 1),
            ])
            let scenario = try await sim.control.get("/scenario")
            #expect(scenario.status == 200)
            #expect(scenario.headers.first(name: "content-type")?.hasPrefix("application/json") == true)
            #expect(try scenario.json()["faults"] == [
                ["status": 503, "count": 2], ["status": 429, "rate": 0], ["status": 503, "reason": "Shutdown", "rate": 1],
            ])
            // And it takes effect on the next push (one end-to-end check; the rules are tested on the state).
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push()), status: 503, reason: "ServiceUnavailable")

            #expect(try await sim.control.delete("/scenario/faults").status == 204)
            #expect(sim.state.scenarios().faults.isEmpty)
            #expect(try await sim.control.get("/scenario").json()["faults"] == [])
        }
    }

    @Test func putAndDeleteLatencySetTheScenario() async throws {
        try await withSimulator { sim async throws in
            #expect(try await sim.control.put("/scenario/latency", #"{"fixedMilliseconds":120}"#).status == 204)
            #expect(sim.state.scenarios().latency == .init(fixedMilliseconds: 120))
            #expect(try await sim.control.get("/scenario").json()["latency"] == ["fixedMilliseconds": 120])
            #expect(try await sim.control.put("/scenario/latency", #"{"minMilliseconds":50,"maxMilliseconds":80}"#).status == 204)
            #expect(sim.state.scenarios().latency == .init(minMilliseconds: 50, maxMilliseconds: 80))
            #expect(try await sim.control.delete("/scenario/latency").status == 204)
            #expect(sim.state.scenarios().latency == nil)
        }
    }

    @Test func putAndDeleteGoAwayAndDropSetTheScenario() async throws {
        try await withSimulator { sim async throws in
            let put = try await sim.control.put("/scenario/goaway", #"{"afterStreams":2,"reason":"Shutdown","connections":1}"#)
            #expect(put.status == 204)
            #expect(sim.state.scenarios().goAway == .init(afterStreams: 2, reason: "Shutdown", connections: 1))
            #expect(try await sim.control.get("/scenario").json()["goAway"] == ["afterStreams": 2, "reason": "Shutdown", "connections": 1])
            #expect(try await sim.control.put("/scenario/drop", #"{"afterStreams":1}"#).status == 204)
            #expect(sim.state.scenarios().drop == .init(afterStreams: 1))

            #expect(try await sim.control.delete("/scenario/goaway").status == 204)
            #expect(try await sim.control.delete("/scenario/drop").status == 204)
            #expect(sim.state.scenarios().goAway == nil && sim.state.scenarios().drop == nil)
        }
    }

    // MARK: Tokens

    @Test func unregisterSetsTheTokensStateWithOrWithoutABody() async throws {
        try await withSimulator { sim async throws in
            let response = try await sim.control.post(
                "/tokens/\(deviceToken)/unregister", #"{"timestamp":1690000000123,"reason":"ExpiredToken"}"#)
            #expect(response.status == 204)
            #expect(sim.state.tokens()[deviceToken] == .init(unregisteredAt: 1_690_000_000_123, unregisteredReason: "ExpiredToken"))

            // Without a body: Unregistered, as of the simulator's clock; the token may be given in capitals.
            #expect(try await sim.control.post("/tokens/\(deviceToken.uppercased())/unregister").status == 204)
            let now = Int64((sim.clock.now.timeIntervalSince1970 * 1000).rounded())
            #expect(sim.state.tokens()[deviceToken] == .init(unregisteredAt: now, unregisteredReason: "Unregistered"))
            let tokens = try await sim.control.get("/tokens").json()
            #expect(tokens["tokens"]?[deviceToken]?["unregisteredReason"] == "Unregistered")

            #expect(try await sim.control.delete("/tokens/\(deviceToken)").status == 204)
            #expect(sim.state.tokens()[deviceToken] == nil)
        }
    }

    @Test func putTokenBindsItsTopicAndEnvironment() async throws {
        try await withSimulator { sim in
            #expect(try await sim.control.put("/tokens/\(deviceToken)", #"{"topic":"com.example.app"}"#).status == 204)
            #expect(try await sim.control.put("/tokens/\(otherDeviceToken)", #"{"environment":"production"}"#).status == 204)
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push(topic: "com.other.app")), status: 400, reason: "DeviceTokenNotForTopic")
            #expect(try await client.send(sim.push(topic: "com.example.app")).status == 200)
            expectRejection(try await client.send(sim.push(token: otherDeviceToken)), status: 400, reason: "BadDeviceToken")
            let tokens = try await sim.control.get("/tokens").json()
            #expect(tokens["tokens"]?[deviceToken] == ["topic": "com.example.app"])
            #expect(tokens["tokens"]?[otherDeviceToken] == ["environment": "production"])
        }
    }

    // MARK: Log, stats, reset

    @Test func notificationsPageWithAfterLimitAndToken() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for index in 0..<5 {
                let token = index.isMultiple(of: 2) ? deviceToken : otherDeviceToken
                #expect(try await client.send(sim.push(token: token, payload: #"{"aps":{"alert":"\#(index)"}}"#)).status == 200)
            }
            let all = try await sim.control.get("/notifications").decode(NotificationPage.self)
            #expect(all.items.map(\.sequence) == [1, 2, 3, 4, 5])
            #expect(all.items.map(\.payload) == (0..<5).map { #"{"aps":{"alert":"\#($0)"}}"# })
            #expect(all.items.first?.topic == "com.example.app")
            #expect(all.items.first?.pushType == "alert")
            #expect(all.next == 5)

            let page = try await sim.control.get("/notifications?after=1&limit=2").decode(NotificationPage.self)
            #expect(page.items.map(\.sequence) == [2, 3])
            #expect(page.next == 3)

            let filtered = try await sim.control.get("/notifications?token=\(otherDeviceToken.uppercased())").decode(NotificationPage.self)
            #expect(filtered.items.map(\.sequence) == [2, 4])
            #expect(filtered.items.allSatisfy { $0.token == otherDeviceToken })

            let empty = try await sim.control.get("/notifications?after=5").decode(NotificationPage.self)
            #expect(empty.items.isEmpty)
            #expect(empty.next == 5, "next stays at after when nothing is newer")

            #expect(try await sim.control.delete("/notifications").status == 204)
            #expect(try await sim.control.get("/notifications").decode(NotificationPage.self).items.isEmpty)
        }
    }

    @Test func statsReportCounters() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            #expect(try await client.send(sim.push(priority: "7")).status == 400)
            let response = try await sim.control.get("/stats")
            #expect(response.status == 200)
            let stats = try response.decode(SimulatorStats.self)
            #expect(stats.connectionsOpened == 1)
            #expect(stats.connectionsActive == 1)
            #expect(stats.requests == 2)
            #expect(stats.accepted == 1)
            #expect(stats.rejected == 1)
            #expect(stats.rejectedByReason == ["BadPriority": 1])
            #expect(stats.logCount == 1)
            #expect(stats.logCapacity == 100_000)
        }
    }

    @Test func resetClearsEverythingTheScenarioAPISet() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            #expect(try await sim.control.put("/scenario/faults", #"[{"status":500,"rate":1}]"#).status == 204)
            #expect(try await sim.control.put("/scenario/latency", #"{"fixedMilliseconds":10}"#).status == 204)
            #expect(try await sim.control.put("/scenario/goaway", #"{"afterStreams":50}"#).status == 204)
            #expect(try await sim.control.put("/scenario/drop", #"{"afterStreams":50}"#).status == 204)
            #expect(try await sim.control.post("/tokens/\(deviceToken)/unregister").status == 204)

            #expect(try await sim.control.post("/reset").status == 204)

            #expect(try await sim.control.get("/scenario").json() == ["faults": []])
            #expect(try await sim.control.get("/tokens").json() == ["tokens": [:]])
            #expect(try await sim.control.get("/notifications").decode(NotificationPage.self).items.isEmpty)
            let stats = try await sim.control.get("/stats").decode(SimulatorStats.self)
            #expect(stats.requests == 0)
            #expect(stats.accepted == 0)
            #expect(stats.connectionsActive == 1)
            #expect(try await client.send(sim.push()).status == 200)
        }
    }

    // MARK: Bad input

    static let badInputs: [BadControlInput] = [
        BadControlInput("invalid JSON", "PUT", "/scenario/faults", "[{", field: "body"),
        BadControlInput("no body", "PUT", "/scenario/latency", nil, field: "body"),
        BadControlInput("an array where an object belongs", "PUT", "/scenario/latency", "[1]", field: "body"),
        BadControlInput("latency of the wrong type", "PUT", "/scenario/latency", #"{"fixedMilliseconds":"fast"}"#, field: "fixedMilliseconds"),
        BadControlInput("afterStreams of the wrong type", "PUT", "/scenario/goaway", #"{"afterStreams":"five"}"#, field: "afterStreams"),
        BadControlInput("afterStreams missing", "PUT", "/scenario/goaway", "{}", field: "afterStreams"),
        BadControlInput("fault status 404", "PUT", "/scenario/faults", #"[{"status":404,"count":1}]"#, field: "[0].status"),
        BadControlInput("fault rate 2", "PUT", "/scenario/faults", #"[{"status":503,"rate":2}]"#, field: "[0].rate"),
        BadControlInput(
            "fault with both rate and count", "PUT", "/scenario/faults", #"[{"status":503,"count":1},{"status":503,"rate":0.5,"count":1}]"#,
            field: "[1].rate"),
        BadControlInput("fault with neither rate nor count", "PUT", "/scenario/faults", #"[{"status":503}]"#, field: "[0].rate"),
        BadControlInput("fault count 0", "PUT", "/scenario/faults", #"[{"status":503,"count":0}]"#, field: "[0].count"),
        BadControlInput(
            "fault reason of another status", "PUT", "/scenario/faults", #"[{"status":429,"reason":"Shutdown","count":1}]"#,
            field: "[0].reason"),
        BadControlInput(
            "latency min above max", "PUT", "/scenario/latency", #"{"minMilliseconds":100,"maxMilliseconds":50}"#, field: "maxMilliseconds"),
        BadControlInput("negative fixed latency", "PUT", "/scenario/latency", #"{"fixedMilliseconds":-1}"#, field: "fixedMilliseconds"),
        BadControlInput("goaway afterStreams 0", "PUT", "/scenario/goaway", #"{"afterStreams":0}"#, field: "afterStreams"),
        BadControlInput("drop afterStreams 0", "PUT", "/scenario/drop", #"{"afterStreams":0}"#, field: "afterStreams"),
        BadControlInput("goaway for 0 connections", "PUT", "/scenario/goaway", #"{"afterStreams":1,"connections":0}"#, field: "connections"),
        BadControlInput("bad token in the unregister path", "POST", "/tokens/xyz/unregister", nil, field: "token"),
        BadControlInput("odd-length token in the bind path", "PUT", "/tokens/abc", #"{"topic":"com.example.app"}"#, field: "token"),
        BadControlInput("unregister reason Foo", "POST", "/tokens/\(deviceToken)/unregister", #"{"reason":"Foo"}"#, field: "reason"),
        BadControlInput("negative unregister timestamp", "POST", "/tokens/\(deviceToken)/unregister", #"{"timestamp":-1}"#, field: "timestamp"),
        BadControlInput("unknown environment", "PUT", "/tokens/\(deviceToken)", #"{"environment":"staging"}"#, field: "environment"),
        BadControlInput("limit=0", "GET", "/notifications?limit=0", field: "limit"),
        BadControlInput("limit above 10000", "GET", "/notifications?limit=10001", field: "limit"),
        BadControlInput("after=abc", "GET", "/notifications?after=abc", field: "after"),
        BadControlInput("after=-1", "GET", "/notifications?after=-1", field: "after"),
        BadControlInput("token filter not hex", "GET", "/notifications?token=xyz", field: "token"),
    ]

    @Test("Bad input gets 400 {\"error\":\"badRequest\",\"message\":…,\"field\":…}", arguments: badInputs)
    func badInputIsRefusedNamingTheField(_ input: BadControlInput) async throws {
        try await withSimulator { sim in
            try sim.state.setFaults([.init(status: 500, count: 7)])
            let response = try await sim.control.send(.init(rawValue: input.method), input.path, body: input.body)
            #expect(response.status == 400, "body: \(response.text)")
            #expect(response.headers.first(name: "content-type") == "application/json")
            let json = try response.json()
            #expect(json["error"] == "badRequest")
            #expect(json["field"] == .string(input.field), "message: \(json["message"].map { "\($0)" } ?? "none")")
            if case .string(let message)? = json["message"] {
                #expect(!message.isEmpty)
            } else {
                Issue.record("no message in \(response.text)")
            }
            // Nothing changed.
            #expect(sim.state.scenarios().faults == [.init(status: 500, count: 7)])
            #expect(sim.state.scenarios().latency == nil)
            #expect(sim.state.scenarios().goAway == nil)
            #expect(sim.state.scenarios().drop == nil)
            #expect(sim.state.tokens().isEmpty)
        }
    }

    @Test(
        "Unknown routes are 404",
        arguments: [("GET", "/nothing"), ("GET", "/scenario/faults/extra"), ("POST", "/tokens"), ("GET", "/")])
    func unknownRouteIs404(method: String, path: String) async throws {
        try await withSimulator { sim in
            let response = try await sim.control.send(.init(rawValue: method), path)
            #expect(response.status == 404)
        }
    }
}
