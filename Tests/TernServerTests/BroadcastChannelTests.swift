import Foundation
import NIOHTTP1
import TernAPNs
import TernTestSupport
import Testing

/// Broadcast channels through the API: made at APNs (the built-in simulator) under the backend's names, broadcast to,
/// deleted; every bad input a 4xx naming its field, and APNs' refusals told as such.
@Suite(.serialized) struct BroadcastChannelTests {
    static let update = #"{"aps": {"event": "update", "timestamp": 1700000000, "content-state": {"score": "2-1"}}}"#

    @Test func aChannelIsMadeOncePerNameBroadcastToAndDeleted() async throws {
        try await RouterHarness.withServer { server in
            let made = try await server.master.put("/v1/apps/demo/broadcast-channels/match-42", #"{"storage": "mostRecent"}"#)
            #expect(made.status == 201, "\(made.text)")
            let channelID = try #require(try made.json()["channelId"]?.string)
            #expect(try made.json()["storage"]?.string == "mostRecent" && made.json()["name"]?.string == "match-42")
            let atAPNs = try await server.simulator.get("/channels").json()["channels"]?.arrayItems ?? []
            #expect(atAPNs.map { $0["id"]?.string } == [channelID])

            // Asked again (a retry): the same channel, and APNs makes no second one.
            let again = try await server.master.put("/v1/apps/demo/broadcast-channels/match-42", #"{"storage": "mostRecent"}"#)
            #expect(try again.status == 200 && (again.json()["channelId"]?.string) == channelID)
            let changed = try await server.master.put("/v1/apps/demo/broadcast-channels/match-42", #"{"storage": "none"}"#)
            #expect(try changed.status == 409 && (changed.json()["field"]?.string) == "storage", "\(changed.text)")
            #expect(try await server.simulator.get("/channels").json()["channels"]?.arrayItems?.count == 1)

            #expect(try await server.master.put("/v1/apps/demo/broadcast-channels/match-7", #"{"storage": "none"}"#).status == 201)
            let list = try await server.master.get("/v1/apps/demo/broadcast-channels?limit=1")
            #expect(try list.json()["channels"]?.arrayItems?.compactMap { $0["name"]?.string } == ["match-42"])
            let next = try #require(try list.json()["next"]?.string)
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels?after=\(next)").json()["channels"]?.arrayItems?
                .compactMap { $0["name"]?.string } == ["match-7"])
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels/match-7").json()["storage"]?.string == "none")

            let sent = try await server.master.post("/v1/apps/demo/broadcast-channels/match-42/broadcasts", #"{"payload": \#(Self.update), "priority": 5}"#)
            #expect(sent.status == 200, "\(sent.text)")
            #expect(try sent.json()["channelId"]?.string == channelID && sent.json()["uniqueId"]?.string != nil)
            let taken = try #require(try await server.simulator.get("/broadcasts").json()["items"]?.arrayItems?.first)
            #expect(taken["channelID"]?.string == channelID && taken["priority"]?.int == 5)
            // A storing channel keeps it up to 8 hours by default.
            let expiration = try #require(taken["expiration"]?.int)
            #expect(abs(Double(expiration) - Date().addingTimeInterval(8 * 3600).timeIntervalSince1970) < 120)
            #expect(try JSONValue(parsing: Data((taken["payload"]?.string ?? "").utf8))[path: "aps.content-state.score"]?.string == "2-1")

            // The channel's history: newest first, each with APNs' answer and the payload as sent.
            let second = try await server.master.post("/v1/apps/demo/broadcast-channels/match-42/broadcasts", #"{"payload": \#(Self.update)}"#)
            #expect(second.status == 200)
            let history = try await server.master.get("/v1/apps/demo/broadcast-channels/match-42/broadcasts?limit=1")
            #expect(history.status == 200, "\(history.text)")
            let newest = try #require(try history.json()["broadcasts"]?.arrayItems?.first)
            #expect(try newest["id"]?.string == second.json()["id"]?.string && newest["priority"]?.int == 10)
            #expect(try newest["uniqueId"]?.string == second.json()["uniqueId"]?.string && newest["result"]?.string == "delivered")
            #expect(newest[path: "payload.aps.content-state.score"]?.string == "2-1" && newest["reason"] == nil)
            let older = try await server.master.get("/v1/apps/demo/broadcast-channels/match-42/broadcasts?before=\(try #require(try history.json()["next"]?.string))")
            let first = try #require(try older.json()["broadcasts"]?.arrayItems)
            let sentID = try sent.json()["id"]?.string
            #expect(first.count == 1 && first[0]["priority"]?.int == 5 && first[0]["id"]?.string == sentID)
            #expect(first[0]["expiration"]?.int == taken["expiration"]?.int && first[0]["attempts"]?.int == 1)
            #expect(try older.json()["next"] == nil)

            #expect(try await server.master.delete("/v1/apps/demo/broadcast-channels/match-42").status == 204)
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels/match-42").status == 404)
            #expect(try await server.simulator.get("/channels").json()["channels"]?.arrayItems?.count == 1, "deleted at APNs too")
            #expect(try await server.master.post("/v1/apps/demo/broadcast-channels/match-42/broadcasts", #"{"payload": \#(Self.update)}"#).status == 404)
        }
    }

    @Test func badInputIsRefusedNamingItsField() async throws {
        try await RouterHarness.withServer { server in
            #expect(try await server.master.put("/v1/apps/demo/broadcast-channels/bare", #"{"storage": "none"}"#).status == 201)
            let cases: [(String, String, String, String)] = [
                ("PUT", "/v1/apps/demo/broadcast-channels/x", #"{"storage": "forever"}"#, "storage"),
                ("PUT", "/v1/apps/demo/broadcast-channels/x", #"{"storage": "none", "color": "red"}"#, "color"),
                ("PUT", "/v1/apps/demo/broadcast-channels/x", #"{"storage": "none", "environment": "development"}"#, "environment"),
                ("PUT", "/v1/apps/demo/broadcast-channels/a%20b", #"{"storage": "none"}"#, "name"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts", #"{"payload": {"aps": {"alert": "hi"}}}"#, "payload.aps.event"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts",
                 #"{"payload": {"aps": {"event": "start", "timestamp": 1, "content-state": {}}}}"#, "payload.aps.event"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts",
                 #"{"payload": {"aps": {"event": "end", "content-state": {}}}}"#, "payload.aps.timestamp"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts",
                 #"{"payload": {"aps": {"event": "end", "timestamp": 1}}}"#, "payload.aps.content-state"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts", #"{"payload": \#(Self.update), "priority": 1}"#, "priority"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts", #"{"payload": \#(Self.update), "expiration": 1900000000}"#, "expiration"),
                ("POST", "/v1/apps/demo/broadcast-channels/bare/broadcasts",
                 #"{"payload": {"aps": {"event": "update", "timestamp": 1, "content-state": {"s": "\#(String(repeating: "x", count: 5200))"}}}}"#, "payload"),
                ("GET", "/v1/apps/demo/broadcast-channels?after=a%20b", "", "after"),
                ("GET", "/v1/apps/demo/broadcast-channels?limit=0", "", "limit"),
                ("GET", "/v1/apps/demo/broadcast-channels?color=red", "", "color"),
                ("GET", "/v1/apps/demo/broadcast-channels/bare/broadcasts?before=x", "", "before"),
                ("GET", "/v1/apps/demo/broadcast-channels/bare/broadcasts?limit=0", "", "limit"),
                ("GET", "/v1/apps/demo/broadcast-channels/bare/broadcasts?after=1", "", "after"),
            ]
            for (method, path, body, field) in cases {
                let response = try await server.master.send(HTTPMethod(rawValue: method), path, body: body.isEmpty ? nil : body)
                #expect(response.status == 400 && (try? response.json()["field"]?.string) == field, "\(method) \(path): \(response.status) \(response.text)")
            }
            #expect(try await server.simulator.get("/broadcasts").json()["items"]?.arrayItems?.isEmpty == true, "nothing was broadcast")
            #expect(try await server.simulator.get("/channels").json()["channels"]?.arrayItems?.count == 1, "nothing else was made")
        }
    }

    /// The app key ships in every copy of the app: with it, a channel can be read by its name (its id is in every
    /// copy subscribed to it), and none can be made, listed, deleted or broadcast to.
    @Test func theAppKeyReadsAChannelAndDoesNothingElseWithChannels() async throws {
        try await RouterHarness.withServer { server in
            let made = try await server.master.put("/v1/apps/demo/broadcast-channels/match", #"{"storage": "none"}"#)
            #expect(made.status == 201)
            let read = try await server.device.get("/v1/apps/demo/broadcast-channels/match")
            #expect(read.status == 200 && read.text == made.text, "the same channel: \(read.text)")
            #expect(try await server.device.get("/v1/apps/demo/broadcast-channels/other").status == 404)
            #expect(try await server.api.with(bearer: "tak_wrong").get("/v1/apps/demo/broadcast-channels/match").status == 401)
            let calls: [(HTTPMethod, String, String?)] = [
                (.PUT, "/v1/apps/demo/broadcast-channels/mine", #"{"storage": "none"}"#),
                (.PUT, "/v1/apps/demo/broadcast-channels/match", #"{"storage": "none"}"#),
                (.GET, "/v1/apps/demo/broadcast-channels", nil),
                (.DELETE, "/v1/apps/demo/broadcast-channels/match", nil),
                (.POST, "/v1/apps/demo/broadcast-channels/match/broadcasts", #"{"payload": \#(Self.update)}"#),
                (.GET, "/v1/apps/demo/broadcast-channels/match/broadcasts", nil),
            ]
            for (method, path, body) in calls {
                let response = try await server.device.send(method, path, body: body)
                #expect(response.status == 403, "\(method) \(path): \(response.status)")
            }
            #expect(try await server.simulator.get("/broadcasts").json()["items"]?.arrayItems?.isEmpty == true)
            #expect(try await server.simulator.get("/channels").json()["channels"]?.arrayItems?.count == 1)
        }
    }

    /// The built-in simulator keeps its channels as Apple does: one made before a restart takes broadcasts after it.
    @Test func aChannelIsBroadcastToAfterTheServerAndItsBuiltInSimulatorRestart() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (channelID, masterSecret) = try await RouterHarness.withServer(folder: folder) { server in
            let made = try await server.master.put("/v1/apps/demo/broadcast-channels/match-9", #"{"storage": "none"}"#)
            #expect(made.status == 201, "\(made.text)")
            return (try #require(try made.json()["channelId"]?.string), server.master.bearer)
        }
        // The demo's secrets are shown on the first start only.
        try await RouterHarness.withServer(folder: folder) { server in
            let atAPNs = try await server.simulator.get("/channels").json()["channels"]?.arrayItems ?? []
            #expect(atAPNs.map { $0["id"]?.string } == [channelID])
            let sent = try await server.master.with(bearer: masterSecret).post("/v1/apps/demo/broadcast-channels/match-9/broadcasts", #"{"payload": \#(Self.update)}"#)
            #expect(try sent.status == 200 && (sent.json()["channelId"]?.string) == channelID, "\(sent.text)")
        }
    }

    /// A channel APNs no longer has (deleted outside Tern, or the simulator reset) is told as such: 409, and its
    /// deletion here still works.
    @Test func aChannelAPNsForgotIsAConflictAndCanBeDeleted() async throws {
        let logs = LogRecorder()
        try await RouterHarness.withServer(logs: logs) { server in
            #expect(try await server.master.put("/v1/apps/demo/broadcast-channels/gone", #"{"storage": "none"}"#).status == 201)
            #expect(try await server.simulator.post("/reset").status == 204)
            for _ in 0..<5 {
                let sent = try await server.master.post("/v1/apps/demo/broadcast-channels/gone/broadcasts", #"{"payload": \#(Self.update)}"#)
                #expect(try sent.status == 409 && (sent.json()["error"]?.string) == "channelNotRegistered", "\(sent.text)")
            }
            // Five refusals in a row are one line, not five.
            #expect(logs.messages(containing: "APNs refuses broadcasts").count == 1, "\(logs.messages(containing: "broadcast"))")
            // Each is in the channel's history with APNs' reason.
            let history = try await server.master.get("/v1/apps/demo/broadcast-channels/gone/broadcasts").json()["broadcasts"]?.arrayItems ?? []
            #expect(history.count == 5)
            #expect(history.allSatisfy { $0["result"]?.string == "rejected" && $0["reason"]?.string == "ChannelNotRegistered" && $0["uniqueId"] == nil })
            #expect(try await server.master.delete("/v1/apps/demo/broadcast-channels/gone").status == 204)
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels").json()["channels"]?.arrayItems?.isEmpty == true)
        }
    }

    @Test func anAppOnTheLegacyProtocolHasNoChannels() async throws {
        try await RouterHarness.withServer { server in
            #expect(try await server.admin.patch("/v1/apps/demo", #"{"transport": "legacy"}"#).status == 200)
            let response = try await server.master.put("/v1/apps/demo/broadcast-channels/match", #"{"storage": "none"}"#)
            #expect(try response.status == 409 && (response.json()["error"]?.string) == "legacyTransport", "\(response.status) \(response.text)")
        }
    }
}
