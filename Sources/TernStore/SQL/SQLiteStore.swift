import Foundation
import Logging
import SQLiteKit
import Synchronization

extension SQLStore {
    /// Opens (creating if needed) the SQLite database at `path`. Call ``migrate()`` before use.
    ///
    /// One connection, in write-ahead-log mode so readers in other processes (a backup, `sqlite3`) never block it.
    ///
    /// With `claimingFile`, the store also holds an exclusive lock on `<path>.lock` while it is open, and fails at once
    /// if another process holds it: two `tern serve` on one SQLite file would each think itself the only node (their
    /// devices' online messages would never meet).
    ///
    /// While the store runs (``SQLStore/run()``), it looks every `fileCheckInterval` whether `path` is still the file
    /// it opened: a file deleted or renamed under it would take every later write with it, unseen. Until the file is
    /// back, every call fails as unavailable, and the log says so once.
    public static func openSQLite(
        path: String, claimingFile: Bool = false, fileCheckInterval: Duration = .seconds(5), logger: Logger
    ) async throws -> SQLStore {
        let claim = claimingFile ? try FileClaim(path + ".lock") : nil
        // Tokens, aliases and inbox messages are nobody else's business: a new database file is made owner-only
        // whatever the umask, and SQLite gives its -wal and -shm files the database file's mode.
        if !FileManager.default.fileExists(atPath: path),
            !FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        {
            throw StoreError.unavailable("cannot create the database file \(path)")
        }
        let connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        let keeper = SQLiteConnectionKeeper(connection)
        // Every query is logged at trace: its binds hold tokens and aliases.
        let database = connection.sql(queryLogLevel: .trace)
        do {
            for pragma in [
                // The busy timeout first: switching to WAL takes the file's lock, and a file another connection holds
                // (a second store on it, a backup) then waits for it instead of failing the open at once.
                "busy_timeout = 5000", "journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON",
                // SQLite's own default, 2 MB, said here since a larger cache costs more than it saves: a fan-out
                // reads the devices in key order, each page once, and through 32 MiB every page landed in a buffer
                // long out of the CPU's caches (docs/benchmarks.md: a 1,000,000-device push about 3% faster, SQLite's
                // threads a tenth less CPU, registrations on 300,000 devices unchanged). The file's pages stay in
                // the kernel's page cache either way.
                "cache_size = -2000",
            ] {
                try await database.raw("PRAGMA \(unsafeRaw: pragma)").run()
            }
        } catch {
            // Closed before the error goes on, even when the open was cancelled.
            try? await keeper.close()
            throw error
        }
        let watch = FileWatch(path: path, interval: fileCheckInterval, logger: logger)
        return SQLStore(sessions: SQLiteSessions(keeper: keeper, database: database, claim: claim, watch: watch), flavor: .sqlite, logger: logger)
    }
}

/// An exclusive lock on a file of its own (`flock`), held while the store is open and let go when it closes or the
/// process ends, however it ends.
final class FileClaim: Sendable {
    /// Nil once let go.
    private let descriptor: Mutex<Int32?>

    init(_ path: String) throws {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError.unavailable("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            close(descriptor)
            if reason == EWOULDBLOCK {
                throw StoreError.unavailable(
                    "another process uses this database (it holds \(path)): stop the other tern serve, or give this one a database of its own")
            }
            throw StoreError.unavailable("cannot lock \(path): \(String(cString: strerror(reason)))")
        }
        self.descriptor = Mutex(descriptor)
    }

    /// Lets go (once); a store that failed to open lets go when its claim goes away.
    func release() {
        if let descriptor = descriptor.withLock({ held in defer { held = nil }; return held }) { close(descriptor) }
    }

    deinit { release() }
}

/// Whether a path is still the file that was opened there (the same device and inode), looked at every `interval`.
final class FileWatch: Sendable {
    private let path: String
    private let interval: Duration
    private let logger: Logger
    private let opened: (device: UInt64, inode: UInt64)?
    private let state = Mutex<String?>(nil)

    init(path: String, interval: Duration, logger: Logger) {
        self.path = path
        self.interval = interval
        self.logger = logger
        opened = Self.identity(path)
    }

    /// Why calls fail now, while the file is not there.
    var problem: String? { state.withLock { $0 } }

    func run() async {
        guard let opened else { return }
        while true {
            do { try await Task.sleep(for: interval) } catch { return }
            let now = Self.identity(path)
            let gone = now.map { $0 != opened } ?? true
            let problem = gone
                ? "the database file \(path) was deleted or replaced while in use; put it back, or restart with the file you mean"
                : nil
            let was = state.withLock { state in
                defer { state = problem }
                return state
            }
            if let problem, was == nil { logger.error("every call fails: \(problem)") }
            if problem == nil, was != nil { logger.warning("the database file \(path) is back; calls go on") }
        }
    }

    private static func identity(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }
}

/// The one SQLite connection: calls take turns on it.
struct SQLiteSessions: SQLSessions {
    var connection: SQLiteConnection { keeper.connection }
    let database: any SQLDatabase
    /// The file's lock for this process, when it was asked for.
    let claim: FileClaim?
    private let keeper: SQLiteConnectionKeeper
    private var lock: AsyncLock { keeper.lock }

    /// Whether the path is still the file opened.
    let watch: FileWatch?

    init(keeper: SQLiteConnectionKeeper, database: any SQLDatabase, claim: FileClaim? = nil, watch: FileWatch? = nil) {
        self.keeper = keeper
        self.database = database
        self.claim = claim
        self.watch = watch
    }

    /// Calls take turns, with no deadline: the file does not go away mid-call as a server can.
    func withSession<T: Sendable>(calls: Int, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if let problem = watch?.problem { throw StoreError.unavailable(problem) }
        return try await lock.withLock { [connection] in
            try await database.withSession { session in try await body(SQLiteSession(base: session, connection: connection)) }
        }
    }

    /// What an error of SQLite's means to the store's callers, when it is about the file rather than the statement:
    /// what the file system refuses (a full disk, a read-only file, an I/O error, a lock held elsewhere) is
    /// unavailable, for the caller to try again; a damaged file is unreadable; both in SQLite's own words.
    static func storeError(_ error: SQLiteError) -> StoreError? {
        // The reasons' extended forms (`ioErrorFailedSharedMemSize`, `readOnlyDirectory`…) share their prefix.
        let reason = "\(error.reason)"
        if ["full", "readOnly", "ioError", "cantOpen", "busy", "locked", "permission", "noMemory"].contains(where: reason.hasPrefix) {
            return .unavailable("the database file cannot be used: \(error.message) (\(reason))")
        }
        if reason.hasPrefix("corrupt") || reason.hasPrefix("notADatabase") {
            return .unreadable("the database file is damaged: \(error.message) (\(reason)); restore it from a backup")
        }
        return nil
    }

    /// One connection, opened with the store; what runs is the look at its file.
    func run() async {
        await watch?.run()
    }

    func close() async throws {
        try await keeper.close()
        claim?.release()
    }
}

/// Closes the store's connection once: when the store is closed, or else when the last copy of the store goes.
///
/// A store dropped without ``SQLStore/close()`` (a caller that threw before its close) would leave the file open for
/// the process's life, and a debug build traps in sqlite-nio's check when the connection goes: that trap took a whole
/// test run with it and hid the failure that caused it. Either way the close waits its turn, after the calls under
/// way.
final class SQLiteConnectionKeeper: Sendable {
    let connection: SQLiteConnection
    let lock = AsyncLock()
    private let closed = Atomic<Bool>(false)

    init(_ connection: SQLiteConnection) {
        self.connection = connection
    }

    /// Waits for the calls under way, then closes the connection; at once if it was closed already.
    func close() async throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try await closing().value
    }

    deinit {
        guard !closed.load(ordering: .acquiring) else { return }
        // A deinit cannot wait: the task holds the lock and the connection until it has closed it.
        _ = closing()
    }

    /// The close, in a task of its own: no caller's cancellation reaches it (waiting for the lock would throw, and
    /// sqlite-nio's async close would not run, leaving the connection open).
    private func closing() -> Task<Void, any Error> {
        Task { [lock, connection] in
            try await lock.withLock {
                let closed: EventLoopFuture<Void> = connection.close()
                try await closed.get()
            }
        }
    }
}

/// A call's turn on the SQLite connection: SQLKit's database for it, and the connection under it, for the reads too
/// hot for SQLKit's rows (``SQLStore/recipientRows(_:_:)``). It runs nothing of its own: whatever goes through it
/// runs in the call's turn, in its transaction if it has one.
struct SQLiteSession: SQLDatabase {
    let base: any SQLDatabase
    let connection: SQLiteConnection

    var logger: Logger { base.logger }
    var eventLoop: any EventLoop { base.eventLoop }
    var version: (any SQLDatabaseReportedVersion)? { base.version }
    var dialect: any SQLDialect { base.dialect }
    var queryLogLevel: Logger.Level? { base.queryLogLevel }

    // Every statement's error about the file becomes the store's (``SQLiteSessions/storeError(_:)``), here where
    // each statement runs, so that it reads alike whether a call's body passes it on or keeps it (the registrations'
    // group commit answers each registration with its own result).
    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        base.execute(sql: query, onRow).flatMapErrorThrowing { throw Self.translated($0) }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        do {
            try await base.execute(sql: query, onRow)
        } catch {
            throw Self.translated(error)
        }
    }

    private static func translated(_ error: any Error) -> any Error {
        guard let error = error as? SQLiteError else { return error }
        return SQLiteSessions.storeError(error) ?? error
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }

    /// Runs `query` on the connection itself and hands back SQLite's own rows, whose columns are read as they are
    /// rather than decoded through Codable.
    func sqliteRows(_ query: any SQLExpression) async throws -> [SQLiteRow] {
        let (sql, binds) = serialize(query)
        if let queryLogLevel {
            logger.log(level: queryLogLevel, "Executing query", metadata: ["sql": .string(sql)])
        }
        let encoder = SQLiteDataEncoder()
        do {
            return try await connection.query(sql, try binds.map { try encoder.encode($0) })
        } catch {
            throw Self.translated(error)
        }
    }

    /// Runs `sql` with `binds` as SQLite's own values, on the connection itself: for the statements that carry
    /// thousands of values (a chunk's messages), which SQLKit would build as a query string and encode one by one
    /// through Codable.
    func sqliteRows(_ sql: String, _ binds: [SQLiteData]) async throws -> [SQLiteRow] {
        if let queryLogLevel {
            logger.log(level: queryLogLevel, "Executing query", metadata: ["sql": .string(sql)])
        }
        do {
            return try await connection.query(sql, binds)
        } catch {
            throw Self.translated(error)
        }
    }
}

extension Array where Element == String {
    /// `count` copies of `group` (such as `(?, ?, 1)`), comma-separated: the VALUES of a statement with bound rows.
    static func sqliteRows(_ group: String, count: Int) -> String {
        Array(repeating: group, count: count).joined(separator: ", ")
    }
}
