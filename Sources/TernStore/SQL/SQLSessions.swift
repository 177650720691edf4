import SQLKit

/// How ``SQLStore`` reaches its database: every call gets a connection to itself for as long as it runs, which a
/// transaction needs (its statements must not interleave with another call's on the same connection).
protocol SQLSessions: Sendable {
    /// Runs `body` on a connection no other call uses meanwhile. Where calls have a deadline, this one has `calls`
    /// times one call's: a session that runs several steps (the schema's migrations) gets time for each.
    func withSession<T: Sendable>(calls: Int, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    /// Runs the pool until cancelled (``TernStore/run()``).
    func run() async
    /// Closes the connections once the calls already running are done.
    func close() async throws
}

extension SQLSessions {
    /// Runs `body` on a connection no other call uses meanwhile, with one call's time.
    func withSession<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await withSession(calls: 1, body)
    }
}
