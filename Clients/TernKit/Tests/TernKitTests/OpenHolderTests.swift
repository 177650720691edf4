import Foundation
import TernKit
import Testing

/// The notification that launched or opened the app is held until the app is ready, then handed over once (seed 004
/// #7: no guessed delay).
struct OpenHolderTests {
    private func open(_ tern: [String: TernJSON], title: String = "Your order shipped") -> OpenedNotification {
        OpenedNotification(payload: TernPayload(json: ["aps": .object(["alert": .object(["title": .string(title)])]), "tern": .object(tern)]))
    }

    @Test func anOpenIsHeldUntilTakenAndTakenOnce() {
        var holder = OpenHolder()
        let launch = open(["id": "75f7e009-0893-555a-98ad-b527bf108e29", "sequence": 1])
        #expect(holder.opened(launch) == true)
        #expect(holder.held == [launch])
        #expect(holder.take() == launch)
        #expect(holder.take() == nil)
    }

    @Test func theLaunchNotificationReportedTwiceIsHandedOverOnce() {
        // iOS gives it in the launch options and to the notification center's delegate.
        var holder = OpenHolder()
        let fromLaunchOptions = open(["messageId": "8c693256-6f6b-4bc2-bf74-5a7267737671"])
        let fromDelegate = OpenedNotification(payload: fromLaunchOptions.payload, actionIdentifier: OpenedNotification.defaultAction)
        #expect(holder.opened(fromLaunchOptions) == true)
        #expect(holder.take() == fromLaunchOptions)
        #expect(holder.opened(fromDelegate) == false)
        #expect(holder.take() == nil)
        // A notification without Tern's ids is known by its payload.
        let plain = OpenedNotification(payload: TernPayload(json: ["aps": .object(["alert": .string("hi")]), "screen": .string("orders")]))
        #expect(holder.opened(plain) == true)
        #expect(
            holder.opened(OpenedNotification(payload: TernPayload(json: ["screen": .string("orders"), "aps": .object(["alert": .string("hi")])])))
                == false)
        #expect(
            holder.opened(OpenedNotification(payload: TernPayload(json: ["aps": .object(["alert": .string("hi")]), "screen": .string("cart")])))
                == true)
    }

    @Test func itHoldsAtMostCapacityKeepingTheLatest() {
        var holder = OpenHolder(capacity: 2, memory: 4)
        let opens = (1...3).map { open(["messageId": .string(UUID().uuidString.lowercased())], title: "\($0)") }
        for opened in opens { #expect(holder.opened(opened) == true) }
        #expect(holder.held == Array(opens.suffix(2)))
    }

    @Test func theRouterHandsAHeldOpenToTheFirstWhoAsksAndAWaiterGetsTheNext() async throws {
        let tern = Tern(
            configuration: TernConfiguration(serverURL: URL(string: "http://127.0.0.1:9")!, appID: "demo", appKey: "tak_x"),
            identityStore: MemoryIdentityStore(), stateStore: MemoryStateStore(), channelTransport: testChannelTransport(),
            httpTransport: ScriptedHTTP([]))
        let launch = open(["messageId": "8c693256-6f6b-4bc2-bf74-5a7267737671"])
        tern.opened(launch)
        tern.opened(launch)
        var opens = tern.openedNotifications.makeAsyncIterator()
        #expect(await opens.next() == launch)
        // The next open reaches the app whether it was already waiting or asks after: no polling, no delay.
        let later = open(["messageId": "09ee523f-6241-483d-8f6c-d5f90c4a7f3c"])
        async let waiting = next("the next open") {
            var iterator = tern.openedNotifications.makeAsyncIterator()
            return await iterator.next()
        }
        tern.opened(later)
        #expect(try await waiting == later)
    }

    /// An `auto` message waits in TernKit's buffer (the app's loop has not taken it) when its APNs copy is opened:
    /// the app has it through the open, so `messages` must not hand it over as well.
    @Test func anOpenedMessageThatWaitsInTheBufferIsNotHandedToMessagesAsWell() async throws {
        let connection = ScriptedConnection()
        let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_x")
        let http = ScriptedHTTP([], always: ["/opens": .status(204, ""), "/inbox": .status(200, #"{"messages":[],"unread":0}"#)])
        let tern = Tern(
            configuration: TernConfiguration(serverURL: URL(string: "http://127.0.0.1:8080")!, appID: "demo", appKey: "tak_x"),
            identityStore: MemoryIdentityStore(identity), stateStore: MemoryStateStore(),
            channelTransport: ScriptedChannelTransport([.open(connection)]), httpTransport: http)
        let runner = Task { await tern.run() }
        defer { runner.cancel() }
        tern.setForeground(true)
        let opened = UUID().uuidString.lowercased()
        let next = UUID().uuidString.lowercased()
        connection.deliver(messageFrame(id: opened, sequence: 1, title: "Tap me"))
        try await waitUntil("the channel buffered the message") { connection.isWaitingForFrames }

        tern.opened(open(["id": .string(opened), "sequence": 1], title: "Tap me"))
        try await waitUntil("the open is acknowledged") { connection.sent.contains { $0.contains(opened) } }
        connection.deliver(messageFrame(id: next, sequence: 2, title: "next"))
        var messages = tern.messages.makeAsyncIterator()
        #expect(await messages.next()?.id == next)
    }
}
