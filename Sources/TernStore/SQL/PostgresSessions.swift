import Logging
import PostgresKit
import PostgresNIO
import SQLKit
import Synchronization
import TernAPNs

/// A pool of PostgreSQL connections: each call leases one for its duration. The pool works while ``run()`` runs
/// (postgres-nio's `PostgresClient.run()`), in whatever structure owns the store: `tern serve` runs it around its
/// service group, since migrations come before the services and the last records are written during their
/// graceful shutdown.
///
/// While the server cannot be reached, calls fail at once as unavailable, and a new pool takes over as soon as it can
/// be reached again (``DatabaseReachability`` decides; this performs).
final class PostgresSessions: SQLSessions {
    /// One pool, and what stops it.
    private struct Pool: Sendable {
        var client: PostgresClient
        /// Ends when the pool is retired.
        var retirement: AsyncStream<Never>
        var retire: AsyncStream<Never>.Continuation
        /// Fires as the pool's `run()` is called: a lease asked for before that works, but postgres-nio warns of it.
        let started = OneTimeSignal()

        init(_ location: PostgresURL, maximumConnections: Int, logger: Logger) {
            client = PostgresClient(configuration: location.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
            (retirement, retire) = AsyncStream.makeStream()
        }
    }

    /// What ``run()`` starts: a pool to run, or a probe.
    private enum Work: Sendable {
        case run(Pool)
        case probe
    }

    private struct Inner {
        var reachability: DatabaseReachability
        var pool: Pool
        /// The calls under way: when each began, on which pool, its connection once it has one, and what ends it
        /// when its pool is retired.
        var running: [Int: (since: ContinuousClock.Instant, generation: Int, connection: PostgresConnection?, cutoff: CallCutoff)] = [:]
        var nextCall = 0
    }

    private let location: PostgresURL
    private let maximumConnections: Int
    private let logger: Logger
    /// How long one call may take before it fails as unavailable.
    private let callTimeout: Duration
    /// How long a probe may take to connect and answer.
    private let probeTimeout: Duration
    private let inner: Mutex<Inner>
    private let work: AsyncStream<Work>
    private let workInput: AsyncStream<Work>.Continuation

    init(
        location: PostgresURL, maximumConnections: Int, callTimeout: Duration, probeTimeout: Duration = .seconds(3),
        probeInterval: Duration = .seconds(1), logger: Logger
    ) {
        self.location = location
        self.maximumConnections = maximumConnections
        self.callTimeout = callTimeout
        self.probeTimeout = probeTimeout
        self.logger = logger
        let first = Pool(location, maximumConnections: maximumConnections, logger: logger)
        inner = Mutex(Inner(reachability: DatabaseReachability(probeInterval: probeInterval), pool: first))
        // Unbounded, yet small: an element per new pool and per outage.
        (work, workInput) = AsyncStream.makeStream()
        workInput.yield(.run(first))
    }

    /// Runs the pools (the first, then each that takes over), the probes, and the look at the calls under way, until
    /// cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.watchRunningCalls() }
            for await item in work {
                switch item {
                case .run(let pool):
                    group.addTask { await Self.runPool(pool) }
                case .probe:
                    group.addTask { await self.probe() }
                }
            }
        }
    }

    /// Runs one pool until it is retired or the sessions are cancelled. Retiring it fails the calls waiting in it.
    private static func runPool(_ pool: Pool) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // `run()` marks the pool running before it first suspends, a few instructions from here; the calls let
                // go resume on other threads and reach their lease after that. (One quicker still would only be warned
                // of: its lease waits for the pool either way.)
                pool.started.fire()
                await pool.client.run()
            }
            group.addTask { for await _ in pool.retirement {} }
            await group.next()
            group.cancelAll()
        }
    }

    /// Runs `body` on a pooled connection. A call still unanswered after `calls` times `callTimeout` fails as
    /// unavailable, and is left to finish on its own: a call in flight while the server restarts can otherwise wait
    /// forever (seen with postgres-nio 1.33), and the caller would wait with it. While the server cannot be reached
    /// the call fails at once, and so does a call under way when the store finds that out (its pool is retired).
    func withSession<T: Sendable>(calls: Int, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let now = ContinuousClock.now
        let cutoff = CallCutoff()
        let (admitted, pool, call) = inner.withLock { inner in
            let admitted = inner.reachability.admit()
            let call = inner.nextCall
            if case .success(let generation) = admitted {
                inner.nextCall += 1
                inner.running[call] = (now, generation, nil, cutoff)
            }
            return (admitted, inner.pool, call)
        }
        let generation: Int
        switch admitted {
        case .success(let current): generation = current
        case .failure(let unreachable): throw StoreError.unavailable("the database cannot be reached: \(unreachable.reason)")
        }
        defer { _ = inner.withLock { $0.running.removeValue(forKey: call) } }
        do {
            return try await withDeadline(callTimeout * max(1, calls), cutoff: cutoff) {
                // Only a store's first calls (its migration) and those right after a pool takes over can come first.
                if !pool.started.hasFired { await pool.started.wait() }
                return try await pool.client.withConnection { connection in
                    self.inner.withLock { $0.running[call]?.connection = connection }
                    // Every query is logged at trace: its binds hold tokens and aliases.
                    return try await body(connection.sql(queryLogLevel: .trace))
                }
            }
        } catch {
            let connection = inner.withLock { $0.running[call]?.connection }
            if error.isStoreUnavailable, let connection {
                // Past its deadline on a connection: whatever holds it up (a network gone silent, a lock), the call is
                // given up, and so is the connection. Closed, it fails what still waits on it and leaves the pool, which
                // opens another, and its open transaction can never commit (the caller was answered "unavailable, try
                // again": a statement that waited on a lock must not land afterwards). Kept, a connection whose network
                // went silent would stay taken for ever, and a few of them would take the whole pool. (A call that gets
                // no connection before its deadline never runs: postgres-nio drops the lease of a cancelled task.)
                connection.close().whenComplete { _ in }
            }
            if error is CancellationError { throw error }
            // No connection could be had (the pool's own errors), the connection failed, or the deadline passed.
            guard connection == nil || Self.isConnectionFailure(error) else { throw error }
            // Unavailable here is the call's deadline (or its pool's retirement, which has said all there is to say).
            couldNotReach(generation: generation, because: error.isStoreUnavailable ? .noAnswer : .connectionFailed)
            // A call that waited in a pool retired meanwhile fails with the pool's shutdown: say why it was retired.
            if case .unreachable(let reason) = inner.withLock({ $0.reachability.state }) {
                throw StoreError.unavailable("the database cannot be reached: \(reason)")
            }
            if error is StoreError { throw error }
            throw StoreError.unavailable("cannot reach the database: \(Self.describe(error))")
        }
    }

    /// The connection failed or closed under the call, or the server is shutting down (SQLSTATE classes 08 and 57):
    /// not an answer to the call.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if error.isStoreUnavailable { return true }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            return true
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57")
        default:
            return false
        }
    }

    private func couldNotReach(generation: Int, because cause: DatabaseReachability.Cause) {
        let now = ContinuousClock.now
        if inner.withLock({ $0.reachability.callCouldNotReach(generation: generation, because: cause, at: now) }) == .probe {
            workInput.yield(.probe)
        }
    }

    /// Every second, a call under way for ``DatabaseReachability/patience`` counts as one that could not reach the
    /// server, and a probe finds out (one reaching the server settles it: a slow call is only slow). The pool keeps
    /// calls waiting while it cannot connect, and a call on a connection whose network went silent would otherwise
    /// wait for its whole deadline. One still waiting for its connection is told apart from one waiting on its
    /// statements.
    private func watchRunningCalls() async {
        while true {
            do { try await Task.sleep(for: .seconds(1)) } catch { return }
            let now = ContinuousClock.now
            let action = inner.withLock { inner in
                let stuck = inner.running.values.filter { $0.since + DatabaseReachability.patience <= now }
                guard let call = stuck.first(where: { $0.connection == nil }) ?? stuck.first else { return DatabaseReachability.Action.none }
                return inner.reachability.callCouldNotReach(
                    generation: call.generation, because: call.connection == nil ? .noConnection : .noAnswer, at: now)
            }
            if action == .probe { workInput.yield(.probe) }
        }
    }

    /// Connects on a connection of its own, asks `SELECT 1` and tells ``DatabaseReachability``: again every probe
    /// interval while the server cannot be reached, until one reaches it.
    private func probe() async {
        while true {
            let failure = await probeOnce()
            // Stopping: what the probe saw says nothing about the server.
            if Task.isCancelled { return }
            let now = ContinuousClock.now
            let (action, interval, newPool) = inner.withLock { inner in
                let action = failure.map { inner.reachability.probeFailed($0) } ?? inner.reachability.probeReachedServer(at: now)
                // The new pool with its generation, in one step: a call admitted on the new generation gets it.
                guard case .startPool = action else { return (action, inner.reachability.probeInterval, Pool?.none) }
                inner.pool = Pool(location, maximumConnections: maximumConnections, logger: logger)
                return (action, inner.reachability.probeInterval, inner.pool)
            }
            switch action {
            case .none, .probe:
                return
            case .startPool:
                if let newPool { workInput.yield(.run(newPool)) }
                // At the outage's level, so that a log kept to warnings shows its end too.
                logger.warning("the database can be reached again; a new pool of connections takes over")
                return
            case .probeAgain(let retiringPool):
                if retiringPool {
                    logger.warning(
                        "the database cannot be reached; calls fail at once until it can",
                        metadata: ["reason": "\(failure ?? "")"])
                    let (pool, cutoffs) = inner.withLock { inner in
                        let retired = inner.reachability.generation
                        return (inner.pool, inner.running.values.filter { $0.generation == retired }.map(\.cutoff))
                    }
                    pool.retire.finish()
                    // The calls still on it fail now too, whatever they wait for: the pool's shutdown fails those
                    // waiting for a connection, yet one call (under CI's load) kept its caller until its deadline
                    // after its pool was retired.
                    let error = StoreError.unavailable("the database cannot be reached: \(failure ?? "")")
                    for cutoff in cutoffs { cutoff.cut(error) }
                }
                do { try await Task.sleep(for: interval) } catch { return }
            }
        }
    }

    /// - Returns: nil when the server answered (with rows, or with an error of its own that is not about its
    ///   connections), or why it could not be reached.
    private func probeOnce() async -> String? {
        let location = self.location
        let logger = self.logger
        let timeout = probeTimeout
        do {
            try await withDeadline(timeout) { try await location.askSelectOne(connectTimeout: timeout, logger: logger) }
            return nil
        } catch let error as PSQLError where error.code == .server && !Self.isConnectionFailure(error) {
            return nil
        } catch {
            return Self.describe(error)
        }
    }

    /// The connections close when ``run()`` is cancelled.
    func close() async throws {}

    /// What went wrong, with the server's message when there is one (PSQLError's own description says nothing, so
    /// that queries and their binds never reach a log).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            return "\(message) (SQLSTATE \(error.serverInfo?[.sqlState] ?? "?"))"
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
}
