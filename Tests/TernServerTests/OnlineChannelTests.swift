import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// The online channel (README, "The online channel"): devices connected over real WebSockets to a running server,
/// pushes with `delivery` `online` and `auto`, and the built-in simulator's log for what went through APNs.
@Suite(.serialized)
struct OnlineChannelTests {
    /// A fresh device registered with the demo app's key: its id, token and secret.
    private func newDevice(_ server: RunningServer) async throws -> (id: String, token: String, secret: String) {
        let id = UUID().uuidString.lowercased()
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        try await server.register(id, token: token)
        return (id, token, try #require(server.deviceSecrets[id]))
    }

    private func connect(_ server: RunningServer, _ device: (id: String, token: String, secret: String), after: Int64? = nil) -> TestDevice {
        TestDevice(port: server.server.boundPort!, deviceID: device.id, appKey: server.device.bearer, secret: device.secret, after: after)
    }

    /// `device` connected, the upgrade proven by a first message ("probe") that it has read.
    private func connected(_ server: RunningServer, _ device: (id: String, token: String, secret: String)) async throws -> TestDevice {
        let connection = connect(server, device)
        _ = try await pushOnline(server, to: device.id, title: "probe")
        _ = try await connection.next()
        return connection
    }

    private func pushOnline(_ server: RunningServer, to device: String, title: String, extra: String = "") async throws -> JSONValue {
        try await server.push(#"{"audience": {"devices": ["\#(device)"]}, "notification": {"title": "\#(title)"}, "delivery": "online"\#(extra)}"#)
    }

    private func arrivals(_ server: RunningServer, token: String) async throws -> [Arrival] {
        try await server.arrivals().filter { $0.token == token }
    }

    private func pushView(_ server: RunningServer, _ id: String) async throws -> JSONValue {
        try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
    }

    @Test func aConnectedDeviceGetsTheMessageOverItsConnectionAndItsAckIsCounted() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let connection = connect(server, device)
        // Whether or not the connection is registered when the push is kept, the message is read from the store.
        let push = try await pushOnline(server, to: device.id, title: "Hi")
        let frame = try await connection.next()
        #expect(frame["type"]?.string == "message")
        #expect(frame["sequence"]?.int == 1)
        #expect(frame["pushId"]?.string == push["id"]?.string)
        #expect(frame[path: "notification.title"]?.string == "Hi")
        let messageID = try #require(frame["id"]?.string)
        connection.ack([messageID])
        let pushID = try #require(push["id"]?.string)
        try await waitUntil("the ack is counted") { try await pushView(server, pushID)[path: "counts.acked"]?.int == 1 }
        let view = try await pushView(server, pushID)
        #expect(view[path: "counts.deliveredOnline"]?.int == 1)
        #expect(view[path: "counts.fellBackToAPNs"]?.int == 0)
        #expect(view[path: "counts.accepted"]?.int == 1)
        #expect(try await arrivals(server, token: device.token).isEmpty, "an online message went through APNs")

        // A bad or unknown body is a 400 naming the field.
        for (body, field) in [(#"{"messageId": "nope"}"#, "messageId"), (#"{"messageId": "\#(messageID)", "at": 1}"#, "at"), ("{}", "messageId")] {
            let refused = try await server.device.send(
                .POST, "/v1/apps/demo/devices/\(device.id)/opens", body: body, headers: server.asDevice(device.id))
            #expect(refused.status == 400, "\(body): \(refused.text)")
            #expect(try refused.json()["field"]?.string == field, "\(body): \(refused.text)")
        }
        // Opened: counted once, and another device's message id is not this device's.
        let opened = try await server.device.send(
            .POST, "/v1/apps/demo/devices/\(device.id)/opens", body: #"{"messageId": "\#(messageID)"}"#, headers: server.asDevice(device.id))
        #expect(opened.status == 204, "\(opened.text)")
        let again = try await server.device.send(
            .POST, "/v1/apps/demo/devices/\(device.id)/opens", body: #"{"messageId": "\#(messageID)"}"#, headers: server.asDevice(device.id))
        #expect(again.status == 204)
        #expect(try await pushView(server, pushID)[path: "counts.opened"]?.int == 1)
        let other = try await newDevice(server)
        let notItsOwn = try await server.device.send(
            .POST, "/v1/apps/demo/devices/\(other.id)/opens", body: #"{"messageId": "\#(messageID)"}"#, headers: server.asDevice(other.id))
        #expect(notItsOwn.status == 404, "\(notItsOwn.text)")
        await connection.close()
    }

    /// A Notification Service Extension's receipt: the acknowledgement of a message that came through APNs, made
    /// over HTTP, so the app's own connection (if it has one) is not replaced by the extension's.
    @Test func messagesAcknowledgedOverHTTPAreCountedAndNotSentAgainOverTheConnection() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let first = try await pushOnline(server, to: device.id, title: "first")
        let second = try await pushOnline(server, to: device.id, title: "second")
        let firstID = try #require(first["id"]?.string)
        // The ids a device knows: the message ids of the pushes (a name-based UUID of push and device).
        let connection = connect(server, device)
        let frames = [try await connection.next(), try await connection.next()]
        let messageIDs = try frames.map { try #require($0["id"]?.string) }
        await connection.close()

        func ack(_ body: String, as deviceID: String) async throws -> HTTPTestResponse {
            try await server.device.send(.POST, "/v1/apps/demo/devices/\(deviceID)/acks", body: body, headers: server.asDevice(deviceID))
        }
        // Another device cannot acknowledge this one's messages: nothing of theirs is counted.
        let other = try await newDevice(server)
        let notItsOwn = try await ack(#"{"ids": ["\#(messageIDs[0])"]}"#, as: other.id)
        #expect(notItsOwn.status == 200, "\(notItsOwn.text)")
        #expect(try notItsOwn.json()["acked"]?.int == 0)

        let acked = try await ack(#"{"ids": ["\#(messageIDs[0].uppercased())"]}"#, as: device.id)
        #expect(acked.status == 200, "\(acked.text)")
        #expect(try acked.json()["acked"]?.int == 1)
        #expect(try await ack(#"{"ids": ["\#(messageIDs[0])"]}"#, as: device.id).json()["acked"]?.int == 0, "once")
        #expect(try await pushView(server, firstID)[path: "counts.acked"]?.int == 1)
        // The next connection resumes with what is not acknowledged: the second message only.
        let again = connect(server, device)
        #expect(try await again.next()[path: "notification.title"]?.string == "second")
        await again.close()

        // Bad input: a 400 naming the field, nothing acknowledged.
        let tooMany = "[" + Array(repeating: #""\#(messageIDs[1])""#, count: 1001).joined(separator: ",") + "]"
        for (body, field) in [
            (#"{"ids": []}"#, "ids"), (#"{"ids": ["nope"]}"#, "ids"), (#"{"ids": \#(tooMany)}"#, "ids"), ("{}", "ids"),
            (#"{"ids": ["\#(messageIDs[1])"], "at": 1}"#, "at"),
        ] {
            let refused = try await ack(body, as: device.id)
            #expect(refused.status == 400, "\(body.prefix(60)): \(refused.text)")
            #expect(try refused.json()["field"]?.string == field, "\(body.prefix(60)): \(refused.text)")
        }
        #expect(try await pushView(server, try #require(second["id"]?.string))[path: "counts.acked"]?.int == 0)
    }

    @Test func anOfflineDeviceGetsWhatWasKeptWhenItConnectsAndAWakeUpThroughAPNs() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        _ = try await pushOnline(server, to: device.id, title: "first")
        let woken = try await pushOnline(server, to: device.id, title: "second", extra: #", "wake": true"#)
        #expect(woken[path: "counts.accepted"]?.int == 1)
        // Only the second asked for a wake-up: one silent push, nothing visible.
        let sent = try await arrivals(server, token: device.token)
        #expect(sent.count == 1)
        #expect(sent.first?.payload.contains(#""content-available":1"#) == true)
        #expect(sent.first?.payload.contains("second") == false)

        let connection = connect(server, device)
        let first = try await connection.next()
        let second = try await connection.next()
        #expect(first[path: "notification.title"]?.string == "first")
        #expect(second[path: "notification.title"]?.string == "second")
        #expect(first["sequence"]?.int == 1)
        #expect(second["sequence"]?.int == 2)
        await connection.close()
    }

    @Test func reconnectingWithAfterGetsExactlyWhatWasMissedAndNothingAcked() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        var pushIDs: [String] = []
        for title in ["one", "two", "three"] { pushIDs.append(try #require(try await pushOnline(server, to: device.id, title: title)["id"]?.string)) }
        let connection = connect(server, device)
        var ids: [String] = []
        for _ in 0..<3 { ids.append(try #require(try await connection.next()["id"]?.string)) }
        // Acks the first only, then drops.
        connection.ack([ids[0]])
        _ = try await pushOnline(server, to: device.id, title: "four")
        let fourth = try await connection.next()
        #expect(fourth["sequence"]?.int == 4)
        try await waitUntil("the first ack is stored") { try await pushView(server, pushIDs[0])[path: "counts.acked"]?.int == 1 }
        await connection.close()

        // The device had everything up to 2 on screen; 3 and 4 were sent but not acknowledged, 1 was acknowledged.
        let resumed = connect(server, device, after: 2)
        let third = try await resumed.next()
        let again = try await resumed.next()
        #expect(third["sequence"]?.int == 3)
        #expect(again["sequence"]?.int == 4)
        resumed.ack([ids[1], ids[2], try #require(again["id"]?.string)])
        try await waitUntil("the acks are stored") { try await pushView(server, pushIDs[2])[path: "counts.acked"]?.int == 1 }
        await resumed.close()

        // Without `after`: what is not acknowledged, which is nothing now (1 acked before, 2-4 just now).
        let fresh = connect(server, device)
        _ = try await pushOnline(server, to: device.id, title: "five")
        let fifth = try await fresh.next()
        #expect(fifth["sequence"]?.int == 5, "an acknowledged message came again: \(fifth)")
        await fresh.close()
    }

    @Test func autoFallsBackToAPNsOnceWhenTheDeviceDoesNotAcknowledge() async throws {
        let server = try await ServerHarness.shared.value
        // Offline: through APNs at once, naming the message.
        let offline = try await newDevice(server)
        let first = try await server.push(
            #"{"audience": {"devices": ["\#(offline.id)"]}, "notification": {"title": "auto"}, "delivery": "auto"}"#)
        let sentOffline = try await arrivals(server, token: offline.token)
        #expect(sentOffline.count == 1)
        #expect(sentOffline.first?.payload.contains(#""tern":{"id":""#) == true)
        #expect(try await pushView(server, try #require(first["id"]?.string))[path: "counts.fellBackToAPNs"]?.int == 1)

        // Online and silent: through APNs after the timeout, once.
        let silent = try await newDevice(server)
        let connection = connect(server, silent)
        _ = try await pushOnline(server, to: silent.id, title: "probe")
        let probe = try await connection.next()
        connection.ack([try #require(probe["id"]?.string)])
        let late = try await server.push(
            #"{"audience": {"devices": ["\#(silent.id)"]}, "notification": {"title": "late"}, "delivery": "auto", "ackTimeout": 0.3}"#)
        let frame = try await connection.next()
        #expect(frame[path: "notification.title"]?.string == "late")
        let lateID = try #require(late["id"]?.string)
        try await waitUntil("the fallback") { try await pushView(server, lateID)[path: "counts.fellBackToAPNs"]?.int == 1 }
        #expect(try await arrivals(server, token: silent.token).count == 1)
        // The ack after the fallback is counted as such, and nothing goes out again.
        connection.ack([try #require(frame["id"]?.string)])
        try await waitUntil("the late ack") { try await pushView(server, lateID)[path: "counts.ackedAfterFallback"]?.int == 1 }
        #expect(try await arrivals(server, token: silent.token).count == 1)

        // Online and acknowledging: never through APNs.
        let quick = try await newDevice(server)
        let answering = connect(server, quick)
        _ = try await pushOnline(server, to: quick.id, title: "probe")
        answering.ack([try #require(try await answering.next()["id"]?.string)])
        let acking = Task {
            let frame = try await answering.next()
            answering.ack([try #require(frame["id"]?.string)])
        }
        let quickPush = try await server.push(
            #"{"audience": {"devices": ["\#(quick.id)"]}, "notification": {"title": "quick"}, "delivery": "auto", "ackTimeout": 60}"#)
        try await acking.value
        let quickID = try #require(quickPush["id"]?.string)
        // Once every device has acknowledged, the push is done: it does not sit out its 60 s ackTimeout.
        try await waitUntil("the push completes", within: 10) { try await pushView(server, quickID)["status"]?.string == "completed" }
        #expect(try await pushView(server, quickID)[path: "counts.fellBackToAPNs"]?.int == 0)
        #expect(try await arrivals(server, token: quick.token).isEmpty)
        await connection.close()
        await answering.close()
    }

    @Test func aConnectedDeviceGetsItsLanguageOverTheChannelAndAnOfflineOneInItsFallback() async throws {
        let server = try await ServerHarness.shared.value
        func device(locale: String) async throws -> (id: String, token: String, secret: String) {
            let id = UUID().uuidString.lowercased()
            let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            try await server.register(id, token: token, locale: locale)
            return (id, token, try #require(server.deviceSecrets[id]))
        }
        let online = try await device(locale: "ko-KR")
        let offline = try await device(locale: "ko_KR")
        let other = try await device(locale: "fr-FR")
        let connection = try await connected(server, online)
        let posted = try await server.master.post("/v1/apps/demo/pushes", #"""
            {"audience": {"devices": ["\#(online.id)", "\#(offline.id)", "\#(other.id)"]}, "delivery": "auto", "ackTimeout": 30,
             "notification": {"title": "Sale", "body": "Half price", "localizations": {"ko": {"title": "세일"}}}}
            """#)
        #expect(posted.status == 202, "\(posted.text)")
        let push = try posted.json()
        let frame = try await connection.next()
        #expect(frame[path: "notification.title"]?.string == "세일")
        #expect(frame[path: "notification.body"]?.string == "Half price")
        connection.ack([try #require(frame["id"]?.string)])
        let pushID = try #require(push["id"]?.string)
        try await waitUntil("the push completes", within: 15) { try await pushView(server, pushID)["status"]?.string == "completed" }
        let fellBack = try await arrivals(server, token: offline.token)
        #expect(fellBack.count == 1)
        let payload = try JSONValue(parsing: Data(try #require(fellBack.first).payload.utf8))
        #expect(payload[path: "aps.alert.title"]?.string == "세일")
        #expect(payload[path: "tern.id"]?.string != nil, "the fallback names the device's message")
        let french = try await arrivals(server, token: other.token)
        #expect(try french.map { try JSONValue(parsing: Data($0.payload.utf8))[path: "aps.alert.title"]?.string } == ["Sale"])
        #expect(try await arrivals(server, token: online.token).isEmpty)
        await connection.close()
    }

    @Test func anAutoPushHoldsAConnectedDevicesAPNsLineOnlyUntilItAcknowledges() async throws {
        let server = try await ServerHarness.shared.value
        let quick = try await newDevice(server)
        let silent = try await newDevice(server)
        let answering = connect(server, quick)
        let quiet = connect(server, silent)
        for (device, connection) in [(quick, answering), (silent, quiet)] {
            _ = try await pushOnline(server, to: device.id, title: "probe")
            connection.ack([try #require(try await connection.next()["id"]?.string)])
        }
        // One auto push to both: its place in each device's APNs line is taken in its turn, in case it falls back.
        let auto = try await server.master.post(
            "/v1/apps/demo/pushes",
            #"{"audience": {"devices": ["\#(quick.id)", "\#(silent.id)"]}, "notification": {"title": "auto"}, "delivery": "auto", "ackTimeout": 30}"#)
        #expect(auto.status == 202, "\(auto.text)")
        answering.ack([try #require(try await answering.next()["id"]?.string)])
        let waiting = try await quiet.next()

        // The quick device's place is given back once its ack is seen, not when the silent one's 30 s are over.
        _ = try await server.push(#"{"audience": {"devices": ["\#(quick.id)"]}, "notification": {"title": "after"}, "delivery": "apns"}"#)
        try await waitUntil("the APNs push to the device that acknowledged", within: 15) {
            try await arrivals(server, token: quick.token).count == 1
        }
        quiet.ack([try #require(waiting["id"]?.string)])
        let autoID = try #require(try auto.json()["id"]?.string)
        try await waitUntil("the auto push completes", within: 15) { try await pushView(server, autoID)["status"]?.string == "completed" }
        #expect(try await pushView(server, autoID)[path: "counts.fellBackToAPNs"]?.int == 0)
        #expect(try await arrivals(server, token: silent.token).isEmpty)
        await answering.close()
        await quiet.close()
    }

    @Test(arguments: ["online", "auto"])
    func aChannelMessageWaitsForTheAPNsNotificationPushedBeforeIt(delivery: String) async throws {
        try await ServerHarness.withServer { server in
            let device = try await newDevice(server)
            let connection = try await connected(server, device)
            // APNs answers after a second; the simulator logs a notification as its answer goes.
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 1000}"#)
            for (title, path) in [("first", "apns"), ("second", delivery)] {
                let answer = try await server.master.post(
                    "/v1/apps/demo/pushes",
                    #"{"audience": {"devices": ["\#(device.id)"]}, "notification": {"title": "\#(title)"}, "delivery": "\#(path)"}"#)
                #expect(answer.status == 202, "\(answer.text)")
            }
            let frame = try await connection.next()
            // Read at once: APNs had answered the first push when the second came over the channel.
            let sent = try await arrivals(server, token: device.token)
            #expect(frame[path: "notification.title"]?.string == "second")
            #expect(sent.count == 1, "the channel message came before APNs answered the push made before it")
            connection.ack([try #require(frame["id"]?.string)])
            await connection.close()
        }
    }

    @Test func anAutoPushsChannelMessageDoesNotWaitForTheAcknowledgementOfTheOneBeforeIt() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let connection = try await connected(server, device)
        // The first waits 30 s for an acknowledgement that does not come; its place in the line is held meanwhile.
        for title in ["first", "second"] {
            let answer = try await server.master.post(
                "/v1/apps/demo/pushes",
                #"{"audience": {"devices": ["\#(device.id)"]}, "notification": {"title": "\#(title)"}, "delivery": "auto", "ackTimeout": 30}"#)
            #expect(answer.status == 202, "\(answer.text)")
        }
        // Both come over the channel at once, in order: the second does not wait for the first's place.
        let first = try await connection.next(within: 10)
        let second = try await connection.next(within: 10)
        #expect(first[path: "notification.title"]?.string == "first")
        #expect(second[path: "notification.title"]?.string == "second")
        connection.ack([try #require(first["id"]?.string), try #require(second["id"]?.string)])
        await connection.close()
    }

    @Test func anAutoPushWaitingForAnAcknowledgementDoesNotHoldAStopAndIsTakenUpAgainAfterIt() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-auto-stop-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (pushID, token, stopAsked) = try await ServerHarness.withServer(folder: folder) { server in
            let device = try await newDevice(server)
            let connection = try await connected(server, device)
            let accepted = try await server.master.post(
                "/v1/apps/demo/pushes",
                #"{"audience": {"devices": ["\#(device.id)"]}, "notification": {"title": "unanswered"}, "delivery": "auto", "ackTimeout": 60}"#)
            #expect(accepted.status == 202, "\(accepted.text)")
            #expect(try await connection.next()[path: "notification.title"]?.string == "unanswered")
            // Not acknowledged: the node would wait a minute for it. It stops now; its connections close first.
            return (try #require(try accepted.json()["id"]?.string), device.token, ContinuousClock.now)
        }
        #expect(ContinuousClock.now - stopAsked < .seconds(5), "the stop waited for an acknowledgement that could not come")

        try await ServerHarness.withServer(folder: folder) { server in
            // Taken up again at the start: the device is not connected now, so the message falls back through APNs, once.
            try await waitUntil("the push to complete", within: 20) { try await pushView(server, pushID)["status"]?.string == "completed" }
            let view = try await pushView(server, pushID)
            #expect(view[path: "counts.fellBackToAPNs"]?.int == 1, "\(view)")
            #expect(view[path: "counts.failed"]?.int == 0, "\(view)")
            #expect(try await arrivals(server, token: token).count == 1)
        }
    }

    @Test func aConnectionDroppedMidBurstLosesNothingAndRepeatsNothingAcknowledged() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let connection = connect(server, device)
        var pushIDs: [String] = []
        for number in 1...30 {
            let answer = try await server.master.post(
                "/v1/apps/demo/pushes",
                #"{"audience": {"devices": ["\#(device.id)"]}, "notification": {"title": "m\#(number)"}, "delivery": "online"}"#)
            pushIDs.append(try #require(try answer.json()["id"]?.string))
        }
        // The first twelve arrive and are acknowledged (and stored), then the connection drops mid-burst.
        var received: [Int] = []
        for _ in 0..<12 {
            let frame = try await connection.next()
            received.append(try #require(frame["sequence"]?.int))
            connection.ack([try #require(frame["id"]?.string)])
        }
        try await waitUntil("the twelve acks are stored") { try await pushView(server, pushIDs[11])[path: "counts.acked"]?.int == 1 }
        await connection.drop()
        #expect(received == Array(1...12))

        // A new connection, without `after`: exactly what was not acknowledged, in order, nothing twice.
        let again = connect(server, device)
        var rest: [Int] = []
        for _ in 0..<18 { rest.append(try #require(try await again.next()["sequence"]?.int)) }
        #expect(rest == Array(13...30))
        _ = try await pushOnline(server, to: device.id, title: "last")
        #expect(try await again.next()["sequence"]?.int == 31, "something came twice or went missing")
        await again.close()
    }

    @Test func serverCountedBadgesGoUpWhicheverWayTheMessageTakes() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        func push(_ delivery: String) async throws {
            _ = try await server.push(
                #"{"audience": {"devices": ["\#(device.id)"]}, "notification": {"title": "b", "badge": "+1"}, "delivery": "\#(delivery)"}"#)
        }
        // Offline: two kept online, one through APNs (auto), one more online.
        try await push("online")
        try await push("online")
        try await push("auto")
        try await push("online")
        let fallback = try await arrivals(server, token: device.token)
        #expect(fallback.count == 1)
        let payload = try JSONValue(parsing: Data(try #require(fallback.first?.payload).utf8))
        #expect(payload[path: "aps.badge"]?.int == 3)
        #expect(payload[path: "tern.sequence"]?.int == 3)
        let connection = connect(server, device)
        var badges: [Int?] = []
        // The auto push's message is kept too (the app shows it once, by id): all four arrive, in order.
        for _ in 0..<4 { badges.append(try await connection.next()[path: "notification.badge"]?.int) }
        #expect(badges == [1, 2, 3, 4])
        await connection.close()
    }

    @Test func aNewerConnectionReplacesTheOlderOne() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let older = try await connected(server, device)
        let newer = connect(server, device)
        let closed = try await older.closeFrame()
        #expect(closed?.closeCode == .unknown(4409))
        #expect(closed?.reason == ChannelCloseCode.replaced.reason)
        _ = try await pushOnline(server, to: device.id, title: "after")
        // The newer one gets what was not acknowledged, then the new message.
        #expect(try await newer.next()[path: "notification.title"]?.string == "probe")
        #expect(try await newer.next()[path: "notification.title"]?.string == "after")
        await newer.close()
    }

    @Test func aReplacedSecretOrADeletedDeviceClosesItsOpenConnection() async throws {
        let server = try await ServerHarness.shared.value
        for deleted in [false, true] {
            let device = try await newDevice(server)
            let connection = try await connected(server, device)
            let path = "/v1/apps/demo/devices/\(device.id)" + (deleted ? "" : "/secret")
            let changed = try await server.master.send(deleted ? .DELETE : .POST, path)
            #expect(changed.status == (deleted ? 204 : 200), "\(changed.text)")
            let closed = try await connection.closeFrame()
            #expect(closed?.closeCode == .unknown(4401))
            #expect(closed?.reason == ChannelCloseCode.credentialsChanged.reason)
        }
    }

    /// A device deleted because its token moved to another device id kept its connection, and when its id was
    /// registered afresh (a new device, a new secret) that stale connection got the new device's messages.
    @Test func aDeviceWhoseTokenMovedAwayHasItsConnectionClosed() async throws {
        let server = try await ServerHarness.shared.value
        let device = try await newDevice(server)
        let connection = try await connected(server, device)
        // Another device id registers the same token: the token moves there and the first device goes.
        let taker = UUID().uuidString.lowercased()
        try await server.register(taker, token: device.token)
        #expect(try await server.master.get("/v1/apps/demo/devices/\(device.id)").status == 404)
        let closed = try await connection.closeFrame()
        #expect(closed?.closeCode == .unknown(4401))
        #expect(closed?.reason == ChannelCloseCode.credentialsChanged.reason)
    }

    /// A deleted app's connections stayed open; an app made again under its id, with a device under a connection's
    /// id, would have been sent to through them.
    @Test func deletingAnAppClosesItsDevicesConnections() async throws {
        let server = try await ServerHarness.shared.value
        let created = try await server.admin.post("/v1/apps", #"{"id": "closing", "topic": "com.example.closing", "environment": "simulator"}"#)
        #expect(created.status == 201, "\(created.text)")
        let appKey = try #require(try created.json()["appKey"]?.string)
        let deviceID = UUID().uuidString.lowercased()
        let registered = try await server.api.with(bearer: appKey).put(
            "/v1/apps/closing/devices/\(deviceID)", Fixture.registration(token: Fixture.token(7_001)))
        #expect(registered.status == 200, "\(registered.text)")
        let secret = try #require(try registered.json()["deviceSecret"]?.string)
        let connection = TestDevice(port: server.server.boundPort!, app: "closing", deviceID: deviceID, appKey: appKey, secret: secret)
        // Connected once the demo app's own device would be: a message through it proves the upgrade.
        let master = try #require(try created.json()["masterSecret"]?.string)
        let sent = try await server.api.with(bearer: master).post(
            "/v1/apps/closing/pushes?wait=20", #"{"audience": {"devices": ["\#(deviceID)"]}, "notification": {"title": "probe"}, "delivery": "online"}"#)
        #expect([200, 201].contains(sent.status), "\(sent.text)")
        _ = try await connection.next()
        #expect(try await server.admin.delete("/v1/apps/closing").status == 204)
        let closed = try await connection.closeFrame()
        #expect(closed?.closeCode == .unknown(4401))
    }

    @Test func refusalsAndBadFramesCloseWithTheirCodes() async throws {
        let server = try await ServerHarness.shared.value
        let port = server.server.boundPort!
        let device = try await newDevice(server)
        let other = try await newDevice(server)

        // A refused upgrade does not open.
        let refusals: [(String, TestDevice)] = [
            ("a wrong secret", TestDevice(port: port, deviceID: device.id, appKey: server.device.bearer, secret: "tds_" + String(repeating: "x", count: 43))),
            ("no secret", TestDevice(port: port, deviceID: device.id, appKey: server.device.bearer, secret: nil)),
            ("another device's id", TestDevice(port: port, deviceID: other.id, appKey: server.device.bearer, secret: device.secret)),
            ("a wrong app key", TestDevice(port: port, deviceID: device.id, appKey: "tak_wrong", secret: device.secret)),
            ("no such device", TestDevice(port: port, deviceID: UUID().uuidString.lowercased(), appKey: server.device.bearer, secret: device.secret)),
            ("a bad after", TestDevice(port: port, deviceID: device.id, appKey: server.device.bearer, secret: device.secret, after: -1)),
        ]
        for (what, refused) in refusals {
            await #expect(throws: WebSocketClientError.webSocketUpgradeFailed, "\(what)") { _ = try await refused.closeFrame(within: 10, what) }
        }
        // It is answered with the API's JSON error, as the same GET without the upgrade is.
        let upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
        for (path, headers, status, field) in [
            ("/v1/apps/demo/devices/\(device.id)/connect", [("X-Tern-Device-Secret", "tds_" + String(repeating: "y", count: 43))], 403, "X-Tern-Device-Secret"),
            ("/v1/apps/demo/devices/\(other.id)/connect", server.asDevice(device.id), 403, "X-Tern-Device-Secret"),
            ("/v1/apps/demo/devices/\(device.id)/connect?after=-1", server.asDevice(device.id), 400, "after"),
            ("/v1/apps/demo/devices/not-a-uuid/connect", server.asDevice(device.id), 400, "deviceId"),
        ] {
            let answer = try await server.device.send(.GET, path, headers: upgrade + headers)
            #expect(answer.status == status, "\(path): \(answer.text)")
            #expect(try answer.json()["field"]?.string == field, "\(path): \(answer.text)")
            #expect(answer.headers["Connection"].first == "close")
        }
        let noSuchDevice = try await server.device.send(
            .GET, "/v1/apps/demo/devices/\(UUID().uuidString.lowercased())/connect", headers: upgrade + server.asDevice(device.id))
        #expect(noSuchDevice.status == 404, "\(noSuchDevice.text)")
        // An upgrade to another path is the API's to answer.
        #expect(try await server.device.send(.GET, "/v1/nowhere", headers: upgrade).status == 404)
        // The same GET without the upgrade says why, in JSON.
        for (path, headers, status) in [
            ("/v1/apps/demo/devices/\(device.id)/connect", [("X-Tern-Device-Secret", "tds_" + String(repeating: "x", count: 43))], 403),
            ("/v1/apps/demo/devices/\(device.id)/connect", [], 403),
            ("/v1/apps/demo/devices/\(UUID().uuidString.lowercased())/connect", server.asDevice(device.id), 404),
        ] {
            let answer = try await server.device.send(.GET, path, headers: headers)
            #expect(answer.status == status, "\(path): \(answer.text)")
        }
        #expect(try await server.api.with(bearer: "tak_wrong").send(.GET, "/v1/apps/demo/devices/\(device.id)/connect").status == 401)

        for (frame, code) in [
            ("not json", UInt16(4400)), (#"{"type": "ack", "ids": ["x"]}"#, 4400), (#"{"type": "hello"}"#, 4400),
            (#"{"type": "ack", "ids": [], "extra": 1}"#, 4400),
        ] {
            let connection = connect(server, device)
            connection.send(.text(frame))
            let closed = try await connection.closeFrame(within: 10, frame)
            #expect(closed?.closeCode == .unknown(code), "\(frame): \(String(describing: closed))")
            #expect(closed?.reason?.hasPrefix("bad frame: ") == true)
        }
        // Acks for messages the connection was never sent, past a few: made up, each a database write. Closed.
        let inventing = connect(server, device)
        for _ in 0..<2 { inventing.ack((0..<600).map { _ in UUID().uuidString }) }
        let invented = try await inventing.closeFrame(within: 10, "made-up acks")
        #expect(invented?.closeCode == .unknown(4400))
        #expect(invented?.reason?.contains("not sent") == true, "\(String(describing: invented?.reason))")
        let binary = connect(server, device)
        binary.send(.binary)
        #expect(try await binary.closeFrame(within: 10, "binary")?.closeCode == .unacceptableData)

        // Without an upgrade, the same checks answer JSON.
        let plain = try await server.device.send(.GET, "/v1/apps/demo/devices/\(device.id)/connect", headers: server.asDevice(device.id))
        #expect(plain.status == 426)
        let refused = try await server.device.send(.GET, "/v1/apps/demo/devices/\(other.id)/connect", headers: server.asDevice(device.id))
        #expect(refused.status == 403)
        let bad = try await server.device.send(.GET, "/v1/apps/demo/devices/\(device.id)/connect?after=x", headers: server.asDevice(device.id))
        #expect(bad.status == 400)
        #expect(try bad.json()["field"]?.string == "after")
    }

    /// Connects a device with `open`, waits until the server records it connected, lets `leave` end it the way the
    /// test is about, and expects the server to let it go within `within` seconds (then it is offline: a push with a
    /// wake-up goes through APNs). - Returns: how long the server took to let it go.
    private func expectLetGo(
        _ server: RunningServer, within: Double = 10, open: (RunningServer, (id: String, token: String, secret: String)) -> TestDevice,
        leave: (TestDevice) async -> Void
    ) async throws -> Duration {
        let device = try await newDevice(server)
        // The server's own record of who is connected, read beside it.
        let store = try await SQLStore.openSQLite(path: server.folder.appendingPathComponent("tern.db").path, logger: Logger(label: "test"))
        func connected() async throws -> Bool { try await !store.presence(app: "demo", deviceIDs: [device.id]).isEmpty }
        let connection = open(server, device)
        do {
            try await waitUntil("the device is connected") { try await connected() }
            let since = ContinuousClock.now
            await leave(connection)
            try await waitUntil("the server lets the connection go", within: within) { try await !connected() }
            let took = ContinuousClock.now - since
            _ = try await pushOnline(server, to: device.id, title: "later", extra: #", "wake": true"#)
            #expect(try await arrivals(server, token: device.token).count == 1)
            try await store.close()
            connection.send(.close)
            return took
        } catch {
            try? await store.close()
            throw error
        }
    }

    @Test func aSilentConnectionIsClosedAfterItMissesItsPongs() async throws {
        try await ServerHarness.withServer(configure: { $0.channel.pingInterval = .milliseconds(500) }) { server in
            // It answers no ping, so within two intervals the server drops it.
            let took = try await expectLetGo(server) { server, device in
                TestDevice(
                    port: server.server.boundPort!, deviceID: device.id, appKey: server.device.bearer, secret: device.secret,
                    readsFrames: false)
            } leave: { _ in }
            #expect(took >= .milliseconds(400), "dropped before a ping could go unanswered")
        }
    }

    @Test func aDeviceThatVanishesWithoutAGoodbyeIsNoLongerConnected() async throws {
        try await ServerHarness.withServer { server in
            // The app is killed: its socket ends without a close frame.
            _ = try await expectLetGo(server) { server, device in connect(server, device) } leave: { await $0.drop() }
        }
    }

    @Test func pushRequestsCheckTheDeliveryFields() async throws {
        let server = try await ServerHarness.shared.value
        for (extra, field) in [
            (#", "delivery": "pigeon""#, "delivery"), (#", "wake": true"#, "wake"), (#", "delivery": "auto", "wake": true"#, "wake"),
            (#", "delivery": "online", "ackTimeout": 1"#, "ackTimeout"), (#", "delivery": "auto", "ackTimeout": 0"#, "ackTimeout"),
        ] {
            let response = try await server.master.post(
                "/v1/apps/demo/pushes", #"{"audience": {"all": true}, "notification": {"title": "x"}\#(extra)}"#)
            #expect(response.status == 400, "\(extra): \(response.text)")
            #expect(try response.json()["field"]?.string == field, "\(extra): \(response.text)")
        }
    }
}
