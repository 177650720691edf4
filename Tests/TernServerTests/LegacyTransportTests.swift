import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// An app on the legacy binary protocol: delivery through the built-in simulator's gateway, and its feedback
/// service read on schedule or on request, with the timestamp rule both ways.
@Suite(.serialized) struct LegacyTransportTests {
    /// Switches the demo app to the legacy transport; expects 200.
    static func useLegacy(_ server: RoutedServer, extra: String = "") async throws -> JSONValue {
        let response = try await server.admin.patch("/v1/apps/demo", #"{"transport": "legacy"\#(extra)}"#)
        #expect(response.status == 200, "\(response.text)")
        return try response.json()
    }

    @Test func aLegacyAppDeliversThroughTheSimulatorsGateway() async throws {
        try await RouterHarness.withServer { server in
            let app = try await Self.useLegacy(server)
            #expect(app["transport"]?.string == "legacy")
            #expect(app[path: "credentials.type"]?.string == "certificate")
            #expect(app["feedbackInterval"]?.int == 12 * 3600)
            for number in 1...3 { try await server.register(Fixture.device(number), token: Fixture.token(number), alias: "u\(number)") }
            // Token 3 belongs to another app as far as APNs knows: the gateway answers status 8.
            let bound = try await server.simulator.put("/tokens/\(Fixture.token(3))", #"{"topic": "com.example.other"}"#)
            #expect(bound.status == 204)

            let push = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            #expect(push["status"]?.string == "completed")
            #expect(push[path: "counts.accepted"]?.int == 2)
            #expect(push[path: "counts.failed"]?.int == 1)
            #expect(push[path: "counts.failedByReason.BadDeviceToken"]?.int == 1)
            #expect(push[path: "counts.pruned"]?.int == 1)

            let arrivals = try await server.arrivals()
            #expect(Set(arrivals.map(\.token)) == [Fixture.token(1), Fixture.token(2)])
            #expect(arrivals.allSatisfy { $0.transport == "legacy" && $0.topic == "com.example.tern.demo" })
            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(3))").json()
            #expect(device["active"] == .bool(false))
        }
    }

    @Test func aLegacyAppOnTheSimulatorGetsACertificateForItsNewTopic() async throws {
        try await RouterHarness.withServer { server in
            _ = try await Self.useLegacy(server)
            // The binary protocol carries no topic: the gateway reads it from the client certificate, which names it.
            let renamed = try await server.admin.patch("/v1/apps/demo", #"{"topic": "com.example.tern.renamed"}"#)
            #expect(renamed.status == 200, "\(renamed.text)")
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let push = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            #expect(push[path: "counts.accepted"]?.int == 1, "\(push)")
            let arrivals = try await server.arrivals()
            #expect(arrivals.map(\.topic) == ["com.example.tern.renamed"], "\(arrivals)")
        }
    }

    @Test func aPushUnderWayWhenItsLegacyClientIsReplacedIsSentToEveryone() async throws {
        // Four in flight, each settled after the 2 s replay window: 12 devices take about 6 s, and the operator
        // changes the app a moment in. The next push asks for a client made from the changed app, which replaces
        // (and shuts down) the one the chunk is handing its notifications to.
        try await RouterHarness.withServer(configure: { $0.delivery.concurrency = 4 }) { server in
            _ = try await Self.useLegacy(server)
            let devices = 1...12
            for number in devices { try await server.register(Fixture.device(number), token: Fixture.token(number), tags: ["legacy"]) }
            let accepted = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["legacy"]}"#))
            #expect(accepted.status == 202, "\(accepted.text)")
            let id = try #require(try accepted.json()["id"]?.string)
            try await waitUntil("the push's first notifications at the gateway") { try await server.arrivals().count >= 4 }
            let changed = try await server.admin.patch("/v1/apps/demo", #"{"inboxCap": 10}"#)
            #expect(changed.status == 200, "\(changed.text)")
            try await server.register(Fixture.device(99), token: Fixture.token(99), tags: ["other"])
            _ = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["other"]}"#))

            try await waitUntil("the push to complete", within: 60) {
                try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["status"]?.string == "completed"
            }
            let push = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
            #expect(push[path: "counts.accepted"]?.int == devices.count, "\(push)")
            #expect(push[path: "counts.failed"]?.int == 0, "\(push)")
        }
    }

    @Test func feedbackDeactivatesOnlyTokensNotRegisteredAgainSinceItsTimestamp() async throws {
        try await RouterHarness.withServer { server in
            _ = try await Self.useLegacy(server)
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "gone")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "back")
            let now = Date().timeIntervalSince1970
            // Token 1: dead since a minute from now, after its registration. Token 2: dead since an hour ago, but
            // registered again since (the app was reinstalled and got the same token).
            _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(Int64((now + 60) * 1000))}"#)
            _ = try await server.simulator.post("/tokens/\(Fixture.token(2))/unregister", #"{"timestamp": \#(Int64((now - 3600) * 1000))}"#)
            // Token 99 is another app's: the simulator's feedback service is shared, so it is listed too, but not counted.
            _ = try await server.simulator.post("/tokens/\(Fixture.token(99))/unregister", #"{"timestamp": \#(Int64((now + 60) * 1000))}"#)

            let read = try await server.admin.post("/v1/apps/demo/feedback")
            #expect(read.status == 200, "\(read.text)")
            #expect(try read.json() == ["listed": 2, "deactivated": 1, "kept": 1])

            let gone = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(gone["active"] == .bool(false))
            #expect(gone["deactivationReason"]?.string == "Unregistered")
            let back = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(2))").json()
            #expect(back["active"] == .bool(true))
            let events = try await server.master.get("/v1/apps/demo/token-events").json()
            #expect(events["events"]?.arrayItems?.map { $0["token"]?.string } == [Fixture.token(1)])

            // The service's list was cleared once read, and reading again at once is refused.
            #expect(try await server.simulator.get("/feedback").json() == ["items": []])
            let again = try await server.admin.post("/v1/apps/demo/feedback")
            #expect(again.status == 429)
            #expect(try again.json()["error"]?.string == "tooSoon")
            #expect(try await server.admin.get("/v1/apps/demo").json()["feedbackPolledAt"] != nil)
        }
    }

    @Test func theScheduledPollerReadsADueApp() async throws {
        let clock = ManualClock()
        let checkInterval = Duration.seconds(30)
        try await RouterHarness.withServer(configure: { $0.feedback.checkInterval = checkInterval }, clocks: .manual(clock)) { server in
            // The poller's first check, at its start, found no legacy app; it waits for the next on the test's clock.
            let check = clock.now.advanced(by: checkInterval)
            try await withTimeout(10, "the poller's first check to end") { await clock.waitUntilSleeping(until: check) }
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "gone")
            let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
            _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(later)}"#)
            // Never read before: due as soon as the app is on the legacy transport, so at the next check.
            _ = try await Self.useLegacy(server)
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()["active"] == .bool(true))
            clock.advance(by: checkInterval)
            try await waitUntil("the poller to deactivate the token") {
                try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()["active"] == .bool(false)
            }
        }
    }

    /// The binary protocol's frames carry at most 2048 bytes of payload: a larger one (which HTTP/2 would take) is
    /// refused when the push is made, not failed for every recipient at sending.
    @Test func aPayloadOverTheBinaryProtocolsLimitIsRefusedWhenMade() async throws {
        try await RouterHarness.withServer { server in
            _ = try await Self.useLegacy(server)
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            func padded(_ count: Int, badge: String = "") -> String {
                #"{"audience": {"all": true}, "notification": {"title": "x"\#(badge), "data": {"pad": "\#(String(repeating: "y", count: count))"}}}"#
            }
            let large = try await server.master.post("/v1/apps/demo/pushes", padded(2_000))
            #expect(large.status == 400, "\(large.text)")
            #expect(try large.json()["field"]?.string == "notification")
            #expect(large.text.contains("2048"), "\(large.text)")
            // One that fits only without the widest badge the server may work out per recipient is refused too.
            let counted = try await server.master.post("/v1/apps/demo/pushes", padded(1_949, badge: #", "badge": "+1""#))
            #expect(counted.status == 400, "\(counted.text)")
            #expect(try await server.master.post("/v1/apps/demo/pushes", padded(1_949)).status == 202)

            let fits = try await server.push(padded(1_900))
            #expect(fits[path: "counts.accepted"]?.int == 1, "\(fits)")
            #expect(try await server.arrivals().contains { $0.transport == "legacy" && $0.payload.count > 1_900 })
        }
    }

    @Test func legacySettingsAreChecked() async throws {
        try await RouterHarness.withServer { server in
            func expectBadRequest(_ response: HTTPTestResponse, field: String) throws {
                #expect(response.status == 400, "\(response.text)")
                #expect(try response.json()["field"]?.string == field)
            }
            try expectBadRequest(try await server.admin.patch("/v1/apps/demo", #"{"transport": "pigeon"}"#), field: "transport")
            try expectBadRequest(
                try await server.admin.patch("/v1/apps/demo", #"{"transport": "legacy", "feedbackInterval": 10}"#), field: "feedbackInterval")
            // A token key cannot open the binary protocol.
            let key = APNsSigningKey.generate(keyID: "KEY0000001", teamID: "TEAM000001")
            let pem = key.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
            try expectBadRequest(
                try await server.admin.post("/v1/apps", #"""
                    {"id": "old", "topic": "com.example.old", "environment": "custom", "transport": "legacy",
                     "endpoint": {"host": "127.0.0.1", "port": 2195},
                     "credentials": {"type": "token", "keyPEM": "\#(pem)", "keyID": "KEY0000001", "teamID": "TEAM000001"}}
                    """#), field: "transport")
            // Nothing half-written: the demo app is still on HTTP/2, and there is no app "old".
            #expect(try await server.admin.get("/v1/apps/demo").json()["transport"]?.string == "http2")
            #expect(try await server.admin.get("/v1/apps/old").status == 404)
            // An HTTP/2 app has no feedback service to read.
            let feedback = try await server.admin.post("/v1/apps/demo/feedback")
            #expect(feedback.status == 409)
            #expect(try feedback.json()["field"]?.string == "transport")
        }
    }
}
