import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL server the tests may use: `TERN_TEST_POSTGRES_URL`, whose user may create databases
/// (`scripts/test.sh` starts one and sets it). Suites that need it are enabled only when it is set.
public enum PostgresTestServer {
    public static let url = environment("TERN_TEST_POSTGRES_URL")
    /// A shell command that restarts that server (set by `scripts/test.sh` for the server it starts).
    public static let restartCommand = environment("TERN_TEST_POSTGRES_RESTART")
    /// How long a store's call may take in the suites that run in parallel: four times the default. Those suites check
    /// what the store does, not its deadline (whose own tests set theirs), and the test process is the busy part:
    /// with every suite started at once on two cores a plain call took up to 13 s of the default 15 and one CI run
    /// failed; 32 at a time (`scripts/test.sh`), up to 4 s. This leaves room for a slower machine.
    public static let callTimeout: Duration = .seconds(60)

    /// Creates an empty database with a fresh name. - Returns: its name and URL.
    public static func createDatabase(prefix: String = "tern_test") async throws -> (name: String, url: String) {
        guard let url, var components = URLComponents(string: url) else { throw Missing() }
        let name = prefix + "_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await administer("CREATE DATABASE \(name)")
        components.path = "/" + name
        return (name, components.string!)
    }

    public static func dropDatabase(_ name: String) async throws {
        try await administer("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs `body` with a new database's URL, and drops the database afterwards whatever happens.
    public static func withDatabase<T>(prefix: String = "tern_test", _ body: (String) async throws -> T) async throws -> T {
        let database = try await createDatabase(prefix: prefix)
        do {
            let result = try await body(database.url)
            try await dropDatabase(database.name)
            return result
        } catch {
            try? await dropDatabase(database.name)
            throw error
        }
    }

    /// Runs one statement (no binds: database names are not bindable) on the server's own database.
    public static func administer(_ statement: String) async throws {
        guard let url else { throw Missing() }
        // Whatever it answers (`pg_terminate_backend` answers booleans) is not read.
        _ = try await rows(statement, database: url) { _ in () }
    }

    /// Runs a query on the database at `databaseURL` and returns its rows' first column as integers.
    public static func integers(_ query: String, database databaseURL: String) async throws -> [Int] {
        try await rows(query, database: databaseURL) { try $0.decode(Int.self) }
    }

    /// Runs a query on the database at `databaseURL` and returns its rows' first column as text (for a test's
    /// diagnosis: `SELECT format(...)`).
    public static func texts(_ query: String, database databaseURL: String) async throws -> [String] {
        try await rows(query, database: databaseURL) { try $0.decode(String.self) }
    }

    /// Runs a query on its own connection and reads each row with `read`: a row that is not of the type asked for
    /// fails the test rather than going missing from its answer.
    private static func rows<Value>(
        _ query: String, database databaseURL: String, _ read: (PostgresRow) throws -> Value
    ) async throws -> [Value] {
        guard let components = URLComponents(string: databaseURL), let host = components.host else { throw Missing() }
        var configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        configuration.options.connectTimeout = .seconds(10)
        let logger = Logger(label: "tern.tests.postgres")
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            var values: [Value] = []
            for try await row in try await connection.query(PostgresQuery(unsafeSQL: query), logger: logger) {
                values.append(try read(row))
            }
            try await connection.close()
            return values
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Runs `statement` (a `SELECT … FOR UPDATE`, say) in a transaction on a connection of its own, and keeps that
    /// transaction, with the locks it took, open while `body` runs; then rolls it back.
    public static func holding<T>(_ statement: String, database databaseURL: String, _ body: () async throws -> T) async throws -> T {
        guard let components = URLComponents(string: databaseURL), let host = components.host else { throw Missing() }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        let logger = Logger(label: "tern.tests.postgres")
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            try await connection.query("BEGIN", logger: logger)
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            let result = try await body()
            try await connection.query("ROLLBACK", logger: logger)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    public struct Missing: Error, CustomStringConvertible {
        public var description: String { "TERN_TEST_POSTGRES_URL is not set (scripts/test.sh starts a server and sets it)" }
    }

    private static func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}
