import Logging
import Synchronization

/// When to say that some work keeps failing: the first failure, then once a ``reminder`` while failures go on (with
/// how many came since), and the first success once none has failed for ``quiet`` (with how many there were). A
/// database that goes away while thousands of requests or reconnecting devices arrive is then a few lines, not one
/// per attempt; and where only some of the work fails (writes on a full disk, while reads succeed), the successes in
/// between do not end the run, so it stays a few lines rather than two per failure.
struct FailureRun: Sendable, Equatable {
    /// What the log says now.
    enum Say: Sendable, Equatable {
        case nothing
        /// The first failure of a run.
        case started
        /// Still failing: `count` failures since the last line.
        case stillFailing(count: Int)
        /// Working again after `count` failures.
        case recovered(count: Int)
    }

    static let reminder = Duration.seconds(60)
    /// How long without a failure before a success ends the run.
    static let quiet = Duration.seconds(5)

    private var failures = 0
    private var unsaid = 0
    private var lastSaid: ContinuousClock.Instant?
    private var lastFailure: ContinuousClock.Instant?

    init() {}

    var isFailing: Bool { failures > 0 }

    mutating func failed(at now: ContinuousClock.Instant) -> Say {
        failures += 1
        lastFailure = now
        guard let lastSaid else {
            self.lastSaid = now
            return .started
        }
        unsaid += 1
        guard lastSaid.duration(to: now) >= Self.reminder else { return .nothing }
        self.lastSaid = now
        defer { unsaid = 0 }
        return .stillFailing(count: unsaid)
    }

    mutating func succeeded(at now: ContinuousClock.Instant) -> Say {
        guard failures > 0, let lastFailure, lastFailure.duration(to: now) >= Self.quiet else { return .nothing }
        defer { self = FailureRun() }
        return .recovered(count: failures)
    }
}

/// A ``FailureRun`` with its logger: `failed` and `succeeded` from any task.
final class FailureLog: Sendable {
    private let run = Mutex(FailureRun())
    /// Whether a run is going on, read without the lock on the way of every success.
    private let failing = Atomic<Bool>(false)
    private let logger: Logger
    /// What fails, as the log's message says it ("request failed").
    private let what: String
    private let now: @Sendable () -> ContinuousClock.Instant

    init(_ what: String, logger: Logger, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.what = what
        self.logger = logger
        self.now = now
    }

    func failed(_ metadata: Logger.Metadata) {
        let now = now()
        let say = run.withLock { run in
            defer { failing.store(run.isFailing, ordering: .relaxed) }
            return run.failed(at: now)
        }
        switch say {
        case .started: logger.error("\(what)", metadata: metadata)
        case .stillFailing(let count): logger.error("\(what) (still failing: \(count) more since the last line)", metadata: metadata)
        case .nothing, .recovered: break
        }
    }

    func succeeded() {
        guard failing.load(ordering: .relaxed) else { return }
        let say = run.withLock { run in
            defer { failing.store(run.isFailing, ordering: .relaxed) }
            return run.succeeded(at: now())
        }
        if case .recovered(let count) = say { logger.info("\(what): working again after \(count) failure(s)") }
    }
}
