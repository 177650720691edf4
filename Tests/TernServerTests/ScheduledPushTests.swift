import Foundation
import TernAPNs
import TernTestSupport
import TernWeb
import Testing

/// `sendAt`: a push stored now and sent later, on the server's clock (a manual one here, moved by the test).
struct ScheduledPushTests {
    @Test func aScheduledPushWaitsForItsTimeThenGoesAfterThePushesMadeBeforeIt() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            try await server.register(Fixture.device(2), token: Fixture.token(2))
            let sendAt = clock.wall.now.addingTimeInterval(3600)
            let stored = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "later", extra: #", "sendAt": "\#(Self.text(sendAt))""#))
            #expect(stored.status == 202, "\(stored.text)")
            let id = try #require(try stored.json()["id"]?.string)
            #expect(try stored.json()["status"]?.string == "scheduled")
            #expect(try stored.json()["sendAt"]?.string == Self.text(sendAt))

            // A push made after it goes at once, and is complete while the scheduled one is still waiting: the
            // dispatcher claimed work with the scheduled push stored, and left it.
            let now = try await server.push(Fixture.push(audience: #"{"all": true}"#, title: "now"))
            #expect(now[path: "counts.accepted"]?.int == 2)
            #expect(try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["status"]?.string == "scheduled")
            #expect(try await server.arrivals().map(\.payload).allSatisfy { $0.contains("now") })

            // Its time comes: the dispatcher's next look (every second) sends it.
            clock.advance(by: .seconds(3600))
            var view = JSONValue.null
            try await waitUntil("the scheduled push to complete", within: 10) {
                view = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
                return view["status"]?.string == "completed"
            }
            #expect(view[path: "counts.accepted"]?.int == 2)
            #expect(view["sendAt"]?.string == Self.text(sendAt))
            let arrivals = try await server.arrivals().map { $0.payload.contains("later") ? "later" : "now" }
            #expect(arrivals == ["now", "now", "later", "later"])
        }
    }

    @Test func aScheduledPushCancelledBeforeItsTimeIsNeverSent() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let sendAt = Self.text(clock.wall.now.addingTimeInterval(600))
            let stored = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "unwanted", extra: #", "sendAt": "\#(sendAt)""#))
            let id = try #require(try stored.json()["id"]?.string)
            let cancelled = try await server.master.post("/v1/apps/demo/pushes/\(id)/cancel", "")
            #expect(cancelled.status == 200, "\(cancelled.text)")
            #expect(try cancelled.json()["status"]?.string == "completed")
            #expect(try cancelled.json()["cancelledAt"] != nil)

            // Past its time, a push made then goes, and it does not.
            clock.advance(by: .seconds(1200))
            _ = try await server.push(Fixture.push(audience: #"{"all": true}"#, title: "wanted"))
            #expect(try await server.arrivals().map(\.payload).allSatisfy { $0.contains("wanted") })
            #expect(try await server.arrivals().count == 1)
            let view = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
            #expect(view[path: "counts.targeted"]?.int == 0)
        }
    }

    @Test func sendAtIsCheckedAndAPastTimeSendsNow() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let now = clock.wall.now
            let hourAhead = Self.text(now.addingTimeInterval(3600))
            let refused: [(extra: String, field: String)] = [
                (#", "sendAt": "tomorrow""#, "sendAt"),
                (#", "sendAt": 1767258000"#, "sendAt"),
                (#", "sendAt": "2026-02-30T09:00:00Z""#, "sendAt"),
                (#", "sendAt": "2026-12-01T09:00:00""#, "sendAt"),
                (#", "sendAt": "\#(Self.text(now.addingTimeInterval(91 * 86_400)))""#, "sendAt"),
                (#", "sendAt": "\#(hourAhead)", "apns": {"expiration": \#(Int(now.timeIntervalSince1970) + 60)}"#, "apns.expiration"),
            ]
            for (extra, field) in refused {
                let response = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, extra: extra))
                #expect(response.status == 400, "\(extra): \(response.text)")
                #expect(try response.json()["field"]?.string == field, "\(extra): \(response.text)")
            }
            // Expiring after it is sent is fine; so is 0 (now or never, at the time it goes).
            for expiration in [Int(now.timeIntervalSince1970) + 7200, 0] {
                let taken = try await server.master.post(
                    "/v1/apps/demo/pushes",
                    Fixture.push(audience: #"{"all": true}"#, extra: #", "sendAt": "\#(hourAhead)", "apns": {"expiration": \#(expiration)}"#))
                #expect(taken.status == 202, "\(taken.text)")
                #expect(try taken.json()["status"]?.string == "scheduled")
            }
            // Ninety days ahead, in another offset (as Foundation writes it), is taken.
            // A whole second: written in another offset, the milliseconds are cut off, not rounded.
            let far = Date(timeIntervalSince1970: now.addingTimeInterval(90 * 86_400 - 60).timeIntervalSince1970.rounded(.down))
            let offset = Self.text(far, offsetHours: 9)
            let farPush = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, extra: #", "sendAt": "\#(offset)""#))
            #expect(farPush.status == 202, "\(farPush.text)")
            #expect(try farPush.json()["sendAt"]?.string == Self.text(far))

            // Waiting for the outcome of a push scheduled past the wait: answered at once, not after the wait.
            let started = ContinuousClock.now
            let unwaited = try await server.master.post(
                "/v1/apps/demo/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, extra: #", "sendAt": "\#(hourAhead)""#))
            #expect(unwaited.status == 202)
            #expect(try unwaited.json()["status"]?.string == "scheduled")
            #expect(ContinuousClock.now - started < .seconds(10), "it waited for a push that could not complete")

            // A time already past sends it now.
            let past = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "sendAt": "2020-01-01T00:00:00Z""#))
            #expect(past["status"]?.string == "completed")
            #expect(past["sendAt"] == nil)
            #expect(past[path: "counts.accepted"]?.int == 1)
        }
    }

    @Test func theConsoleSchedulesAPushShowsWhenItGoesAndStopsIt() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let browser = ConsoleBrowser(server)
            try await browser.signIn(try #require(server.master.bearer))
            let form = [("audience.kind", "all"), ("notification.title", "Tomorrow's news")]
            // The preview says so before the form is sent, as the send would.
            let preview = try await browser.post(
                "/console/apps/demo/preview", form + [("sendAt", "tomorrow at nine")],
                headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
            #expect(try preview.json()["problem"]?.string?.hasPrefix("sendAt: sendAt is an RFC 3339 date-time") == true, "\(preview.text)")
            let refused = try await browser.post("/console/apps/demo/pushes", form + [("sendAt", "tomorrow at nine")])
            #expect(refused.status == 400)
            #expect(refused.text.contains("sendAt is an RFC 3339 date-time"), "\(refused.text.prefix(3000))")

            let sendAt = clock.wall.now.addingTimeInterval(86_400)
            let sent = try await browser.post("/console/apps/demo/pushes", form + [("sendAt", Self.text(sendAt))])
            #expect(sent.status == 303)
            let location = try #require(sent.header("Location"))
            let page = try await browser.get(location)
            #expect(page.text.contains(#"data-status="scheduled""#))
            #expect(page.text.contains("Scheduled for"))
            #expect(page.text.contains(sendAt.formatted(Date.ISO8601FormatStyle())))
            #expect(page.text.contains("Stop this push"))
            // The list says so too, with a Stop button of its own (the same form).
            let id = try #require(location.split(separator: "/").last.map(String.init))
            let list = try await browser.get("/console/apps/demo/pushes")
            #expect(list.text.contains(#"<span class="status scheduled">scheduled</span> for <time"#), "\(list.text.prefix(4000))")
            #expect(list.text.contains(#"action="/console/apps/demo/pushes/\#(id)/cancel""#))
            #expect(list.text.contains("Stop push \(id.prefix(8))"))

            let stopped = try await browser.post("\(location)/cancel", [])
            #expect(stopped.status == 303)
            let after = try await browser.get(location)
            #expect(after.text.contains(#"data-status="completed""#))
            #expect(!after.text.contains("Stop this push"))
            #expect(!(try await browser.get("/console/apps/demo/pushes").text.contains("Stop push")))
            clock.advance(by: .seconds(2 * 86_400))
            _ = try await server.push(Fixture.push(audience: #"{"all": true}"#, title: "today"))
            #expect(try await server.arrivals().map(\.payload).allSatisfy { $0.contains("today") })
        }
    }

    @Test func datesAreReadAsRFC3339SaysAndNoOtherWay() {
        let noon = Date(timeIntervalSince1970: 1_796_126_400)  // 2026-12-01T12:00:00Z
        #expect(InternetDate.parse("2026-12-01T12:00:00Z") == noon)
        #expect(InternetDate.parse("2026-12-01T21:00:00+09:00") == noon)
        #expect(InternetDate.parse("2026-12-01T07:30:00-04:30") == noon)
        #expect(InternetDate.parse("2026-12-01T21:00:00+0900") == noon, "Foundation's offset")
        #expect(InternetDate.parse("2026-12-01T12:00:00.250Z") == noon.addingTimeInterval(0.25))
        #expect(InternetDate.parse("2028-02-29T00:00:00Z") != nil, "a leap day")
        for text in [
            "2026-12-01 12:00:00Z", "2026-12-01T12:00Z", "2026-12-01", "2026-12-01T12:00:00", "2026-13-01T12:00:00Z",
            "2026-02-29T12:00:00Z", "2026-04-31T12:00:00Z", "2026-12-01T24:00:00Z", "2026-12-01T12:60:00Z", "2026-12-01T12:00:60Z",
            "2026-12-01T12:00:00.Z", "2026-12-01T12:00:00+9:00", "2026-12-01T12:00:00+09", "2026-12-01T12:00:00+09:0", "2026-12-01T12:00:00+09:00 ", "2026-12-01t12:00:00z",
            "+2026-12-01T12:00:00Z", "2026-12-01T12:00:00.1234567890Z", "２026-12-01T12:00:00Z",
        ] {
            #expect(InternetDate.parse(text) == nil, "\(text)")
        }
        // Written to the millisecond, rounded: Foundation's style alone wrote a stored .916 as .915.
        #expect(InternetDate.format(Date(timeIntervalSince1970: 1_764_469_643.916)) == "2025-11-30T02:27:23.916Z")
        #expect(InternetDate.format(Date(timeIntervalSince1970: 1_764_469_643.9996)) == "2025-11-30T02:27:24.000Z")
        for text in ["2026-12-01T12:00:00.001Z", "2026-12-01T12:00:00.916Z", "2026-12-01T12:00:00.999Z"] {
            #expect(InternetDate.parse(text).map(InternetDate.format) == text)
        }
    }

    /// `date` as the API writes it back (UTC, milliseconds), or in another offset as a caller may send it.
    static func text(_ date: Date, offsetHours: Int = 0) -> String {
        guard offsetHours != 0 else { return InternetDate.format(date) }
        var style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        style.timeZone = TimeZone(secondsFromGMT: offsetHours * 3600)!
        return date.formatted(style)
    }
}
