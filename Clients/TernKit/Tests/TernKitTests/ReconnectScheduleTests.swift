import Foundation
import TernKit
import Testing

/// What the online channel does when a connection ends or cannot be made, as values: no sockets, no clocks.
struct ReconnectScheduleTests {
    private func schedule() -> ReconnectSchedule {
        ReconnectSchedule(backoff: RetryBackoff(initial: 1, maximum: 16), stableAfter: 30)
    }

    @Test func aConnectionThatKeepsFailingWaitsLongerEachTimeUpToTheMaximum() {
        var schedule = schedule()
        let waits = (0..<7).map { _ in schedule.couldNotConnect(unit: 1) }
        #expect(waits == [1, 2, 4, 8, 16, 16, 16].map { .reconnect(after: $0) })
        // Jittered: each wait is drawn between half and all of it.
        #expect(schedule.couldNotConnect(unit: 0) == .reconnect(after: 8))
    }

    @Test func aConnectionThatLastedStartsAgainFromTheShortestWait() {
        var schedule = schedule()
        for _ in 0..<4 { _ = schedule.couldNotConnect(unit: 1) }
        schedule.opened()
        #expect(schedule.closed(code: 1001, lasted: 45, unit: 1) == .reconnect(after: 1))
        // One that ended early counts as another failure.
        #expect(schedule.closed(code: 1006, lasted: 2, unit: 1) == .reconnect(after: 2))
        #expect(schedule.closed(code: nil, lasted: 0.1, unit: 1) == .reconnect(after: 4))
    }

    @Test(arguments: [1000, 1001, 1006, 1011, 4000])
    func theServerStoppingOrTheNetworkGoingAwayReconnects(_ code: Int) {
        var schedule = schedule()
        #expect(schedule.closed(code: code, lasted: 60, unit: 0.5) == .reconnect(after: 0.75))
    }

    @Test func replacedByANewerConnectionStopsInsteadOfFightingForTheDevice() {
        var schedule = schedule()
        #expect(schedule.closed(code: 4409, reason: "replaced by a newer connection of this device", lasted: 60, unit: 1) == .stop(.replaced))
    }

    @Test(arguments: [4400, 1003, 1007, 1009])
    func aFrameTheServerCannotReadStopsRatherThanRepeatingIt(_ code: Int) {
        var schedule = schedule()
        #expect(
            schedule.closed(code: code, reason: "bad frame: ids", lasted: 1, unit: 1) == .stop(.protocolError(code: code, reason: "bad frame: ids")))
    }

    @Test func theComingToTheForegroundConnectsAtOnce() {
        var schedule = schedule()
        for _ in 0..<5 { _ = schedule.couldNotConnect(unit: 1) }
        schedule.started()
        #expect(schedule.couldNotConnect(unit: 1) == .reconnect(after: 1))
    }

    @Test func aDeviceTheServerNoLongerTakesRegistersOnceThenStops() {
        var schedule = schedule()
        let forbidden = TernError(
            .refused, "with the app key, a device acts only as itself", status: 403, serverError: "forbidden", field: "X-Tern-Device-Secret")
        #expect(schedule.refused(forbidden, unit: 1) == .register)
        // Registered again and refused again: no loop.
        #expect(schedule.refused(forbidden, unit: 1) == .stop(.refused(forbidden)))
        // A connection that opens proves the credentials: the next refusal may register again.
        schedule.opened()
        let unknown = TernError(.refused, "no device", status: 404, serverError: "notFound")
        #expect(schedule.refused(unknown, unit: 1) == .register)
    }

    @Test func refusalsThatPassWaitAndOnesThatDoNotStop() {
        var schedule = schedule()
        // 426 to the plain request: the server would take the connection now.
        #expect(schedule.refused(nil, unit: 1) == .reconnect(after: 1))
        let busy = TernError(.refused, "too many wrong secrets", status: 429, retryAfter: 40)
        #expect(schedule.refused(busy, unit: 1) == .reconnect(after: 40))
        let down = TernError(.refused, "HTTP 503", status: 503)
        #expect(schedule.refused(down, unit: 1) == .reconnect(after: 4))
        let badKey = TernError(.refused, "unknown app key", status: 401, serverError: "unauthorized")
        #expect(schedule.refused(badKey, unit: 1) == .stop(.refused(badKey)))
    }
}

/// Each message id handed to the app once, within a bounded memory.
struct MessageDeduplicatorTests {
    @Test func anIdIsNewOnceWhicheverCaseItIsWrittenIn() {
        var seen = MessageDeduplicator(capacity: 10)
        #expect(seen.firstSighting(of: "75F7E009-0893-555A-98AD-B527BF108E29") == true)
        #expect(seen.firstSighting(of: "75f7e009-0893-555a-98ad-b527bf108e29") == false)
        #expect(seen.count == 1)
    }

    @Test func itRemembersTheLastCapacityIdsAndForgetsTheOldestFirst() {
        var seen = MessageDeduplicator(capacity: 3)
        for id in ["a", "b", "c", "d"] { #expect(seen.firstSighting(of: id) == true) }
        #expect(seen.count == 3)
        #expect(!seen.contains("a"))
        #expect(["b", "c", "d"].allSatisfy { seen.contains($0) })
        // "a" is new again; "b" goes now.
        #expect(seen.firstSighting(of: "a") == true)
        #expect(!seen.contains("b"))
        #expect(seen.firstSighting(of: "d") == false)
        for index in 0..<1000 { _ = seen.firstSighting(of: "id-\(index)") }
        #expect(seen.count == 3)
    }

    @Test func aForgottenIdIsNewAgain() {
        var seen = MessageDeduplicator(capacity: 3)
        _ = seen.firstSighting(of: "a")
        seen.forget("a")
        #expect(seen.firstSighting(of: "a") == true)
    }

    /// A probe's case: an id forgotten (its APNs copy came while the buffer was full) and seen again (its channel copy)
    /// left the window when its first slot came round, with two newer ids seen since: the window had shrunk.
    @Test func anIdSeenAgainAfterItWasForgottenStaysForAWholeWindow() {
        var seen = MessageDeduplicator(capacity: 3)
        _ = seen.firstSighting(of: "x")
        seen.forget("x")
        #expect(seen.firstSighting(of: "x") == true)
        for id in ["a", "b"] { #expect(seen.firstSighting(of: id) == true) }
        #expect(seen.firstSighting(of: "x") == false, "x is among the last three seen")
        #expect(seen.count == 3)
        // Its second slot comes round after three more: then it goes, as any id does.
        for id in ["c", "d", "e"] { _ = seen.firstSighting(of: id) }
        #expect(!seen.contains("x") && seen.count == 3)
        for index in 0..<1000 { _ = seen.firstSighting(of: "id-\(index)") }
        #expect(seen.count == 3)
    }
}

/// The channel carrying out those decisions against scripted connections: the waits it keeps, and a connection that
/// went silent. (The schedule above decides; these check that nothing cuts a wait short or leaves a dead connection.)
struct OnlineChannelTests {
    private let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_x")

    private func tern(_ transport: ScriptedChannelTransport, _ http: ScriptedHTTP, pingInterval: TimeInterval = 30) -> Tern {
        var configuration = TernConfiguration(serverURL: URL(string: "http://127.0.0.1:8080")!, appID: "demo", appKey: "tak_x")
        configuration.channel.reconnect = RetryBackoff(initial: 0.01, maximum: 0.02)
        configuration.channel.pingInterval = pingInterval
        return Tern(
            configuration: configuration, identityStore: MemoryIdentityStore(identity), stateStore: MemoryStateStore(), channelTransport: transport,
            httpTransport: http)
    }

    private static let unread = ScriptedHTTP.Answer.status(200, #"{"messages":[],"unread":0}"#)

    /// A 503 with Retry-After on the upgrade: the ring of coming to the foreground (kept from before the first attempt)
    /// does not end the wait, and neither does coming to the foreground again (that skips TernKit's own back-off only).
    @Test func aRetryAfterOnTheUpgradeIsKeptWhenTheAppComesToTheForegroundAgain() async throws {
        let transport = ScriptedChannelTransport([.refuse, .open(ScriptedConnection())])
        let http = ScriptedHTTP(
            [], always: ["/connect": .status(503, #"{"error":"unavailable","message":"try later"}"#, headers: ["Retry-After": "1"]), "/inbox": Self.unread])
        let tern = tern(transport, http)
        tern.setForeground(true)
        let runner = Task { await tern.run() }
        defer { runner.cancel() }
        try await waitUntil("the refused upgrade") { http.requests.contains { $0.url?.path.hasSuffix("/connect") == true } }
        tern.setForeground(true)
        try await waitUntil("connected after the Retry-After") { await tern.channelState == .connected }
        let attempts = transport.attempts
        try #require(attempts.count == 2)
        #expect(attempts[1] - attempts[0] >= .milliseconds(990), "\(attempts[1] - attempts[0])")
    }

    /// A connection that says nothing more and never fails (a frozen network): the unanswered ping closes it, and the
    /// channel connects again and receives there.
    @Test func aConnectionWhosePongDoesNotComeIsClosedAndMadeAgain() async throws {
        let silent = ScriptedConnection(answersPings: false)
        let next = ScriptedConnection()
        let transport = ScriptedChannelTransport([.open(silent), .open(next)])
        let tern = tern(transport, ScriptedHTTP([], always: ["/inbox": Self.unread]), pingInterval: 1)
        let runner = Task { await tern.run() }
        defer { runner.cancel() }
        tern.setForeground(true)
        try await waitUntil("the channel connects and pings") { silent.pings == 1 }
        try await waitUntil("the silent connection is closed and another made", within: 5) {
            silent.isClosed && transport.attempts.count == 2
        }
        #expect(silent.pings == 1)
        let id = UUID().uuidString.lowercased()
        next.deliver(messageFrame(id: id, sequence: 1, title: "after"))
        var messages = tern.messages.makeAsyncIterator()
        #expect(await messages.next()?.id == id)
    }
}
