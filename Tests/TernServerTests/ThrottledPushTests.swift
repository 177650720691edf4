import Foundation
import TernAPNs
import TernTestSupport
import TernWeb
import Testing

/// `ratePerSecond`: a push sent a second's worth at a time, on the server's clock (a manual one here, moved by the
/// test), and the field's refusals.
struct ThrottledPushTests {
    @Test func aThrottledPushGoesASecondsWorthAtATime() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            for n in 1...25 { try await server.register(Fixture.device(n), token: Fixture.token(n)) }
            let stored = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "slowly", extra: #", "ratePerSecond": 10"#))
            #expect(stored.status == 202, "\(stored.text)")
            #expect(try stored.json()["ratePerSecond"]?.int == 10)
            let id = try #require(try stored.json()["id"]?.string)
            func view() async throws -> JSONValue { try await server.master.get("/v1/apps/demo/pushes/\(id)").json() }

            // The first second's ten, in one chunk, recorded; the clock has not moved, so that chunk is all there is.
            try await waitUntil("the first ten recorded") { try await view()[path: "counts.targeted"]?.int == 10 }
            #expect(try await server.arrivals().count == 10)
            #expect(try await view()["status"]?.string == "sending")
            // The console's list and the push's page say it is throttled.
            let browser = ConsoleBrowser(server)
            try await browser.signIn(try #require(server.master.bearer))
            #expect(try await browser.get("/console/apps/demo/pushes").text.contains("sending</span>, 10 a second"))
            #expect(try await browser.get("/console/apps/demo/pushes/\(id)").text.contains("Throttled to</dt><dd>10 recipients a second"))

            // Each second, the next ten, then the last five.
            clock.advance(by: .seconds(1))
            try await waitUntil("twenty recorded") { try await view()[path: "counts.targeted"]?.int == 20 }
            #expect(try await server.arrivals().count == 20)
            clock.advance(by: .seconds(1))
            try await waitUntil("the push to complete") { try await view()["status"]?.string == "completed" }
            let done = try await view()
            #expect(done[path: "counts.accepted"]?.int == 25)
            #expect(Set(try await server.arrivals().map(\.token)).count == 25, "each device once")
        }
    }

    @Test func ratePerSecondIsCheckedNamingTheField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            for rate in ["-5", "100001", "\"fast\"", "2.5"] {
                let refused = try await server.master.post(
                    "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, extra: #", "ratePerSecond": \#(rate)"#))
                #expect(refused.status == 400, "\(rate): \(refused.text)")
                #expect(try refused.json()["field"]?.string == "ratePerSecond", "\(rate): \(refused.text)")
            }
            // The fastest throttle is taken, and a push without one shows none.
            let fastest = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "ratePerSecond": 100000"#))
            #expect(fastest["ratePerSecond"]?.int == 100_000)
            #expect(fastest[path: "counts.accepted"]?.int == 1)
            let plain = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            #expect(plain["ratePerSecond"] == nil)
        }
    }

    /// An app's `broadcastRatePerSecond` throttles its broadcasts (tags, everyone) that give no rate of their own; a
    /// push to devices, aliases or tokens is not a broadcast, and `ratePerSecond: 0` sends one unthrottled.
    @Test func anAppsBroadcastRateThrottlesItsBroadcastsThatGiveNone() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), tags: ["news"])
            let set = try await server.admin.patch("/v1/apps/demo", #"{"broadcastRatePerSecond": 500}"#)
            #expect(set.status == 200, "\(set.text)")
            #expect(try set.json()["broadcastRatePerSecond"]?.int == 500)

            for audience in [#"{"all": true}"#, #"{"tags": ["news"]}"#] {
                let broadcast = try await server.push(Fixture.push(audience: audience))
                #expect(broadcast["ratePerSecond"]?.int == 500, "\(audience)")
                #expect(broadcast[path: "counts.accepted"]?.int == 1, "\(audience)")
            }
            let ownRate = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "ratePerSecond": 20"#))
            #expect(ownRate["ratePerSecond"]?.int == 20)
            let unthrottled = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "ratePerSecond": 0"#))
            #expect(unthrottled["ratePerSecond"] == nil)
            for audience in [#"{"devices": ["\#(Fixture.device(1))"]}"#, #"{"tokens": ["\#(Fixture.token(1))"]}"#] {
                #expect(try await server.push(Fixture.push(audience: audience))["ratePerSecond"] == nil, "\(audience)")
            }

            // Checked as a push's rate is; 0 removes it from an app, and cannot make one.
            for body in [#"{"broadcastRatePerSecond": 100001}"#, #"{"broadcastRatePerSecond": -1}"#] {
                let refused = try await server.admin.patch("/v1/apps/demo", body)
                #expect(refused.status == 400, "\(body): \(refused.text)")
                #expect(try refused.json()["field"]?.string == "broadcastRatePerSecond")
            }
            let created = try await server.admin.post(
                "/v1/apps", #"{"id": "zero", "topic": "com.example.zero", "environment": "simulator", "broadcastRatePerSecond": 0}"#)
            #expect(created.status == 400, "\(created.text)")
            #expect(try created.json()["field"]?.string == "broadcastRatePerSecond")
            let removed = try await server.admin.patch("/v1/apps/demo", #"{"broadcastRatePerSecond": 0}"#)
            #expect(try removed.json()["broadcastRatePerSecond"] == nil, "\(removed.text)")
            #expect(try await server.push(Fixture.push(audience: #"{"all": true}"#))["ratePerSecond"] == nil)
        }
    }
}
