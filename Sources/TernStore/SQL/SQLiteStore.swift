import Foundation
import Logging
import SQLiteKit

extension SQLStore {
    /// Opens (creating if needed) the SQLite database at `path`. Call ``migrate()`` before use.
    ///
    /// One connection, in write-ahead-log mode so readers in other processes (a backup, `sqlite3`) never block it.
    public static func openSQLite(path: String, logger: Logger) async throws -> SQLStore {
        // Tokens, aliases and inbox messages are nobody else's business: a new database file is made owner-only
        // whatever the umask, and SQLite gives its -wal and -shm files the database file's mode.
        if !FileManager.default.fileExists(atPath: path),
            !FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        {
            throw StoreError.unavailable("cannot create the database file \(path)")
        }
        let connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        // Every query is logged at trace: its binds hold tokens and aliases.
        let database = connection.sql(queryLogLevel: .trace)
        do {
            for pragma in [
                "journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON", "busy_timeout = 5000",
                // Registrations and audience pages look devices up at random: with SQLite's default 2 MB page cache
                // most lookups read their pages back from the file. 32 MiB holds the indexes of a few hundred
                // thousand devices.
                "cache_size = -32768",
            ] {
                try await database.raw("PRAGMA \(unsafeRaw: pragma)").run()
            }
        } catch {
            try? await connection.close()
            throw error
        }
        return SQLStore(sessions: SQLiteSessions(connection: connection, database: database), flavor: .sqlite, logger: logger)
    }
}

/// The one SQLite connection: calls take turns on it.
struct SQLiteSessions: SQLSessions {
    let connection: SQLiteConnection
    let database: any SQLDatabase
    private let lock = AsyncLock()

    init(connection: SQLiteConnection, database: any SQLDatabase) {
        self.connection = connection
        self.database = database
    }

    func withSession<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await lock.withLock { try await database.withSession(body) }
    }

    /// One connection, opened with the store: nothing to run.
    func run() async {}

    /// A cancelled caller still closes it: in a task of its own, since waiting for the lock would throw on
    /// cancellation and leave the connection open.
    func close() async throws {
        try await Task { [lock, connection] in try await lock.withLock { try await connection.close() } }.value
    }
}
