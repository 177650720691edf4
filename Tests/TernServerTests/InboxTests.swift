import Foundation
import NIOHTTP1
import TernAPNs
import TernServer
import TernTestSupport
import Testing

/// The message inbox and server-side badges, end to end through `tern serve` and its built-in simulator.
@Suite(.serialized) struct InboxTests {
    /// A push with `inbox` that carries `badge`, to an aliases audience.
    private static func inboxPush(alias: String, title: String, badge: String? = nil, ttl: Int? = nil, data: String? = nil) -> String {
        var notification = #""title": "\#(title)", "body": "body of \#(title)""#
        if let badge { notification += #", "badge": \#(badge)"# }
        if let data { notification += #", "data": \#(data)"# }
        let inbox = ttl.map { #"{"ttl": \#($0)}"# } ?? "{}"
        return #"{"audience": {"aliases": ["\#(alias)"]}, "notification": {\#(notification)}, "inbox": \#(inbox)}"#
    }

    /// The badge in a payload the simulator received.
    private static func badge(_ arrival: Arrival) throws -> Int? {
        try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.badge"]?.int
    }

    @Test func aUserThatWasOfflinePullsEveryMessageOldestFirstWithACursor() async throws {
        try await RouterHarness.withServer { server in
            let registered = try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            let secret = try #require(registered["deviceSecret"]?.string)
            var ids: [String] = []
            for number in 1...5 {
                let push = try await server.push(Self.inboxPush(alias: "user-1", title: "m\(number)", data: #"{"orderId": \#(number)}"#))
                ids.append(try #require(push["id"]?.string))
            }
            // The message id travels beside aps, so the app can open it.
            let arrivals = try await server.arrivals()
            #expect(arrivals.count == 5)
            let first = try JSONValue(parsing: Data(try #require(arrivals.first).payload.utf8))
            #expect(first[path: "tern.messageId"]?.string == ids[0])

            // The device pulls with the app key, its id and its secret, two at a time.
            var titles: [String] = []
            var after: String?
            for _ in 0..<5 {
                let query = "deviceId=\(Fixture.device(1))&limit=2" + (after.map { "&after=\($0)" } ?? "")
                let page = try await server.device.send(.GET, "/v1/apps/demo/inbox?\(query)", headers: [("X-Tern-Device-Secret", secret)])
                #expect(page.status == 200, "\(page.text)")
                let body = try page.json()
                titles += body["messages"]?.arrayItems?.compactMap { $0["title"]?.string } ?? []
                #expect(body["unread"]?.int == 5)
                after = body["next"]?.string
                if after == nil { break }
            }
            #expect(titles == ["m1", "m2", "m3", "m4", "m5"])
            let master = try await server.master.get("/v1/apps/demo/inbox?alias=user-1&limit=1").json()
            #expect(master["messages"]?.arrayFirst?["id"]?.string == ids[0])
            #expect(master["messages"]?.arrayFirst?[path: "data.orderId"]?.int == 1)
        }
    }

    @Test func readStateUnreadCountsAndDeleting() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            var ids: [String] = []
            for number in 1...4 {
                ids.append(try #require(try await server.push(Self.inboxPush(alias: "user-1", title: "m\(number)"))["id"]?.string))
            }
            let upTo = try await server.master.post("/v1/apps/demo/inbox/read?alias=user-1", #"{"upTo": "\#(ids[1])", "updateBadge": false}"#)
            #expect(upTo.status == 200)
            #expect(try upTo.json()["marked"]?.int == 2)
            #expect(try upTo.json()["unread"]?.int == 2)
            let byID = try await server.master.post("/v1/apps/demo/inbox/read?alias=user-1", #"{"ids": ["\#(ids[3])", "\#(ids[0])"], "updateBadge": false}"#)
            #expect(try byID.json()["marked"]?.int == 1, "m1 was read already")
            let listing = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(listing["messages"]?.arrayItems?.map { $0["read"] == .bool(true) } == [true, true, false, true])
            #expect(listing["unread"]?.int == 1)

            #expect(try await server.master.delete("/v1/apps/demo/inbox/\(ids[2])?alias=user-1").status == 204)
            #expect(try await server.master.delete("/v1/apps/demo/inbox/\(ids[2])?alias=user-1").status == 404)
            let after = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(after["messages"]?.arrayItems?.count == 3)
            #expect(after["unread"]?.int == 0)
        }
    }

    @Test func aDeviceSecretCannotReadAnotherUsersInbox() async throws {
        try await RouterHarness.withServer { server in
            let mine = try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "alice")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "bob")
            _ = try await server.push(Self.inboxPush(alias: "bob", title: "for bob"))
            let secret = try #require(mine["deviceSecret"]?.string)

            let asBob = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(Fixture.device(1))&alias=bob", headers: [("X-Tern-Device-Secret", secret)])
            #expect(asBob.status == 403)
            let bobsDevice = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(Fixture.device(2))", headers: [("X-Tern-Device-Secret", secret)])
            #expect(bobsDevice.status == 403)
            let noSecret = try await server.device.get("/v1/apps/demo/inbox?deviceId=\(Fixture.device(1))")
            #expect(noSecret.status == 403)
            let noKey = try await server.api.get("/v1/apps/demo/inbox?alias=bob")
            #expect(noKey.status == 401)
            let own = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(Fixture.device(1))", headers: [("X-Tern-Device-Secret", secret)])
            #expect(own.status == 200)
            #expect(try own.json()["messages"]?.arrayItems?.isEmpty == true, "alice's inbox holds nothing of bob's")
        }
    }

    @Test func anExpiredMessageIsInNoListingAtOnce() async throws {
        let clock = ManualClock()
        // The sweeper an hour off: the listing leaves the message out on its own, before any sweep deletes it.
        try await RouterHarness.withServer(configure: { $0.inbox.sweepInterval = .seconds(3600) }, clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "short", ttl: 60))
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "long"))
            let before = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(before["messages"]?.arrayItems?.count == 2)
            let short = try #require(before["messages"]?.arrayItems?.first { $0["title"]?.string == "short" })
            let expiry = try #require(short["expiresAt"]?.string.flatMap { try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0) })
            #expect(abs(expiry.timeIntervalSince(clock.wall.now) - 60) < 1, "the server dates the message by the test's clock")

            // A second before its expiry, as the listing gives it, it is still there.
            clock.advance(by: .seconds(expiry.timeIntervalSince(clock.wall.now) - 1))
            let almost = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(almost["messages"]?.arrayItems?.count == 2)
            // Just past it, it is in no listing and no count.
            clock.advance(by: .milliseconds(1001))
            let after = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(after["messages"]?.arrayItems?.compactMap { $0["title"]?.string } == ["long"])
            #expect(after["unread"]?.int == 1)
        }
    }

    @Test func theCapDropsTheOldestAndThePushSaysHowMany() async throws {
        try await RouterHarness.withServer { server in
            #expect(try await server.admin.patch("/v1/apps/demo", #"{"inboxCap": 2}"#).status == 200)
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "m1"))
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "m2"))
            let third = try await server.push(Self.inboxPush(alias: "user-1", title: "m3"))
            #expect(third[path: "counts.inboxDropped"]?.int == 1)
            let listing = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()
            #expect(listing["messages"]?.arrayItems?.compactMap { $0["title"]?.string } == ["m2", "m3"])
        }
    }

    @Test func badgeModesUnreadIncrementAndSet() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "user-1")
            // "unread": each device shows its user's unread messages, this one included.
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "a", badge: #""unread""#))
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "b", badge: #""unread""#))
            // "+N" counts on from the stored counter, once per push for the user (both devices see the same value):
            // the badge they were last given, here the unread count 2.
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["user-1"]}"#, extra: "").replacingOccurrences(
                of: #""body": "from Tern"}"#, with: #""body": "from Tern", "badge": "+3"}"#))
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["user-1"]}"#).replacingOccurrences(
                of: #""body": "from Tern"}"#, with: #""body": "from Tern", "badge": 7}"#))
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["user-1"]}"#).replacingOccurrences(
                of: #""body": "from Tern"}"#, with: #""body": "from Tern", "badge": "+1"}"#))
            // A badge alone is a push too.
            _ = try await server.push(#"{"audience": {"aliases": ["user-1"]}, "notification": {"badge": "+1"}}"#)
            let arrivals = try await server.arrivals()
            for token in [Fixture.token(1), Fixture.token(2)] {
                let badges = try arrivals.filter { $0.token == token }.map(Self.badge)
                #expect(badges == [1, 2, 5, 7, 8, 9], "device \(token.suffix(2))")
            }
        }
    }

    /// The label of the badge updates' sleep on a test's manual clock. The tests wait for that sleep by it: a
    /// one-second sweep of the server's sleeps until the same instant as a 1 s gathering, so a test that waited for
    /// "a sleeper until then" could move the clock on before the updates slept, and then wait for them in vain.
    static let badges = ServerClocks.Waiter.badgeUpdates.rawValue

    @Test func readingSendsOneSilentBadgeUpdatePerDevice() async throws {
        let clock = ManualClock()
        let delay = Duration.seconds(3)
        try await RouterHarness.withServer(configure: { $0.inbox.badgeUpdateDelay = delay }, clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            var ids: [String] = []
            for number in 1...3 {
                ids.append(try #require(try await server.push(Self.inboxPush(alias: "user-1", title: "m\(number)", badge: #""unread""#))["id"]?.string))
            }
            // A burst of reads. The first starts the gathering, which waits on the test's clock: the clock stands
            // still, so the others are within the delay however long they take.
            for id in ids {
                #expect(try await server.master.post("/v1/apps/demo/inbox/read?alias=user-1", #"{"ids": ["\#(id)"]}"#).status == 200)
            }
            let due = clock.now.advanced(by: delay)
            try await withTimeout(10, "the badge updates to gather") { await clock.waitUntilSleeping(until: due, label: Self.badges) }
            // Just before the delay, it is still gathering.
            clock.advance(by: delay - .milliseconds(1))
            #expect(clock.sleepers.contains(due))
            clock.advance(by: .milliseconds(1))
            var updates: [Arrival] = []
            try await waitUntil("the badge update") {
                updates = Array(try await server.arrivals().dropFirst(3))
                return !updates.isEmpty
            }
            // Another update would need another delay on the clock, which stands still again.
            #expect(updates.count == 1, "a burst of three reads sends one update: \(updates.count)")
            let last = try #require(updates.last)
            #expect(try Self.badge(last) == 0)
            let payload = try JSONValue(parsing: Data(last.payload.utf8))
            #expect(payload[path: "aps.content-available"]?.int == 1)
            #expect(payload[path: "aps.alert"] == nil)
        }
    }

    /// A probe's case: "+1" pushes with inbox messages, reads between them. Each read's silent update showed the
    /// unread count, and the next "+1" counted on from the old counter (1, 2, 3, then 2, 4, then 0, 5): after a read the
    /// icon never matched the inbox again. The counter is now what the devices were last shown.
    @Test func aReadSetsTheCounterThatTheNextIncrementCountsOnFrom() async throws {
        let clock = ManualClock()
        let delay = Duration.seconds(1)
        try await RouterHarness.withServer(configure: { $0.inbox.badgeUpdateDelay = delay }, clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            var ids: [String] = []
            for title in ["a", "b", "c"] {
                ids.append(try #require(try await server.push(Self.inboxPush(alias: "user-1", title: title, badge: #""+1""#))["id"]?.string))
            }
            /// Reads `read`, and waits for the silent update it sends (the clock moved past the gathering delay).
            func read(_ read: [String], arrivals count: Int) async throws {
                let ids = read.map { #""\#($0)""# }.joined(separator: ", ")
                #expect(try await server.master.post("/v1/apps/demo/inbox/read?alias=user-1", #"{"ids": [\#(ids)]}"#).status == 200)
                let due = clock.now.advanced(by: delay)
                try await withTimeout(10, "the badge update to gather") { await clock.waitUntilSleeping(until: due, label: Self.badges) }
                clock.advance(by: delay)
                try await waitUntil("the badge update") { try await server.arrivals().count == count }
            }
            try await read([ids[0]], arrivals: 4)
            let d = try #require(try await server.push(Self.inboxPush(alias: "user-1", title: "d", badge: #""+1""#))["id"]?.string)
            try await read(ids + [d], arrivals: 6)
            _ = try await server.push(Self.inboxPush(alias: "user-1", title: "e", badge: #""+1""#))
            let badges = try await server.arrivals().map(Self.badge)
            #expect(badges == [1, 2, 3, 2, 3, 0, 1])
            let unread = try await server.master.get("/v1/apps/demo/inbox?alias=user-1").json()["unread"]?.int
            #expect(unread == 1, "the icon shows the inbox's unread count")
        }
    }

    @Test func badInputOnEveryInboxEndpointNamesTheField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1")
            let cases: [(HTTPMethod, String, String?, String)] = [
                (.GET, "/v1/apps/demo/inbox", nil, "alias"),
                (.GET, "/v1/apps/demo/inbox?alias=user-1&after=x", nil, "after"),
                (.GET, "/v1/apps/demo/inbox?alias=user-1&limit=0", nil, "limit"),
                (.GET, "/v1/apps/demo/inbox?deviceId=nope", nil, "deviceId"),
                (.POST, "/v1/apps/demo/inbox/read?alias=user-1", "{}", "upTo"),
                (.POST, "/v1/apps/demo/inbox/read?alias=user-1", #"{"upTo": "x"}"#, "upTo"),
                (.POST, "/v1/apps/demo/inbox/read?alias=user-1", #"{"ids": ["x"]}"#, "ids[0]"),
                (.DELETE, "/v1/apps/demo/inbox/nope?alias=user-1", nil, "messageId"),
            ]
            for (method, path, body, field) in cases {
                let response = try await server.master.send(method, path, body: body)
                #expect(response.status == 400, "\(method) \(path): \(response.status)")
                #expect(try response.json()["field"]?.string == field, "\(method) \(path): \(response.text)")
            }
            let unknownApp = try await server.master.get("/v1/apps/nope/inbox?alias=user-1")
            #expect(unknownApp.status == 401, "answered as a wrong secret, so app ids cannot be probed")
            let pushes: [(String, String)] = [
                (#"{"audience": {"aliases": ["u"]}, "notification": {"title": "x", "badge": "-1"}}"#, "notification.badge"),
                (#"{"audience": {"aliases": ["u"]}, "notification": {"title": "x", "badge": "+0"}}"#, "notification.badge"),
                (#"{"audience": {"aliases": ["u"]}, "notification": {"title": "x"}, "inbox": {"ttl": 0}}"#, "inbox.ttl"),
                (#"{"audience": {"aliases": ["u"]}, "notification": {"title": "x"}, "inbox": {"ttl": 99999999}}"#, "inbox.ttl"),
                (#"{"audience": {"aliases": ["u"]}, "payload": {"aps": {}}, "inbox": {}}"#, "inbox"),
                (#"{"audience": {"aliases": ["u"]}, "notification": {"title": "x", "data": {"tern": 1}}, "inbox": {}}"#, "notification.data.tern"),
            ]
            for (body, field) in pushes {
                let response = try await server.master.post("/v1/apps/demo/pushes", body)
                #expect(response.status == 400, "\(body): \(response.status)")
                #expect(try response.json()["field"]?.string == field, "\(body): \(response.text)")
            }
            let apps: [(String, String)] = [(#"{"inboxCap": 0}"#, "inboxCap"), (#"{"inboxMaxTTL": 3000000}"#, "inboxMaxTTL")]
            for (body, field) in apps {
                let response = try await server.admin.patch("/v1/apps/demo", body)
                #expect(response.status == 400)
                #expect(try response.json()["field"]?.string == field)
            }
        }
    }
}
