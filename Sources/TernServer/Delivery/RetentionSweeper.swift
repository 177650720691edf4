import Foundation
import Logging
import Metrics
import ServiceLifecycle
import TernStore

/// Deletes what Tern keeps only for a while, every `interval`, in batches: expired inbox messages, the online
/// channel's expired device messages, the tokens of Live Activities that can no longer be running
/// (``ActivityTokenRecord/lifetime``), and pushes that completed longer than `pushRetention` ago, and the opens
/// recorded for webhooks longer ago than that, posted or not. Listings and
/// connections leave expired messages out the moment they expire; this only frees the space. Pushes are deleted
/// with their failures and chunks, oldest first; one whose device messages are still kept stays until they expire.
/// It also completes pushes sent in full that were never marked completed (``TernStore/completeStrandedPushes(at:limit:)``),
/// which an earlier version could leave on PostgreSQL.
final class RetentionSweeper: Service {
    static let batch = 1000

    private let store: any TernStore
    private let interval: Duration
    /// Zero keeps every push.
    private let pushRetention: Duration
    /// One node sweeps at a time. The lease keeps its name from before pushes were swept too, so that nodes of both
    /// versions share it during a rolling upgrade.
    private let lease: JobLease
    /// `wall` says what has expired; the sweeps are `interval` apart on `timer`.
    private let clocks: ServerClocks
    private let logger: Logger
    /// Sweeps that fail (the database away): said when it starts, once a minute, and when it ends.
    private let inboxFailures: FailureLog
    private let messageFailures: FailureLog
    private let activityFailures: FailureLog
    private let pushFailures: FailureLog
    private let openEventFailures: FailureLog
    private let strandedFailures: FailureLog
    /// The stranded pushes it completed count among the pushes completed, as those the dispatcher completes do.
    private let pushesCompleted: Counter

    init(
        store: any TernStore, interval: Duration, pushRetention: Duration = .zero, coordinator: any NodeCoordinator = LocalCoordinator(),
        clocks: ServerClocks = .system, logger: Logger, metrics: any MetricsFactory = MetricsSystem.factory
    ) {
        self.store = store
        self.interval = interval
        self.pushRetention = pushRetention
        self.lease = coordinator.lease("inbox-sweeper")
        self.clocks = clocks
        self.logger = logger
        inboxFailures = FailureLog("cannot sweep expired inbox messages", logger: logger)
        messageFailures = FailureLog("cannot sweep expired device messages", logger: logger)
        activityFailures = FailureLog("cannot sweep ended Live Activities' tokens", logger: logger)
        pushFailures = FailureLog("cannot delete pushes past delivery.pushRetention", logger: logger)
        openEventFailures = FailureLog("cannot delete open events past delivery.pushRetention", logger: logger)
        strandedFailures = FailureLog("cannot complete pushes sent in full", logger: logger)
        pushesCompleted = Counter(label: PushDispatcher.pushesCompletedLabel, factory: metrics)
    }

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            if lease.isHeld { await sweep() }
            try? await cancelWhenGracefulShutdown { [interval, timer = clocks.timer] in try await timer.sleep(for: interval) }
        }
    }

    /// What one sweep deleted.
    struct Swept: Equatable {
        var inboxEntries = 0
        var deviceMessages = 0
        var activityTokens = 0
        var pushes = 0
        var pushFailures = 0
        var pushReports = 0
        var openEvents = 0
        var strandedPushes = 0
    }

    /// Deletes everything that expired by `now` (the wall clock's, unless given), and the pushes that completed
    /// `pushRetention` before it.
    @discardableResult
    func sweep(now given: Date? = nil) async -> Swept {
        let now = given ?? clocks.wall.now
        var swept = Swept()
        await Self.untilDone(inboxFailures) {
            let deleted = try await store.purgeExpiredInbox(before: now, limit: Self.batch)
            swept.inboxEntries += deleted
            return deleted == Self.batch
        }
        if swept.inboxEntries > 0 { logger.info("expired inbox messages deleted", metadata: ["entries": "\(swept.inboxEntries)"]) }
        await Self.untilDone(messageFailures) {
            let deleted = try await store.purgeExpiredMessages(before: now, limit: Self.batch)
            swept.deviceMessages += deleted
            return deleted == Self.batch
        }
        if swept.deviceMessages > 0 { logger.info("expired device messages deleted", metadata: ["messages": "\(swept.deviceMessages)"]) }
        await Self.untilDone(activityFailures) {
            let deleted = try await store.purgeEndedActivities(startedBefore: now.addingTimeInterval(-ActivityTokenRecord.lifetime), limit: Self.batch)
            swept.activityTokens += deleted
            return deleted == Self.batch
        }
        if swept.activityTokens > 0 { logger.info("ended Live Activities' tokens deleted", metadata: ["tokens": "\(swept.activityTokens)"]) }
        var stranded: [String] = []
        await Self.untilDone(strandedFailures) {
            let completed = try await store.completeStrandedPushes(at: now, limit: Self.batch)
            stranded += completed.prefix(max(0, 5 - stranded.count))
            swept.strandedPushes += completed.count
            pushesCompleted.increment(by: completed.count)
            return completed.count == Self.batch
        }
        if swept.strandedPushes > 0 {
            logger.warning(
                "pushes sent in full but never marked completed were completed now",
                metadata: ["pushes": "\(swept.strandedPushes)", "first": "\(stranded.joined(separator: ", "))"])
        }
        guard pushRetention > .zero else { return swept }
        let cutoff = now.addingTimeInterval(-pushRetention.seconds)
        await Self.untilDone(pushFailures) {
            let purge = try await store.purgeFinishedPushes(before: cutoff, limit: Self.batch)
            swept.pushes += purge.pushes
            swept.pushFailures += purge.failures
            swept.pushReports += purge.reports
            return purge.more
        }
        await Self.untilDone(openEventFailures) {
            let deleted = try await store.purgeOpenEvents(before: cutoff, limit: Self.batch)
            swept.openEvents += deleted
            return deleted == Self.batch
        }
        if swept.pushes > 0 || swept.pushFailures > 0 || swept.pushReports > 0 || swept.openEvents > 0 {
            logger.info(
                "pushes past delivery.pushRetention deleted",
                metadata: [
                    "pushes": "\(swept.pushes)", "failures": "\(swept.pushFailures)", "reports": "\(swept.pushReports)",
                    "openEvents": "\(swept.openEvents)",
                ])
        }
        return swept
    }

    /// Runs `step`, a batch at a time, until it says there may be no more (false) or the server stops (a backlog of
    /// pushes from before an upgrade can take minutes); a failure ends it and is said through `failures` (when it
    /// starts, once a minute, and when it ends).
    static func untilDone(_ failures: FailureLog, _ step: () async throws -> Bool) async {
        do {
            while !Task.isShuttingDownGracefully, !Task.isCancelled, try await step() {}
            failures.succeeded()
        } catch {
            failures.failed(["error": "\(error)"])
        }
    }
}
