import Logging
import SQLiteKit

extension SQLStore {
    /// Opens (creating if needed) the SQLite database at `path`. Call ``migrate()`` before use.
    ///
    /// One connection, in write-ahead-log mode so readers in other processes (a backup, `sqlite3`) never block it.
    public static func openSQLite(path: String, logger: Logger) async throws -> SQLStore {
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
        return SQLStore(database: database, flavor: .sqlite, logger: logger) { try await connection.close() }
    }
}
