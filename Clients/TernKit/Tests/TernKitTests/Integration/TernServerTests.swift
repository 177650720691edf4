#if os(Linux)
import Foundation
import TernKit
import Testing

/// TernKit against a real `tern serve` (its demo app, its in-process APNs simulator): registration through the SDK's
/// HTTP client, signing in with an alias token minted here, the online channel through the test transport, pushes
/// made with the master secret, acknowledgements, resuming after the server dropped the connection, de-duplication
/// across the channel and APNs, the inbox and badge, opens and delivery receipts. Linux only (where CI runs: it
/// spawns the server with glibc's API); on macOS the value tests run.
@Suite(
    .serialized,
    .enabled(
        if: TernServerProcess.isAvailable,
        "needs a tern binary: copy the main package's .build/debug/tern to /tmp/ternkit-tern/tern, or set TERN_BINARY"))
struct TernServerTests {
    /// A Tern for `server`'s demo app, running until the test ends, with the app's message loop: it takes each
    /// message as it comes (which acknowledges it), as an app's loop does, and keeps it for the test.
    private final class Device: Sendable {
        let tern: Tern
        let identities: MemoryIdentityStore
        let transport: RecordingTransport
        let badge = RecordingBadgeSink()
        let token = randomToken()
        private let taken = Taken()
        private let runner: Task<Void, Never>
        private let loop: Task<Void, Never>

        /// - Parameters:
        ///   - relay: the channel connects through it (the HTTP calls go straight to the server).
        ///   - pingInterval: how often the channel checks that its connection is alive.
        init(
            _ server: TernServerProcess, identities: MemoryIdentityStore = MemoryIdentityStore(), states: MemoryStateStore = MemoryStateStore(),
            relay: FreezingRelay? = nil, pingInterval: TimeInterval = 30
        ) {
            self.identities = identities
            let forwarding = Forwarding(port: { [server] in server.port })
            transport = RecordingTransport(
                testChannelTransport(pingInterval: .milliseconds(Int64(pingInterval * 1000))),
                forwarding: relay.map { relay in Forwarding(port: { relay.port }) } ?? forwarding)
            var configuration = server.configuration()
            configuration.channel.pingInterval = pingInterval
            tern = Tern(
                configuration: configuration, identityStore: identities, stateStore: states, channelTransport: transport,
                httpTransport: ForwardingHTTP(forwarding: forwarding), badgeSink: badge)
            runner = Task { [tern] in await tern.run() }
            loop = Task { [tern, taken] in
                for await message in tern.messages { taken.append(message) }
            }
        }

        var hexToken: String { RegistrationFacts.hex(token) }

        /// Registers (once, waiting for the answer) and returns the device id.
        func register() async throws -> String {
            try await tern.registerNow(facts(token)).deviceID
        }

        /// Comes to the foreground and waits until the channel is connected.
        func connect() async throws {
            tern.setForeground(true)
            try await waitUntil("the channel connects") { await tern.channelState == .connected }
        }

        /// The next message the app's loop took.
        func nextMessage(_ what: String, within seconds: Double = 10) async throws -> TernMessage {
            try await next(what, within: seconds) { [taken] in await taken.next() }
        }

        deinit {
            loop.cancel()
            runner.cancel()
        }
    }

    /// The messages the app's loop took, handed to the test in order.
    private final class Taken: @unchecked Sendable {
        // @unchecked: all state is behind `lock`.
        private let lock = NSLock()
        private var messages: [TernMessage] = []
        private var read = 0
        private var waiter: CheckedContinuation<TernMessage?, Never>?

        func append(_ message: TernMessage) {
            let waiter = lock.withLock { () -> CheckedContinuation<TernMessage?, Never>? in
                messages.append(message)
                guard let waiter = self.waiter else { return nil }
                self.waiter = nil
                read += 1
                return waiter
            }
            waiter?.resume(returning: message)
        }

        /// The next message taken, waiting for it; nil if the waiting task is cancelled (a test that timed out).
        func next() async -> TernMessage? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<TernMessage?, Never>) in
                    let now = lock.withLock { () -> TernMessage?? in
                        if read < messages.count {
                            read += 1
                            return .some(messages[read - 1])
                        }
                        if Task.isCancelled { return .some(nil) }
                        waiter = continuation
                        return .none
                    }
                    if case .some(let message) = now { continuation.resume(returning: message) }
                }
            } onCancel: {
                let waiter = lock.withLock { () -> CheckedContinuation<TernMessage?, Never>? in
                    defer { self.waiter = nil }
                    return self.waiter
                }
                waiter?.resume(returning: nil)
            }
        }
    }

    private func online(_ deviceID: String, _ notification: String, delivery: String = "online", extra: String = "") -> String {
        #"{"audience": {"devices": ["\#(deviceID)"]}, "notification": \#(notification), "delivery": "\#(delivery)"\#(extra)}"#
    }

    @Test func registersBindsTheUserTagsAndSignsOutThroughTheSDK() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let first = try await device.tern.registerNow(facts(device.token))
        #expect(first.outcome == .sent)
        let record = try await server.backend("GET", "v1/apps/demo/devices/\(first.deviceID)").json
        #expect(record?["token"] == .string(device.hexToken))
        #expect(record?["locale"] == "ko-KR" && record?["timezone"] == "Asia/Seoul" && record?["appVersion"] == "1.0 (1)")
        // The next launch with nothing new sends nothing.
        #expect(try await device.tern.registerNow(facts(device.token)).outcome == .upToDate)

        // The backend's word for the user: an alias token minted with the identity secret.
        let signedIn = try await device.tern.signIn(aliasToken: server.aliasToken(for: "user-42"))
        #expect(signedIn.alias == "user-42")
        let users = try await server.backend("GET", "v1/apps/demo/devices?alias=user-42").json
        #expect(users?["devices"]?.arrayFirst?["deviceId"] == .string(first.deviceID))
        // A token for another app is refused, naming the field, and nothing changes.
        let foreign = AliasTokenMinter.token(user: "user-7", app: "other", identitySecret: server.identitySecret)
        let refusal = await #expect(throws: TernError.self) { try await device.tern.signIn(aliasToken: foreign) }
        #expect(refusal?.status == 403 && refusal?.field == "aliasToken")
        #expect(await device.tern.alias == "user-42")

        #expect(try await device.tern.updateTags(add: ["vip", "ko"]) == ["ko", "vip"])
        #expect(try await device.tern.updateTags(remove: ["vip"]) == ["ko"])
        try await device.tern.signOut()
        #expect(await device.tern.alias == nil)
        #expect(try await server.backend("GET", "v1/apps/demo/devices/\(first.deviceID)").json?["alias"] == nil)
    }

    @Test func aWipedSecretRegistersUnderANewDeviceAndTheTokenMovesThere() async throws {
        let server = try await TernServerProcess.start()
        let identities = MemoryIdentityStore()
        let states = MemoryStateStore()
        let before = Device(server, identities: identities, states: states)
        let old = try await before.register()
        _ = try await before.tern.signIn(aliasToken: server.aliasToken(for: "user-42"))
        // The keychain kept the id but not the secret (seed 001's reinstall, gone wrong); the app launches again.
        try identities.save(DeviceIdentity(deviceID: old, deviceSecret: "tds_" + String(repeating: "x", count: 43)))
        let after = Device(server, identities: identities, states: states)
        let registration = try await after.tern.registerNow(facts(before.token), force: true)
        #expect(registration.outcome == .newDevice(previousDeviceID: old))
        #expect(registration.needsSignIn)
        #expect(registration.deviceID != old)
        #expect(try identities.load()?.deviceID == registration.deviceID)
        // One device keeps the token: the new one; the old one is gone.
        #expect(try await server.backend("GET", "v1/apps/demo/devices/\(registration.deviceID)").json?["token"] == .string(before.hexToken))
        #expect(try await server.backend("GET", "v1/apps/demo/devices/\(old)").status == 404)
    }

    @Test func messagesArriveOnlineAreAcknowledgedAndAnAPNsCopyIsNotHandedOverAgain() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        try await device.connect()

        let first = try await server.push(online(id, #"{"title": "one", "badge": 3}"#))
        let one = try await device.nextMessage("the online message")
        #expect(one.notification?.title == "one" && one.source == .channel && one.sequence == 1 && one.pushID == first)
        try await waitUntil("the server counts the ack") { try await server.counts(ofPush: first)?["acked"] == .int(1) }
        // Not through APNs: TernKit puts the message's badge on the icon.
        try await waitUntil("the badge follows the message") { await device.badge.badges.last == 3 }

        // auto: online first; taken by the app's loop and acknowledged within the ackTimeout, so no APNs. (The push's
        // outcome waits for the whole ackTimeout even once every device acknowledged: hence a short one.)
        let second = try await server.push(online(id, #"{"data": {"orderId": 17}}"#, delivery: "auto", extra: #", "ackTimeout": 1"#))
        let two = try await device.nextMessage("the auto message")
        #expect(two.notification == nil && two.data == ["orderId": 17])
        try await waitUntil("the server counts the ack") { try await server.counts(ofPush: second)?["acked"] == .int(1) }
        #expect(try await server.counts(ofPush: second)?["fellBackToAPNs"] == .int(0))

        // The same message again, as the app delegate would hand over an APNs copy: a duplicate.
        let copy = TernPayload(userInfo: ["aps": ["content-available": 1], "orderId": 17, "tern": ["id": two.id, "sequence": 2]])
        #expect(await device.tern.receive(copy) == .duplicate(messageID: two.id))
        // The stream's next message is the next push, not the copy.
        _ = try await server.push(online(id, #"{"title": "three"}"#))
        #expect(try await device.nextMessage("the third message").notification?.title == "three")
    }

    /// The backend deletes the device (4401 on its connection); the SDK registers it again, which makes a new device
    /// on the server whose messages are numbered from 1 again: it must not resume after the old device's last.
    @Test func aDeviceMadeAgainAfterTheServerDeletedItGetsItsFirstMessages() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        try await device.connect()
        for title in ["one", "two", "three"] { _ = try await server.push(online(id, #"{"title": "\#(title)"}"#)) }
        for n in 1...3 { #expect(try await device.nextMessage("message \(n)").sequence == Int64(n)) }

        #expect(try await server.backend("DELETE", "v1/apps/demo/devices/\(id)").status == 204)
        try await waitUntil("the SDK registers the device again and reconnects", within: 20) {
            guard await device.tern.channelState == .connected, device.transport.urls.count >= 2 else { return false }
            return try await server.backend("GET", "v1/apps/demo/devices/\(id)").status == 200
        }
        #expect(device.transport.urls.last?.query == nil, "\(device.transport.urls)")
        _ = try await server.push(online(id, #"{"title": "to the new device"}"#))
        let message = try await device.nextMessage("the new device's first message")
        #expect(message.notification?.title == "to the new device" && message.sequence == 1)
    }

    @Test func afterTheServerDroppedTheConnectionItReconnectsAndResumesAfterWhatItHad() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        try await device.connect()
        _ = try await server.push(online(id, #"{"title": "before"}"#))
        #expect(try await device.nextMessage("the first message").sequence == 1)

        // The server stops (closing the connection) and comes back with the same data (behind the same address: see
        // Forwarding).
        await server.stop()
        try await server.start()
        try await waitUntil("the channel reconnects", within: 20) {
            await device.tern.channelState == .connected && device.transport.urls.count >= 2
        }
        let resumed = try #require(device.transport.urls.last)
        #expect(resumed.query == "after=1")
        #expect(device.transport.urls.first?.query == nil)

        let after = try await server.push(online(id, #"{"title": "after"}"#))
        let message = try await device.nextMessage("the message after the restart")
        #expect(message.notification?.title == "after" && message.sequence == 2)
        try await waitUntil("the server counts the ack") { try await server.counts(ofPush: after)?["acked"] == .int(1) }
    }

    /// The network goes silent under an open connection (a relay stops forwarding, both ways, and keeps the sockets):
    /// nothing ends it, so only the unanswered ping shows it. The channel connects again and gets the message sent
    /// into the silence.
    @Test func aConnectionThatGoesSilentIsNoticedAndMadeAgain() async throws {
        let server = try await TernServerProcess.start()
        let relay = try FreezingRelay(to: { [server] in server.port })
        defer { relay.stop() }
        let device = Device(server, relay: relay, pingInterval: 1)
        let id = try await device.register()
        try await device.connect()
        _ = try await server.push(online(id, #"{"title": "before"}"#))
        #expect(try await device.nextMessage("the first message").sequence == 1)

        relay.freeze()
        _ = try await server.push(online(id, #"{"title": "into the silence"}"#))
        let message = try await device.nextMessage("the message sent into the silence", within: 20)
        #expect(message.notification?.title == "into the silence" && message.sequence == 2)
        #expect(relay.accepted == 2)
        #expect(device.transport.urls.last?.query == "after=1")
    }

    @Test func aMessageThatCameThroughAPNsFirstIsNotHandedOverAgainWhenTheChannelBringsIt() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        // In the background: the auto push falls back to APNs after its ackTimeout.
        let push = try await server.push(online(id, #"{"title": "while away", "badge": 4}"#, delivery: "auto", extra: #", "ackTimeout": 0.2"#))
        try await waitUntil("the push falls back to APNs") { try await server.counts(ofPush: push)?["fellBackToAPNs"] == .int(1) }
        let payloads = try await server.apnsPayloads(token: device.hexToken)
        let fallback = try #require(payloads.last)
        #expect(fallback["tern"]?["id"] != nil)

        // The app delegate hands the notification over.
        let result = await device.tern.receive(TernPayload(json: fallback))
        guard case .message(let message) = result else {
            Issue.record("the fallback was \(result)")
            return
        }
        #expect(message.source == .apns && message.notification?.title == "while away" && message.notification?.badge == 4)
        #expect(try await device.nextMessage("the APNs message").id == message.id)

        // Taken, so acknowledged (by request: there is no connection); in the foreground it is not handed over again.
        try await device.connect()
        try await waitUntil("the late ack is counted") { try await server.counts(ofPush: push)?["ackedAfterFallback"] == .int(1) }
        _ = try await server.push(online(id, #"{"title": "next"}"#))
        #expect(try await device.nextMessage("the next message").notification?.title == "next")
    }

    /// The app takes a message that came through APNs while it has no connection, and iOS ends it; the next launch
    /// makes its Tern again with the same stores and connects. The acknowledgement went by request, not into memory
    /// to wait for a connection that this launch never made, so the server does not send the message again.
    @Test func aMessageTakenThroughAPNsIsNotHandedOverAgainAfterTheAppWasEnded() async throws {
        let server = try await TernServerProcess.start()
        let identities = MemoryIdentityStore()
        let states = MemoryStateStore()
        var first: Device? = Device(server, identities: identities, states: states)
        let launched = try #require(first)
        let id = try await launched.register()
        let push = try await server.push(online(id, #"{"title": "while away"}"#, delivery: "auto", extra: #", "ackTimeout": 0.2"#))
        try await waitUntil("the push falls back to APNs") { try await server.counts(ofPush: push)?["fellBackToAPNs"] == .int(1) }
        let fallback = try #require(try await server.apnsPayloads(token: launched.hexToken).last)
        guard case .message(let message) = await launched.tern.receive(TernPayload(json: fallback)) else {
            Issue.record("the fallback was not a new message")
            return
        }
        #expect(try await launched.nextMessage("the APNs message").id == message.id)
        try await waitUntil("the ack is counted") { try await server.counts(ofPush: push)?["ackedAfterFallback"] == .int(1) }
        #expect(launched.transport.urls.isEmpty, "a connection was opened for it")

        // iOS ends the app; the next launch.
        first = nil
        let again = Device(server, identities: identities, states: states)
        try await again.connect()
        _ = try await server.push(online(id, #"{"title": "next"}"#))
        #expect(try await again.nextMessage("the next message").notification?.title == "next")
    }

    @Test func replacedByANewerConnectionItStaysAwayUntilTheAppComesBack() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        _ = try await device.register()
        try await device.connect()
        // Another connection of the same device (as a Notification Service Extension's receipt would open).
        let identity = try #require(try device.identities.load())
        let credentials = DeviceCredentials(deviceID: identity.deviceID, secret: try #require(identity.deviceSecret))
        let other = try await testChannelTransport().connect(
            try device.tern.client.channelRequest(credentials, after: nil), maximumFrameSize: 1 << 16)
        try await waitUntil("the SDK's connection is replaced") { await device.tern.channelState == .stopped(.replaced) }
        // The app comes to the foreground again: TernKit connects, replacing the other one (and only now).
        try await device.connect()
        #expect(await other.receive() == .closed(code: 4409, reason: "replaced by a newer connection of this device"))
    }

    @Test func theInboxKeepsTheBadgeAndAnOpenIsRoutedOnceAndReported() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        _ = try await device.tern.signIn(aliasToken: server.aliasToken(for: "user-77"))
        let stored = try await server.push(
            #"{"audience": {"aliases": ["user-77"]}, "notification": {"title": "Your order shipped", "badge": "unread"}, "inbox": {"ttl": 600}}"#)
        let page = try await device.tern.inbox.page()
        #expect(page.unread == 1 && page.messages.map(\.id) == [stored] && page.messages.first?.title == "Your order shipped")
        try await waitUntil("the badge shows the unread count") { await device.badge.badges.last == 1 }
        #expect(try await device.tern.inbox.markRead(upTo: stored).unread == 0)
        try await waitUntil("the badge is cleared") { await device.badge.badges.last == 0 }

        // An online message whose notification the user opened: routed once when the app is ready, and reported.
        try await device.connect()
        let push = try await server.push(online(id, #"{"title": "Tap me"}"#))
        let message = try await device.nextMessage("the message")
        let opened = OpenedNotification(
            payload: TernPayload(json: ["aps": ["alert": ["title": "Tap me"]], "tern": ["id": .string(message.id), "sequence": 1]]))
        device.tern.opened(opened)
        device.tern.opened(opened)
        let routed = try await next("the open") { [tern = device.tern] in
            var opens = tern.openedNotifications.makeAsyncIterator()
            return await opens.next()
        }
        #expect(routed == opened)
        try await waitUntil("the server counts the open") { try await server.counts(ofPush: push)?["opened"] == .int(1) }
    }

    @Test func anOpenOfAPushThatCameThroughAPNsIsRoutedAndCountedOnce() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        let push = try await server.push(#"{"audience": {"devices": ["\#(id)"]}, "notification": {"title": "Flash sale", "data": {"sku": 7}}}"#)
        let payload = try #require(try await server.apnsPayloads(token: device.hexToken).last)
        let opened = OpenedNotification(payload: TernPayload(json: payload))
        #expect(opened.payload.pushID == push)
        device.tern.opened(opened)
        device.tern.opened(opened)
        let routed = try await next("the open") { [tern = device.tern] in
            var opens = tern.openedNotifications.makeAsyncIterator()
            return await opens.next()
        }
        #expect(routed == opened && routed.payload.data == ["sku": .int(7)])
        try await waitUntil("the server counts the open") { try await server.counts(ofPush: push)?["opened"] == .int(1) }
        // A device the push did not go to is not counted, though its app reports the same notification.
        let other = Device(server)
        _ = try await other.register()
        other.tern.opened(opened)
        _ = try await next("the other device's open") { [tern = other.tern] in
            var opens = tern.openedNotifications.makeAsyncIterator()
            return await opens.next()
        }
        let credentials = try #require(try other.identities.load().flatMap { identity in
            identity.deviceSecret.map { DeviceCredentials(deviceID: identity.deviceID, secret: $0) }
        })
        #expect(try await TernClient(configuration: server.configuration(), transport: ForwardingHTTP(forwarding: Forwarding(port: { server.port })))
            .reportOpen(credentials, pushID: push) == false)
        #expect(try await server.counts(ofPush: push)?["opened"] == .int(1))
    }

    @Test func aVoIPTokenGivenBeforeRegisteringIsSetAfterItAndACallToTheUserRingsIt() async throws {
        let server = try await TernServerProcess.start()
        let identities = MemoryIdentityStore()
        let states = MemoryStateStore()
        let device = Device(server, identities: identities, states: states)
        // PushKit can answer before APNs does: the token waits for the device.
        let voip = randomToken()
        device.tern.register(pushToken: voip, kind: .voip)
        let id = try await device.register()
        _ = try await device.tern.signIn(aliasToken: server.aliasToken(for: "callee"))
        let hex = RegistrationFacts.hex(voip)
        try await waitUntil("the VoIP token is set") {
            try await server.backend("GET", "v1/apps/demo/devices/\(id)").json?["pushTokens"]?["voip"]?["token"] == .string(hex)
        }
        // The backend calls the user: the VoIP token rings, not the device token.
        let call = try await server.push(#"{"audience": {"aliases": ["callee"]}, "notification": {"title": "Incoming call"}, "apns": {"pushType": "voip"}}"#)
        #expect(try await server.counts(ofPush: call)?["accepted"] == .int(1))
        #expect(try await server.apnsPayloads(token: hex).count == 1)
        #expect(try await server.apnsPayloads(token: device.hexToken).isEmpty)

        // The keychain lost the secret; the app launches again and gives PushKit's token again: it is set for the
        // device made under a new id.
        try identities.save(DeviceIdentity(deviceID: id, deviceSecret: "tds_" + String(repeating: "x", count: 43)))
        let after = Device(server, identities: identities, states: states)
        after.tern.register(pushToken: voip, kind: .voip)
        let registration = try await after.tern.registerNow(facts(device.token), force: true)
        #expect(registration.deviceID != id)
        try await waitUntil("the VoIP token is set for the new device") {
            try await server.backend("GET", "v1/apps/demo/devices/\(registration.deviceID)").json?["pushTokens"]?["voip"]?["token"] == .string(hex)
        }
        // The user turns calls off: the token is gone from the server, and not set again by the next registration.
        #expect(try await after.tern.removePushToken(kind: .voip))
        _ = try await after.tern.registerNow(facts(device.token), force: true)
        // The tokens go in kind order, VoIP first: once a push-to-start token given now is set, a VoIP token still
        // wanted would have been set before it.
        let start = randomToken()
        after.tern.register(pushToken: start, kind: .pushToStart)
        try await waitUntil("the push-to-start token is set") {
            try await server.backend("GET", "v1/apps/demo/devices/\(registration.deviceID)").json?["pushTokens"]?["pushToStart"]?["token"]
                == .string(RegistrationFacts.hex(start))
        }
        let credentials = try #require(try identities.load().flatMap { identity in
            identity.deviceSecret.map { DeviceCredentials(deviceID: identity.deviceID, secret: $0) }
        })
        let client = TernClient(configuration: server.configuration(), transport: ForwardingHTTP(forwarding: Forwarding(port: { server.port })))
        #expect(try await client.removePushToken(credentials, kind: .voip) == false, "none was set again")
    }

    @Test func aLiveActivitysTokenIsSetAnUpdateReachesItAndEndingTheActivityRemovesIt() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        /// The device's activities as the backend reads them, oldest first.
        func activities(_ id: String) async throws -> [TernJSON] {
            guard case .array(let items)? = try await server.backend("GET", "v1/apps/demo/devices/\(id)").json?["activities"] else { return [] }
            return items
        }
        let activity = "league.eu:match-7_final"
        // ActivityKit can give the token before APNs gives the device's: it waits for the device.
        let first = randomToken()
        device.tern.register(activityToken: first, for: activity)
        let id = try await device.register()
        try await waitUntil("the activity's token is set") { try await activities(id).first?["token"] == .string(RegistrationFacts.hex(first)) }
        let set = try #require(try await activities(id).first)
        #expect(set["activityId"] == .string(activity))
        let date = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let started = try date.parse(try #require(set["startedAt"]?.stringValue))
        let expires = try date.parse(try #require(set["expiresAt"]?.stringValue))
        #expect(abs(expires.timeIntervalSince(started) - RegisteredActivityToken.lifetime) < 0.01)

        // pushTokenUpdates gives a new token: it replaces the old one, and the activity keeps its start.
        let second = randomToken()
        device.tern.register(activityToken: second, for: activity)
        try await waitUntil("the new token replaces it") { try await activities(id).first?["token"] == .string(RegistrationFacts.hex(second)) }
        #expect(try await activities(id).count == 1)
        #expect(try await activities(id).first?["startedAt"] == set["startedAt"])
        // The backend updates the activity: the push goes to its token.
        let update = try await server.push(
            #"{"audience": {"activity": "\#(activity)"}, "apns": {"pushType": "liveactivity"}, "payload": {"aps": {"event": "update", "timestamp": 1700000000, "content-state": {"score": "2-1"}}}}"#)
        #expect(try await server.counts(ofPush: update)?["accepted"] == .int(1))
        let delivered = try #require(try await server.apnsPayloads(token: RegistrationFacts.hex(second)).last)
        #expect(delivered["aps"]?["content-state"]?["score"] == .string("2-1"))
        #expect(try await server.apnsPayloads(token: RegistrationFacts.hex(first)).isEmpty)

        // The backend deletes the device; the next registration makes it again, without its activities, and this
        // process sets the activity's token again.
        #expect(try await server.backend("DELETE", "v1/apps/demo/devices/\(id)").status == 204)
        #expect(try await server.backend("GET", "v1/apps/demo/devices/\(id)").status == 404)
        #expect(try await device.tern.registerNow(facts(device.token), force: true).outcome == .sent)
        try await waitUntil("the activity's token is set for the device made again") {
            try await activities(id).first?["token"] == .string(RegistrationFacts.hex(second))
        }

        // The activity ends: its token is gone from the server, and the next registration does not set it again.
        #expect(try await device.tern.endActivity(activity))
        #expect(try await activities(id).isEmpty)
        #expect(try await !device.tern.endActivity(activity), "the server has no token for it any more")
        #expect(try await device.tern.registerNow(facts(device.token), force: true).outcome == .sent)
        // The activities go oldest first: once one given now is set, the ended one would have been set before it.
        device.tern.register(activityToken: randomToken(), for: "match-8")
        try await waitUntil("the next activity is set") { try await !activities(id).isEmpty }
        #expect(try await activities(id).compactMap { $0["activityId"]?.stringValue } == ["match-8"])
    }

    /// The backend makes a channel for a match; the app finds it by the match's id with the app key alone, before it
    /// has registered, and the backend's broadcast goes out on it.
    @Test func theAppFindsTheBroadcastChannelOfAMatchByItsName() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        #expect(try await device.tern.broadcastChannel(named: "final-2026") == nil, "none yet")
        let made = try await server.backend("PUT", "v1/apps/demo/broadcast-channels/final-2026", #"{"storage": "mostRecent"}"#)
        #expect(made.status == 201)
        let channel = try #require(try await device.tern.broadcastChannel(named: "final-2026"))
        #expect(channel.channelID == made.json?["channelId"]?.stringValue && channel.storage == "mostRecent")
        #expect(channel.environment == "production")
        let sent = try await server.backend(
            "POST", "v1/apps/demo/broadcast-channels/final-2026/broadcasts",
            #"{"payload": {"aps": {"event": "update", "timestamp": 1796198400, "content-state": {"home": 2, "away": 1}}}}"#)
        #expect(sent.status == 200 && sent.json?["channelId"]?.stringValue == channel.channelID)
        do {
            _ = try await device.tern.broadcastChannel(named: "a/b")
            Issue.record("a name with a slash was sent")
        } catch {
            #expect(error.kind == .invalidArgument)
        }
    }

    @Test func aNotificationServiceExtensionReportsTheDelivery() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        let push = try await server.push(
            online(id, #"{"title": "to the extension", "mutableContent": true}"#, delivery: "auto", extra: #", "ackTimeout": 0.2"#))
        try await waitUntil("the push falls back to APNs") { try await server.counts(ofPush: push)?["fellBackToAPNs"] == .int(1) }
        let fallback = try #require(try await server.apnsPayloads(token: device.hexToken).last)
        // The extension reads the identity the app keeps (a shared keychain group in an app) and acknowledges.
        let receipts = DeliveryReceipts(configuration: server.configuration(), identityStore: device.identities)
        #expect(await receipts.reportDelivery(of: TernPayload(json: fallback)) == .sent)
        try await waitUntil("the receipt is counted") { try await server.counts(ofPush: push)?["ackedAfterFallback"] == .int(1) }
        #expect(await receipts.reportDelivery(of: TernPayload(json: ["aps": ["alert": "plain"]])) == .notFromTern)
        // A push through APNs alone: acknowledged by its id, and counted as received, once.
        let plain = try await server.push(#"{"audience": {"devices": ["\#(id)"]}, "notification": {"title": "plain", "mutableContent": true}}"#)
        let arrived = try #require(try await server.apnsPayloads(token: device.hexToken).last)
        #expect(await receipts.reportDelivery(of: TernPayload(json: arrived)) == .sent)
        #expect(await receipts.reportDelivery(of: TernPayload(json: arrived)) == .sent, "again: taken, not counted")
        #expect(try await server.counts(ofPush: plain)?["received"] == .int(1))
        let stranger = DeliveryReceipts(
            configuration: server.configuration(), identityStore: MemoryIdentityStore())
        #expect(await stranger.reportDelivery(of: TernPayload(json: fallback)) == .notRegistered)
    }

    @Test func aWakePushConnectsFetchesAndGoesBackToTheBackground() async throws {
        let server = try await TernServerProcess.start()
        let device = Device(server)
        let id = try await device.register()
        let push = try await server.push(online(id, #"{"data": {"sync": true}}"#, extra: #", "wake": true"#))
        try await waitUntil("the wake push goes through APNs") {
            try await server.apnsPayloads(token: device.hexToken).contains { $0["tern"]?["wake"] == .bool(true) }
        }
        let wake = try #require(try await server.apnsPayloads(token: device.hexToken).last)
        #expect(await device.tern.receive(TernPayload(json: wake)) == .fetched(newMessages: 1))
        #expect(try await device.nextMessage("the fetched message").data == ["sync": true])
        try await waitUntil("acknowledged") { try await server.counts(ofPush: push)?["acked"] == .int(1) }
        try await waitUntil("back to the background") { await device.tern.channelState == .idle }
    }
}

extension TernJSON {
    fileprivate var arrayFirst: TernJSON? {
        guard case .array(let items) = self else { return nil }
        return items.first
    }
}
#endif
