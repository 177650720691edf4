import Foundation
import TernAPNs
import TernTestSupport
import TernWeb
import Testing

/// What the backend (master secret) and the admin send, tried as a hostile or careless caller would: each refusal is
/// a 400 naming the field, and what is taken is delivered as it was sent. The findings of the backend review, each
/// replayed.
struct BackendInputTests {
    static func refusal(_ response: HTTPTestResponse) throws -> (status: Int, field: String?) {
        (response.status, try response.json()["field"]?.string)
    }

    /// An expiration past what 64 bits hold went through a conversion that trapped when the push was sent, and again
    /// at every restart (the push stays stored): one request took every app on the node down for good.
    @Test func anExpirationPastTheBinaryProtocolsRangeIsRefusedAndTheLatestOneIsSent() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            for value in ["9223372036854775807", "9223372036854775296", "4294967296", "-1"] {
                let response = try await server.master.post(
                    "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, extra: #", "apns": {"expiration": \#(value)}"#))
                #expect(try Self.refusal(response) == (400, "apns.expiration"), "\(value): \(response.text)")
            }
            let latest = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "apns": {"expiration": 4294967295}"#))
            #expect(latest[path: "counts.accepted"]?.int == 1)
            #expect(try await server.arrivals().count == 1)
        }
    }

    /// "Match all" over 10,000 tags compared each tagged device with every tag, in the claim's transaction: ten such
    /// pushes held every database call (registrations, inbox reads, /ready) for 30 s, and reached no one, since a device
    /// carries at most 100 tags.
    @Test func matchingAllOfMoreTagsThanADeviceCarriesIsRefused() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), tags: ["t0", "t1"])
            let many = (0..<101).map { #""t\#($0)""# }.joined(separator: ", ")
            let refused = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": [\#(many)], "match": "all"}"#))
            #expect(try Self.refusal(refused) == (400, "audience.tags"), "\(refused.text)")
            // The same tags, any of them: one device.
            let any = try await server.push(Fixture.push(audience: #"{"tags": [\#(many)]}"#))
            #expect(any[path: "counts.accepted"]?.int == 1)
            let hundred = (0..<100).map { #""t\#($0)""# }.joined(separator: ", ")
            let all = try await server.push(Fixture.push(audience: #"{"tags": [\#(hundred)], "match": "all"}"#))
            #expect(all["status"]?.string == "completed")
            #expect(all[path: "counts.targeted"]?.int == 0, "taken, and no device has all of t0…t99")
        }
    }

    /// An `auto` push falls back to APNs with `tern.id` and `tern.sequence` added; a payload that fits only without
    /// them was taken and then failed `PayloadTooLarge` for every offline device. (The padding leaves the plain payload,
    /// with its `tern.pushId`, 16 bytes under the limit.)
    @Test func anAutoPushWhoseFallbackWouldOutgrowAPNsLimitIsRefusedWhenMade() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let padded = #"{"audience": {"devices": ["\#(Fixture.device(1))"]}, "notification": {"title": "x", "data": {"pad": "\#(String(repeating: "y", count: 3983))"}}"#
            let plain = try await server.master.post("/v1/apps/demo/pushes?wait=20", padded + "}")
            #expect(plain.status == 201, "\(plain.text)")
            let auto = try await server.master.post("/v1/apps/demo/pushes", padded + #", "delivery": "auto"}"#)
            #expect(try Self.refusal(auto) == (400, "notification"), "\(auto.text)")
            #expect(auto.text.contains("tern.id"))
            // A small auto push is taken, and an offline device gets it through APNs with both added.
            let small = try await server.push(#"{"audience": {"devices": ["\#(Fixture.device(1))"]}, "notification": {"title": "x"}, "delivery": "auto"}"#)
            #expect(small[path: "counts.fellBackToAPNs"]?.int == 1)
            let fallback = try JSONValue(parsing: Data(try #require(try await server.arrivals().last).payload.utf8))
            #expect(fallback[path: "tern.sequence"]?.int == 1)
        }
    }

    /// `"+N"` counters climbed past the largest badge the API takes, so a payload checked with a five-digit badge
    /// went out with a six-digit one.
    @Test func aBadgeCounterStopsAtTheLargestBadge() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-b")
            for _ in 0..<3 {
                _ = try await server.push(#"{"audience": {"aliases": ["user-b"]}, "notification": {"title": "x", "badge": "+99999"}}"#)
            }
            let badges = try await server.arrivals().map { try JSONValue(parsing: Data($0.payload.utf8))[path: "aps.badge"]?.int }
            #expect(badges == [99_999, 99_999, 99_999])
        }
    }

    /// A NUL was stored, then read back cut short (SQLite's reader ends a text at it): an inbox title, an app's
    /// topic. Control characters in a collapse id or topic went out as HTTP/2 header values, which RFC 9113 forbids.
    @Test func textThatCannotBeStoredOrSentAsAHeaderIsRefusedNamingTheField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            let audience = #"{"aliases": ["user-1"]}"#
            for (extra, field) in [
                (#", "apns": {"collapseID": "a\nb"}"#, "apns.collapseID"),
                (#", "apns": {"collapseID": ""}"#, "apns.collapseID"),
                (#", "apns": {"collapseID": "a\u0001"}"#, "apns.collapseID"),
            ] {
                let response = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: audience, extra: extra))
                #expect(try Self.refusal(response) == (400, field), "\(extra): \(response.text)")
            }
            let nul = try await server.master.post(
                "/v1/apps/demo/pushes", #"{"audience": \#(audience), "notification": {"title": "ti\u0000tle"}, "inbox": {}}"#)
            #expect(try Self.refusal(nul) == (400, "notification.title"), "\(nul.text)")
            for topic in [#"com.c2\u0000x"#, #"com.c2\u0007"#] {
                let app = try await server.admin.post("/v1/apps", #"{"id": "c2", "topic": "\#(topic)", "environment": "simulator"}"#)
                #expect(app.status == 400, "\(app.text)")
                #expect(try app.json()["field"]?.string == "topic" || app.text.contains("NUL"), "\(app.text)")
            }
            let host = try await server.admin.post(
                "/v1/apps", #"{"id": "c3", "topic": "com.c3", "environment": "custom", "endpoint": {"host": "a\u0001b", "port": 443}}"#)
            #expect(try Self.refusal(host) == (400, "endpoint.host"), "\(host.text)")
            let pem = try await server.admin.post(
                "/v1/apps",
                #"{"id": "c4", "topic": "com.c4", "environment": "custom", "endpoint": {"host": "apns.example", "port": 443, "caPEM": "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"}}"#)
            #expect(try Self.refusal(pem) == (400, "endpoint.caPEM"), "\(pem.text)")
            #expect(try await server.arrivals().isEmpty)
            #expect(try await server.admin.get("/v1/apps/c2").status == 404)
        }
    }

    /// Numbers in `data` went out changed (a 30-digit number as 1.2345678901234568e+29, 1E-400 as 0).
    @Test func aNumberInDataThatWouldBeChangedIsRefusedNamingIt() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            for (number, why) in [("123456789012345678901234567890", "past 64 bits"), ("1e400", "too large"), ("1E-400", "too small")] {
                let response = try await server.master.post(
                    "/v1/apps/demo/pushes", #"{"audience": {"all": true}, "notification": {"title": "x", "data": {"n": \#(number)}}}"#)
                #expect(try Self.refusal(response) == (400, "notification.data.n"), "\(number): \(response.text)")
                #expect(response.text.contains(why), "\(response.text)")
            }
            _ = try await server.push(#"{"audience": {"all": true}, "notification": {"title": "x", "data": {"n": 9223372036854775807, "f": 0.25}}}"#)
            let payload = try JSONValue(parsing: Data(try #require(try await server.arrivals().first).payload.utf8))
            #expect(payload["n"] == .int(.max))
            #expect(payload["f"] == .double(0.25))
        }
    }

    /// After a flood of made-up registrations, the operator lists the devices created in its time, a page at a time,
    /// and deletes them; the devices from before and after it are not listed.
    @Test func devicesAreListedByWhenTheyWereCreated() async throws {
        let clock = ManualClock(wallStart: Date(timeIntervalSince1970: 1_796_000_000))
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            let format = { (date: Date) in InternetDate.format(date) }
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            clock.advance(by: .seconds(60))
            let floodStart = clock.wall.now
            for number in 2...6 { try await server.register(Fixture.device(number), token: Fixture.token(number)) }
            clock.advance(by: .seconds(60))
            let floodEnd = clock.wall.now
            try await server.register(Fixture.device(7), token: Fixture.token(7))

            var listed: [String] = []
            var next: String? = nil
            repeat {
                let cursor = next.map { "&after=\($0)" } ?? ""
                let page = try await server.master.get(
                    "/v1/apps/demo/devices?createdSince=\(format(floodStart))&createdBefore=\(format(floodEnd))&limit=2\(cursor)")
                #expect(page.status == 200, "\(page.text)")
                let json = try page.json()
                let ids = json["devices"]?.arrayItems?.compactMap { $0["deviceId"]?.string } ?? []
                #expect(ids.count <= 2)
                listed += ids
                // Deleted as they are listed: the next page starts where this one ended all the same.
                for id in ids { #expect(try await server.master.delete("/v1/apps/demo/devices/\(id)").status == 204) }
                next = json["next"]?.string
            } while next != nil && listed.count < 10
            #expect(listed == (2...6).map { Fixture.device($0) })
            let left = try await server.master.get("/v1/apps/demo/devices?createdSince=\(format(clock.wall.now.addingTimeInterval(-3600)))")
            #expect(try left.json()["devices"]?.arrayItems?.compactMap { $0["deviceId"]?.string } == [Fixture.device(1), Fixture.device(7)])
            // The app key may not list devices.
            #expect(try await server.device.get("/v1/apps/demo/devices?createdSince=\(format(floodStart))").status == 403)
        }
    }

    /// Query parameters are checked as body fields are: one a call does not take, or one given twice, is an error;
    /// an alias or tag that could never be stored is refused as it is everywhere else.
    @Test func queriesAreCheckedLikeBodies() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u", tags: ["t1"])
            let push = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            let pushID = try #require(push["id"]?.string)
            for (path, field) in [
                ("/v1/apps/demo/devices?alias=", "alias"),
                ("/v1/apps/demo/devices?alias=%00", "alias"),
                ("/v1/apps/demo/devices?alias=\(String(repeating: "a", count: 129))", "alias"),
                ("/v1/apps/demo/devices?tag=bad%20tag", "tag"),
                ("/v1/apps/demo/devices?tag=%FF", "tag"),
                ("/v1/apps/demo/devices?alias=u&tag=t1", "tag"),
                ("/v1/apps/demo/devices?alias=u&limit=5", "limit"),
                ("/v1/apps/demo/devices?tag=t1&limit=abc", "limit"),
                ("/v1/apps/demo/devices?tag=t1&after=zzz", "after"),
                ("/v1/apps/demo/devices?tag=t1&tag=t2", "tag"),
                ("/v1/apps/demo/devices?tag=t1&colour=red", "colour"),
                ("/v1/apps/demo/devices?createdSince=yesterday", "createdSince"),
                ("/v1/apps/demo/devices?createdSince=2026-11-30T00:00:00", "createdSince"),
                ("/v1/apps/demo/devices?createdSince=2026-11-30T00:00:00Z&createdBefore=2026-11-29T00:00:00Z", "createdBefore"),
                ("/v1/apps/demo/devices?createdBefore=2026-11-30T00:00:00Z", "createdBefore"),
                ("/v1/apps/demo/devices?tag=t1&createdBefore=2026-11-30T00:00:00Z", "createdBefore"),
                ("/v1/apps/demo/devices?tag=t1&createdSince=2026-11-30T00:00:00Z", "createdSince"),
                ("/v1/apps/demo/devices?createdSince=2026-11-30T00:00:00Z&after=\(Fixture.device(1))", "after"),
                ("/v1/apps/demo/devices?createdSince=2026-11-30T00:00:00Z&limit=0", "limit"),
                ("/v1/apps/demo/pushes/\(pushID)?failuresAfter=abc", "failuresAfter"),
                ("/v1/apps/demo/pushes/\(pushID)?failuresAfter=-1", "failuresAfter"),
                ("/v1/apps/demo/pushes/\(pushID)?failuresAfter=99999999999999999999", "failuresAfter"),
                ("/v1/apps/demo/devices/\(Fixture.device(1))?verbose=1", "verbose"),
                ("/v1/apps/demo/token-events?after=1&after=2", "after"),
            ] {
                let response = try await server.master.get(path)
                #expect(try Self.refusal(response) == (400, field), "\(path): \(response.text)")
            }
            let repeated = try await server.master.post("/v1/apps/demo/pushes?wait=1&wait=2", Fixture.push(audience: #"{"all": true}"#))
            #expect(try Self.refusal(repeated) == (400, "wait"))
            let adminQuery = try await server.admin.get("/v1/apps/demo?x=1")
            #expect(try Self.refusal(adminQuery) == (400, "x"))
            // What the calls take still works, and an unknown path is a 404 whatever its query.
            for path in ["/v1/apps/demo/devices?tag=t1&limit=5", "/v1/apps/demo/devices?alias=u"] {
                let listed = try await server.master.get(path)
                #expect(listed.status == 200 && listed.text.contains(Fixture.device(1)), "\(path): \(listed.text)")
            }
            #expect(try await server.master.get("/v1/apps/demo/pushes/\(pushID)?failuresAfter=0&limit=10").status == 200)
            #expect(try await server.master.get("/v1/apps/demo/nothing?x=1").status == 404)
            // A device that never was has no token history: 404, as the device itself.
            let unknown = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(99))/tokens")
            #expect(unknown.status == 404)
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))/tokens").status == 200)
        }
    }

    /// Webhook addresses that resolvers read differently ("127.1", hex, octal) or that no connection can reach (port
    /// 99999) were taken, and failed at every delivery.
    @Test func webhookURLsWithAmbiguousNumericHostsOrImpossiblePortsAreRefused() async throws {
        try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
            for url in [
                "http://127.1/", "http://0x7f000001/", "http://2130706433/", "http://0177.0.0.1/", "http://0/", "http://1.2.3.04/",
                "http://example.com:99999/", "http://example.com:0/",
            ] {
                let response = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "\#(url)"}"#)
                #expect(try Self.refusal(response) == (400, "webhookURL"), "\(url): \(response.text)")
            }
            for url in ["http://127.0.0.1:8080/hook", "https://hooks.example.com/tern", "http://[2606:4700::1111]/hook", "https://a1.example/x"] {
                let response = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "\#(url)"}"#)
                #expect(response.status == 200, "\(url): \(response.text)")
            }
        }
    }
}
