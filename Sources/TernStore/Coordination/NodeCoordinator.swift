import Synchronization

/// What the `tern serve` nodes sharing one database agree on: which node runs a job that must run on one node at a
/// time (a ``JobLease``), and wake-ups when one node stores work another may do.
///
/// On SQLite there is one node, which holds every lease (``LocalCoordinator``); on PostgreSQL, leases are advisory
/// locks and wake-ups are LISTEN/NOTIFY (``PostgresCoordinator``).
public protocol NodeCoordinator: Sendable {
    /// The lease on `job` (one per name). The coordinator takes it whenever no other node holds it.
    func lease(_ job: String) -> JobLease
    /// Tells every node (this one too) that `event` happened, e.g. that a push was stored.
    func announce(_ event: String) async
    /// Events announced by any node, from now on, while the coordinator runs.
    func events() -> AsyncStream<String>
    /// Keeps the leases and the event subscription alive (reconnecting after a database outage) until cancelled;
    /// on the way out every lease is released.
    func run() async
}

/// A job only one node may run at a time. Check ``isHeld`` before each unit of work: a lease can be lost (the
/// database connection that held it broke), and another node may then take the job over.
public final class JobLease: Sendable {
    public let job: String
    private let held = Atomic<Bool>(false)

    init(job: String, held: Bool = false) {
        self.job = job
        self.held.store(held, ordering: .relaxed)
    }

    public var isHeld: Bool { held.load(ordering: .acquiring) }

    func set(_ value: Bool) { held.store(value, ordering: .releasing) }
}

/// One node on its own database (SQLite): it holds every lease, and announcements reach only itself.
public final class LocalCoordinator: NodeCoordinator {
    private let leases = Mutex<[String: JobLease]>([:])
    private let subscribers = Mutex<[AsyncStream<String>.Continuation]>([])

    public init() {}

    public func lease(_ job: String) -> JobLease {
        leases.withLock { leases in
            if let lease = leases[job] { return lease }
            let lease = JobLease(job: job, held: true)
            leases[job] = lease
            return lease
        }
    }

    public func announce(_ event: String) async {
        for subscriber in subscribers.withLock({ $0 }) { subscriber.yield(event) }
    }

    public func events() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(64))
        subscribers.withLock { $0.append(continuation) }
        return stream
    }

    public func run() async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        for subscriber in subscribers.withLock({ $0 }) { subscriber.finish() }
    }
}
