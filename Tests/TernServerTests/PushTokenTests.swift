import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// A device's VoIP (PushKit) and push-to-start (ActivityKit) tokens: the app registers them beside its device token
/// (`PUT …/devices/{id}/push-tokens/{kind}`), and a `voip` push, or a `liveactivity` push that starts an activity, to
/// a user, a tag or everyone goes to them. APNs' verdict on a dead one deactivates it, not the device.
struct PushTokenTests {
    /// A 32-byte VoIP token from a number, unlike any ``Fixture/token(_:)``.
    private static func voipToken(_ number: Int) -> String {
        String(repeating: "5e", count: 28) + String(format: "%08x", number)
    }

    private func setToken(
        _ server: RoutedServer, _ device: String, kind: String = "voip", _ token: String
    ) async throws -> HTTPTestResponse {
        try await server.device.send(
            .PUT, "/v1/apps/demo/devices/\(device)/push-tokens/\(kind)", body: #"{"token": "\#(token)"}"#, headers: server.asDevice(device))
    }

    private static let voip = #", "apns": {"pushType": "voip"}"#

    @Test func aVoIPPushToAUserGoesToEachDevicesVoIPTokenAndPassesOverDevicesWithoutOne() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...3 {
                try await server.register(Fixture.device(number), token: Fixture.token(number), alias: "callee", tags: ["t"])
            }
            for number in 1...2 {
                let set = try await setToken(server, Fixture.device(number), Self.voipToken(number).uppercased())
                #expect(set.status == 200, "\(set.text)")
                #expect(try set.json()["token"]?.string == Self.voipToken(number), "kept as lowercase hex")
                #expect(try set.json()["active"] == .bool(true))
            }
            // The device shows its VoIP token beside its device token.
            let device = try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(1))", headers: server.asDevice(Fixture.device(1))).json()
            #expect(device[path: "pushTokens.voip.token"]?.string == Self.voipToken(1), "\(device)")
            #expect(device["token"]?.string == Fixture.token(1))
            // The backend sees which of the user's phones a call can ring.
            let listed = try await server.master.get("/v1/apps/demo/devices?alias=callee").json()
            let callable = listed["devices"]?.arrayItems?.compactMap { $0[path: "pushTokens.voip.token"]?.string }
            #expect(callable == [Self.voipToken(1), Self.voipToken(2)], "\(listed)")
            #expect(listed["devices"]?.arrayItems?.count == 3)
            let tagged = try await server.master.get("/v1/apps/demo/devices?tag=t").json()
            #expect(tagged["devices"]?.arrayItems?.compactMap { $0[path: "pushTokens.voip.token"]?.string }.count == 2, "\(tagged)")

            for audience in [#"{"aliases": ["callee"]}"#, #"{"tags": ["t"]}"#, #"{"all": true}"#] {
                let push = try await server.push(Fixture.push(audience: audience, title: "Incoming call", extra: Self.voip))
                #expect(push["status"]?.string == "completed")
                #expect(push[path: "counts.targeted"]?.int == 2, "\(audience): \(push)")
                #expect(push[path: "counts.accepted"]?.int == 2, "\(audience): \(push)")
            }
            let arrivals = try await server.arrivals()
            #expect(arrivals.count == 6)
            #expect(Set(arrivals.map(\.token)) == [Self.voipToken(1), Self.voipToken(2)])
            #expect(Set(arrivals.map(\.topic)) == ["com.example.tern.demo.voip"])

            // An alert push to the same user still goes to the device tokens, all three.
            let alert = try await server.push(Fixture.push(audience: #"{"aliases": ["callee"]}"#))
            #expect(alert[path: "counts.accepted"]?.int == 3)
            #expect(Set(try await server.arrivals().suffix(3).map(\.token)) == Set((1...3).map(Fixture.token)))
        }
    }

    @Test func aDeadVoIPTokenIsDeactivatedWhileTheDeviceKeepsItsDeviceTokenAndSettingItAgainRevivesIt() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "callee")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "callee")
            for number in 1...2 { #expect(try await setToken(server, Fixture.device(number), Self.voipToken(number)).status == 200) }
            // APNs: VoIP token 1 has been dead since a minute from now (after it was set); token 2 since an hour ago
            // (before it was set: the app registered it again since, so it stays).
            let now = Date().timeIntervalSince1970
            #expect(try await server.simulator.post(
                "/tokens/\(Self.voipToken(1))/unregister", #"{"timestamp": \#(Int64((now + 60) * 1000))}"#).status == 204)
            #expect(try await server.simulator.post(
                "/tokens/\(Self.voipToken(2))/unregister", #"{"timestamp": \#(Int64((now - 3600) * 1000))}"#).status == 204)

            let call = try await server.push(Fixture.push(audience: #"{"aliases": ["callee"]}"#, extra: Self.voip))
            #expect(call[path: "counts.failed"]?.int == 2, "\(call)")
            #expect(call[path: "counts.pruned"]?.int == 1, "\(call)")
            #expect(call[path: "counts.failedByReason.Unregistered"]?.int == 2)

            let one = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(one["active"] == .bool(true), "the device token is not the VoIP token")
            #expect(one[path: "pushTokens.voip.active"] == .bool(false), "\(one)")
            #expect(one[path: "pushTokens.voip.deactivationReason"]?.string == "Unregistered")
            let two = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(2))").json()
            #expect(two[path: "pushTokens.voip.active"] == .bool(true), "registered after the timestamp: \(two)")
            // The app's backend never held the VoIP token: no token event for it.
            #expect(try await server.master.get("/v1/apps/demo/token-events").json()["events"]?.arrayItems?.isEmpty == true)

            // The next call passes the dead token over; the device token still gets alert pushes.
            let next = try await server.push(Fixture.push(audience: #"{"devices": ["\#(Fixture.device(1))"]}"#, extra: Self.voip))
            #expect(next[path: "counts.targeted"]?.int == 0, "\(next)")
            let alert = try await server.push(Fixture.push(audience: #"{"devices": ["\#(Fixture.device(1))"]}"#))
            #expect(alert[path: "counts.accepted"]?.int == 1, "\(alert)")

            // The app sets it again at its next launch (PushKit gave it again): it is active, and gets calls.
            _ = try await server.simulator.delete("/tokens/\(Self.voipToken(1))")  // the app is back
            #expect(try await setToken(server, Fixture.device(1), Self.voipToken(1)).status == 200)
            let revived = try await server.push(Fixture.push(audience: #"{"devices": ["\#(Fixture.device(1))"]}"#, extra: Self.voip))
            #expect(revived[path: "counts.accepted"]?.int == 1, "\(revived)")
        }
    }

    @Test func aTokenMovesToTheDeviceThatSetsItAndGoesWithItsDevice() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...2 { try await server.register(Fixture.device(number), token: Fixture.token(number), tags: ["t"]) }
            #expect(try await setToken(server, Fixture.device(1), Self.voipToken(7)).status == 200)
            #expect(try await setToken(server, Fixture.device(2), Self.voipToken(7)).status == 200)
            let first = try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()
            #expect(first["pushTokens"] == .object([:]), "\(first)")
            let call = try await server.push(Fixture.push(audience: #"{"tags": ["t"]}"#, extra: Self.voip))
            #expect(call[path: "counts.accepted"]?.int == 1)

            // Removed, it gets no more calls; removed again, there is none.
            let path = "/v1/apps/demo/devices/\(Fixture.device(2))/push-tokens/voip"
            #expect(try await server.device.send(.DELETE, path, headers: server.asDevice(Fixture.device(2))).status == 204)
            let again = try await server.device.send(.DELETE, path, headers: server.asDevice(Fixture.device(2)))
            #expect(again.status == 404, "\(again.text)")
            #expect(try await server.push(Fixture.push(audience: #"{"tags": ["t"]}"#, extra: Self.voip))[path: "counts.targeted"]?.int == 0)

            // A deleted device's token goes with it.
            #expect(try await setToken(server, Fixture.device(1), Self.voipToken(8)).status == 200)
            #expect(try await server.master.delete("/v1/apps/demo/devices/\(Fixture.device(1))").status == 204)
            #expect(try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: Self.voip))[path: "counts.targeted"]?.int == 0)
        }
    }

    @Test func aLiveActivityPushToDevicesStartsAnActivityThroughTheirPushToStartTokens() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "fan")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "fan")
            let set = try await setToken(server, Fixture.device(1), kind: "pushToStart", Self.voipToken(1))
            #expect(set.status == 200, "\(set.text)")
            #expect(try set.json()["kind"]?.string == "pushToStart")

            func liveActivity(_ event: String) -> String {
                #"""
                {"audience": {"aliases": ["fan"]}, "apns": {"pushType": "liveactivity"},
                 "payload": {"aps": {"timestamp": 1764547200, "event": "\#(event)", "content-state": {"score": "1-0"},
                  "attributes-type": "MatchAttributes", "attributes": {"match": "A-B"}, "alert": {"title": "Kick-off", "body": "A-B"}}}}
                """#
            }
            // An update has no place on a push-to-start token: it goes to the activity's own token.
            let update = try await server.master.post("/v1/apps/demo/pushes", liveActivity("update"))
            #expect(update.status == 400, "\(update.text)")
            #expect(try update.json()["field"]?.string == "payload.aps.event")

            let start = try await server.push(liveActivity("start"))
            #expect(start[path: "counts.targeted"]?.int == 1, "\(start)")
            #expect(start[path: "counts.accepted"]?.int == 1, "\(start)")
            let arrival = try #require(try await server.arrivals().last)
            #expect(arrival.token == Self.voipToken(1))
            #expect(arrival.topic == "com.example.tern.demo.push-type.liveactivity")
        }
    }

    /// iOS 18: a start names the broadcast channel the activity is to follow, by the name the backend gave it; the
    /// payload carries APNs' id, so a backend never handles APNs' ids.
    @Test func aStartNamesTheBroadcastChannelTheActivityFollows() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "fan")
            #expect(try await setToken(server, Fixture.device(1), kind: "pushToStart", Self.voipToken(1)).status == 200)
            let made = try await server.master.put("/v1/apps/demo/broadcast-channels/final", #"{"storage": "mostRecent"}"#)
            let channelID = try #require(try made.json()["channelId"]?.string)

            func start(_ channel: String?, event: String = "start", aps extra: String = "", payload: Bool = true) -> String {
                let content =
                    payload
                    ? #""payload": {"aps": {"timestamp": 1764547200, "event": "\#(event)", "content-state": {"score": "0-0"}\#(extra),"#
                        + #" "attributes-type": "MatchAttributes", "attributes": {"match": "A-B"}, "alert": {"title": "Kick-off"}}}"#
                    : #""notification": {"title": "Kick-off"}"#
                return #"{"audience": {"aliases": ["fan"]}, "apns": {"pushType": "liveactivity"}, \#(content)"#
                    + (channel.map { #", "broadcastChannel": "\#($0)""# } ?? "") + "}"
            }
            let pushed = try await server.push(start("final"))
            #expect(pushed[path: "counts.accepted"]?.int == 1, "\(pushed)")
            let arrival = try #require(try await server.arrivals().last)
            #expect(arrival.token == Self.voipToken(1))
            let aps = try JSONValue(parsing: Data(arrival.payload.utf8))["aps"]
            #expect(aps?["input-push-channel"]?.string == channelID && aps?["event"]?.string == "start")

            let refusals: [(String, String)] = [
                (start("other"), "broadcastChannel"),
                (start("a b"), "broadcastChannel"),
                (start("final", event: "update"), "broadcastChannel"),
                (start("final", payload: false), "broadcastChannel"),
                (start("final", aps: #", "input-push-channel": "\#(channelID)""#), "payload.aps.input-push-channel"),
            ]
            for (body, field) in refusals {
                let refused = try await server.master.post("/v1/apps/demo/pushes", body)
                #expect(refused.status == 400 && (try? refused.json()["field"]?.string) == field, "\(body): \(refused.status) \(refused.text)")
            }
            #expect(try await server.arrivals().count == 1, "nothing more was sent")

            // A scheduled start holds its channel: deleting it is refused, naming the push, until the push is cancelled.
            let sendAt = ISO8601DateFormatter().string(from: Date().addingTimeInterval(30 * 86_400))
            let scheduled = try await server.master.post(
                "/v1/apps/demo/pushes", String(start("final").dropLast()) + #", "sendAt": "\#(sendAt)"}"#)
            #expect(scheduled.status == 202, "\(scheduled.text)")
            let pushID = try #require(try scheduled.json()["id"]?.string)
            let refused = try await server.master.delete("/v1/apps/demo/broadcast-channels/final")
            #expect(refused.status == 409, "\(refused.text)")
            #expect(refused.text.contains("push \(pushID), scheduled for \(sendAt.dropLast())"), "\(refused.text)")
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels/final").status == 200, "kept")
            #expect(try await server.master.post("/v1/apps/demo/pushes/\(pushID)/cancel", "").status == 200)
            #expect(try await server.master.delete("/v1/apps/demo/broadcast-channels/final").status == 204)
        }
    }

    @Test func badCallsAreRefusedNamingTheirField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            let device = Fixture.device(1)
            func put(_ path: String, _ body: String) async throws -> HTTPTestResponse {
                try await server.device.send(.PUT, "/v1/apps/demo/devices/\(device)/push-tokens/\(path)", body: body, headers: server.asDevice(device))
            }
            let cases: [(String, String, Int, String)] = [
                ("fcm", #"{"token": "\#(Self.voipToken(1))"}"#, 400, "kind"),
                ("voip", #"{"token": "not hex"}"#, 400, "token"),
                ("voip", #"{"token": ""}"#, 400, "token"),
                ("voip", #"{"token": "\#(Self.voipToken(1))", "environment": "production"}"#, 400, "environment"),
                ("voip", #"{}"#, 400, "token"),
                ("voip", #"["\#(Self.voipToken(1))"]"#, 400, ""),
            ]
            for (kind, body, status, field) in cases {
                let answer = try await put(kind, body)
                #expect(answer.status == status, "\(kind) \(body): \(answer.text)")
                if !field.isEmpty { #expect(try answer.json()["field"]?.string == field, "\(kind) \(body): \(answer.text)") }
            }
            let unknown = try await server.master.send(
                .PUT, "/v1/apps/demo/devices/\(Fixture.device(9))/push-tokens/voip", body: #"{"token": "\#(Self.voipToken(1))"}"#)
            #expect(unknown.status == 404, "\(unknown.text)")
            // Nothing was kept by the refusals.
            #expect(try await server.master.get("/v1/apps/demo/devices/\(device)").json()["pushTokens"] == .object([:]))

            // A VoIP push to devices goes through APNs, not over the online channel.
            let online = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"aliases": ["u"]}"#, extra: #", "apns": {"pushType": "voip"}, "delivery": "auto""#))
            #expect(online.status == 400, "\(online.text)")
            #expect(try online.json()["field"]?.string == "delivery")
        }
    }
}
