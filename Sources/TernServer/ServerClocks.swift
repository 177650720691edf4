import TernAPNs

/// The two kinds of time the server reads, made once at the composition root and handed to what needs them.
///
/// `wall` dates what the server stores and compares with stored dates: inbox expiry and read times, badge counts,
/// push and app timestamps, alias tokens, the feedback and webhook schedules. `timer` is what its periodic and
/// delayed work waits on: the inbox sweep, the feedback poll, badge gathering, the webhook loop. `tern serve` uses
/// the system's; a test passes a manual pair that moves together, and advances it instead of sleeping. On PostgreSQL,
/// whose dates several nodes compare, the assembly reads `wall` through the database server's time
/// (``DatabaseAlignedClock``).
public struct ServerClocks: Sendable {
    /// Dates: stored, and compared with what is stored.
    public var wall: any WallClock
    /// Waits between and before pieces of background work.
    public var timer: any Clock<Duration>
    /// ``timer`` as one piece of work waits on it, where a test tells those waits apart (``clock(for:)``).
    private var named: (@Sendable (Waiter) -> any Clock<Duration>)?

    /// The pieces of background work a test waits for by name: two loops of a second each sleep until the same
    /// instant, and a test that waits for "a sleeper until then" cannot tell whose it is.
    public enum Waiter: String, Sendable, CaseIterable {
        case badgeUpdates
        case webhooks
        case leaseRenewal
    }

    /// - Parameter named: ``timer`` as `waiter` waits on it (a test's clock that records who sleeps); nil: ``timer``.
    public init(
        wall: any WallClock = SystemWallClock(), timer: any Clock<Duration> = ContinuousClock(),
        named: (@Sendable (Waiter) -> any Clock<Duration>)? = nil
    ) {
        self.wall = wall
        self.timer = timer
        self.named = named
    }

    /// What `waiter` waits on: ``timer``, told apart from the rest of the server's waits for a test.
    public func clock(for waiter: Waiter) -> any Clock<Duration> { named?(waiter) ?? timer }

    /// The system's time: what `tern serve` runs on.
    public static let system = ServerClocks()
}
