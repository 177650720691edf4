import Foundation
import Logging
import NIOSSL
import PostgresKit
import PostgresNIO

extension SQLStore {
    /// Connects to the PostgreSQL database at `url` (`postgres://user:password@host:port/database`, with
    /// `?sslmode=disable|prefer|require`, default `prefer`). Call ``migrate()`` before use.
    ///
    /// Calls share a pool of at most `maximumConnections` connections; several Tern nodes can use one database. A call
    /// the server has not answered after `callTimeout` fails as unavailable.
    public static func openPostgres(
        url: String, maximumConnections: Int = 16, callTimeout: Duration = .seconds(15), logger: Logger
    ) async throws -> SQLStore {
        let location = try PostgresURL(url)
        // Fail now, with the server's own answer, rather than at the first call (the pool retries quietly for a
        // minute before it gives up on a server it cannot reach).
        do {
            try await location.askSelectOne(logger: logger)
        } catch {
            throw StoreError.unavailable("cannot reach PostgreSQL at \(location.redacted): \(PostgresSessions.describe(error))")
        }
        let sessions = PostgresSessions(location: location, maximumConnections: maximumConnections, callTimeout: callTimeout, logger: logger)
        return SQLStore(sessions: sessions, flavor: .postgres, logger: logger)
    }
}

extension SQLFlavor {
    /// PostgreSQL: `BYTEA`, identity keys, plain `BEGIN` at SERIALIZABLE isolation (so concurrent calls, from this
    /// node or another, behave as if they ran one after another, as they do on SQLite), with conflicts run again.
    /// Schema statements are written once for both databases; here every `TEXT` compares byte by byte
    /// (`COLLATE "C"`), as SQLite's does, so keyset pages agree with the order Swift sorts in, and every `INTEGER`
    /// is 64-bit, as SQLite's is.
    static let postgres = SQLFlavor(
        bytes: "BYTEA",
        serialPrimaryKey: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        beginTransaction: "BEGIN ISOLATION LEVEL SERIALIZABLE",
        adapt: { statement in
            statement
                .replacingOccurrences(of: #"\bTEXT\b"#, with: #"TEXT COLLATE "C""#, options: .regularExpression)
                .replacingOccurrences(of: #"\bINTEGER\b"#, with: "BIGINT", options: .regularExpression)
        },
        isTransient: { error in
            // 40001 serialization_failure, 40P01 deadlock_detected.
            guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
            return state == "40001" || state == "40P01"
        },
        // Any fixed number: it names the lock only within this database.
        schemaLock: ("SELECT pg_advisory_lock(7461726001)", "SELECT pg_advisory_unlock(7461726001)"),
        lockSkippingLocked: " FOR UPDATE SKIP LOCKED",
        // An identity column: numbered in the order the inserts ran.
        pushOrdinal: ("BIGINT GENERATED ALWAYS AS IDENTITY", nil),
        // The moment of the call, not of its transaction (`now()`).
        serverTime: "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now",
        // A lock of the transaction's, per app (by a hash of its id: two apps that share one only take turns).
        eventOrderLock: { table, app in "SELECT pg_advisory_xact_lock(hashtextextended(\(bind: table + " " + app), 0))" }
    )
}

/// A `postgres://` URL, checked.
struct PostgresURL {
    var host: String
    var port: Int
    var username: String
    var password: String?
    var database: String?
    var sslMode: String

    init(_ text: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme,
            scheme == "postgres" || scheme == "postgresql"
        else {
            throw StoreError.invalidInput("the database URL must look like postgres://user:password@host:5432/database")
        }
        guard let host = components.host, !host.isEmpty else {
            throw StoreError.invalidInput("the database URL names no host: postgres://user:password@host:5432/database")
        }
        self.host = host
        port = components.port ?? 5432
        // NIO would take the port modulo 65536 and connect elsewhere.
        guard (1...65_535).contains(port) else { throw StoreError.invalidInput("the database URL's port must be 1-65535") }
        username = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.drop(while: { $0 == "/" })
        database = path.isEmpty ? nil : String(path)
        sslMode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        guard ["disable", "prefer", "require"].contains(sslMode) else {
            throw StoreError.invalidInput("sslmode must be disable, prefer or require, not '\(sslMode)'")
        }
    }

    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "require": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.additionalStartupParameters = Self.startupParameters
        return configuration
    }

    func clientConfiguration(maximumConnections: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "require": tls = .require(.makeClientConfiguration())
        default: tls = .prefer(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = max(1, maximumConnections)
        configuration.options.additionalStartupParameters = Self.startupParameters
        return configuration
    }

    /// Plan every statement for its parameters and the tables as they are now. PostgreSQL otherwise settles on a
    /// generic plan after a few runs, and keeps the foreign-key checks' plans for a connection's life: made while a
    /// new database's tables were nearly empty, they scan whole tables once the tables have grown.
    static let startupParameters = [("plan_cache_mode", "force_custom_plan")]

    /// Connects on a connection of its own, runs `SELECT 1` and closes it: whether the server can be reached.
    func askSelectOne(connectTimeout: Duration? = nil, logger: Logger) async throws {
        var configuration = try connectionConfiguration()
        if let connectTimeout { configuration.options.connectTimeout = .init(connectTimeout) }
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            try await connection.sql(queryLogLevel: .trace).raw("SELECT 1").run()
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// The URL without its password, for messages.
    var redacted: String {
        "postgres://\(username)\(password == nil ? "" : ":***")@\(host):\(port)/\(database ?? "")"
    }
}

/// One call racing its timeout: whichever finishes first resumes the caller, once.
