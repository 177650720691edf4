import Foundation
import Logging
import SQLKit
import Testing
@testable import TernStore
import TernTestSupport

/// One way to get a fresh, empty store. Every conformance test runs once per factory in ``all``.
struct StoreFactory: Sendable, CustomTestStringConvertible {
    var name: String
    /// Opens a new, empty store and says how to dispose of it.
    var make: @Sendable () async throws -> (store: any TernStore, dispose: @Sendable () async throws -> Void)

    var testDescription: String { name }

    /// Every conformance test runs once per factory here: SQLite always, PostgreSQL when `TERN_TEST_POSTGRES_URL`
    /// names a server (`scripts/test.sh` starts one).
    static let all: [StoreFactory] = [.sqliteFile] + (PostgresTestServer.url == nil ? [] : [.postgres])

    /// SQLite in a file of its own, in a temporary directory deleted afterwards.
    static let sqliteFile = StoreFactory(name: "SQLite file") {
        let directory = try TemporaryDirectory()
        do {
            let store = try await SQLStore.openSQLite(path: directory.path("tern.sqlite"), logger: Logger(label: "tern.store.tests"))
            return (store, {
                try await store.close()
                try directory.remove()
            })
        } catch {
            try? directory.remove()
            throw error
        }
    }

    /// A database of its own on the test server, dropped afterwards. Its calls may take ``PostgresTestServer/callTimeout``.
    static let postgres = postgres(name: "PostgreSQL", settings: [])

    /// ``postgres`` planning its reads as it does for large tables: through an index wherever one serves. A test's
    /// few rows are otherwise read whole, and SERIALIZABLE transactions that read a whole table conflict with every
    /// write to it: two transactions that race in a large deployment would end in one's retry instead, and a test
    /// of their race would pass however they were written.
    static let postgresIndexedReads = postgres(name: "PostgreSQL, indexed reads", settings: ["enable_seqscan = off"])

    private static func postgres(name: String, settings: [String]) -> StoreFactory {
        StoreFactory(name: name) {
            let database = try await PostgresTestServer.createDatabase()
            do {
                // The database's own settings, so every connection of the store's pool has them.
                for setting in settings { try await PostgresTestServer.administer("ALTER DATABASE \(database.name) SET \(setting)") }
                let store = try await SQLStore.openPostgres(
                    url: database.url, callTimeout: PostgresTestServer.callTimeout, logger: Logger(label: "tern.store.tests"))
                return (store, {
                    try await store.close()
                    try await PostgresTestServer.dropDatabase(database.name)
                })
            } catch {
                try? await PostgresTestServer.dropDatabase(database.name)
                throw error
            }
        }
    }

    /// Runs `body` with a fresh, migrated store (its pool running), disposed of afterwards whatever happens.
    func withStore(_ body: (any TernStore) async throws -> Void) async throws {
        let (store, dispose) = try await make()
        try await withThrowingTaskGroup(of: Void.self) { pool in
            pool.addTask { await store.run() }
            defer { pool.cancelAll() }
            do {
                try await store.migrate()
                try await body(store)
            } catch {
                try? await dispose()
                throw error
            }
            try await dispose()
        }
    }
}

/// A directory of its own under the system's temporary directory.
struct TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("tern-store-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func remove() throws { try FileManager.default.removeItem(at: url) }
}
