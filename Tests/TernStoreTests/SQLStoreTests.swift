import Foundation
import Synchronization
import Logging
import SQLKit
import Testing
import TernTestSupport
@testable import TernStore

/// What only the SQL implementation has: its schema, its SQLite file, its transactions.
@Suite("SQLStore on SQLite")
struct SQLStoreTests {
    /// Runs `body` with the store in `directory`'s database file, closed afterwards whatever happens.
    private static func withStore(
        in directory: TemporaryDirectory, migrated: Bool = true, _ body: (SQLStore) async throws -> Void
    ) async throws {
        let store = try await SQLStore.openSQLite(path: directory.path("tern.sqlite"), logger: Logger(label: "tern.store.tests"))
        do {
            if migrated { try await store.migrate() }
            try await body(store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    private static func count(_ table: String, _ store: SQLStore) async throws -> Int {
        try await store.exclusive { db in
            try await db.raw("SELECT COUNT(*) AS n FROM \(ident: table)").first(decodingColumn: "n", as: Int.self) ?? -1
        }
    }

    @Test("migrate records each migration once and is safe to run again")
    func migrateIsIdempotent() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            try await store.migrate()
            let versions = try await store.exclusive { db in
                try await db.raw("SELECT version FROM schema_migrations ORDER BY version").all(decodingColumn: "version", as: Int.self)
            }
            #expect(versions == SQLStore.migrations(.sqlite).map(\.version))
            #expect(versions == Array(1...versions.count), "versions are numbered 1, 2, 3…")
        }
    }

    @Test("migration 9 clears the own inboxes that earlier versions left of deleted devices, and only those")
    func orphanedDeviceInboxesAreCleared() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            try await store.createApp(makeApp())
            for id in ["kept", "gone"] { _ = try await store.register(registration(id, token: "t-\(id)"), app: "demo", at: time(0)) }
            let owners: [InboxOwner] = [.device("kept"), .device("gone"), .alias("alice")]
            let message = InboxMessage(
                id: "m1", appID: "demo", title: "t", body: "b", data: nil, createdAt: time(0), expiresAt: time(10_000))
            _ = try await store.deliverToInbox(message, owners: owners, cap: 10, at: time(0))
            // As earlier versions deleted a device: its row only. Then migration 9 runs (again).
            try await store.exclusive { db in
                try await db.raw("DELETE FROM devices WHERE device_id = 'gone'").run()
                try await db.raw("DELETE FROM schema_migrations WHERE version = 9").run()
            }
            try await store.migrate()
            let left = try await store.exclusive { db in
                (
                    try await db.raw("SELECT owner FROM inbox_entries ORDER BY owner").all(decodingColumn: "owner", as: String.self),
                    try await db.raw("SELECT owner FROM inbox_owners ORDER BY owner").all(decodingColumn: "owner", as: String.self)
                )
            }
            #expect(left.0 == ["a:alice", "d:kept"])
            #expect(left.1 == ["a:alice", "d:kept"])
        }
    }

    @Test("data survives closing and reopening the file")
    func reopenKeepsData() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1", alias: "alice"), app: "demo", at: time(1))
        }
        try await Self.withStore(in: directory) { store async throws in
            #expect(try await store.device(app: "demo", deviceID: "d1")?.alias == "alice")
            #expect(try await Self.count("schema_migrations", store) == SQLStore.migrations(.sqlite).count)
        }
    }

    @Test("the connection runs in WAL mode with foreign keys and a busy timeout")
    func pragmas() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory, migrated: false) { store async throws in
            let pragmas = try await store.exclusive { db in
                (
                    try await db.raw("PRAGMA journal_mode").first(decodingColumn: "journal_mode", as: String.self),
                    try await db.raw("PRAGMA foreign_keys").first(decodingColumn: "foreign_keys", as: Int.self),
                    try await db.raw("PRAGMA busy_timeout").first(decodingColumn: "timeout", as: Int.self),
                    try await db.raw("PRAGMA synchronous").first(decodingColumn: "synchronous", as: Int.self)
                )
            }
            #expect(pragmas.0 == "wal")
            #expect(pragmas.1 == 1)
            #expect(pragmas.2 == 5000)
            #expect(pragmas.3 == 1, "1 is NORMAL")
        }
    }

    @Test("a transaction that fails midway leaves nothing written, and the store goes on")
    func failedTransactionRollsBack() async throws {
        struct Boom: Error {}
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            await #expect(throws: Boom.self) {
                try await store.transaction { db in
                    try await db.raw("INSERT INTO settings (name, value) VALUES ('half', 'written')").run()
                    try await db.raw("""
                        INSERT INTO apps (id, topic, environment, created_at, updated_at) VALUES ('demo', 't', 'production', 0, 0)
                        """).run()
                    throw Boom()
                }
            }

            #expect(try await store.setting("half") == nil)
            #expect(try await store.app("demo") == nil)
            // The lock was released and no transaction is left open: a normal call commits.
            try await withTimeout(5, "a call after the failed transaction") { try await store.createApp(makeApp("next")) }
            #expect(try await store.app("next") != nil)
        }
    }

    @Test(
        "a transaction whose caller is cancelled midway still ends, committed or rolled back, and the next one begins",
        arguments: [false, true])
    func cancelledTransactionEnds(throwsAfterCancel: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            // Cancelled between its statements, as a request's task is when the server stops: sqlite-nio skips a
            // statement whose task is cancelled before it runs, the COMMIT or ROLLBACK among them.
            let outcome = await Task {
                try await store.transaction { db in
                    try await db.raw("INSERT INTO settings (name, value) VALUES ('half', 'written')").run()
                    withUnsafeCurrentTask { $0?.cancel() }
                    if throwsAfterCancel { try Task.checkCancellation() }
                    return "returned"
                }
            }.result
            if throwsAfterCancel {
                #expect(throws: CancellationError.self) { try outcome.get() }
            } else {
                #expect(try outcome.get() == "returned", "a body that returned is committed")
            }
            // No transaction is left open on the connection: the next one begins and commits.
            try await withTimeout(5, "a transaction after the cancelled one") {
                try await store.transaction { db in
                    try await db.raw("INSERT INTO settings (name, value) VALUES ('next', 'written')").run()
                }
            }
        }
        // What each committed is in the file (not in a transaction never ended), and nothing of the rolled back one.
        try await Self.withStore(in: directory) { store async throws in
            #expect(try await store.setting("next") == "written")
            #expect(try await store.setting("half") == (throwsAfterCancel ? nil : "written"))
        }
    }

    @Test("a failing statement inside a transaction rolls back the statements before it")
    func failingStatementRollsBack() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            await #expect(throws: (any Error).self) {
                try await store.transaction { db in
                    try await db.raw("INSERT INTO settings (name, value) VALUES ('half', 'written')").run()
                    // Violates the foreign key: there is no such app.
                    try await db.raw("""
                        INSERT INTO pushes (id, app_id, audience, status, targeted, accepted, failed, pruned, failed_by_reason, created_at)
                        VALUES ('p', 'ghost', '{}', 'pending', 0, 0, 0, 0, '{}', 0)
                        """).run()
                }
            }
            #expect(try await store.setting("half") == nil)
        }
    }
    @Test("a file SQLite cannot write (here a read-only connection; a full disk and a lock held elsewhere fail alike) is unavailable, in SQLite's words, and the store goes on once it can write")
    func unwritableFileIsUnavailable() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            try await store.setSetting("before", to: "1")
            // The connection refuses writes, as a read-only file does (SQLITE_READONLY).
            try await store.exclusive { db in try await db.raw("PRAGMA query_only = ON").run() }
            let readOnly = await #expect(throws: StoreError.self) { try await store.setSetting("during", to: "2") }
            guard case .unavailable(let message)? = readOnly else {
                Issue.record("not unavailable: \(String(describing: readOnly))")
                return
            }
            #expect(message.contains("readonly") && message.contains("readOnly"), "\(message)")
            #expect(try await store.setting("before") == "1", "reads go on")
            try await store.exclusive { db in try await db.raw("PRAGMA query_only = OFF").run() }
            try await store.setSetting("after", to: "3")
            #expect(try await store.setting("after") == "3")
            #expect(try await store.setting("during") == nil)
        }
    }

    @Test("a database file renamed or deleted under the running store fails every call as unavailable, saying so, until it is back")
    func fileTakenAwayIsUnavailable() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        let path = directory.path("tern.sqlite")
        let store = try await SQLStore.openSQLite(path: path, fileCheckInterval: .milliseconds(50), logger: Logger(label: "tern.store.tests"))
        let running = Task { await store.run() }
        defer { running.cancel() }
        do {
            try await Self.takeTheFileAway(path, under: store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    private static func takeTheFileAway(_ path: String, under store: SQLStore) async throws {
        try await store.migrate()
        try await store.setSetting("before", to: "1")

        // Renamed: the writes would go on into the file under its new name, and a restart would start afresh.
        try FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
        try await waitUntil("calls to fail") {
            do {
                try await store.setSetting("during", to: "2")
                return false
            } catch StoreError.unavailable(let message) {
                return message.contains("deleted or replaced")
            }
        }
        try FileManager.default.moveItem(atPath: path + ".moved", toPath: path)
        try await waitUntil("calls to go on") { (try? await store.setting("before")) == "1" }
        try await store.setSetting("after", to: "3")

        // Deleted: what it wrote from now on would go with it.
        try FileManager.default.removeItem(atPath: path)
        try await waitUntil("calls to fail again") {
            do {
                _ = try await store.setting("before")
                return false
            } catch StoreError.unavailable {
                return true
            }
        }
    }

    @Test("a statement SQLite refuses for what it says (not for the file) stays SQLite's own error")
    func statementErrorsAreNotUnavailable() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        try await Self.withStore(in: directory) { store async throws in
            let error = await #expect(throws: (any Error).self) {
                try await store.exclusive { db in try await db.raw("SELECT * FROM no_such_table").run() }
            }
            #expect(!(error is StoreError), "\(String(describing: error))")
        }
    }

    @Test("an open cut short by cancellation closes what it opened (a debug build traps on a connection left open)")
    func anOpenCutShortByCancellationClosesItsConnection() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        // Cancelled at every point of the open in turn: before the file is opened, while a pragma runs, after.
        for attempt in 0..<2000 {
            let path = directory.path("tern-\(attempt).sqlite")
            let opening = Task { try await SQLStore.openSQLite(path: path, logger: Logger(label: "tern.store.tests")) }
            for _ in 0..<(attempt % 50) { await Task.yield() }
            opening.cancel()
            if let store = try? await opening.value { try await store.close() }
        }
    }

    /// A caller that throws before its close (a failing test, a start that fails after the open) drops the store: the
    /// file was left open, and a debug build trapped when the connection went, taking every other test's result with it.
    @Test("a store dropped without close closes its connection once its calls have ended")
    func aStoreDroppedWithoutCloseClosesItsConnection() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        let path = directory.path("tern.sqlite")
        var store: SQLStore? = try await SQLStore.openSQLite(path: path, logger: Logger(label: "tern.store.tests"))
        try await store?.migrate()
        // A call under way when the caller lets go of the store: the call holds it, so it ends on an open connection,
        // and the connection closes once the call is done.
        let gate = AsyncStream<Void>.makeStream()
        let entered = AsyncStream<Void>.makeStream()
        let call = Task { [store] in
            try await store?.exclusive { db in
                entered.continuation.yield()
                for await _ in gate.stream { break }
                return try await db.raw("SELECT COUNT(*) AS n FROM devices").first(decodingColumn: "n", as: Int.self)
            }
        }
        for await _ in entered.stream { break }
        store = nil
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "open in WAL mode")
        gate.continuation.yield()
        #expect(try await call.value == 0, "the call under way ended on an open connection")
        // SQLite checkpoints the log into the file and removes it as the file's last connection closes.
        try await waitUntil("the dropped store's connection closed") { !FileManager.default.fileExists(atPath: path + "-wal") }
    }
}

@Suite("AsyncLock")
struct AsyncLockTests {
    @Test("holders never overlap")
    func mutualExclusion() async throws {
        let lock = AsyncLock()
        let inside = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await lock.withLock {
                        inside.add(1)
                        await Task.yield()
                        inside.add(-1)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(inside.maximum == 1)
    }

    @Test("waiters get the lock in the order they asked")
    func firstComeFirstServed() async throws {
        let lock = AsyncLock()
        let order = Recorder()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await lock.withLock { for await _ in gate {} } }
            try await Task.sleep(for: .milliseconds(50))
            for n in 0..<5 {
                group.addTask { try await lock.withLock { order.append(n) } }
                // Each waiter queues before the next one asks.
                try await Task.sleep(for: .milliseconds(50))
            }
            open.finish()
            try await group.waitForAll()
        }
        #expect(order.values == [0, 1, 2, 3, 4])
    }

    @Test("a waiter cancelled before its turn leaves the queue, and the lock still passes on")
    func cancelledWaiterDoesNotDeadlock() async throws {
        let lock = AsyncLock()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let holder = Task { try await lock.withLock { for await _ in gate {} } }
        try await Task.sleep(for: .milliseconds(50))

        let waiter = Task { try await lock.withLock { "ran" } }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        let result = await withTimeoutResult { try await waiter.value }
        #expect(result is CancellationError, "the cancelled waiter gives up at once, while the lock is still held")

        open.finish()
        try await holder.value
        let next = try await withTimeout(5, "the lock after a cancelled waiter") { try await lock.withLock { "next" } }
        #expect(next == "next")
    }

    /// The error `operation` throws within 5 seconds, or the timeout.
    private func withTimeoutResult(_ operation: @escaping @Sendable () async throws -> String) async -> (any Error)? {
        do {
            _ = try await withTimeout(5, "the cancelled waiter", operation)
            return nil
        } catch {
            return error
        }
    }
}

/// A count of tasks inside, remembering the most at once.
private final class Counter: Sendable {
    private let state = Mutex((current: 0, maximum: 0))

    func add(_ delta: Int) {
        state.withLock { state in
            state.current += delta
            state.maximum = max(state.maximum, state.current)
        }
    }

    var maximum: Int { state.withLock { $0.maximum } }
}

private final class Recorder: Sendable {
    private let state = Mutex<[Int]>([])

    func append(_ value: Int) { state.withLock { $0.append(value) } }

    var values: [Int] { state.withLock { $0 } }
}
