import Foundation
import Hummingbird
import Logging
import Metrics
import ServiceLifecycle
import TernAPNs
import TernAPNsClient
import TernStore

/// Reads the legacy feedback service for every app on the legacy transport, each at its own interval (12 hours
/// unless the app says otherwise), and deactivates the dead tokens it lists by the same rule as a 410's timestamp:
/// only a token not registered again since the feedback time goes.
///
/// The time of each read is kept in the store, so a restart does not read again early. A failed read is tried
/// again after ``retryDelay``, never in a tight loop.
actor FeedbackPoller: Service {
    /// What one read found and did.
    struct Result: Codable, Sendable, Equatable, ResponseEncodable {
        /// Tuples listing this app's live tokens (a shared service lists other apps' too; those, and tokens this app
        /// already deactivated, are not counted). A token listed twice counts twice.
        var listed: Int
        /// Tokens deactivated.
        var deactivated: Int
        /// Tuples whose token was left alone: registered again after the tuple's time, or already deactivated by an
        /// earlier tuple of the same read.
        var kept: Int
    }

    /// The least time between two reads for one app, whoever asks.
    static let minimumSpacing: TimeInterval = 60
    static let retryDelay: TimeInterval = 300

    private let store: any TernStore
    private let clients: ClientDirectory
    private let checkInterval: Duration
    private let onTokensPruned: @Sendable () -> Void
    /// The same series as the dispatcher's, which counts the tokens APNs' answers to pushes deactivate.
    private let tokensPruned = Counter(label: "tern_tokens_pruned_total")
    /// One node polls on schedule at a time.
    private let lease: JobLease
    /// Reads are due by `wall` (their times are stored); the checks are `checkInterval` apart on `timer`.
    private let clocks: ServerClocks
    private let logger: Logger
    /// The apps' list that cannot be read (the database away): said when it starts, once a minute, and when it ends.
    private let listFailures: FailureLog
    private var retryAfter: [String: Date] = [:]
    private var reading: Set<String> = []

    init(
        store: any TernStore, clients: ClientDirectory, checkInterval: Duration, coordinator: any NodeCoordinator = LocalCoordinator(),
        clocks: ServerClocks = .system, onTokensPruned: @escaping @Sendable () -> Void, logger: Logger
    ) {
        self.clocks = clocks
        self.store = store
        self.clients = clients
        self.checkInterval = checkInterval
        self.lease = coordinator.lease("feedback-poller")
        self.onTokensPruned = onTokensPruned
        self.logger = logger
        listFailures = FailureLog("cannot list apps for the feedback service", logger: logger)
    }

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            if lease.isHeld { await pollDue() }
            try? await cancelWhenGracefulShutdown { [checkInterval, timer = clocks.timer] in try await timer.sleep(for: checkInterval) }
        }
    }

    /// Reads the feedback of every legacy app whose interval has passed by `now` (the wall clock's, unless given).
    func pollDue(now given: Date? = nil) async {
        let now = given ?? clocks.wall.now
        let apps: [AppRecord]
        do {
            apps = try await store.apps().filter { $0.transport == AppRecord.legacy }
            listFailures.succeeded()
        } catch {
            listFailures.failed(["error": "\(error)"])
            return
        }
        for app in apps {
            if let polledAt = app.feedbackPolledAt, now < polledAt.addingTimeInterval(TimeInterval(app.feedbackInterval)) { continue }
            if let retry = retryAfter[app.id], now < retry { continue }
            do {
                _ = try await poll(app, now: now)
            } catch let error as EndpointUnavailable where error.reason == .simulatorOff {
                // The embedded APNs is starting (the first look can come before the node knows where it listens):
                // looked at again at the next check, not after the retry delay.
                continue
            } catch {
                retryAfter[app.id] = now.addingTimeInterval(Self.retryDelay)
                logger.warning("cannot read the feedback service", metadata: ["app": "\(app.id)", "error": "\(error)"])
            }
        }
    }

    /// Reads `app`'s feedback service now and applies what it lists.
    /// - Throws: ``PollError/tooSoon(retryAfter:)`` within ``minimumSpacing`` of the last read; the client's error
    ///   when the service cannot be read (nothing is applied then).
    func poll(_ app: AppRecord, now given: Date? = nil) async throws -> Result {
        let now = given ?? clocks.wall.now
        if let polledAt = app.feedbackPolledAt, now < polledAt.addingTimeInterval(Self.minimumSpacing) {
            throw PollError.tooSoon(retryAfter: polledAt.addingTimeInterval(Self.minimumSpacing))
        }
        guard reading.insert(app.id).inserted else { throw PollError.tooSoon(retryAfter: now.addingTimeInterval(Self.minimumSpacing)) }
        defer { reading.remove(app.id) }
        // An app on Apple's servers has tokens of both environments, each with its own feedback service.
        let environments: [APNsEnvironment?] = app.environment.apnsEnvironment != nil ? [.production, .development] : [nil]
        var tuples: [FeedbackTuple] = []
        var failures: [any Error] = []
        for environment in environments {
            do {
                let configuration = try await clients.feedbackConfiguration(for: app, tokenEnvironment: environment)
                tuples += try await LegacyFeedbackClient.fetch(configuration)
            } catch {
                // A certificate for one environment cannot read the other's service; what was read still counts.
                failures.append(error)
            }
        }
        if failures.count == environments.count, let first = failures.first { throw first }
        // The service has cleared its list: note the read before applying, so a crash cannot make us read early.
        try await store.recordFeedbackPoll(app: app.id, at: now)
        retryAfter[app.id] = nil
        // A feedback service may serve several apps (the simulator's does): only this app's live tokens count.
        // Looked up a thousand distinct tokens at a time: paging one audience of every listed token sorted the whole
        // list again for each page (500,000 tokens Tern never had took a core for nine minutes).
        let listedTokens = Set(tuples.map { DeviceToken.hex($0.token) }).sorted()
        var ours: Set<String> = []
        for start in stride(from: 0, to: listedTokens.count, by: 1000) {
            let chunk = Array(listedTokens[start..<min(start + 1000, listedTokens.count)])
            var cursor: String?
            repeat {
                let page = try await store.recipients(app: app.id, audience: .tokens(chunk), after: cursor, limit: 1000)
                ours.formUnion(page.items.filter { $0.deviceID != nil }.map(\.token))
                cursor = page.next
            } while cursor != nil
        }
        let listed = tuples.compactMap { tuple -> TokenDeactivation? in
            let token = DeviceToken.hex(tuple.token)
            guard ours.contains(token) else { return nil }
            let reported = Date(timeIntervalSince1970: TimeInterval(tuple.timestamp))
            return TokenDeactivation(
                token: token, reason: .apns(.unregistered), invalidSince: TokenPruning.invalidSince(reported: reported, observedAt: now),
                apnsTimestamp: reported)
        }
        // Five hundred a transaction: one commit for each, not one a token.
        var result = Result(listed: listed.count, deactivated: 0, kept: 0)
        for piece in stride(from: 0, to: listed.count, by: 500) {
            result.deactivated += try await store.deactivateTokens(
                app: app.id, Array(listed[piece..<min(piece + 500, listed.count)]), at: now
            ).count
        }
        result.kept = result.listed - result.deactivated
        tokensPruned.increment(by: result.deactivated)
        if result.deactivated > 0 { onTokensPruned() }
        logger.info(
            "feedback service read",
            metadata: ["app": "\(app.id)", "listed": "\(result.listed)", "deactivated": "\(result.deactivated)", "kept": "\(result.kept)"])
        return result
    }

    enum PollError: Error {
        case tooSoon(retryAfter: Date)
    }
}
