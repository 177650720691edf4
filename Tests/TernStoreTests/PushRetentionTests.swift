import Foundation
import SQLKit
import Testing
@testable import TernStore

/// Completed pushes deleted once past their retention (`purgeFinishedPushes`), with their failures and chunks, in
/// bounded transactions. On SQLite and PostgreSQL alike.
@Suite("Push retention")
struct PushRetentionTests {
    @Test("only completed pushes past the cutoff go, with their failures and chunks; one whose messages are kept waits for them",
        arguments: StoreFactory.all)
    func onlyCompletedPushesPastTheCutoffGo(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            try await complete("old", failures: 2, at: time(100), store)
            try await complete("recent", failures: 1, at: time(1_000), store)
            try await complete("held", failures: 0, at: time(100), store)
            _ = try await store.keepMessages(
                [DeviceMessageDraft(deviceID: "device-1", id: "held-1", notification: #"{"title":"held"}"#, data: nil)],
                app: "demo", pushID: "held", at: time(100), expiresAt: time(5_000))
            _ = try await store.createPush(makePush("unfinished", at: time(0)))

            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 100) == PushPurge(pushes: 1, failures: 2, more: false))
            #expect(try await store.push(app: "demo", id: "old") == nil)
            #expect(try await store.failures(pushID: "old", after: nil, limit: 10).items.isEmpty)
            #expect(try await rows("push_chunks", of: "old", store) == 0)
            #expect(try await store.push(app: "demo", id: "recent")?.counts.failed == 1, "finished after the cutoff")
            #expect(try await rows("push_chunks", of: "recent", store) == 1)
            #expect(try await store.push(app: "demo", id: "unfinished")?.status == .pending, "never finished")
            #expect(try await store.push(app: "demo", id: "held") != nil, "its device message is still kept")
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 100) == PushPurge(pushes: 0, failures: 0, more: false))

            // Once its message has expired and been swept, it goes too.
            #expect(try await store.purgeExpiredMessages(before: time(6_000), limit: 100) == 1)
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 100) == PushPurge(pushes: 1, failures: 0, more: false))
            #expect(try await store.push(app: "demo", id: "held") == nil)
            #expect(try await store.push(app: "demo", id: "recent") != nil)
        }
    }

    @Test("a push's failures go a limit at a time before its row, which shows all its counts until then", arguments: StoreFactory.all)
    func failuresGoInPiecesBeforeTheirPush(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            try await complete("big", failures: 5, at: time(100), store)
            try await complete("small-1", failures: 0, at: time(200), store)
            try await complete("small-2", failures: 0, at: time(300), store)

            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 0, failures: 2, more: true))
            let big = try #require(try await store.push(app: "demo", id: "big"))
            #expect(big.counts.failed == 5, "its counts are its chunks', kept until the row goes")
            #expect(try await store.failures(pushID: "big", after: nil, limit: 10).items.count == 3)
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 0, failures: 2, more: true))
            // The last failure, then the two oldest pushes: a whole limit of them, so there may be more.
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 2, failures: 1, more: true))
            #expect(try await store.push(app: "demo", id: "big") == nil)
            #expect(try await store.push(app: "demo", id: "small-1") == nil)
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 1, failures: 0, more: false))
            #expect(try await rows("push_chunks", of: nil, store) == 0)
        }
    }

    @Test("a push's devices' reports go with its failures, a limit of both at a time, before its row", arguments: StoreFactory.all)
    func reportsGoInPiecesBeforeTheirPush(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            try await complete("opened", failures: 1, at: time(100), store)
            for n in 1...3 { _ = try await store.recordPushReport(.opened, pushID: "opened", deviceID: "device-\(n)", at: time(150), openEvent: nil) }
            _ = try await store.recordPushReport(.received, pushID: "opened", deviceID: "device-1", at: time(150), openEvent: nil)
            try await complete("kept", failures: 0, at: time(1_000), store)
            _ = try await store.recordPushReport(.received, pushID: "kept", deviceID: "device-1", at: time(1_100), openEvent: nil)

            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 0, failures: 1, reports: 1, more: true))
            #expect(try await store.pushReportCounts(pushID: "opened").opened == 2, "counted until the row goes")
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 0, failures: 0, reports: 2, more: true))
            #expect(try await store.purgeFinishedPushes(before: time(500), limit: 2) == PushPurge(pushes: 1, failures: 0, reports: 0, more: false))
            #expect(try await store.push(app: "demo", id: "opened") == nil)
            #expect(try await rows("push_reports", of: "opened", store) == 0)
            #expect(try await store.pushReportCounts(pushID: "kept").received == 1, "finished after the cutoff")
        }
    }

    /// An app with three devices.
    private func prepared(_ store: any TernStore) async throws {
        try await store.createApp(makeApp())
        for n in 1...3 { _ = try await store.register(registration("device-\(n)", token: "token-\(n)"), app: "demo", at: time(0)) }
    }

    /// Push `id` to every device, sent in one chunk and recorded at `finished`: the first `failures` devices failed.
    private func complete(_ id: String, failures: Int, at finished: Date, _ store: any TernStore) async throws {
        _ = try await store.createPush(makePush(id, at: finished))
        let chunk = try #require(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: finished).chunk)
        #expect(chunk.push.id == id)
        let progress = PushProgress(
            accepted: chunk.recipients.count - failures, failures: (0..<failures).map { failure("token-\($0)", at: finished) }, pruned: 0)
        #expect(try await store.recordChunk(pushID: id, sequence: chunk.sequence, node: "a", progress, at: finished) == .recorded(pushCompleted: true))
    }

    /// Rows of `table` for push `pushID` (every push's when nil).
    private func rows(_ table: String, of pushID: String?, _ store: any TernStore) async throws -> Int {
        let sql = try #require(store as? SQLStore)
        return try await sql.exclusive { db in
            let query: SQLQueryString = pushID.map { "SELECT COUNT(*) AS n FROM \(unsafeRaw: table) WHERE push_id = \(bind: $0)" }
                ?? "SELECT COUNT(*) AS n FROM \(unsafeRaw: table)"
            return try await db.raw(query).first(decodingColumn: "n", as: Int.self) ?? 0
        }
    }
}
