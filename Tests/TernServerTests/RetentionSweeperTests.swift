import Foundation
import Logging
import MetricsTestKit
import Synchronization
import TernTestSupport
import Testing
@testable import TernStore
@testable import TernServer

/// The retention sweeper on a real SQLite file: expired inbox messages, and pushes past `delivery.pushRetention`.
struct RetentionSweeperTests {
    @Test func theSweeperDeletesEverythingExpiredInBatchesAndKeepsTheRest() async throws {
        try await withStore { store, now in
            let owners = (0..<1_500).map { InboxOwner.alias("user-\($0)") }
            let expired = InboxMessage(id: "old", appID: "demo", title: "old", body: nil, data: nil, createdAt: now.addingTimeInterval(-20), expiresAt: now.addingTimeInterval(-10))
            let current = InboxMessage(id: "new", appID: "demo", title: "new", body: nil, data: nil, createdAt: now, expiresAt: now.addingTimeInterval(3600))
            _ = try await store.deliverToInbox(expired, owners: owners, cap: 10, at: now.addingTimeInterval(-20))
            _ = try await store.deliverToInbox(current, owners: [owners[0]], cap: 10, at: now)

            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), logger: Logger(label: "test"))
            #expect(await sweeper.sweep(now: now).inboxEntries == 1_500, "more than one batch of \(RetentionSweeper.batch)")
            #expect(await sweeper.sweep(now: now).inboxEntries == 0)
            let left = try await store.inbox(app: "demo", owner: owners[0], after: nil, limit: 10, at: now.addingTimeInterval(-30))
            #expect(left.items.map(\.message.id) == ["new"])
        }
    }

    /// A Live Activity runs at most 8 hours and stays on the Lock Screen at most 4 more: twelve hours after it started,
    /// no update can reach it, and its tokens go, however many devices registered one.
    @Test func activitiesTwelveHoursAfterTheyStartedAreForgotten() async throws {
        try await withStore { store, now in
            let hour = 3600.0
            for n in 0..<3 { _ = try await store.register(registration(n), app: "demo", at: now.addingTimeInterval(-13 * hour)) }
            // Three devices follow five matches each, started just over twelve hours ago.
            for n in 0..<15 {
                _ = try await store.setActivityToken(
                    app: "demo", deviceID: "device-\(n % 3)", activity: "match-\(n / 3)", token: String(format: "%064x", n),
                    at: now.addingTimeInterval(-12 * hour - 1))
            }
            _ = try await store.setActivityToken(app: "demo", deviceID: "device-0", activity: "tonight", token: "ab", at: now.addingTimeInterval(-11 * hour))
            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), logger: Logger(label: "test"))
            #expect(await sweeper.sweep(now: now) == .init(activityTokens: 15))
            let left = try await store.activityTokens(app: "demo", deviceIDs: ["device-0", "device-1", "device-2"])
            #expect(left.mapValues { $0.map(\.activityID) } == ["device-0": ["tonight"]])
            #expect(await sweeper.sweep(now: now.addingTimeInterval(hour + 1)) == .init(activityTokens: 1))
        }
    }

    /// A backlog takes batch after batch (minutes, after an upgrade); a server stopping meanwhile must not wait for
    /// them all. A step that always says there may be more, and cancels its task during the first batch: no second
    /// batch is asked for.
    @Test func batchesStopOnceTheSweepsTaskIsCancelled() async {
        let batches = Mutex(0)
        let sweep = Task {
            await RetentionSweeper.untilDone(FailureLog("test", logger: Logger(label: "test"))) {
                let taken = batches.withLock { $0 += 1; return $0 }
                if taken == 1 { withUnsafeCurrentTask { $0?.cancel() } }
                return taken < 5
            }
        }
        await sweep.value
        #expect(batches.withLock { $0 } == 1)
    }

    /// Pushes were kept until their app was deleted: a backend pushing to one user at a time grew the database by
    /// every push it ever made.
    @Test func pushesCompletedLongerThanTheRetentionAgoAreDeletedWithAllTheirFailures() async throws {
        try await withStore { store, now in
            for n in 0..<3 { _ = try await store.register(registration(n), app: "demo", at: now) }
            let day = 86_400.0
            // More failures than one batch, so the sweep takes several transactions for them.
            try await complete("old", failures: 2_500, at: now.addingTimeInterval(-31 * day), store)
            try await complete("recent", failures: 1, at: now.addingTimeInterval(-29 * day), store)

            let keeping = RetentionSweeper(store: store, interval: .seconds(60), pushRetention: .zero, logger: Logger(label: "test"))
            #expect(await keeping.sweep(now: now) == .init(), "zero keeps every push")
            #expect(try await store.push(app: "demo", id: "old") != nil)

            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), pushRetention: .seconds(30 * 86_400), logger: Logger(label: "test"))
            #expect(await sweeper.sweep(now: now) == .init(pushes: 1, pushFailures: 2_500))
            #expect(try await store.push(app: "demo", id: "old") == nil)
            #expect(try await store.failures(pushID: "old", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.push(app: "demo", id: "recent")?.counts.failed == 1)
            // A day later, the other one is past it too.
            #expect(await sweeper.sweep(now: now.addingTimeInterval(day + 1)) == .init(pushes: 1, pushFailures: 1))
            #expect(try await store.push(app: "demo", id: "recent") == nil)
        }
    }

    /// The opens recorded for an app's webhook go with the pushes' retention, posted or not: a receiver down for a
    /// month does not keep them for ever.
    @Test func opensRecordedForTheWebhookGoAfterThePushesRetention() async throws {
        try await withStore { store, now in
            _ = try await store.register(registration(0), app: "demo", at: now)
            let day = 86_400.0
            let subject = OpenEventSubject(app: "demo", alias: nil)
            for (id, age) in [("old", 31.0), ("recent", 29.0)] {
                _ = try await store.createPush(PushRecord(
                    id: id, appID: "demo", idempotencyKey: nil, audience: .everyone, notification: Array("{}".utf8), createdAt: now))
                _ = try await store.recordPushReport(
                    .opened, pushID: id, deviceID: registration(0).deviceID, at: now.addingTimeInterval(-age * day), openEvent: subject)
            }
            let keeping = RetentionSweeper(store: store, interval: .seconds(60), pushRetention: .zero, logger: Logger(label: "test"))
            #expect(await keeping.sweep(now: now) == .init(), "zero keeps them")
            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), pushRetention: .seconds(30 * 86_400), logger: Logger(label: "test"))
            #expect(await sweeper.sweep(now: now) == .init(openEvents: 1))
            #expect(try await store.openEvents(app: "demo", after: nil, limit: 10).map(\.pushID) == ["recent"])
        }
    }

    /// A push sent in full that an earlier version left uncompleted (its last chunk closed without the completion
    /// check, as two nodes on PostgreSQL could) shows `sending` for ever: the next sweep completes it, and says so.
    @Test func aPushSentInFullButNeverMarkedCompletedIsCompletedByTheNextSweep() async throws {
        try await withStore { store, now in
            for n in 0..<3 { _ = try await store.register(registration(n), app: "demo", at: now) }
            _ = try await store.createPush(PushRecord(
                id: "stranded", appID: "demo", idempotencyKey: nil, audience: .everyone, notification: Array("{\"aps\":{}}".utf8),
                createdAt: now))
            guard case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 100, leaseUntil: now.addingTimeInterval(60), at: now) else {
                Issue.record("the push's one chunk was not claimed")
                return
            }
            let closed = try await store.transaction { db in
                try await SQLStore.addToChunk(
                    pushID: "stranded", sequence: chunk.sequence, node: "a", PushProgress(accepted: 3, failures: [], pruned: 0), mark: nil,
                    then: .close, db)
            }
            #expect(closed)
            #expect(try await store.push(app: "demo", id: "stranded")?.status == .sending)

            let logs = LogRecorder()
            let metrics = TestMetrics()
            let sweeper = RetentionSweeper(store: store, interval: .seconds(60), logger: logs.logger, metrics: metrics)
            #expect(await sweeper.sweep(now: now.addingTimeInterval(5)) == .init(strandedPushes: 1))
            // Counted among the pushes completed, as the dispatcher's are.
            #expect(try metrics.expectCounter("tern_pushes_completed_total").totalValue == 1)
            let push = try #require(try await store.push(app: "demo", id: "stranded"))
            #expect(push.status == .completed)
            // Stored in milliseconds.
            #expect(push.finishedAt.map { abs($0.timeIntervalSince(now) - 5) < 0.001 } == true)
            #expect(logs.lines(atLeast: .warning).contains { $0.contains("never marked completed") && $0.contains("stranded") })
            #expect(await sweeper.sweep(now: now.addingTimeInterval(6)) == .init(), "nothing more to complete")
        }
    }

    private func withStore(_ body: (SQLStore, Date) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tern-sweeper-\(UUID().uuidString).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLStore.openSQLite(path: path, logger: Logger(label: "test"))
        do {
            try await store.migrate()
            let now = Date()
            try await store.createApp(AppRecord(
                id: "demo", topic: "com.example.demo", environment: .production, endpoint: nil, sealedCredentials: [1],
                appKeyHash: [2], masterSecretHash: [3], webhookURL: nil, createdAt: now, updatedAt: now))
            try await body(store, now)
            try await store.close()
        } catch {
            try? await store.close()
            throw error
        }
    }

    private func registration(_ n: Int) -> DeviceRegistration {
        DeviceRegistration(deviceID: "device-\(n)", token: String(repeating: "0", count: 63) + String(n), environment: .production)
    }

    /// Push `id` to every device, sent in chunks of 100 and recorded at `finished`, with `failures` failures in all
    /// (the first chunk's, as if from its recipients; the store does not check whose they are).
    private func complete(_ id: String, failures: Int, at finished: Date, _ store: SQLStore) async throws {
        _ = try await store.createPush(PushRecord(
            id: id, appID: "demo", idempotencyKey: nil, audience: .everyone, notification: Array("{\"aps\":{}}".utf8), createdAt: finished))
        var first = true
        var completed = false
        while case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 100, leaseUntil: finished.addingTimeInterval(60), at: finished) {
            let failed = first ? (0..<failures).map {
                PushFailure(deviceID: nil, token: "token-\($0)", status: 400, reason: .apns(.badDeviceToken), at: finished)
            } : []
            first = false
            let recording = try await store.recordChunk(
                pushID: id, sequence: chunk.sequence, node: "a",
                PushProgress(accepted: chunk.recipients.count, failures: failed, pruned: 0), at: finished)
            if recording == .recorded(pushCompleted: true) { completed = true }
        }
        #expect(completed, "push \(id) completed")
    }
}
