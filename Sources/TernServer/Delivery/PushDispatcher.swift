import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore

/// Delivers stored pushes, page by page, so a restart resumes where the last recorded page ended.
///
/// Up to `pushConcurrency` unfinished pushes at once (oldest first). For each it reads the audience from the store
/// `pageSize` recipients at a time (never the whole audience), keeps the inbox message and works out badges, sends
/// the page through the app's APNs clients with at most `concurrency` in flight (one per device token at a time,
/// in order, unless `ordering` is off), applies the pruning rule to dead tokens, and records the page's results and
/// the new cursor in one transaction. A process killed mid-push re-sends at most the page each push was on; the
/// push id is the notifications' `apns-collapse-id` unless the caller chose one, so a device shows such a repeat
/// once. With several nodes on one database, only the node holding the `dispatcher` lease sends; another takes
/// over at each push's cursor when that node stops or loses its database connection.
final class PushDispatcher: Service {
    struct Settings: Sendable {
        var pageSize = 2000
        var concurrency = 1000
        /// Pushes sent at once (oldest first).
        var pushConcurrency = 32
        /// At most one notification per device token in flight, in order (see ``DeliveryOrder``).
        var ordering = true
        /// How often to look for work when nothing woke the dispatcher.
        var pollInterval: Duration = .seconds(1)
    }

    private let store: any TernStore
    private let clients: ClientDirectory
    private let settings: Settings
    private let coordinator: any NodeCoordinator
    /// Only the node holding it sends; the others take over when it is lost (see ``NodeCoordinator``).
    private let lease: JobLease
    private let onTokensPruned: @Sendable () -> Void
    private let logger: Logger
    private let doorbell = Doorbell()
    /// Each token's line; shared with the badge updates sent after inbox reads.
    let order = DeliveryOrder()
    /// One page at a time counts badges and queues notifications, so lines follow the order badges were counted.
    private let admission = AdmissionQueue()
    /// The pushes being sent now.
    private let running = Mutex<Set<String>>([])
    private let stopping = Atomic<Bool>(false)
    private let pushesCompleted = Counter(label: "tern_pushes_completed_total")
    private let recipientsAccepted = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "accepted")])
    private let recipientsFailed = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "failed")])
    private let tokensPruned = Counter(label: "tern_tokens_pruned_total")

    /// - Parameter onTokensPruned: called after a page that deactivated tokens (the webhook sender looks then).
    init(
        store: any TernStore, clients: ClientDirectory, settings: Settings, coordinator: any NodeCoordinator = LocalCoordinator(),
        onTokensPruned: @escaping @Sendable () -> Void = {}, logger: Logger
    ) {
        self.store = store
        self.clients = clients
        self.settings = settings
        self.coordinator = coordinator
        self.lease = coordinator.lease("dispatcher")
        self.onTokensPruned = onTokensPruned
        self.logger = logger
    }

    /// A new push is stored: this node and the others look now rather than at the next poll.
    func wake() {
        doorbell.ring()
        coordinator.announce(Self.newPushEvent)
    }

    static let newPushEvent = "push"

    func run() async throws {
        // Another node stored a push.
        let listener = Task { [coordinator, doorbell] in
            for await event in coordinator.events() where event == Self.newPushEvent { doorbell.ring() }
        }
        defer { listener.cancel() }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                while !stopping.load(ordering: .relaxed) {
                    // Only the node holding the lease sends; the others serve the API and stand by.
                    guard lease.isHeld else {
                        await doorbell.wait(upTo: settings.pollInterval)
                        continue
                    }
                    let pushes: [PushRecord]
                    do {
                        pushes = try await store.unfinishedPushes(limit: settings.pushConcurrency * 2)
                    } catch {
                        logger.error("cannot read pushes from the store", metadata: ["error": "\(error)"])
                        pushes = []
                    }
                    // Oldest first, up to pushConcurrency at once; a push already being sent is not started again.
                    for push in pushes where !stopping.load(ordering: .relaxed) {
                        let start = self.running.withLock { running -> Bool in
                            guard running.count < settings.pushConcurrency, !running.contains(push.id) else { return false }
                            running.insert(push.id)
                            return true
                        }
                        guard start else { continue }
                        let place = admission.reserve()
                        group.addTask {
                            do {
                                try await self.deliver(push, place: place)
                            } catch {
                                self.logger.error("push delivery interrupted", metadata: ["push": "\(push.id)", "error": "\(error)"])
                            }
                            _ = self.running.withLock { $0.remove(push.id) }
                            self.doorbell.ring()
                        }
                    }
                    if !stopping.load(ordering: .relaxed) {
                        await doorbell.wait(upTo: settings.pollInterval)
                    }
                }
            }
        } onGracefulShutdown: {
            // The pages in flight finish and are recorded; the rest resumes at the next start.
            self.stopping.store(true, ordering: .relaxed)
            self.doorbell.ring()
        }
    }

    /// Sends one push from its cursor to the end of its audience (or until shutdown). `place` is its first page's
    /// place in the admission queue.
    func deliver(_ listed: PushRecord, place: UInt64) async throws {
        var firstPlace: UInt64? = place
        defer { if let firstPlace { admission.give(up: firstPlace) } }
        // Read again: the list may predate a run of this push that finished since (its cursor moved, or it completed).
        guard let push = try await store.push(app: listed.appID, id: listed.id), push.status != .completed else { return }
        guard let app = try await store.app(push.appID) else {
            try await store.completePush(id: push.id, at: Date())
            return
        }
        let content = try JSONDecoder().decode(PushContent.self, from: Data(push.notification))
        if push.status == .pending { try await store.startPush(id: push.id, at: Date()) }
        var cursor = push.cursor
        // A node that lost the lease stops after the page in flight: the node that took over resumes at the cursor.
        while !stopping.load(ordering: .relaxed), lease.isHeld {
            let page = try await store.recipients(app: app.id, audience: push.audience, after: cursor, limit: settings.pageSize)
            guard let last = page.items.last else { break }
            let pagePlace = firstPlace ?? admission.reserve()
            firstPlace = nil
            var progress = try await send(page.items, app: app, content: content, pushID: push.id, place: pagePlace)
            progress.cursor = last.key
            try await store.recordProgress(pushID: push.id, progress)
            recipientsAccepted.increment(by: progress.accepted)
            recipientsFailed.increment(by: progress.failures.count)
            tokensPruned.increment(by: progress.pruned)
            if progress.pruned > 0 { onTokensPruned() }
            cursor = last.key
            if page.next == nil { break }
        }
        guard !stopping.load(ordering: .relaxed), lease.isHeld else { return }
        try await store.completePush(id: push.id, at: Date())
        pushesCompleted.increment()
        logger.info("push delivered", metadata: ["push": "\(push.id)", "app": "\(app.id)"])
    }

    /// Sends one page and classifies every result.
    ///
    /// First, one page at a time across all pushes: the inbox message goes into the recipients' inboxes, their
    /// badges are worked out, and every notification takes its place in its token's line. Taken together, that
    /// makes a device's notifications leave in the order their badges were counted. Then the page is sent.
    private func send(
        _ recipients: [Recipient], app: AppRecord, content: PushContent, pushID: String, place: UInt64
    ) async throws -> PushProgress {
        let tally = Tally()
        var clientsByEnvironment: [String: any NotificationSender] = [:]
        var reachable: [(recipient: Recipient, token: DeviceToken)] = []
        for recipient in recipients {
            let environment = recipient.environment ?? app.environment
            if clientsByEnvironment[environment] == nil {
                do {
                    clientsByEnvironment[environment] = try await clients.client(for: app, tokenEnvironment: environment)
                } catch {
                    logger.error("no APNs client for the app", metadata: ["app": "\(app.id)", "error": "\(error)"])
                }
            }
            guard clientsByEnvironment[environment] != nil else {
                tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: "clientUnavailable", at: Date()))
                continue
            }
            // Checked when registered or given; a token that is not hex is refused like APNs would.
            guard let token = try? DeviceToken(hex: recipient.token) else {
                tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: "BadDeviceToken", at: Date()))
                continue
            }
            reachable.append((recipient, token))
        }

        let batches = try await admission.admit(place) {
            try await self.admit(reachable, app: app, content: content, pushID: pushID, into: tally)
        }
        let byToken = Dictionary(reachable.map { ($0.token.hex, $0.recipient) }, uniquingKeysWith: { first, _ in first })
        await withTaskGroup(of: Void.self) { group in
            for (environment, batch) in batches {
                guard let client = clientsByEnvironment[environment] else { continue }
                group.addTask {
                    await OrderedBatch.send(batch, client: client, order: self.order, concurrency: self.settings.concurrency) { notification, outcome in
                        guard let recipient = byToken[notification.deviceToken.hex] else { return }
                        await self.record(outcome, recipient: recipient, app: app, into: tally)
                    }
                }
            }
        }
        return tally.progress()
    }

    /// Inbox, badges and places in line for a page's recipients. - Returns: the notifications by environment.
    private func admit(
        _ recipients: [(recipient: Recipient, token: DeviceToken)], app: AppRecord, content: PushContent, pushID: String,
        into tally: Tally
    ) async throws -> [String: [QueuedNotification]] {
        let now = Date()
        let owners = recipients.compactMap { entry in entry.recipient.deviceID.map { InboxOwner(deviceID: $0, alias: entry.recipient.alias) } }
        let distinctOwners = Array(Set(owners))
        if let inbox = content.inbox, !distinctOwners.isEmpty {
            let message = InboxMessage(
                id: pushID, appID: app.id, title: inbox.title, body: inbox.body, data: inbox.data, createdAt: now,
                expiresAt: now.addingTimeInterval(TimeInterval(inbox.ttl)))
            tally.dropped(try await store.deliverToInbox(message, owners: distinctOwners, cap: app.inboxCap, at: now))
        }
        var badges: [InboxOwner: Int] = [:]
        if let change = content.badge, !distinctOwners.isEmpty {
            badges = try await store.badges(app: app.id, owners: distinctOwners, pushID: pushID, change: change, at: now)
        }
        var payloads: [Int: [UInt8]] = [:]
        var batches: [String: [QueuedNotification]] = [:]
        for (recipient, token) in recipients {
            var payload: [UInt8]?
            if content.badge?.isPerRecipient == true, let deviceID = recipient.deviceID,
                let badge = badges[InboxOwner(deviceID: deviceID, alias: recipient.alias)]
            {
                if payloads[badge] == nil { payloads[badge] = content.payload(badge: badge) }
                payload = payloads[badge]
            }
            let notification = content.notification(to: token, topic: app.topic, pushID: pushID, payload: payload)
            let ticket = settings.ordering ? order.enqueue(token.hex) : nil
            batches[recipient.environment ?? app.environment, default: []].append(QueuedNotification(notification: notification, ticket: ticket))
        }
        return batches
    }

    private func record(_ outcome: BatchOutcome, recipient: Recipient, app: AppRecord, into tally: Tally) async {
        let now = Date()
        let result: Result<APNsDelivery, APNsClientError>
        switch outcome {
        case .sent(let sent):
            result = sent
        case .superseded:
            tally.accept()
            return
        case .notSent:
            tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: "notSent", at: now))
            return
        }
        switch result {
        case .success(let delivery) where delivery.isDelivered:
            tally.accept()
        case .success(let delivery):
            let response = delivery.response
            let reason = response.reason?.rawValue ?? "\(response.status)"
            var pruned = false
            if case .deactivate = TokenPruning.verdict(
                for: response, lastRegisteredAt: recipient.lastRegisteredAt ?? .distantPast, answeredAt: now)
            {
                let atOnce = response.reason == .badDeviceToken || response.reason == .deviceTokenNotForTopic
                do {
                    let event = try await store.deactivateToken(
                        app: app.id, token: recipient.token, reason: reason, invalidSince: atOnce ? nil : (response.timestamp ?? now),
                        apnsTimestamp: response.timestamp, at: now)
                    pruned = event != nil
                } catch {
                    logger.error("cannot deactivate a dead token", metadata: ["app": "\(app.id)", "error": "\(error)"])
                }
            }
            tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: response.status, reason: reason, at: now), pruned: pruned)
        case .failure(let error):
            tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: error.code.rawValue, at: now))
        }
    }
}

/// A page's results as they come in from several clients.
private final class Tally: Sendable {
    private struct State {
        var accepted = 0
        var failures: [PushFailure] = []
        var pruned = 0
        var inboxDropped = 0
    }

    private let state = Mutex(State())

    func dropped(_ count: Int) { state.withLock { $0.inboxDropped += count } }
    func accept() { state.withLock { $0.accepted += 1 } }

    func fail(_ failure: PushFailure, pruned: Bool = false) {
        state.withLock { state in
            state.failures.append(failure)
            if pruned { state.pruned += 1 }
        }
    }

    func progress() -> PushProgress {
        state.withLock {
            PushProgress(accepted: $0.accepted, failures: $0.failures, pruned: $0.pruned, cursor: "", inboxDropped: $0.inboxDropped)
        }
    }
}
