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

    @Test func aPushTypeWithTokensOfItsOwnGoesToGivenTokensAndPrunesNoDevice() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u", tags: ["t"])
            let voip = #", "apns": {"pushType": "voip"}"#
            // A type whose tokens devices do not register here is refused to devices: APNs would refuse every device
            // token on its topic. (VoIP goes to the devices' VoIP tokens: PushTokenTests.)
            let complication = #", "apns": {"pushType": "complication"}"#
            for audience in [#"{"aliases": ["u"]}"#, #"{"devices": ["\#(Fixture.device(1))"]}"#, #"{"tags": ["t"]}"#, #"{"all": true}"#] {
                let refused = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: audience, extra: complication))
                #expect(refused.status == 400, "\(audience): \(refused.text)")
                #expect(try refused.json()["field"]?.string == "apns.pushType")
                #expect(refused.text.contains("PushKit"))
            }
            // Given as tokens, it goes. A device token given by mistake is refused for the VoIP topic (the simulator
            // binds it to the app's own topic, as APNs does), and the device keeps its token.
            #expect(try await server.simulator.put("/tokens/\(Fixture.token(1))", #"{"topic": "com.example.tern.demo"}"#).status == 204)
            let sent = try await server.push(Fixture.push(audience: #"{"tokens": ["\#(Fixture.token(1))"]}"#, extra: voip))
            #expect(sent[path: "counts.failedByReason.DeviceTokenNotForTopic"]?.int == 1, "\(sent)")
            #expect(sent[path: "counts.pruned"]?.int == 0)
            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(device["active"] == .bool(true))
            #expect(try await server.master.get("/v1/apps/demo/token-events").json()["events"]?.arrayItems?.isEmpty == true)
            let alert = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(alert[path: "counts.accepted"]?.int == 1, "\(alert)")
        }
    }

    @Test func oneTokenRejectedOutrightGoesButAnAppWhoseEveryTokenIsRejectedKeepsThem() async throws {
        try await RouterHarness.withServer { server in
            func refuse(_ n: Int) async throws {
                // Bound to another app's topic: APNs answers `DeviceTokenNotForTopic` for the demo app.
                #expect(try await server.simulator.put("/tokens/\(Fixture.token(n))", #"{"topic": "com.example.other"}"#).status == 204)
            }
            for n in 1...5 { try await server.register(Fixture.device(n), token: Fixture.token(n), alias: "u") }
            // One stale token among good ones: deactivated at once.
            try await refuse(1)
            let one = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(one[path: "counts.failedByReason.DeviceTokenNotForTopic"]?.int == 1, "\(one)")
            #expect(one[path: "counts.pruned"]?.int == 1)

            // Every token refused, as when the app's topic names another app: the app is at fault, its tokens stay.
            let many = 100
            for n in 10..<(10 + many) {
                try await server.register(Fixture.device(n), token: Fixture.token(n), tags: ["many"])
                try await refuse(n)
            }
            let refused = try await server.push(Fixture.push(audience: #"{"tags": ["many"]}"#))
            #expect(refused[path: "counts.failed"]?.int == many, "\(refused)")
            let pruned = try #require(refused[path: "counts.pruned"]?.int)
            #expect(pruned < 40, "\(pruned) of \(many) tokens deactivated")
            #expect(refused[path: "failureDetails.DeviceTokenNotForTopic"]?.string?.hasPrefix("not deactivated: APNs refuses nearly every token") == true)
            let events = try await server.master.get("/v1/apps/demo/token-events?limit=500").json()["events"]?.arrayItems?.count
            #expect(events == 1 + pruned)

            // APNs accepts them again: once most answers are accepted, an outright rejection deactivates again.
            for n in 10..<(10 + many) { _ = try await server.simulator.delete("/tokens/\(Fixture.token(n))") }
            for _ in 0..<2 {
                let accepted = try await server.push(Fixture.push(audience: #"{"tags": ["many"]}"#))
                #expect(accepted[path: "counts.accepted"]?.int == many - pruned, "\(accepted)")
            }
            try await refuse(2)
            let again = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
            #expect(again[path: "counts.pruned"]?.int == 1, "\(again)")
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
