import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// Dead tokens: the 410 timestamp rule both ways, outright rejections, token events.
@Suite(.serialized) struct PruningTests {
    @Test func aTokenDeadSinceAfterItsLastRegistrationIsDeactivatedAndNotSentAgain() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "u")
            // APNs: token 1 has been dead since a minute from now (after its registration).
            let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
            let marked = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(later)}"#)
            #expect(marked.status == 204)

            let first = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(first[path: "counts.accepted"]?.int == 1)
            #expect(first[path: "counts.failed"]?.int == 1)
            #expect(first[path: "counts.pruned"]?.int == 1)
            #expect(first[path: "counts.failedByReason.Unregistered"]?.int == 1)
            #expect(first["failures"]?.arrayFirst?["token"]?.string == Fixture.token(1))

            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(device["active"] == .bool(false))
            #expect(device["deactivationReason"]?.string == "Unregistered")
            let events = try await server.master.get("/v1/apps/demo/token-events").json()
            #expect(events["events"]?.arrayItems?.count == 1)
            #expect(events["events"]?.arrayFirst?["token"]?.string == Fixture.token(1))
            #expect(events["events"]?.arrayFirst?["reason"]?.string == "Unregistered")

            // Never sent to again until registered again.
            let second = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(second[path: "counts.targeted"]?.int == 1)
            let arrivals = try await server.arrivals()
            #expect(arrivals.filter { $0.token == Fixture.token(1) }.isEmpty)
            #expect(arrivals.filter { $0.token == Fixture.token(2) }.count == 2)
        }
    }

    @Test func aTokenRegisteredAgainAfterTheTimestampIsKept() async throws {
        try await RouterHarness.withServer { server in
            // APNs says dead since an hour ago; the app registered it again just now.
            let earlier = Int64((Date().timeIntervalSince1970 - 3600) * 1000)
            _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(earlier)}"#)
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")

            let push = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(push[path: "counts.failed"]?.int == 1, "the simulator still answers 410")
            #expect(push[path: "counts.pruned"]?.int == 0)
            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(device["active"] == .bool(true))
            let events = try await server.master.get("/v1/apps/demo/token-events").json()
            #expect(events["events"]?.arrayItems?.isEmpty == true)
        }
    }

    @Test func reRegisteringADeactivatedTokenMakesItReachableAgain() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
            _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(later)}"#)
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            _ = try await server.simulator.delete("/tokens/\(Fixture.token(1))")  // the app is back
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")

            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(device["active"] == .bool(true))
            let push = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(push[path: "counts.accepted"]?.int == 1, "\(push)")
        }
    }
}
