import Foundation
import Logging
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// The test clock itself: what the timed-work tests below rely on.
struct ManualClockTests {
    @Test func aSleepEndsWhenAnAdvanceReachesItsDeadlineAndNotBefore() async throws {
        let clock = ManualClock()
        let start = clock.wall.now
        let sleeping = Task { try await clock.sleep(for: .seconds(10)) }
        let deadline = clock.now.advanced(by: .seconds(10))
        try await withTimeout(10, "the task to sleep") { await clock.waitUntilSleeping(until: deadline) }
        clock.advance(by: .seconds(9))
        #expect(clock.sleepers == [deadline], "9 s into a 10 s sleep")
        clock.advance(by: .seconds(1))
        try await withTimeout(10, "the sleep to end") { try await sleeping.value }
        #expect(clock.sleepers.isEmpty)
        #expect(clock.wall.now.timeIntervalSince(start) == 10, "the wall clock moves with it")
    }

    @Test func aWaitForALabelledSleepIsNotEndedByAnotherSleepUntilTheSameInstant() async throws {
        let clock = ManualClock()
        let deadline = clock.now.advanced(by: .seconds(1))
        // Another loop's sleep already ends then, as the server's one-second sweep does.
        let other = Task { try await clock.sleep(for: .seconds(1)) }
        try await withTimeout(10, "the other sleep") { await clock.waitUntilSleeping(until: deadline) }
        let webhooks = Task { try await clock.labeled("webhooks").sleep(for: .seconds(1)) }
        try await withTimeout(10, "the webhooks' sleep") { await clock.waitUntilSleeping(until: deadline, label: "webhooks") }
        // Neither the unlabelled sleep nor the webhooks' ends a wait for the badge updates' sleep: it stays waiting
        // (a wait that any sleep ended would return at once, and never be counted as waiting).
        let waiting = Task { await clock.waitUntilSleeping(until: deadline, label: "badgeUpdates") }
        try await waitUntil("the wait for the badge updates' sleep to be waiting") { clock.watching == 1 }
        let badges = Task { try await clock.labeled("badgeUpdates").sleep(for: .seconds(1)) }
        try await withTimeout(10, "the wait for the badge updates' sleep") { await waiting.value }
        #expect(clock.watching == 0)
        clock.advance(by: .seconds(1))
        for sleep in [other, webhooks, badges] { try await withTimeout(10, "the sleeps to end") { try await sleep.value } }
    }

    @Test func aCancelledSleepThrowsAtOnce() async throws {
        let clock = ManualClock()
        let sleeping = Task { try await clock.sleep(for: .seconds(10)) }
        try await withTimeout(10, "the task to sleep") { await clock.waitUntilSleeping(until: clock.now.advanced(by: .seconds(10))) }
        sleeping.cancel()
        await #expect(throws: CancellationError.self) { try await withTimeout(10, "the sleep to end") { try await sleeping.value } }
        #expect(clock.sleepers.isEmpty)
    }
}

/// Periodic and delayed work driven by a manual clock, on a real SQLite file and without a server.
@Suite(.serialized) struct TimedWorkTests {
    /// The failures these tests cause on purpose are logged as warnings: not shown.
    static let logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .error
        return logger
    }()

    /// A migrated SQLite store in a temporary file with the demo app (`webhookURL` as given), for `body`.
    private static func withStore<T>(
        webhookURL: String? = nil, at now: Date, _ body: (SQLStore) async throws -> T
    ) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tern-timed-\(UUID().uuidString).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLStore.openSQLite(path: path, logger: Self.logger)
        do {
            try await store.migrate()
            try await store.createApp(AppRecord(
                id: "demo", topic: "com.example.demo", environment: .production, endpoint: nil, sealedCredentials: [1],
                appKeyHash: [2], masterSecretHash: [3], webhookURL: webhookURL, createdAt: now, updatedAt: now))
            let result = try await body(store)
            try await store.close()
            return result
        } catch {
            try? await store.close()
            throw error
        }
    }

    @Test func theSweeperDeletesNothingBeforeItsIntervalAndTheExpiredOnceItComes() async throws {
        let clock = ManualClock()
        let start = clock.wall.now
        try await Self.withStore(at: start) { store in
            let owner = InboxOwner.alias("user-1")
            let soon = InboxMessage(id: "soon", appID: "demo", title: "soon", body: nil, data: nil, createdAt: start, expiresAt: start + 10)
            let later = InboxMessage(id: "later", appID: "demo", title: "later", body: nil, data: nil, createdAt: start, expiresAt: start + 3600)
            _ = try await store.deliverToInbox(soon, owners: [owner], cap: 10, at: start)
            _ = try await store.deliverToInbox(later, owners: [owner], cap: 10, at: start)
            // What is stored, expired or not.
            @Sendable func stored() async throws -> [String] {
                try await store.inbox(app: "demo", owner: owner, after: nil, limit: 10, at: start).items.map(\.message.id)
            }

            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), clocks: .manual(clock), logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await sweeper.run() }
                // Its first sweep, at the start, finds nothing expired; then it waits a whole interval.
                try await withTimeout(10, "the first sweep") { await clock.waitUntilSleeping(until: clock.now.advanced(by: .seconds(60))) }
                // "soon" has expired 20 s ago, but it is not the sweeper's time yet: it sleeps on.
                clock.advance(by: .seconds(30))
                #expect(clock.sleepers == [ManualClock.Instant(offset: .seconds(60))])
                #expect(try await stored() == ["soon", "later"])
                // At the interval it sweeps, then sleeps again: once it does, the sweep is done.
                clock.advance(by: .seconds(30))
                try await withTimeout(10, "the second sweep") { await clock.waitUntilSleeping(until: clock.now.advanced(by: .seconds(60))) }
                #expect(try await stored() == ["later"])
                group.cancelAll()
            }
        }
    }

    /// With the database away, the webhook sender logged every look it took (twice a minute for as long as it
    /// lasted, a probe found); the deployment guide promises a line when it starts and one a minute.
    @Test func aWebhookSenderWhoseDatabaseIsAwaySaysSoOnceNotAtEveryLook() async throws {
        let clock = ManualClock()
        let logs = LogRecorder()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tern-timed-\(UUID().uuidString).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLStore.openSQLite(path: path, logger: Self.logger)
        try await store.migrate()
        // Closed: every call fails from here on, as while the database is away.
        try await store.close()
        let sender = WebhookSender(
            store: store, serverKey: try ServerKey(bytes: Array(repeating: 7, count: 32)),
            policy: WebhookAddressPolicy(allowPrivateNetworks: true), clocks: .manual(clock), logger: logs.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sender.run() }
            // Each look fails and the sender waits for the next (the back-off's pauses): seven looks.
            for look in 1...6 {
                try await waitUntil("look \(look) to fail and the sender to wait") { !clock.sleepers.isEmpty }
                clock.advance(by: clock.now.duration(to: clock.sleepers[0]))
            }
            try await waitUntil("the seventh look") { !clock.sleepers.isEmpty }
            let said = logs.messages(containing: "cannot read apps for webhooks")
            #expect(said.count == 1, "\(said)")
            group.cancelAll()
        }
    }

    @Test func aFailingWebhookIsRetriedAfterOneSecondThenTwoAndNotBetween() async throws {
        let clock = ManualClock()
        let logs = LogRecorder()
        let receiver = WebhookTests.Receiver(failures: 2)
        try await receiver.run { port in
            try await Self.withStore(webhookURL: "http://127.0.0.1:\(port)/hook", at: clock.wall.now) { store in
                _ = try await store.register(
                    DeviceRegistration(deviceID: Fixture.device(1), token: Fixture.token(1), environment: .production), app: "demo",
                    at: clock.wall.now)
                let event = try await store.deactivateToken(
                    app: "demo", token: Fixture.token(1), reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: clock.wall.now)
                #expect(event != nil)
                let sender = WebhookSender(
                    store: store, serverKey: try ServerKey(bytes: Array(repeating: 7, count: 32)),
                    policy: WebhookAddressPolicy(allowPrivateNetworks: true), clocks: .manual(clock), logger: logs.logger)
                let attempts = { receiver.received.withLock { $0.map(\.answered) } }
                // The receiver has a post before the sender has its answer, and a look waits a second of real time for
                // its posts, then sleeps on the clock all the same: the test moves the clock once the sender has taken in
                // the answer (and dated the back-off), which it logs. Moved before, the clock wakes a look that passes the
                // app over as still posting, and the back-off is dated from the moved clock: every try comes late.
                func senderFailed(_ count: Int) async throws {
                    try await waitUntil("\(count) failed posts") { logs.messages(containing: "webhook delivery failed").count == count }
                }
                // Some task (the sender: nothing else uses this clock) sleeps until `seconds` on the clock.
                func senderWaits(until seconds: Int) async throws {
                    try await withTimeout(10, "the sender to wait until \(seconds) s") {
                        await clock.waitUntilSleeping(until: ManualClock.Instant(offset: .seconds(seconds)))
                    }
                }

                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await sender.run() }
                    // The first attempt is at once; it fails, and the sender looks again a second later.
                    try await senderFailed(1)
                    try await senderWaits(until: 1)
                    clock.advance(by: .milliseconds(500))
                    #expect(attempts() == [500], "nothing within the first second")
                    // At 1 s: the second attempt, which fails too; the back-off doubles to 2 s.
                    clock.advance(by: .milliseconds(500))
                    try await senderFailed(2)
                    #expect(attempts() == [500, 500])
                    try await senderWaits(until: 2)
                    // At 2 s the sender looks, and leaves the app alone: its next try is at 3 s.
                    clock.advance(by: .seconds(1))
                    try await senderWaits(until: 3)
                    #expect(attempts() == [500, 500], "no attempt within the back-off")
                    // At 3 s: the third attempt, acknowledged.
                    clock.advance(by: .seconds(1))
                    try await waitUntil("the third attempt") { attempts().count == 3 }
                    #expect(attempts() == [500, 500, 200])
                    group.cancelAll()
                }
            }
        }
    }
}
