import Foundation
import Logging
import ServiceLifecycle
import TernStore

/// Deletes expired inbox messages, and the online channel's expired device messages, every `interval`, in batches.
/// Listings and connections leave them out the moment they expire; this only frees the space.
final class InboxSweeper: Service {
    static let batch = 1000

    private let store: any TernStore
    private let interval: Duration
    /// One node sweeps at a time.
    private let lease: JobLease
    /// `wall` says what has expired; the sweeps are `interval` apart on `timer`.
    private let clocks: ServerClocks
    private let logger: Logger
    /// Sweeps that fail (the database away): said when it starts, once a minute, and when it ends.
    private let inboxFailures: FailureLog
    private let messageFailures: FailureLog

    init(
        store: any TernStore, interval: Duration, coordinator: any NodeCoordinator = LocalCoordinator(), clocks: ServerClocks = .system,
        logger: Logger
    ) {
        self.store = store
        self.interval = interval
        self.lease = coordinator.lease("inbox-sweeper")
        self.clocks = clocks
        self.logger = logger
        inboxFailures = FailureLog("cannot sweep expired inbox messages", logger: logger)
        messageFailures = FailureLog("cannot sweep expired device messages", logger: logger)
    }

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            if lease.isHeld { await sweep() }
            try? await cancelWhenGracefulShutdown { [interval, timer = clocks.timer] in try await timer.sleep(for: interval) }
        }
    }

    /// Deletes everything that expired by `now` (the wall clock's, unless given). - Returns: how many inbox entries
    /// were deleted.
    @discardableResult
    func sweep(now given: Date? = nil) async -> Int {
        let now = given ?? clocks.wall.now
        var total = 0
        do {
            while true {
                let deleted = try await store.purgeExpiredInbox(before: now, limit: Self.batch)
                total += deleted
                if deleted < Self.batch { break }
            }
            inboxFailures.succeeded()
        } catch {
            inboxFailures.failed(["error": "\(error)"])
        }
        if total > 0 { logger.info("expired inbox messages deleted", metadata: ["entries": "\(total)"]) }
        var messages = 0
        do {
            while true {
                let deleted = try await store.purgeExpiredMessages(before: now, limit: Self.batch)
                messages += deleted
                if deleted < Self.batch { break }
            }
            messageFailures.succeeded()
        } catch {
            messageFailures.failed(["error": "\(error)"])
        }
        if messages > 0 { logger.info("expired device messages deleted", metadata: ["messages": "\(messages)"]) }
        return total
    }
}
