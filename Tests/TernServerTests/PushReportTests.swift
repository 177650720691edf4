import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// What devices report of pushes that came through APNs: every push made from `notification` carries its id
/// (`tern.pushId`); the app reports the user's open with it (`POST …/devices/{id}/opens {"pushId"}`) and its
/// Notification Service Extension the push's arrival (`POST …/devices/{id}/acks {"pushId"}`), and the push counts each
/// device once for each. The app key is public, so a report is taken only from a device the push was handed out to.
struct PushReportTests {
    private func open(_ server: RoutedServer, _ device: String, _ body: String) async throws -> HTTPTestResponse {
        try await server.device.send(.POST, "/v1/apps/demo/devices/\(device)/opens", body: body, headers: server.asDevice(device))
    }

    private func receipt(_ server: RoutedServer, _ device: String, _ body: String) async throws -> HTTPTestResponse {
        try await server.device.send(.POST, "/v1/apps/demo/devices/\(device)/acks", body: body, headers: server.asDevice(device))
    }

    private func opened(_ server: RoutedServer, _ pushID: String) async throws -> Int? {
        try await server.master.get("/v1/apps/demo/pushes/\(pushID)").json()[path: "counts.opened"]?.int
    }

    @Test func aPushCarriesItsIdAndCountsEachDeviceThatOpenedItOnce() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...3 {
                try await server.register(Fixture.device(number), token: Fixture.token(number), tags: number < 3 ? ["news"] : ["sport"])
            }
            let push = try await server.push(Fixture.push(audience: #"{"tags": ["news"]}"#))
            let pushID = try #require(push["id"]?.string)
            #expect(push["status"]?.string == "completed")
            #expect(push[path: "counts.opened"]?.int == 0)

            // The notification says which push it is, beside aps.
            let arrival = try #require(try await server.arrivals().first { $0.token == Fixture.token(1) })
            let payload = try JSONValue(parsing: Data(arrival.payload.utf8))
            #expect(payload[path: "tern.pushId"]?.string == pushID, "\(arrival.payload)")
            #expect(payload[path: "tern.messageId"] == nil, "no inbox message")

            // Each device counts once, however often it reports; the id in capitals is the same push.
            #expect(try await open(server, Fixture.device(1), #"{"pushId": "\#(pushID)"}"#).status == 204)
            #expect(try await open(server, Fixture.device(1), #"{"pushId": "\#(pushID.uppercased())"}"#).status == 204)
            #expect(try await open(server, Fixture.device(2), #"{"pushId": "\#(pushID)"}"#).status == 204)
            #expect(try await opened(server, pushID) == 2)

            // A device the push did not go to cannot count an open of it, nor can one registered after it.
            let outside = try await open(server, Fixture.device(3), #"{"pushId": "\#(pushID)"}"#)
            #expect(outside.status == 404, "\(outside.text)")
            try await server.register(Fixture.device(4), token: Fixture.token(4), tags: ["news"])
            #expect(try await open(server, Fixture.device(4), #"{"pushId": "\#(pushID)"}"#).status == 404)
            // Nor an id that names no push of the app.
            #expect(try await open(server, Fixture.device(1), #"{"pushId": "\#(UUID().uuidString)"}"#).status == 404)
            #expect(try await opened(server, pushID) == 2)

            // Reporting it needs the device's own secret, like every device call.
            let withoutSecret = try await server.device.send(
                .POST, "/v1/apps/demo/devices/\(Fixture.device(1))/opens", body: #"{"pushId": "\#(pushID)"}"#)
            #expect(withoutSecret.status == 403, "\(withoutSecret.text)")
            let asAnother = try await server.device.send(
                .POST, "/v1/apps/demo/devices/\(Fixture.device(3))/opens", body: #"{"pushId": "\#(pushID)"}"#,
                headers: server.asDevice(Fixture.device(1)))
            #expect(asAnother.status == 403, "\(asAnother.text)")

            // Who opened it, for the app's backend: a page at a time, by device id.
            let firstAnswer = try await server.master.get("/v1/apps/demo/pushes/\(pushID)/reports?limit=1")
            #expect(firstAnswer.status == 200, "\(firstAnswer.text)")
            let firstPage = try firstAnswer.json()
            #expect(firstPage[path: "next"]?.string == Fixture.device(1))
            guard case .array(let reported)? = firstPage["reports"] else {
                Issue.record("no reports: \(firstPage)")
                return
            }
            #expect(reported.map { $0["deviceId"]?.string } == [Fixture.device(1)])
            #expect(reported.first?["openedAt"]?.string != nil && reported.first?["receivedAt"] == nil)
            let secondPage = try await server.master.get("/v1/apps/demo/pushes/\(pushID)/reports?limit=1&after=\(Fixture.device(1))").json()
            guard case .array(let rest)? = secondPage["reports"] else {
                Issue.record("no reports: \(secondPage)")
                return
            }
            #expect(rest.map { $0["deviceId"]?.string } == [Fixture.device(2)] && secondPage["next"] == nil)
            let badCursor = try await server.master.get("/v1/apps/demo/pushes/\(pushID)/reports?after=nope")
            #expect(badCursor.status == 400, "\(badCursor.text)")
            #expect(try badCursor.json()["field"]?.string == "after")
            #expect(try await server.master.get("/v1/apps/demo/pushes/\(UUID().uuidString.lowercased())/reports").status == 404)
            #expect(try await server.device.get("/v1/apps/demo/pushes/\(pushID)/reports").status == 403, "the backend's, not a device's")

            // The console's list of pushes says how many opened it, of those APNs accepted it for.
            let console = ConsoleBrowser(server)
            _ = try await console.signIn(try #require(server.master.bearer))
            #expect(try await console.get("/console/apps/demo/pushes").text.contains("2 (100.0%)"))

            // The listing of pushes says it too.
            guard case .array(let listed)? = try await server.master.get("/v1/apps/demo/pushes").json()["pushes"] else {
                Issue.record("no list of pushes")
                return
            }
            #expect(listed.first { $0["id"]?.string == pushID }?[path: "counts.opened"]?.int == 2)
        }
    }

    @Test func anExtensionsReceiptOfAPushCountsEachDeviceOnceAndOnlyForItsRecipients() async throws {
        try await RouterHarness.withServer { server in
            for number in 1...3 {
                try await server.register(Fixture.device(number), token: Fixture.token(number), tags: number < 3 ? ["news"] : ["sport"])
            }
            let push = try await server.push(Fixture.push(audience: #"{"tags": ["news"]}"#, extra: #", "apns": {"pushType": "alert"}"#))
            let pushID = try #require(push["id"]?.string)
            #expect(push[path: "counts.received"]?.int == 0)

            let first = try await receipt(server, Fixture.device(1), #"{"pushId": "\#(pushID)"}"#)
            #expect(first.status == 200, "\(first.text)")
            #expect(try first.json()["acked"]?.int == 1)
            #expect(try await receipt(server, Fixture.device(1), #"{"pushId": "\#(pushID)"}"#).json()["acked"]?.int == 0, "once")
            #expect(try await receipt(server, Fixture.device(3), #"{"pushId": "\#(pushID)"}"#).status == 404, "not its push")
            let view = try await server.master.get("/v1/apps/demo/pushes/\(pushID)").json()
            #expect(view[path: "counts.received"]?.int == 1)
            #expect(view[path: "counts.opened"]?.int == 0, "arrived is not opened")

            for (body, field) in [
                (#"{"pushId": "nope"}"#, "pushId"), (#"{"ids": ["\#(pushID)"], "pushId": "\#(pushID)"}"#, "pushId"), ("{}", "ids"),
            ] {
                let refused = try await receipt(server, Fixture.device(1), body)
                #expect(refused.status == 400, "\(body): \(refused.text)")
                #expect(try refused.json()["field"]?.string == field, "\(body): \(refused.text)")
            }
            // An online push's counts are its messages': no received.
            let online = try await server.push(Fixture.push(audience: #"{"tags": ["news"]}"#, extra: #", "delivery": "online""#))
            #expect(online[path: "counts.received"] == nil)
            let byPush = try await receipt(server, Fixture.device(1), #"{"pushId": "\#(try #require(online["id"]?.string))"}"#)
            #expect(byPush.status == 400, "\(byPush.text)")
            #expect(try byPush.json()["field"]?.string == "pushId")
        }
    }

    @Test func anOpenOfAPushNotHandedOutYetOrSentOverTheChannelIsRefused() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            // Scheduled for tomorrow: nothing was handed out.
            let scheduled = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, extra: #", "sendAt": "\#(Self.tomorrow())""#))
            #expect(scheduled.status == 202, "\(scheduled.text)")
            let scheduledID = try #require(try scheduled.json()["id"]?.string)
            let notYet = try await open(server, Fixture.device(1), #"{"pushId": "\#(scheduledID)"}"#)
            #expect(notYet.status == 404, "\(notYet.text)")

            // An online push's opens are its messages': reported by messageId.
            let online = try await server.push(Fixture.push(audience: #"{"all": true}"#, extra: #", "delivery": "online""#))
            let onlineID = try #require(online["id"]?.string)
            let byPush = try await open(server, Fixture.device(1), #"{"pushId": "\#(onlineID)"}"#)
            #expect(byPush.status == 400, "\(byPush.text)")
            #expect(try byPush.json()["field"]?.string == "pushId")
        }
    }

    @Test func aBadOpenIs400NamingItsField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let id = UUID().uuidString
            let cases = [
                (#"{"pushId": "nope"}"#, "pushId"),
                (#"{"pushId": 7}"#, "pushId"),
                (#"{"pushId": "\#(id)", "messageId": "\#(id)"}"#, "pushId"),
                ("{}", "messageId"),
                (#"{"pushId": "\#(id)", "at": 1}"#, "at"),
            ]
            for (body, field) in cases {
                let refused = try await open(server, Fixture.device(1), body)
                #expect(refused.status == 400, "\(body): \(refused.text)")
                #expect(try refused.json()["field"]?.string == field, "\(body): \(refused.text)")
            }
        }
    }

    @Test func aRawPayloadIsSentAsGivenAndTheKeyIsTernsInANotification() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            let raw = try await server.push(#"{"audience": {"all": true}, "payload": {"aps": {"alert": "raw"}, "k": 1}}"#)
            #expect(raw["status"]?.string == "completed")
            let arrival = try #require(try await server.arrivals().last { $0.token == Fixture.token(1) })
            #expect(arrival.payload == #"{"aps":{"alert":"raw"},"k":1}"#)

            let taken = try await server.master.post(
                "/v1/apps/demo/pushes", #"{"audience": {"all": true}, "notification": {"title": "x", "data": {"tern": 1}}}"#)
            #expect(taken.status == 400, "\(taken.text)")
            #expect(try taken.json()["field"]?.string == "notification.data.tern")
        }
    }

    /// RFC 3339, a day from now.
    private static func tomorrow() -> String {
        ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
    }
}
