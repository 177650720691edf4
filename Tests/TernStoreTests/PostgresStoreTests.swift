import Foundation
import Logging
import SQLKit
import Testing
import TernTestSupport
@testable import TernStore

/// What only the PostgreSQL store has: its URL, its pool, migrations from several nodes at once, and transactions
/// that conflict and run again.
@Suite("SQLStore on PostgreSQL")
struct PostgresStoreTests {
    @Test(
        "a malformed URL is refused with what to write instead",
        arguments: [
            ("mysql://u@h/db", "must look like postgres://"),
            ("postgres:///tern", "names no host"),
            ("postgres://u@h/db?sslmode=verify-full", "sslmode must be disable, prefer or require, not 'verify-full'"),
            // Taken modulo 65536, 99999 connected to port 34463.
            ("postgres://u:x@127.0.0.1:99999/db", "port must be 1-65535"),
            ("postgres://u:x@127.0.0.1:0/db", "port must be 1-65535"),
        ])
    func malformedURL(_ url: String, _ message: String) async throws {
        let error = await #expect(throws: StoreError.self) {
            _ = try await SQLStore.openPostgres(url: url, logger: Logger(label: "test"))
        }
        #expect(error.map { "\($0)" }?.contains(message) == true, "\(String(describing: error))")
    }

    @Test("an unreachable server is a clear error that never shows the password")
    func unreachable() async throws {
        // A port nothing listens on: bound, then closed.
        let url = "postgres://tern:hunter2secret@127.0.0.1:\(try freePort())/tern?sslmode=disable"
        let error = await #expect(throws: StoreError.self) {
            _ = try await SQLStore.openPostgres(url: url, logger: Logger(label: "test"))
        }
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("cannot reach PostgreSQL at postgres://tern:***@127.0.0.1:"), "\(text)")
        #expect(!text.contains("hunter2secret"), "\(text)")
        #expect(text.contains("refused"), "the server's answer: \(text)")
    }

    @Test("a store's first calls, made as its pool starts, wait for it without a warning", .enabled(if: PostgresTestServer.url != nil))
    func firstCallsWaitForThePool() async throws {
        try await PostgresTestServer.withDatabase { url in
            // As `tern serve` starts: the pool's run is started beside the migration, which leases at once.
            for _ in 0..<5 {
                let log = LogRecorder()
                let store = try await SQLStore.openPostgres(url: url, logger: log.logger)
                try await withThrowingTaskGroup(of: Void.self) { pools in
                    pools.addTask { await store.run() }
                    defer { pools.cancelAll() }
                    try await store.migrate()
                }
                #expect(log.messages(containing: "run()").isEmpty, "\(log.messages(containing: "run()"))")
            }
        }
    }

    @Test("nodes migrating one database at once apply each step once", .enabled(if: PostgresTestServer.url != nil))
    func concurrentMigrations() async throws {
        try await PostgresTestServer.withDatabase { url in try await concurrentMigrations(url: url) }
    }

    private func concurrentMigrations(url: String) async throws {
        var stores: [SQLStore] = []
        for _ in 0..<4 { stores.append(try await SQLStore.openPostgres(url: url, logger: Logger(label: "test"))) }
        try await withThrowingTaskGroup(of: Void.self) { pools in
            for store in stores { pools.addTask { await store.run() } }
            defer { pools.cancelAll() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                try await group.waitForAll()
            }
            let versions = try await stores[0].exclusive { db in
                try await db.raw("SELECT version FROM schema_migrations ORDER BY version").all(decodingColumn: "version", as: Int.self)
            }
            #expect(versions == SQLStore.migrations(.postgres).map(\.version))
            for store in stores { try await store.close() }
        }
    }

    @Test("while the server cannot be reached, calls fail as unavailable at once, not at their deadline; once it can, a new pool serves them within seconds",
          .enabled(if: PostgresTestServer.url != nil))
    func unreachableServer() async throws {
        try await Self.withStoreThroughRelay(callTimeout: .seconds(60)) { store, relay in
            try await store.setSetting("before", to: "1")

            // The server goes away: its connections close, and new ones are closed as they come.
            await relay.refuse()
            let first = ContinuousClock.now
            let firstError = await #expect(throws: StoreError.self) { try await store.setting("before") }
            #expect(Self.isUnavailable(firstError), "\(String(describing: firstError))")
            // The pool alone kept such a call waiting for its whole deadline (a minute here, 15 s by default).
            #expect(ContinuousClock.now - first < .seconds(20), "the first call failed after \(ContinuousClock.now - first)")

            // Within a probe or two the store knows, and from then on each call fails at once, saying why.
            try await Self.waitUntilStoreFindsServerAway(store, within: 10)
            let next = ContinuousClock.now
            await #expect(throws: StoreError.self) { try await store.setSetting("during", to: "2") }
            #expect(ContinuousClock.now - next < .seconds(1), "a call while the server is away took \(ContinuousClock.now - next)")

            // Back: a probe finds it within a second or two and a new pool takes the calls (postgres-nio's own
            // pool waited out its back-off, up to a minute).
            relay.carry()
            try await waitUntil("the store to answer again", within: 10) { (try? await store.setting("before")) == "1" }
            try await store.setSetting("after", to: "3")
            #expect(try await store.setting("after") == "3")
            #expect(try await store.setting("during") == nil, "the refused write left nothing")
        }
    }

    @Test("a call still under way when the store finds the server unreachable is answered at once, whatever it waits for",
          .enabled(if: PostgresTestServer.url != nil))
    func callsUnderWayEndWithTheirPool() async throws {
        try await Self.withStoreThroughRelay(callTimeout: .seconds(60)) { store, relay in
            // A call that hangs where the pool's shutdown cannot reach it (postgres-nio has left a query waiting for
            // ever on a connection the server closed): here, its body waits on its own.
            let started = AsyncStream.makeStream(of: Void.self)
            let hung = Task {
                try await store.exclusive { db in
                    try await db.raw("SELECT 1").run()
                    started.continuation.yield()
                    try await Task.sleep(for: .seconds(50))
                }
            }
            defer { hung.cancel() }
            for await _ in started.stream { break }
            await relay.refuse()
            let away = ContinuousClock.now
            // Another call finds the server away, and the store says so.
            try await Self.waitUntilStoreFindsServerAway(store, within: 20)
            let error = await #expect(throws: StoreError.self) { try await hung.value }
            #expect("\(String(describing: error))".contains("cannot be reached"), "\(String(describing: error))")
            #expect(ContinuousClock.now - away < .seconds(20), "the call under way was answered after \(ContinuousClock.now - away)")
            relay.carry()
        }
    }

    @Test("when the network goes silent under a pool in use (no close, no error), calls fail as unavailable within seconds, not at their deadline, and a new pool serves once it carries again",
          .enabled(if: PostgresTestServer.url != nil))
    func silentNetwork() async throws {
        try await Self.withStoreThroughRelay(callTimeout: .seconds(60)) { store, relay in
            // A warm pool: connections open and idle, as under traffic.
            try await withThrowingTaskGroup(of: Void.self) { calls in
                for index in 0..<8 { calls.addTask { try await store.setSetting("warm-\(index)", to: "1") } }
                try await calls.waitForAll()
            }

            relay.blackHole()
            let first = ContinuousClock.now
            let firstError = await #expect(throws: StoreError.self) { try await store.setting("warm-0") }
            #expect(Self.isUnavailable(firstError), "\(String(describing: firstError))")
            // Two seconds without an answer, then a probe that gets none in three: well within the minute.
            #expect(ContinuousClock.now - first < .seconds(15), "the first call failed after \(ContinuousClock.now - first)")
            let next = ContinuousClock.now
            await #expect(throws: StoreError.self) { try await store.setting("warm-1") }
            #expect(ContinuousClock.now - next < .seconds(2), "a call while the network is silent took \(ContinuousClock.now - next)")

            relay.carry()
            try await waitUntil("the store to answer again", within: 15) { (try? await store.setting("warm-2")) == "1" }
        }
    }

    @Test("connections that went silent while new ones work (a firewall forgot them) are dropped at their call's deadline, so they cannot take the whole pool",
          .enabled(if: PostgresTestServer.url != nil))
    func silentConnectionsAreDropped() async throws {
        try await Self.withStoreThroughRelay(callTimeout: .seconds(1), maximumConnections: 2) { store, relay in
            try await store.setSetting("kept", to: "1")
            // Both connections open, then silent: new connections through the relay still work.
            try await withThrowingTaskGroup(of: Void.self) { calls in
                for _ in 0..<2 { calls.addTask { _ = try await store.exclusive { db in try await db.raw("SELECT pg_sleep(0.2)").run() } } }
                try await calls.waitForAll()
            }
            relay.freeze()
            // A call on a silent connection fails at its deadline; that connection must not stay taken for ever.
            var answered = false
            for _ in 0..<6 where !answered {
                answered = (try? await store.setting("kept")) == "1"
            }
            #expect(answered, "every call failed: the silent connections kept the pool")
        }
    }

    @Test("a call answered 'unavailable' at its deadline never lands later, even when the statement it waited on goes through once a lock is let go",
          .enabled(if: PostgresTestServer.url != nil))
    func callPastItsDeadlineNeverLands() async throws {
        try await PostgresTestServer.withDatabase { url in
            let store = try await SQLStore.openPostgres(url: url, callTimeout: .seconds(1), logger: Logger(label: "test"))
            // One connection: the transaction that holds the lock and the one that ends it are on the same session.
            let other = try await SQLStore.openPostgres(
                url: url, maximumConnections: 1, callTimeout: PostgresTestServer.callTimeout, logger: Logger(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { pools in
                pools.addTask { await store.run() }
                pools.addTask { await other.run() }
                defer { pools.cancelAll() }
                try await store.migrate()
                try await other.exclusive { db in
                    try await db.raw("BEGIN").run()
                    try await db.raw("LOCK TABLE settings IN ACCESS EXCLUSIVE MODE").run()
                }
                let error = await #expect(throws: StoreError.self) { try await store.setSetting("late", to: "1") }
                #expect(Self.isUnavailable(error), "\(String(describing: error))")

                // The lock goes; the abandoned call's insert goes through, and its transaction must end without a commit.
                try await other.exclusive { db in try await db.raw("COMMIT").run() }
                try await waitUntil("the abandoned call's transaction to end") {
                    try await other.exclusive { db in
                        try await db.raw("""
                            SELECT count(*) AS n FROM pg_stat_activity
                            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'
                            """).first(decodingColumn: "n", as: Int.self) == 0
                    }
                }
                #expect(try await other.setting("late") == nil, "a call answered 'unavailable' was written after all")
                try await store.close()
                try await other.close()
            }
        }
    }

    /// Writes until a call fails saying the database cannot be reached: the store has found the server away (calls
    /// made while it finds out wait for its probe).
    private static func waitUntilStoreFindsServerAway(_ store: SQLStore, within seconds: Double) async throws {
        try await waitUntil("calls to fail saying the database cannot be reached", within: seconds) {
            do {
                try await store.setSetting("during", to: "1")
                return false
            } catch {
                return "\(error)".contains("cannot be reached")
            }
        }
    }

    /// Runs `body` with a migrated store on a new database reached through a ``TCPRelay`` (for the test to cut), the
    /// store's pool running; the store and the relay closed afterwards whatever happens.
    private static func withStoreThroughRelay(
        callTimeout: Duration, maximumConnections: Int = 16, _ body: (SQLStore, TCPRelay) async throws -> Void
    ) async throws {
        try await PostgresTestServer.withDatabase { url in
            let (relay, relayed) = try await TCPRelay.relaying(url)
            let store = try await SQLStore.openPostgres(
                url: relayed, maximumConnections: maximumConnections, callTimeout: callTimeout, logger: Logger(label: "test"))
            do {
                try await withThrowingTaskGroup(of: Void.self) { pools in
                    pools.addTask { await store.run() }
                    defer { pools.cancelAll() }
                    try await store.migrate()
                    try await body(store, relay)
                }
            } catch {
                try? await store.close()
                await relay.close()
                throw error
            }
            try await store.close()
            await relay.close()
        }
    }

    private static func isUnavailable(_ error: StoreError?) -> Bool {
        if case .unavailable = error { return true }
        return false
    }

    @Test("a migration may wait for another node's lock longer than one call's deadline; an ordinary call may not",
          .enabled(if: PostgresTestServer.url != nil))
    func migrationOutlastsOneCallsDeadline() async throws {
        try await PostgresTestServer.withDatabase { url in
            // This store's calls have a second each; the other node's the suite's usual deadline.
            let other = try await SQLStore.openPostgres(url: url, callTimeout: PostgresTestServer.callTimeout, logger: Logger(label: "test"))
            let store = try await SQLStore.openPostgres(url: url, callTimeout: .seconds(1), logger: Logger(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { pools in
                pools.addTask { await other.run() }
                pools.addTask { await store.run() }
                defer { pools.cancelAll() }

                // The other node has migrated, and holds the schema's lock while this store's migration waits for it.
                try await other.migrate()
                let lock = try #require(SQLFlavor.postgres.schemaLock)
                try await other.exclusive { db in
                    try await db.raw(SQLQueryString(lock.acquire)).run()
                    async let migrated: Void = store.migrate()
                    try await waitUntil("the migration to wait for the lock") {
                        try await db.raw("""
                            SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                            """).first(decodingColumn: "n", as: Int.self) == 1
                    }
                    // An ordinary call made after that gives up at its deadline, while the migration keeps waiting.
                    let error = await #expect(throws: StoreError.self) {
                        try await store.exclusive { db in try await db.raw("SELECT pg_sleep(5)").run() }
                    }
                    #expect(error.map { "\($0)" }?.contains("did not answer within 1.0 seconds") == true, "\(String(describing: error))")
                    try await db.raw(SQLQueryString(lock.release)).run()
                    try await migrated
                }
                let versions = try await other.exclusive { db in
                    try await db.raw("SELECT version FROM schema_migrations ORDER BY version").all(decodingColumn: "version", as: Int.self)
                }
                #expect(versions == SQLStore.migrations(.postgres).map(\.version))
                try await store.close()
                try await other.close()
            }
        }
    }

    @Test("text columns compare byte by byte and integers are 64-bit", .enabled(if: PostgresTestServer.url != nil))
    func schemaAdaptation() async throws {
        try await StoreFactory.postgres.withStore { store in
            let store = try #require(store as? SQLStore)
            let (collation, type) = try await store.exclusive { db in
                let row = try await db.raw("""
                    SELECT collation_name, (SELECT data_type FROM information_schema.columns
                        WHERE table_name = 'pushes' AND column_name = 'targeted') AS targeted_type
                    FROM information_schema.columns WHERE table_name = 'devices' AND column_name = 'device_id'
                    """).first()
                return (try row?.decode(column: "collation_name", as: String?.self), try row?.decode(column: "targeted_type", as: String.self))
            }
            #expect(collation == "C")
            #expect(type == "bigint")
        }
    }

    @Test("transactions that conflict run again: 40 concurrent read-modify-writes of one row lose nothing",
          .enabled(if: PostgresTestServer.url != nil))
    func conflictingTransactionsRunAgain() async throws {
        try await StoreFactory.postgres.withStore { store in
            let store = try #require(store as? SQLStore)
            try await store.setSetting("counter", to: "0")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        try await store.transaction { db in
                            let value = try await db.raw("SELECT value FROM settings WHERE name = 'counter'")
                                .first(decodingColumn: "value", as: String.self) ?? "0"
                            try await db.raw("UPDATE settings SET value = \(bind: String(Int(value)! + 1)) WHERE name = 'counter'").run()
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.setting("counter") == "40")
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound by the kernel's choice, then released).
private func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
    return Int(UInt16(bigEndian: address.sin_port))
}
