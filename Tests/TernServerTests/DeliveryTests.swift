import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// `tern serve` end to end: the demo app, the registry and pushes delivered to the built-in simulator.
@Suite(.serialized) struct DeliveryTests {
    @Test func aPushToAnAliasReachesEachOfItsDevicesOnce() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-42")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "user-42")
            try await server.register(Fixture.device(3), token: Fixture.token(3), alias: "someone-else")

            let push = try await server.push(Fixture.push(audience: #"{"aliases": ["user-42"]}"#))
            #expect(push["status"]?.string == "completed")
            #expect(push[path: "counts.targeted"]?.int == 2)
            #expect(push[path: "counts.accepted"]?.int == 2)
            #expect(push[path: "counts.failed"]?.int == 0)

            let arrivals = try await server.arrivals()
            #expect(arrivals.map(\.token).sorted() == [Fixture.token(1), Fixture.token(2)])
            #expect(arrivals.allSatisfy { $0.topic == "com.example.tern.demo" })
            // The push id is the collapse id, so a recipient sent twice (after a crash) shows once.
            #expect(arrivals.allSatisfy { $0.collapseID == push["id"]?.string })
            #expect(arrivals.first?.payload.contains(#""title":"Hello""#) == true)
        }
    }

    @Test func aPushToAnAppWithNoAPNsClientSaysWhy() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-router-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let masterSecret = try await RouterHarness.withServer(folder: folder) { server in
            _ = try await server.register(Fixture.device(1), token: Fixture.token(1))
            return server.master.bearer
        }
        // The same database with the built-in simulator off: the demo app, which delivers to it, has no APNs client.
        try await RouterHarness.withServer(folder: folder, configure: { $0.simulator.enabled = false }) { server in
            let pushed = try await server.master.with(bearer: masterSecret).post("/v1/apps/demo/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: "x"))
            let push = try pushed.json()
            #expect(push[path: "counts.failedByReason.clientUnavailable"]?.int == 1, "\(pushed.text)")
            #expect(
                push[path: "failureDetails.clientUnavailable"]?.string == "app demo delivers to the built-in simulator, which is not running",
                "\(pushed.text)")
        }
    }

    /// Seed 001: a reinstall gives the same device id a new token; the user must not get the push twice.
    @Test func aReinstalledAppGetsThePushOnceOnItsNewToken() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(100), alias: "user-1")
            try await server.register(Fixture.device(1), token: Fixture.token(101), alias: "user-1")  // reinstall
            try await server.register(Fixture.device(2), token: Fixture.token(200), alias: "user-1")  // an iPad

            let push = try await server.push(Fixture.push(audience: #"{"aliases": ["user-1"]}"#))
            #expect(push[path: "counts.accepted"]?.int == 2)
            let arrivals = try await server.arrivals()
            #expect(arrivals.map(\.token).sorted() == [Fixture.token(101), Fixture.token(200)])

            let history = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))/tokens").json()
            #expect(history["tokens"]?.arrayItems?.count == 1)
            #expect(history["tokens"]?.arrayFirst?["token"]?.string == Fixture.token(100))
        }
    }

    @Test func tagsSelectAnyOrAllAndEveryoneMeansEveryActiveDevice() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), tags: ["news", "sport"])
            try await server.register(Fixture.device(2), token: Fixture.token(2), tags: ["news"])
            try await server.register(Fixture.device(3), token: Fixture.token(3), tags: ["weather"])

            let any = try await server.push(Fixture.push(audience: #"{"tags": ["sport", "news"], "match": "any"}"#))
            #expect(any[path: "counts.accepted"]?.int == 2)
            let all = try await server.push(Fixture.push(audience: #"{"tags": ["sport", "news"], "match": "all"}"#))
            #expect(all[path: "counts.accepted"]?.int == 1)
            let everyone = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            #expect(everyone[path: "counts.accepted"]?.int == 3)
            let byToken = try await server.push(Fixture.push(audience: #"{"tokens": ["\#(Fixture.token(3))"]}"#))
            #expect(byToken[path: "counts.accepted"]?.int == 1)
            let arrivals = try await server.arrivals()
            #expect(arrivals.count == 7, "2 + 1 + 3 + 1")
        }
    }

    @Test func anIdempotencyKeyUsedTwiceGivesTheFirstPushAndSendsOnce() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            let body = Fixture.push(audience: #"{"aliases": ["u"]}"#, extra: #", "idempotencyKey": "order-17-shipped""#)
            let first = try await server.push(body)
            let second = try await server.push(body)
            #expect(first["id"] == second["id"])
            #expect(try await server.arrivals().count == 1)
        }
    }
}

extension JSONValue {
    var arrayItems: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    var arrayFirst: JSONValue? { arrayItems?.first }
}
