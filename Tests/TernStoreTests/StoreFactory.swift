import Foundation
import Logging
import Testing
import TernStore

/// One way to get a fresh, empty store. Every conformance test runs once per factory in ``all``.
struct StoreFactory: Sendable, CustomTestStringConvertible {
    var name: String
    /// Opens a new, empty store and says how to dispose of it.
    var make: @Sendable () async throws -> (store: any TernStore, dispose: @Sendable () async throws -> Void)

    var testDescription: String { name }

    /// Add a PostgreSQL factory here and every conformance test runs against it too.
    static let all: [StoreFactory] = [.sqliteFile]

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

    /// Runs `body` with a fresh, migrated store, disposed of afterwards whatever happens.
    func withStore(_ body: (any TernStore) async throws -> Void) async throws {
        let (store, dispose) = try await make()
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
