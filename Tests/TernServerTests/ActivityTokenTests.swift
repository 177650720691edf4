import Foundation
import TernAPNs
import TernWeb
import TernTestSupport
import Testing

/// Live Activities' update tokens: the app registers each activity's token under the activity's id
/// (`PUT …/devices/{id}/activities/{activityId}`), and a `liveactivity` update or end to `audience.activity` goes to
/// every device's token for it, as a sports app updates the score on every fan's Lock Screen. APNs' verdict on a dead
/// one removes it; the device keeps its device token.
struct ActivityTokenTests {
    /// A 32-byte activity token from a number, unlike any ``Fixture/token(_:)``.
    private static func activityToken(_ number: Int) -> String {
        String(repeating: "ac", count: 28) + String(format: "%08x", number)
    }

    private func setToken(_ server: RoutedServer, _ device: String, activity: String, _ token: String) async throws -> HTTPTestResponse {
        try await server.device.send(
            .PUT, "/v1/apps/demo/devices/\(device)/activities/\(activity)", body: #"{"token": "\#(token)"}"#, headers: server.asDevice(device))
    }

    /// A push to `audience` whose raw payload is a Live Activity `event` (with what ActivityKit needs), and `extra`
    /// members of the request.
    private static func update(_ audience: String, event: String = "update", aps extraAPS: String = "", extra: String = "") -> String {
        #"""
        {"audience": \#(audience), "apns": {"pushType": "liveactivity"}\#(extra),
         "payload": {"aps": {"timestamp": 1764547200, "event": "\#(event)", "content-state": {"score": "2-1"}\#(extraAPS)}}}
        """#
    }

    @Test func anUpdateToAnActivityGoesToEveryDevicesTokenForItAndPassesOverTheOthers() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...4 {
                try await server.register(Fixture.device(number), token: Fixture.token(number), alias: number == 2 ? "bea" : "al\(number)")
            }
            // Devices 1-3 follow the match; device 3 follows another one too; device 4 follows none.
            for number in 1...3 {
                let set = try await setToken(server, Fixture.device(number), activity: "match-7", Self.activityToken(number).uppercased())
                #expect(set.status == 200, "\(set.text)")
                #expect(try set.json()["token"]?.string == Self.activityToken(number), "kept as lowercase hex")
                #expect(try set.json()["activityId"]?.string == "match-7")
            }
            #expect(try await setToken(server, Fixture.device(3), activity: "match-8", Self.activityToken(30)).status == 200)

            // The device shows its activities, oldest first, and when Tern forgets each.
            let three = try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(3))", headers: server.asDevice(Fixture.device(3))).json()
            #expect(three["activities"]?.arrayItems?.compactMap { $0["activityId"]?.string } == ["match-7", "match-8"], "\(three)")
            let started = try #require(three["activities"]?.arrayItems?.first?["startedAt"]?.string.flatMap(InternetDate.parse))
            let expires = try #require(three["activities"]?.arrayItems?.first?["expiresAt"]?.string.flatMap(InternetDate.parse))
            #expect(expires.timeIntervalSince(started) == 12 * 3600)

            let push = try await server.push(Self.update(#"{"activity": "match-7"}"#))
            #expect(push["status"]?.string == "completed")
            #expect(push[path: "counts.targeted"]?.int == 3, "\(push)")
            #expect(push[path: "counts.accepted"]?.int == 3, "\(push)")
            let arrivals = try await server.arrivals()
            #expect(Set(arrivals.map(\.token)) == Set((1...3).map(Self.activityToken)))
            #expect(Set(arrivals.map(\.topic)) == ["com.example.tern.demo.push-type.liveactivity"])

            // With aliases, only their devices': an activity id a stranger's device also registered reaches the user's
            // devices only.
            let narrowed = try await server.push(Self.update(#"{"activity": "match-7", "aliases": ["bea"]}"#, event: "end"))
            #expect(narrowed[path: "counts.accepted"]?.int == 1, "\(narrowed)")
            #expect(try await server.arrivals().last?.token == Self.activityToken(2))

            // An activity no device registered reaches no one, and completes.
            let none = try await server.push(Self.update(#"{"activity": "match-9"}"#))
            #expect(none["status"]?.string == "completed")
            #expect(none[path: "counts.targeted"]?.int == 0, "\(none)")

            // An alert to everyone still goes to the device tokens.
            let alert = try await server.push(Fixture.push(audience: #"{"all": true}"#))
            #expect(alert[path: "counts.accepted"]?.int == 4)
        }
    }

    @Test func aNewTokenForAnActivityReplacesItsOldOneAndEndingItOnTheDeviceRemovesIt() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            try await server.register(Fixture.device(2), token: Fixture.token(2))
            #expect(try await setToken(server, Fixture.device(1), activity: "order-1", Self.activityToken(1)).status == 200)
            // ActivityKit gave the activity a new token.
            #expect(try await setToken(server, Fixture.device(1), activity: "order-1", Self.activityToken(2)).status == 200)
            // The first token, registered now for another device's activity, is that one's.
            #expect(try await setToken(server, Fixture.device(2), activity: "order-2", Self.activityToken(1)).status == 200)
            _ = try await server.push(Self.update(#"{"activity": "order-1"}"#))
            #expect(try await server.arrivals().map(\.token) == [Self.activityToken(2)])

            let path = "/v1/apps/demo/devices/\(Fixture.device(1))/activities/order-1"
            #expect(try await server.device.send(.DELETE, path, headers: server.asDevice(Fixture.device(1))).status == 204)
            let again = try await server.device.send(.DELETE, path, headers: server.asDevice(Fixture.device(1)))
            #expect(again.status == 404, "\(again.text)")
            #expect(try await server.push(Self.update(#"{"activity": "order-1"}"#))[path: "counts.targeted"]?.int == 0)

            // A deleted device's activities go with it.
            #expect(try await server.master.delete("/v1/apps/demo/devices/\(Fixture.device(2))").status == 204)
            #expect(try await server.push(Self.update(#"{"activity": "order-2"}"#))[path: "counts.targeted"]?.int == 0)
        }
    }

    @Test func aDeviceKeepsItsLatestActivitiesAndForgetsTheOldest() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            for number in 1...17 {
                #expect(try await setToken(server, Fixture.device(1), activity: "a-\(number)", Self.activityToken(number)).status == 200)
            }
            let device = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            let kept = device["activities"]?.arrayItems?.compactMap { $0["activityId"]?.string } ?? []
            #expect(kept.count == 16, "\(device)")
            #expect(!kept.contains("a-1") && kept.contains("a-17"), "\(kept)")
        }
    }

    @Test func aDeadActivityTokenIsRemovedUnlessRegisteredAgainAfterAPNsVerdict() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            try await server.register(Fixture.device(2), token: Fixture.token(2))
            for number in 1...2 { #expect(try await setToken(server, Fixture.device(number), activity: "m", Self.activityToken(number)).status == 200) }
            // Token 1 dead since a minute from now (after it was set); token 2 since an hour before it was set.
            let now = Date().timeIntervalSince1970
            #expect(try await server.simulator.post(
                "/tokens/\(Self.activityToken(1))/unregister", #"{"timestamp": \#(Int64((now + 60) * 1000))}"#).status == 204)
            #expect(try await server.simulator.post(
                "/tokens/\(Self.activityToken(2))/unregister", #"{"timestamp": \#(Int64((now - 3600) * 1000))}"#).status == 204)

            let push = try await server.push(Self.update(#"{"activity": "m"}"#))
            #expect(push[path: "counts.failed"]?.int == 2, "\(push)")
            #expect(push[path: "counts.pruned"]?.int == 1, "\(push)")

            let one = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(one["active"] == .bool(true), "the device token is not the activity's token")
            #expect(one["activities"]?.arrayItems?.isEmpty == true, "\(one)")
            let two = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(2))").json()
            #expect(two["activities"]?.arrayItems?.count == 1, "registered after the timestamp: \(two)")
            // The backend never held the token: no token event.
            #expect(try await server.master.get("/v1/apps/demo/token-events").json()["events"]?.arrayItems?.isEmpty == true)
        }
    }

    /// No update reaches an ended activity: once an `end` push completes, the tokens it went to are forgotten, so the
    /// app's activities no longer count them, and the id used again later reaches only the devices that follow it anew.
    @Test func anEndForgetsTheTokensItWentToAndNoOthers() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...3 { try await server.register(Fixture.device(number), token: Fixture.token(number), alias: "fan\(number)") }
            for number in 1...3 { #expect(try await setToken(server, Fixture.device(number), activity: "match-7", Self.activityToken(number)).status == 200) }
            #expect(try await setToken(server, Fixture.device(3), activity: "match-8", Self.activityToken(30)).status == 200)

            // One user's activity ended: only their device's token goes.
            let mine = try await server.push(Self.update(#"{"activity": "match-7", "aliases": ["fan1"]}"#, event: "end"))
            #expect(mine[path: "counts.accepted"]?.int == 1, "\(mine)")
            // Forgotten by the node that records the push's last chunk, as it completes it: a reader may come first.
            try await waitUntil("the ended token forgotten") {
                try await server.master.get("/v1/apps/demo/activities/match-7").json()["devices"]?.int == 2
            }
            let one = try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(1))", headers: server.asDevice(Fixture.device(1))).json()
            #expect(one["activities"]?.arrayItems?.isEmpty == true, "\(one)")
            // An update is not an end: the tokens stay.
            #expect(try await server.push(Self.update(#"{"activity": "match-7"}"#))[path: "counts.accepted"]?.int == 2)
            #expect(try await server.master.get("/v1/apps/demo/activities/match-7").json()["devices"]?.int == 2)

            // The match ends for everyone: it is gone from the app's activities; the other match stays.
            let all = try await server.push(Self.update(#"{"activity": "match-7"}"#, event: "end"))
            #expect(all[path: "counts.accepted"]?.int == 2, "\(all)")
            try await waitUntil("the ended activity gone") { try await server.master.get("/v1/apps/demo/activities/match-7").status == 404 }
            #expect(try await server.master.get("/v1/apps/demo/activities/match-8").json()["devices"]?.int == 1)

            // The id used again, by one device: an update reaches that device alone.
            #expect(try await setToken(server, Fixture.device(2), activity: "match-7", Self.activityToken(22)).status == 200)
            let again = try await server.push(Self.update(#"{"activity": "match-7"}"#))
            #expect(again[path: "counts.targeted"]?.int == 1 && again[path: "counts.accepted"]?.int == 1, "\(again)")
            #expect(try await server.arrivals().last?.token == Self.activityToken(22))
        }
    }

    @Test func theBackendSeesTheAppsActivitiesAndHowManyDevicesFollowEach() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...3 { try await server.register(Fixture.device(number), token: Fixture.token(number)) }
            for number in 1...3 { #expect(try await setToken(server, Fixture.device(number), activity: "match-7", Self.activityToken(number)).status == 200) }
            #expect(try await setToken(server, Fixture.device(1), activity: "match-8", Self.activityToken(10)).status == 200)
            #expect(try await setToken(server, Fixture.device(2), activity: "order-1", Self.activityToken(20)).status == 200)

            let first = try await server.master.get("/v1/apps/demo/activities?limit=2").json()
            #expect(first["activities"]?.arrayItems?.compactMap { $0["activityId"]?.string } == ["match-7", "match-8"], "\(first)")
            #expect(first["activities"]?.arrayItems?.compactMap { $0["devices"]?.int } == [3, 1])
            let next = try #require(first["next"]?.string)
            let second = try await server.master.get("/v1/apps/demo/activities?limit=2&after=\(next)").json()
            #expect(second["activities"]?.arrayItems?.compactMap { $0["activityId"]?.string } == ["order-1"], "\(second)")
            #expect(second["next"] == nil)

            let one = try await server.master.get("/v1/apps/demo/activities/match-7").json()
            #expect(one["devices"]?.int == 3, "\(one)")
            #expect(one["firstStartedAt"]?.string != nil && one["lastRegisteredAt"]?.string != nil)
            let none = try await server.master.get("/v1/apps/demo/activities/match-9")
            #expect(none.status == 404, "\(none.text)")
            let bad = try await server.master.get("/v1/apps/demo/activities?after=a%2Fb")
            #expect(bad.status == 400, "\(bad.text)")
            #expect(try bad.json()["field"]?.string == "after", "\(bad.text)")
            // The app key, which every copy of the app holds, does not list them.
            let device = try await server.device.send(.GET, "/v1/apps/demo/activities", headers: server.asDevice(Fixture.device(1)))
            #expect(device.status == 403, "\(device.text)")
        }
    }

    @Test func badPushesToAnActivityAreRefusedNamingTheirField() async throws {
        try await RouterHarness.withServer { server in
            let cases: [(String, String)] = [
                // Not a Live Activity push.
                (Fixture.push(audience: #"{"activity": "m"}"#), "apns.pushType"),
                // A start goes to push-to-start tokens.
                (Self.update(#"{"activity": "m"}"#, event: "start"), "payload.aps.event"),
                (#"{"audience": {"activity": "m"}, "apns": {"pushType": "liveactivity"}, "payload": {"aps": {"event": "update", "content-state": {}}}}"#,
                 "payload.aps.timestamp"),
                (#"{"audience": {"activity": "m"}, "apns": {"pushType": "liveactivity"}, "payload": {"aps": {"event": "end", "timestamp": 1}}}"#,
                 "payload.aps.content-state"),
                (Self.update(#"{"activity": "m"}"#, extra: #", "delivery": "auto""#), "delivery"),
                (Self.update(#"{"activity": "m"}"#, extra: #", "inbox": {}"#), "inbox"),
                (Self.update(#"{"activity": "m", "tags": ["t"]}"#), "audience"),
                (Self.update(#"{"activity": "m", "all": true}"#), "audience"),
                (Self.update(#"{"activity": "no/slash"}"#), "audience.activity"),
                (Self.update(#"{"activity": ""}"#), "audience.activity"),
                (Self.update(#"{"activity": ".."}"#), "audience.activity"),
                // A backend that writes "no user" as null must not widen a user's update to every follower.
                (Self.update(#"{"activity": "m", "aliases": null}"#), "audience.aliases"),
                (Self.update(#"{"activity": "m", "aliases": []}"#), "audience.aliases"),
            ]
            for (body, field) in cases {
                let answer = try await server.master.post("/v1/apps/demo/pushes", body)
                #expect(answer.status == 400, "\(body): \(answer.text)")
                #expect(try answer.json()["field"]?.string == field, "\(body): \(answer.text)")
            }
            #expect(try await server.master.get("/v1/apps/demo/pushes").json()["pushes"]?.arrayItems?.isEmpty == true, "none was stored")
        }
    }

    @Test func badActivityTokenCallsAreRefusedNamingTheirField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let device = Fixture.device(1)
            let cases: [(String, String, Int, String)] = [
                (String(repeating: "x", count: 129), #"{"token": "\#(Self.activityToken(1))"}"#, 400, "activityId"),
                ("a%20b", #"{"token": "\#(Self.activityToken(1))"}"#, 400, "activityId"),
                ("..", #"{"token": "\#(Self.activityToken(1))"}"#, 400, "activityId"),
                ("m", #"{"token": "not hex"}"#, 400, "token"),
                ("m", #"{"token": ""}"#, 400, "token"),
                ("m", #"{}"#, 400, "token"),
                ("m", #"{"token": "\#(Self.activityToken(1))", "activity": "m"}"#, 400, "activity"),
            ]
            for (activity, body, status, field) in cases {
                let response = try await server.device.send(
                    .PUT, "/v1/apps/demo/devices/\(device)/activities/\(activity)", body: body, headers: server.asDevice(device))
                #expect(response.status == status, "\(activity) \(body): \(response.text)")
                #expect(try response.json()["field"]?.string == field, "\(activity) \(body): \(response.text)")
            }
            let unknown = try await server.master.send(
                .PUT, "/v1/apps/demo/devices/\(Fixture.device(9))/activities/m", body: #"{"token": "\#(Self.activityToken(1))"}"#)
            #expect(unknown.status == 404, "\(unknown.text)")
            #expect(try await server.master.get("/v1/apps/demo/devices/\(device)").json()["activities"] == .array([]), "nothing was kept")
        }
    }
}
