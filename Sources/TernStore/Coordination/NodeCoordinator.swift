import Synchronization

/// What the `tern serve` nodes sharing one database agree on: which node runs a job that must run on one node at a
/// time (a ``JobLease``), and wake-ups when one node stores work another may do.
///
/// On SQLite there is one node, which holds every lease and has no one to tell (``LocalCoordinator``); on
/// PostgreSQL, leases are advisory locks and wake-ups are LISTEN/NOTIFY (``PostgresCoordinator``).
public protocol NodeCoordinator: Sendable {
    /// Whether this node is the only one on its database (SQLite), so what a previous run left claimed is its own.
    var isSoleNode: Bool { get }
    /// The lease on `job` (one per name). The coordinator takes it whenever no other node holds it.
    func lease(_ job: String) -> JobLease
    /// Tells the other nodes that `event` happened, e.g. that a push was stored, without waiting for them (this
    /// node acts on its own events directly).
    func announce(_ event: String)
    /// Events the other nodes announce, from now on, while the coordinator runs; and ``CoordinationEvent/resumed``
    /// each time the subscription (re)starts, since events announced while it was down are lost.
    func events() -> AsyncStream<String>
    /// Keeps the leases and the event subscription alive (reconnecting after a database outage) until cancelled;
    /// on the way out every lease is released.
    func run() async
}

/// Events the coordinator itself reports among the other nodes' announcements.
public enum CoordinationEvent {
    /// The subscription to the other nodes' events (re)started: whatever they announced before may have been
    /// missed, so a subscriber that acts on wake-ups looks for work it may have missed.
    public static let resumed = "tern.coordination.resumed"
}

/// A job only one node may run at a time. Check ``isHeld`` before each unit of work: a lease can be lost (the
/// database connection that held it broke), and another node may then take the job over.
public final class JobLease: Sendable {
    public let job: String
    private let held = Atomic<Bool>(false)
    private let tries = Atomic<Int>(0)

    init(job: String, held: Bool = false) {
        self.job = job
        self.held.store(held, ordering: .relaxed)
    }

    public var isHeld: Bool { held.load(ordering: .acquiring) }

    /// How often this node tried to take the job and found another node holding it (tests wait on it).
    public var refusals: Int { tries.load(ordering: .relaxed) }

    func set(_ value: Bool) { held.store(value, ordering: .releasing) }

    func refused() { tries.add(1, ordering: .relaxed) }
}

/// One node on its own database (SQLite): it holds every lease, and there is no one to announce anything to.
public final class LocalCoordinator: NodeCoordinator {
    private let leases = Mutex<[String: JobLease]>([:])

    public init() {}

    public var isSoleNode: Bool { true }

    public func lease(_ job: String) -> JobLease {
        leases.withLock { leases in
            if let lease = leases[job] { return lease }
            let lease = JobLease(job: job, held: true)
            leases[job] = lease
            return lease
        }
    }

    public func announce(_ event: String) {}

    public func events() -> AsyncStream<String> { AsyncStream { $0.finish() } }

    public func run() async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
    }
}
