/// Whether PostgreSQL can be reached, decided from the calls and a probe of its own.
///
/// postgres-nio's pool, while it cannot connect, keeps each call waiting for a connection (until the call's deadline,
/// 15 s by default) for a minute before it fails them at once, and once the server is back it reconnects only when its
/// back-off says, up to a minute later. So a database restart cost every request 15 s before its 503, then 500s, and
/// the node answered nothing for up to a minute after the database was back. This decides instead:
///
/// - a call that could not reach the server (its connection failed, it has had no answer within
///   ``DatabaseReachability/patience``, its deadline passed) starts a probe: a connection of its own, `SELECT 1`;
/// - if the probe cannot reach the server either, the pool is retired (the calls waiting in it fail now) and calls fail
///   at once as unavailable; the probe runs again every ``probeInterval``;
/// - the first probe that reaches the server starts a new pool: the node is back within a probe interval.
///
/// A probe the server answered, even with an error ("too many clients"), means it is reachable: a slow or saturated
/// database is not an unreachable one, and its pool is left alone. After a probe that reached it, a call that had no
/// answer on its connection starts the next check only after ``quiet``, so slow statements do not make a probe a
/// second; a call whose connection failed, or that got none, starts it after a probe interval: a server that stops
/// just after a slow statement is found out within seconds, not after the quiet.
///
/// A value: events in, actions out (`PostgresSessions` performs them). Not thread-safe; its owner guards it.
struct DatabaseReachability: Sendable, Equatable {
    typealias Instant = ContinuousClock.Instant

    enum State: Sendable, Equatable {
        /// Calls go to the current pool.
        case reachable
        /// A call could not reach the server; a probe is finding out whether anything can. Calls still go to the
        /// pool meanwhile.
        case checking
        /// The probe could not reach the server either: calls fail at once with `reason` until a probe reaches it.
        case unreachable(reason: String)
    }

    /// Why a call could not reach the server.
    enum Cause: Sendable, Equatable {
        /// Its connection failed or closed under it, or the pool failed it.
        case connectionFailed
        /// It has waited ``DatabaseReachability/patience`` for a connection from the pool (which keeps calls
        /// waiting while it cannot connect).
        case noConnection
        /// It has had no answer on its connection within ``DatabaseReachability/patience``, or its deadline passed:
        /// perhaps only a slow statement.
        case noAnswer
    }

    /// What the owner does next.
    enum Action: Sendable, Equatable {
        case none
        /// Start a probe.
        case probe
        /// Probe again after the probe interval; first retire the current pool if `retiringPool`.
        case probeAgain(retiringPool: Bool)
        /// The server answers again: start pool `generation` for the calls from now on.
        case startPool(generation: Int)
    }

    /// How long a call may go without an answer (a connection, then its statements' results) before a probe finds
    /// out whether the server can be reached: the pool keeps calls waiting while it cannot connect, and a connection
    /// whose network went silent never answers.
    static let patience = Duration.seconds(2)
    /// After a probe that reached the server, how long before the next check.
    static let quiet = Duration.seconds(5)
    /// Between probes while the server is away, and before a check after one that reached it.
    let probeInterval: Duration

    private(set) var state = State.reachable
    /// The pool that calls use now; each new pool counts one up. A failure on an older pool says nothing new.
    private(set) var generation = 0
    /// When a probe last reached the server.
    private var reached: Instant?

    init(probeInterval: Duration = .seconds(1)) {
        self.probeInterval = probeInterval
    }

    /// A call may start: - Returns: the pool's generation to run on, or why it fails at once.
    func admit() -> Result<Int, Unreachable> {
        if case .unreachable(let reason) = state { return .failure(Unreachable(reason: reason)) }
        return .success(generation)
    }

    /// A call on pool `generation` could not reach the server, for `cause`.
    mutating func callCouldNotReach(generation: Int, because cause: Cause, at now: Instant) -> Action {
        guard generation == self.generation, state == .reachable else { return .none }
        if let reached, now < reached + (cause == .noAnswer ? Self.quiet : probeInterval) { return .none }
        state = .checking
        return .probe
    }

    /// The probe reached the server (which answered, whatever it said).
    mutating func probeReachedServer(at now: Instant) -> Action {
        reached = now
        switch state {
        case .reachable, .checking:
            state = .reachable
            return .none
        case .unreachable:
            state = .reachable
            generation += 1
            return .startPool(generation: generation)
        }
    }

    /// The probe could not reach the server: no connection within its time, or the connection failed.
    mutating func probeFailed(_ reason: String) -> Action {
        switch state {
        case .reachable:
            return .none
        case .checking:
            state = .unreachable(reason: reason)
            return .probeAgain(retiringPool: true)
        case .unreachable:
            state = .unreachable(reason: reason)
            return .probeAgain(retiringPool: false)
        }
    }

    /// Why a call failed at once.
    struct Unreachable: Error, Sendable, Equatable {
        var reason: String
    }
}
