import Crypto
import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore

/// Delivers stored pushes in chunks, so several nodes share a push and a restart resumes where the last recorded
/// chunk ended.
///
/// The dispatcher claims chunks from the store (``TernStore/claimChunk(node:size:leaseUntil:at:)``): `chunkSize`
/// consecutive recipients of an unfinished push (an app's pushes in order, apps taking turns), leased to this node and
/// renewed while it sends them. It keeps up to twice its in-flight limit's worth of recipients and `pushes` chunks in
/// flight (``ClaimRoom``); a chunk waiting for its app's APNs endpoint to have a connection takes none of that room and
/// no permit, and the app's other chunks wait in the store meanwhile (``InFlightChunks``), so an app whose endpoint is
/// down holds up no other app. For each chunk it keeps the inbox message and works out badges, sends the notifications
/// through the app's APNs clients with at most `concurrency` sent and not recorded across all chunks (one per device
/// token at a time, in order, unless `ordering` is off), applies the pruning rule to dead tokens, records the results
/// as they come, and records the rest and closes the chunk in one transaction.
///
/// Any number of nodes on one database do this together. A node that dies or loses the database stops renewing,
/// and when its leases run out (`chunkLease`) another node sends its open chunks again, skipping the recipients
/// whose results were recorded. A notification holds one of the node's `concurrency` permits from the moment it is
/// sent until its result is recorded (``InFlightLimit``, ``ChunkLedger``), so a device may get a notification twice
/// only if it was one of those: at most `concurrency` per node that died. The push id is the notifications'
/// `apns-collapse-id` unless the caller chose one, so a device shows such a repeat once.
final class PushDispatcher: Service {
    /// The configuration's `delivery` settings (their defaults live there), and how the dispatcher paces itself.
    struct Settings: Sendable {
        var delivery: TernServerConfiguration.Delivery
        /// How often to look for work when nothing woke the dispatcher.
        var pollInterval: Duration = .seconds(1)

        init(_ delivery: TernServerConfiguration.Delivery) {
            self.delivery = delivery
        }
    }

    private let store: any TernStore
    private let clients: ClientDirectory
    private let settings: Settings
    private let coordinator: any NodeCoordinator
    /// The devices connected to this node (the online channel), rung when their messages are kept.
    private let connections: DeviceConnections
    /// This process's name on the chunks it claims.
    private let node = UUID.random().uuidString.lowercased()
    private let onTokensPruned: @Sendable () -> Void
    private let logger: Logger
    private let doorbell = Doorbell()
    /// Each token's line; shared with the badge updates sent after inbox reads.
    let order = DeliveryOrder()
    /// Told when this node completes a push: the requests that wait for it (`?wait=`) return then.
    let completions = PushCompletions()
    /// One chunk at a time counts badges and queues notifications, in the order the chunks were claimed, so lines
    /// follow the order badges were counted.
    private let admission = AdmissionQueue()
    /// Notifications sent and not yet recorded, across all chunks: at most `concurrency`, so a crash sends at most
    /// that many again, and fewer while more would only queue (the limit follows APNs' round trips).
    private let permits: InFlightLimit
    /// The chunks being sent now (``InFlightChunks``).
    private let inFlight = Mutex(InFlightChunks())
    private let stopping = Atomic<Bool>(false)
    /// Waits after failed claims (the store away), so the loop does not spin: at most 2 s, so that the pushes in
    /// flight go on within 2 s of the store's return. The log says so through ``claimFailures``: the first failure,
    /// a reminder a minute, the recovery.
    private let claimBackoff = Mutex(ErrorBackoff(maximum: .seconds(2)))
    private let claimFailures: FailureLog
    /// Dead tokens that cannot be deactivated (the database away), said as claims are: the first bunch, a reminder a
    /// minute, the recovery; not a line for every bunch of a push's answers.
    private let pruneFailures: FailureLog
    /// Each app's recent answers, whose outright rejections may be the app's fault rather than its tokens'.
    private let rejections = Mutex<[String: OutrightRejections]>([:])
    /// Pushes this node completed: by recording a push's last chunk, by a cancel, or (the retention sweep) a push
    /// sent in full that was never marked completed.
    static let pushesCompletedLabel = "tern_pushes_completed_total"
    private let pushesCompleted = Counter(label: PushDispatcher.pushesCompletedLabel)
    private let chunksReclaimed = Counter(label: "tern_push_chunks_reclaimed_total")
    private let recipientsAccepted = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "accepted")])
    private let recipientsFailed = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "failed")])
    private let tokensPruned = Counter(label: "tern_tokens_pruned_total")
    private let messagesKept = Counter(label: "tern_channel_messages_kept_total")
    private let fallbacks = Counter(label: "tern_channel_fallbacks_total")
    /// `wall` dates the leases, results, inbox messages and badge counts; lease renewals wait on `timer`. The claim
    /// loop's pacing (polls, retries) and the recorder's 100 ms stay on the system's clock: they pace the work
    /// against a real database and real APNs answers, and decide nothing a test needs to move.
    private let clocks: ServerClocks

    /// - Parameter onTokensPruned: called after a chunk that deactivated tokens (the webhook sender looks then).
    init(
        store: any TernStore, clients: ClientDirectory, settings: Settings, coordinator: any NodeCoordinator = LocalCoordinator(),
        connections: DeviceConnections = DeviceConnections(node: UUID.random().uuidString.lowercased()),
        clocks: ServerClocks = .system, onTokensPruned: @escaping @Sendable () -> Void = {}, logger: Logger
    ) {
        self.connections = connections
        self.clocks = clocks
        self.store = store
        self.clients = clients
        self.settings = settings
        let limitGauge = Gauge(label: "tern_delivery_in_flight_limit")
        self.permits = InFlightLimit(limit: settings.delivery.concurrency, minimum: settings.delivery.minimumConcurrency) { limit in
            limitGauge.record(limit)
            logger.debug("in-flight limit", metadata: ["limit": "\(limit)"])
        }
        limitGauge.record(permits.limit)
        self.coordinator = coordinator
        self.onTokensPruned = onTokensPruned
        self.logger = logger
        claimFailures = FailureLog("cannot claim push work from the store", logger: logger)
        pruneFailures = FailureLog("cannot deactivate dead tokens", logger: logger)
    }

    /// How many of an ended activity's tokens one statement forgets.
    static let endedTokensAtOnce = 10_000

    /// A push that ended a Live Activity (`aps.event` `end`, to `audience.activity`), once it completed: the tokens it
    /// went to are forgotten, since no update can reach an ended activity, so the app's activities list it no more and
    /// a later push to the id reaches only the devices that followed it again since. Done by the node that records the
    /// push's last chunk; if that fails (the database away), the activity's 12 hours still end it.
    private func forgetEndedActivity(_ push: PushRecord) async {
        guard case .activity(let activity, let aliases) = push.audience,
            let content = push.content,
            case .string("end")? = (try? JSONValue(parsing: content.payload))?["aps"]?["event"]
        else { return }
        do {
            var forgotten = 0
            while true {
                let batch = try await store.endActivity(
                    app: push.appID, activity: activity, aliases: aliases, registeredBy: push.createdAt, limit: Self.endedTokensAtOnce)
                forgotten += batch
                if batch < Self.endedTokensAtOnce { break }
            }
            logger.info("activity ended", metadata: ["push": "\(push.id)", "activity": "\(activity)", "tokens": "\(forgotten)"])
        } catch {
            logger.warning("cannot forget an ended activity's tokens", metadata: ["push": "\(push.id)", "activity": "\(activity)", "error": "\(error)"])
        }
    }

    /// This node completed push `id` (recorded its last chunk, or cancelled it): counted, and the requests waiting for
    /// it told.
    func completed(_ id: String) {
        pushesCompleted.increment()
        completions.complete(id)
    }

    /// A new push is stored: this node and the others look now rather than at the next poll.
    func wake() {
        doorbell.ring()
        coordinator.announce(Self.newPushEvent)
    }

    static let newPushEvent = "push"

    func run() async throws {
        await withDiscardingTaskGroup { background in
            // Another node stored a push (or may have while this node was not listening).
            background.addTask { [coordinator, doorbell] in
                for await event in coordinator.events() where event == Self.newPushEvent || event == CoordinationEvent.resumed {
                    doorbell.ring()
                }
            }
            background.addTask { await self.renewLeases() }
            await deliverUntilShutdown()
            background.cancelAll()
        }
    }

    /// Claims and sends chunks until graceful shutdown (the chunks in flight then finish) or cancellation.
    private func deliverUntilShutdown() async {
        if coordinator.isSoleNode {
            // What this node's previous run had claimed is claimable now, not once its leases run out.
            do {
                let released = try await store.releaseChunks()
                if released > 0 { logger.info("resuming chunks left open by the previous run", metadata: ["chunks": "\(released)"]) }
            } catch {
                logger.error("cannot release the previous run's chunks", metadata: ["error": "\(error)"])
            }
        }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                // Cancelled (another service failed, e.g. the API could not bind its port): stop claiming at once.
                while !stopping.load(ordering: .relaxed), !Task.isCancelled {
                    let pause = await claimWhileThereIsRoom { chunk, place in
                        let number = inFlight.withLock { $0.add(chunk.id, app: chunk.push.appID, recipients: chunk.recipients.count) }
                        group.addTask {
                            let signals = ChunkSignals(
                                handedOver: {
                                    // Handed to the devices' connections, with nothing for APNs: its recipients no
                                    // longer take room, so the next chunk is claimed and kept while this one is recorded.
                                    self.inFlight.withLock { $0.handedOver(number) }
                                    self.doorbell.ring()
                                },
                                waitingForEndpoint: { waits in
                                    self.inFlight.withLock { $0.waitingForEndpoint(number, waits) }
                                    // The room it leaves goes to other apps' chunks now.
                                    if waits { self.doorbell.ring() }
                                })
                            await self.deliver(chunk, place: place, signals: signals)
                            self.inFlight.withLock { $0.remove(number) }
                            self.doorbell.ring()
                        }
                    }
                    if !stopping.load(ordering: .relaxed), !Task.isCancelled {
                        await doorbell.wait(upTo: pause)
                    }
                }
            }
        } onGracefulShutdown: {
            // The chunks in flight finish and are recorded; the rest is left to the other nodes or the next start.
            self.stopping.store(true, ordering: .relaxed)
            self.doorbell.ring()
        }
    }

    /// Claims chunks while there is room in flight and starts each with `start`, its place in the admission queue
    /// reserved in claim order. - Returns: how long to wait before looking again (unless woken).
    private func claimWhileThereIsRoom(start: (PushChunk, UInt64) -> Void) async -> Duration {
        while !stopping.load(ordering: .relaxed), !Task.isCancelled {
            let (room, waitingApps) = inFlight.withLock { ($0.room, $0.appsWaitingForEndpoint) }
            let hasRoom = room.hasRoom(inFlightLimit: permits.limit, chunkSize: settings.delivery.chunkSize, pushes: settings.delivery.pushes)
            // A finishing chunk rings the doorbell.
            guard hasRoom else { return settings.pollInterval }
            let claim: ChunkClaim
            do {
                let now = clocks.wall.now
                claim = try await store.claimChunk(
                    node: node, size: settings.delivery.chunkSize, leaseUntil: now.addingTimeInterval(leaseSeconds), at: now,
                    passingOver: waitingApps)
            } catch {
                let wait = claimBackoff.withLock { $0.failed() }
                claimFailures.failed(["error": "\(error)"])
                return wait
            }
            if claimBackoff.withLock({ $0.succeeded() }) { claimFailures.succeeded() }
            switch claim {
            case .chunk(let chunk):
                if chunk.reclaimed, inFlight.withLock({ $0.contains(chunk.id) }) {
                    // This node's own chunk, still being sent: its lease only looked run out (this node's clock was set
                    // forward, or its renewal came late), and the claim has renewed it. Sent again, its recipients not
                    // yet recorded would get the push twice.
                    logger.info(
                        "a chunk this node is sending looked unleased (its clock moved forward?); renewed, not sent again",
                        metadata: ["push": "\(chunk.push.id)", "chunk": "\(chunk.sequence)"])
                    continue
                }
                if chunk.reclaimed {
                    chunksReclaimed.increment()
                    logger.info("taking over a chunk whose lease ran out", metadata: ["push": "\(chunk.push.id)", "chunk": "\(chunk.sequence)"])
                }
                start(chunk, admission.reserve())
            case .retrySoon:
                return .milliseconds(20)
            case .notBefore(let due):
                // A throttled push's next chunk: looked for again when it is due.
                let wait = Duration.seconds(max(0.001, due.timeIntervalSince(clocks.wall.now)))
                return min(wait, settings.pollInterval)
            case .idle:
                return settings.pollInterval
            }
        }
        return .zero
    }

    private var leaseSeconds: TimeInterval {
        let (seconds, attoseconds) = settings.delivery.chunkLease.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    /// Renews the leases on the chunks in flight, every third of the lease, until cancelled.
    private func renewLeases() async {
        while !Task.isCancelled {
            try? await clocks.clock(for: .leaseRenewal).sleep(for: settings.delivery.chunkLease / 3)
            if Task.isCancelled { return }
            let chunks = inFlight.withLock { $0.ids }
            guard !chunks.isEmpty else { continue }
            do {
                try await store.renewChunks(node: node, chunks, until: clocks.wall.now.addingTimeInterval(leaseSeconds))
            } catch {
                logger.warning("cannot renew the leases on chunks in flight", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Sends one chunk and records its results. `place` is its place in the admission queue; `signals` tell the claim
    /// loop what room the chunk takes as it goes.
    func deliver(_ chunk: PushChunk, place: UInt64, signals: ChunkSignals = ChunkSignals()) async {
        let push = chunk.push
        // Recorded often enough that the permits come back before the others wait long for them.
        let ledger = ChunkLedger(
            keys: chunk.recipients.map(\.key), recorded: chunk.recorded, ringEvery: { [permits] in min(500, max(1, permits.limit / 4)) })
        do {
            let app: AppRecord?
            let content: PushContent
            do {
                app = try await whileTheDatabaseIsAway { try await self.store.app(push.appID) }
                content = try JSONDecoder().decode(PushContent.self, from: Data(push.notification))
            } catch {
                admission.give(up: place)
                throw error
            }
            if let app {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        if let online = content.online {
                            try await self.sendOnline(
                                chunk.recipients, app: app, content: content, online: online, pushID: push.id, place: place, into: ledger,
                                signals: signals)
                        } else {
                            try await self.send(
                                chunk.recipients, app: app, content: content, pushID: push.id, tokens: push.recipientTokens, place: place,
                                into: ledger, signals: signals)
                        }
                        ledger.finish()
                    }
                    group.addTask {
                        // Another node has it: stop sending (it sends what this node did not record), which also
                        // frees the permits this chunk holds, since none of its results can be recorded now.
                        if await self.recordProgress(of: chunk, ledger: ledger) == .leaseLost { throw LeaseLost() }
                    }
                    // Not waitForAll(), which would wait for the send before rethrowing: the first error leaves
                    // the group, and that cancels the other task.
                    for try await _ in group {}
                }
            } else {
                // The app is gone (its pushes with it): nothing to send, nothing to record.
                admission.give(up: place)
                return
            }
        } catch {
            if error is LeaseLost {
                logger.warning(
                    "another node took over the chunk after its lease ran out; this node stopped sending it",
                    metadata: ["push": "\(push.id)", "chunk": "\(chunk.sequence)"])
            } else {
                // Left unrecorded, its lease lapses and a node sends it again.
                logger.error("push chunk not sent", metadata: ["push": "\(push.id)", "chunk": "\(chunk.sequence)", "error": "\(error)"])
            }
            // Nothing of it will be recorded by this node now: its permits are free.
            permits.release(ledger.close().permits)
            return
        }
        let (closing, held) = ledger.close()
        // Whether or not the record is written below: if it is not, the lease lapses and the chunk's unrecorded
        // results are sent again by whichever node takes it.
        defer { permits.release(held) }
        switch closing {
        case .sent(let progress):
            counted(progress)
            await writeWhileTheLeaseLasts(chunk) {
                switch try await self.store.recordChunk(pushID: push.id, sequence: chunk.sequence, node: self.node, progress, at: self.clocks.wall.now) {
                case .recorded(pushCompleted: true):
                    // Before those waiting for the push hear of it, so that most see the tokens gone.
                    await self.forgetEndedActivity(push)
                    self.completed(push.id)
                    self.logger.info("push completed", metadata: ["push": "\(push.id)", "app": "\(push.appID)"])
                case .recorded(pushCompleted: false):
                    break
                case .lost:
                    self.logger.warning(
                        "another node took over the chunk after its lease ran out; it records the results",
                        metadata: ["push": "\(push.id)", "chunk": "\(chunk.sequence)"])
                }
            }
        case .unfinished(let record, let unsettled):
            // This node stopped sending them before they went or were answered (a stop; the app's client replaced by
            // an operator's change): not failures. The chunk is given up open, and whichever node claims it next (this
            // one, at once, if it is not stopping) sends them.
            logger.warning(
                "\(unsettled) notifications of a chunk were cut off before they went or were answered; the chunk is left for the next claim to send them",
                metadata: ["push": "\(push.id)", "chunk": "\(chunk.sequence)"])
            counted(record.progress)
            await writeWhileTheLeaseLasts(chunk) {
                let held = try await self.store.giveUpChunk(
                    pushID: push.id, sequence: chunk.sequence, node: self.node, record.progress, mark: record.mark)
                if !held {
                    self.logger.warning(
                        "another node took over the chunk after its lease ran out; it sends what this node did not record",
                        metadata: ["push": "\(push.id)", "chunk": "\(chunk.sequence)"])
                }
            }
        }
    }

    /// Runs `step` again while it fails because the database is away (a restart), for as long as a chunk's lease
    /// lasts (by the clock the leases are dated with). A chunk's steps run in its turn: given up, the chunk would wait
    /// out its lease while this node's later pushes went to the same devices first (a device got a push after pushes
    /// made later). What `step` writes must bear being written twice, as a chunk sent again by the node that takes it
    /// over writes it again. A step not yet sent is not tried again once the node stops (the next claim sends it); a
    /// chunk's record is (`whileStopping`), so that what was sent is not sent again.
    private func whileTheDatabaseIsAway<T>(whileStopping: Bool = false, _ step: () async throws -> T) async throws -> T {
        let deadline = clocks.wall.now.addingTimeInterval(leaseSeconds)
        var pause = Duration.milliseconds(250)
        var said = false
        while true {
            do {
                return try await step()
            } catch where error.isStoreUnavailable && !Task.isCancelled && (whileStopping || !stopping.load(ordering: .relaxed))
                && clocks.wall.now.addingTimeInterval(pause.seconds) < deadline
            {
                if !said {
                    said = true
                    logger.warning("the database is away; a chunk's step is tried again for as long as its lease lasts", metadata: ["error": "\(error)"])
                }
                try await clocks.timer.sleep(for: pause)
                pause = min(pause * 2, .seconds(2))
            }
        }
    }

    /// Writes a chunk's last record, trying again while the database is briefly away. Not written (cancelled by a stop
    /// past its graceful time, the lease run out, or an error that is not the database's absence), the chunk's lease
    /// lapses and its unrecorded recipients are sent again.
    private func writeWhileTheLeaseLasts(_ chunk: PushChunk, _ write: () async throws -> Void) async {
        do {
            try await whileTheDatabaseIsAway(whileStopping: true, write)
        } catch {
            logger.error(
                "cannot record a chunk's results; it will be sent again",
                metadata: ["push": "\(chunk.push.id)", "chunk": "\(chunk.sequence)", "error": "\(error)"])
        }
    }

    /// Counts the results a record carries, and wakes the webhook sender when it pruned tokens: for the records
    /// written while a chunk is sent as for the closing one, since each result is in exactly one of them.
    private func counted(_ progress: PushProgress) {
        recipientsAccepted.increment(by: progress.accepted)
        recipientsFailed.increment(by: progress.failures.count)
        if !progress.failures.isEmpty {
            // By reason, for alerts: a key APNs refuses, an endpoint down, tokens going stale faster than usual.
            var byReason: [String: Int] = [:]
            for failure in progress.failures { byReason[failure.reason.metricLabel, default: 0] += 1 }
            for (reason, count) in byReason {
                Counter(label: "tern_push_failures_total", dimensions: [("reason", reason)]).increment(by: count)
            }
        }
        tokensPruned.increment(by: progress.pruned)
        if progress.pruned > 0 { onTokensPruned() }
    }

    private enum RecorderEnd { case chunkSent, leaseLost }
    private struct LeaseLost: Error {}

    /// Records the chunk's results while it is sent (``ChunkLedger``), so a crash sends again only what was not
    /// recorded, and hands back the permits of what it recorded. Returns when the chunk is sent, or when its lease
    /// was lost.
    private func recordProgress(of chunk: PushChunk, ledger: ChunkLedger) async -> RecorderEnd {
        var backoff = ErrorBackoff(initial: ChunkLedger.interval, maximum: .seconds(2))
        var wait = ChunkLedger.interval
        while !ledger.isFinished, !Task.isCancelled {
            await ledger.doorbell.wait(upTo: wait)
            guard !ledger.isFinished, let record = ledger.recordable() else { continue }
            do {
                let held = try await store.recordChunkProgress(
                    pushID: chunk.push.id, sequence: chunk.sequence, node: node, record.progress, mark: record.mark)
                guard held else { return .leaseLost }
                permits.release(ledger.markRecorded(record))
                counted(record.progress)
                _ = backoff.succeeded()
                wait = ChunkLedger.interval
            } catch {
                // Kept in the ledger: the next record, or the closing one, has these results too.
                wait = backoff.failed()
            }
        }
        return .chunkSent
    }

    /// Sends one chunk and classifies every result.
    ///
    /// First, one chunk at a time across all pushes: the inbox message goes into the recipients' inboxes, their
    /// badges are worked out, and every notification takes its place in its token's line. Taken together, that
    /// makes a device's notifications leave in the order their badges were counted. Then the chunk is sent.
    /// `tokens`: whose tokens the recipients hold (``PushRecord/recipientTokens``), whose dead ones are deactivated
    /// or removed as device tokens are deactivated.
    private func send(
        _ recipients: [Recipient], app: AppRecord, content: PushContent, pushID: String, tokens: RecipientTokens, place: UInt64,
        into tally: ChunkLedger, signals: ChunkSignals
    ) async throws {
        // Those an earlier holder of the chunk recorded are done.
        let (clientsByEnvironment, addressed) = await address(tally.pending(), of: recipients, app: app, into: tally)
        let languages = try await languages(of: addressed.compactMap { recipients[$0.index].deviceID }, app: app, content: content)
        let batches = try await admission.admit(place) {
            try await self.whileTheDatabaseIsAway {
                try await self.admit(addressed, of: recipients, app: app, content: content, languages: languages, pushID: pushID, into: tally)
            }
        }
        await sendBatches(
            batches, pushType: (try? APNsPushType(headerValue: content.pushType)) ?? .alert, tokens: tokens,
            clients: clientsByEnvironment, recipients: recipients, app: app, into: tally, signals: signals)
    }

    /// A chunk's notifications for one APNs environment, with the recipient (its index in the chunk) of each.
    struct Batch: Sendable {
        var notifications: [QueuedNotification] = []
        var recipients: [Int] = []

        mutating func append(_ notification: QueuedNotification, recipient: Int) {
            notifications.append(notification)
            recipients.append(recipient)
        }
    }

    /// Which of the push's languages each device gets (``Localizations``), by device id: those whose registered locale
    /// picks one of `notification.localizations`. Empty for a push that has none, without asking the database.
    /// - Parameter deviceIDs: read only for such a push, so that every other chunk makes no list of its devices.
    private func languages(
        of deviceIDs: @autoclosure () -> [String], app: AppRecord, content: PushContent
    ) async throws -> [String: String] {
        guard let localized = content.localizedPayloads, !localized.isEmpty else { return [:] }
        let deviceIDs = deviceIDs()
        guard !deviceIDs.isEmpty else { return [:] }
        let locales = try await whileTheDatabaseIsAway { try await self.store.locales(app: app.id, deviceIDs: deviceIDs) }
        // Worked out once per locale: a chunk's devices share a few.
        var picked: [String: String?] = [:]
        return locales.compactMapValues { locale in
            if let known = picked[locale] { return known }
            let language = LanguageTags.pick(locale: locale, has: { localized[$0] != nil })
            picked[locale] = language
            return language
        }
    }

    /// A recipient's own payload or channel notification: in its language, with its badge.
    private struct Variant: Hashable {
        var language: String?
        var badge: Int?
    }

    /// Inbox, badges and places in line for a chunk's recipients. - Returns: the notifications by environment.
    /// - Parameter languages: each device's language (``languages(of:app:content:)``).
    private func admit(
        _ addressed: [(index: Int, token: DeviceToken)], of recipients: [Recipient], app: AppRecord, content: PushContent,
        languages: [String: String], pushID: String, into tally: ChunkLedger
    ) async throws -> [APNsEnvironment?: Batch] {
        let perRecipientBadge = content.badge?.isPerRecipient == true
        var badges: [InboxOwner: Int] = [:]
        if content.inbox != nil || content.badge != nil {
            let owners = addressed.compactMap { entry in
                recipients[entry.index].deviceID.map { InboxOwner(deviceID: $0, alias: recipients[entry.index].alias) }
            }
            badges = try await keepInboxAndCountBadges(owners, app: app, content: content, pushID: pushID, into: tally)
        }
        var payloads: [Variant: [UInt8]] = [:]
        // By environment, in the order they first appear; a chunk's recipients nearly all share one, so the batch
        // is found again by comparing with the previous recipient's, not by hashing per recipient.
        var environments: [APNsEnvironment?] = []
        var built: [Batch] = []
        var current = -1
        let template = content.template(topic: app.topic, pushID: pushID)
        let tickets = places(addressed)
        var ids = FastUUIDGenerator()
        for (position, (index, token)) in addressed.enumerated() {
            var payload: [UInt8]?
            if perRecipientBadge || !languages.isEmpty, let deviceID = recipients[index].deviceID {
                let variant = Variant(
                    language: languages[deviceID],
                    badge: perRecipientBadge ? badges[InboxOwner(deviceID: deviceID, alias: recipients[index].alias)] : nil)
                if variant.language != nil || variant.badge != nil {
                    if payloads[variant] == nil { payloads[variant] = content.payload(language: variant.language, badge: variant.badge) }
                    payload = payloads[variant]
                }
            }
            let environment = recipients[index].environment ?? app.environment.apnsEnvironment
            if current < 0 || environments[current] != environment {
                if let found = environments.firstIndex(of: environment) {
                    current = found
                } else {
                    environments.append(environment)
                    var batch = Batch()
                    batch.notifications.reserveCapacity(addressed.count - position)
                    batch.recipients.reserveCapacity(addressed.count - position)
                    built.append(batch)
                    current = built.count - 1
                }
            }
            built[current].append(
                QueuedNotification(notification: template.notification(to: token, payload: payload, ids: &ids), ticket: tickets?[position]),
                recipient: index)
        }
        return Dictionary(uniqueKeysWithValues: zip(environments, built))
    }

    /// What every chunk does in its turn, whichever way it is sent: the push's inbox message into the owners'
    /// inboxes, and the owners' badges counted (and stored). - Returns: the badges by owner.
    private func keepInboxAndCountBadges(
        _ owners: [InboxOwner], app: AppRecord, content: PushContent, pushID: String, into tally: ChunkLedger
    ) async throws -> [InboxOwner: Int] {
        guard content.inbox != nil || content.badge != nil else { return [:] }
        let distinctOwners = Array(Set(owners))
        guard !distinctOwners.isEmpty else { return [:] }
        let now = clocks.wall.now
        if let inbox = content.inbox {
            let message = InboxMessage(
                id: pushID, appID: app.id, title: inbox.title, body: inbox.body, data: inbox.data, createdAt: now,
                expiresAt: now.addingTimeInterval(TimeInterval(inbox.ttl)), localizations: inbox.localizations)
            tally.dropped(try await store.deliverToInbox(message, owners: distinctOwners, cap: app.inboxCap, at: now))
        }
        guard let change = content.badge else { return [:] }
        return try await store.badges(app: app.id, owners: distinctOwners, pushID: pushID, change: change, at: now)
    }

    /// The APNs client for each recipient's environment and its token, parsed; a recipient without either is failed
    /// in the ledger (a client that cannot be made is tried, and logged, once per environment). `indices` say which
    /// of `recipients`; the result names them the same way.
    private func address(
        _ indices: [Int], of recipients: [Recipient], app: AppRecord, into tally: ChunkLedger
    ) async -> (clients: [APNsEnvironment?: any NotificationSender], addressed: [(index: Int, token: DeviceToken)]) {
        // By the token's APNs environment; nil for bare tokens of an app that delivers to the simulator or a custom
        // endpoint (the same client either way there).
        var clientsByEnvironment: [APNsEnvironment?: any NotificationSender] = [:]
        // Why there is none, for an environment whose client cannot be made.
        var unavailable: [APNsEnvironment?: String] = [:]
        var addressed: [(index: Int, token: DeviceToken)] = []
        addressed.reserveCapacity(indices.count)
        let now = clocks.wall.now
        // The previous recipient's environment and whether it has a client: a chunk's recipients nearly all share
        // one, so the table is looked at when the environment changes, not per recipient.
        var previous: (environment: APNsEnvironment?, hasClient: Bool)?
        for index in indices {
            // Read in place: a copy of the recipient is five strings retained and released, per recipient.
            let environment = recipients[index].environment ?? app.environment.apnsEnvironment
            if previous == nil || previous?.environment != environment {
                if clientsByEnvironment[environment] == nil, unavailable[environment] == nil {
                    do {
                        clientsByEnvironment[environment] = try await clients.client(for: app, tokenEnvironment: environment)
                    } catch {
                        unavailable[environment] = ClientDirectory.whyUnavailable(error)
                        logger.error("no APNs client for the app", metadata: ["app": "\(app.id)", "error": "\(error)"])
                    }
                }
                previous = (environment, clientsByEnvironment[environment] != nil)
            }
            guard previous?.hasClient == true else {
                let failure = PushFailure(
                    deviceID: recipients[index].deviceID, token: recipients[index].token, status: nil, reason: .clientUnavailable, at: now,
                    detail: unavailable[environment])
                tally.set(index, .failed(failure, pruned: false))
                continue
            }
            // Checked when registered or given; a token that is not hex is refused like APNs would.
            guard let token = try? DeviceToken(hex: recipients[index].token) else {
                let failure = PushFailure(deviceID: recipients[index].deviceID, token: recipients[index].token, status: nil, reason: .apns(.badDeviceToken), at: now)
                tally.set(index, .failed(failure, pruned: false))
                continue
            }
            addressed.append((index, token))
        }
        return (clientsByEnvironment, addressed)
    }

    // MARK: The online channel

    /// An `online` chunk's messages kept (numbered per device), with its inbox message and badges: in the chunk's
    /// turn. - Returns: the messages, and each device's badge when the push counts them per recipient.
    private func keep(
        _ withDevice: [(index: Int, recipient: Recipient, deviceID: String)], app: AppRecord, content: PushContent,
        online: OnlineDelivery, languages: [String: String], pushID: String, at now: Date, into tally: ChunkLedger
    ) async throws -> ([DeviceMessage], [String: Int]) {
        let owners = withDevice.map { InboxOwner(deviceID: $0.deviceID, alias: $0.recipient.alias) }
        let badges = try await keepInboxAndCountBadges(owners, app: app, content: content, pushID: pushID, into: tally)
        // A per-recipient badge and a language go into each device's notification; devices with the same share one.
        var notifications: [Variant: String?] = [:]
        var badgeByDevice: [String: Int] = [:]
        let drafts = zip(withDevice, owners).map { entry, owner in
            var notification = online.notification
            var variant = Variant(language: languages[entry.deviceID])
            if content.badge?.isPerRecipient == true, let badge = badges[owner] {
                badgeByDevice[entry.deviceID] = badge
                variant.badge = badge
            }
            if variant.language != nil || variant.badge != nil {
                if notifications[variant] == nil { notifications[variant] = online.notification(language: variant.language, badge: variant.badge) }
                notification = notifications[variant] ?? nil
            }
            return DeviceMessageDraft(
                deviceID: entry.deviceID, id: Self.messageID(pushID: pushID, deviceID: entry.deviceID), notification: notification,
                data: online.data)
        }
        let kept = try await store.keepMessages(
            drafts, app: app.id, pushID: pushID, at: now, expiresAt: now.addingTimeInterval(TimeInterval(online.ttl)))
        return (kept, badgeByDevice)
    }

    /// Sends one chunk of a push with `delivery` `online` or `auto` (``OnlineDelivery``).
    ///
    /// In claim order, like the APNs path: the inbox message, the badges, and each device's message, numbered in the
    /// device's order; which devices are connected, here or on another node (the presence table says which); and places
    /// in the devices' APNs lines: for `auto`, each recipient's (``HeldPlaces``), for `online`, a connected device's
    /// whose line holds an earlier `apns` push's notification. Then the connected devices get their messages, each
    /// once that notification is answered, if there is one
    /// (``handOverInTurn(_:messages:nodeByDevice:app:keptAt:waitFor:giveBack:)``). What goes through APNs: for `online`
    /// with `wake`, a silent push to each offline device; for `auto`, the push itself to each device that is offline,
    /// or that has not acknowledged within the timeout, marked in the store first so it falls back once.
    private func sendOnline(
        _ recipients: [Recipient], app: AppRecord, content: PushContent, online: OnlineDelivery, pushID: String, place: UInt64,
        into tally: ChunkLedger, signals: ChunkSignals
    ) async throws {
        let now = clocks.wall.now
        var withDevice: [(index: Int, recipient: Recipient, deviceID: String)] = []
        var withoutDevice: [(index: Int, recipient: Recipient)] = []
        for (index, recipient) in recipients.enumerated() where tally.needsSending(index) {
            if let deviceID = recipient.deviceID { withDevice.append((index, recipient, deviceID)) } else { withoutDevice.append((index, recipient)) }
        }
        let languages = try await languages(of: withDevice.map(\.deviceID), app: app, content: content)
        let (kept, badgeByDevice, presence, held, waitsForNotification) = try await admission.admit(place) {
            () async throws -> ([DeviceMessage], [String: Int], [DevicePresence], HeldPlaces?, [Int: DeliveryOrder.Ticket]) in
            let (kept, badges, presence) = try await self.whileTheDatabaseIsAway {
                let (kept, badges) = try await self.keep(
                    withDevice, app: app, content: content, online: online, languages: languages, pushID: pushID, at: now, into: tally)
                // A sole node knows its connections without asking the database (whose one SQLite connection is busy
                // with the acknowledgements coming back meanwhile).
                let presence =
                    self.coordinator.isSoleNode
                    ? self.connections.presence(app: app.id, deviceIDs: kept.map(\.deviceID))
                    : try await self.store.presence(app: app.id, deviceIDs: kept.map(\.deviceID))
                return (kept, badges, presence)
            }
            // Last, once nothing is left to fail and be tried again: each place is taken once. An `auto` push takes a
            // place for each recipient, which may fall back; an `online` push one for each connected device whose
            // line holds a notification it gets only through APNs (an earlier `apns` push's), for its channel message
            // to wait for.
            guard self.settings.delivery.ordering else { return (kept, badges, presence, nil, [:]) }
            if online.mode == .auto {
                let held = HeldPlaces(
                    withoutDevice.map { ($0.index, $0.recipient.token) } + withDevice.map { ($0.index, $0.recipient.token) }, order: self.order)
                return (kept, badges, presence, held, [:])
            }
            let connected = Set(presence.map(\.deviceID))
            let onChannel = withDevice.compactMap { entry -> (index: Int, key: DeliveryOrder.LineKey)? in
                guard connected.contains(entry.deviceID), let token = try? DeviceToken(hex: entry.recipient.token) else { return nil }
                return (entry.index, DeliveryOrder.LineKey(token))
            }
            let places = self.order.enqueueBehindNotifications(keys: onChannel.map(\.key))
            var waits: [Int: DeliveryOrder.Ticket] = [:]
            for (entry, place) in zip(onChannel, places) { if let place { waits[entry.index] = place } }
            return (kept, badges, presence, nil, waits)
        }
        // Whatever happens below, no place is left holding a device's line.
        defer { held?.giveBackAll() }
        messagesKept.increment(by: kept.count)
        let messageByDevice = Dictionary(kept.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
        let nodeByDevice = Dictionary(presence.map { ($0.deviceID, $0.node) }, uniquingKeysWith: { first, _ in first })
        let connected = Set(nodeByDevice.keys)

        // The connected devices' messages, beside what goes through APNs: at once, or once the device's APNs
        // notification pushed before it is answered.
        let onChannel = withDevice.filter { connected.contains($0.deviceID) }.map { (index: $0.index, deviceID: $0.deviceID) }
        async let channel: Void = handOverInTurn(
            onChannel, messages: messageByDevice, nodeByDevice: nodeByDevice, app: app.id, keptAt: now,
            waitFor: { held?.channelWait($0) ?? waitsForNotification[$0] }, giveBack: held == nil)

        var throughAPNs: [(index: Int, recipient: Recipient, payload: [UInt8]?)] = []
        switch online.mode {
        case .online:
            for (index, recipient) in withoutDevice {
                let failure = PushFailure(deviceID: nil, token: recipient.token, status: nil, reason: .noDevice, at: now)
                tally.set(index, .failed(failure, pruned: false))
            }
            for entry in withDevice {
                if online.wake, !connected.contains(entry.deviceID) {
                    throughAPNs.append((entry.index, entry.recipient, nil))
                } else {
                    tally.set(entry.index, .accepted)
                }
            }
            guard !throughAPNs.isEmpty else {
                await channel
                return signals.handedOver()
            }
            let wake = NotificationTemplate(
                metadata: APNsRequestMetadata(topic: app.topic, pushType: .background, priority: .throttled, collapseID: "tern-wake"),
                payload: OnlineDelivery.wakePayload)
            try await sendThroughAPNs(throughAPNs, of: recipients, template: wake, app: app, into: tally, signals: signals)
            await channel

        case .auto:
            let template = content.template(topic: app.topic, pushID: pushID)
            func payload(_ message: DeviceMessage) -> [UInt8] {
                content.fallbackPayload(
                    messageID: message.id, sequence: message.sequence, language: languages[message.deviceID], badge: badgeByDevice[message.deviceID])
            }
            // Offline: through APNs now.
            let offline = withDevice.filter { !connected.contains($0.deviceID) }
            let offlineIDs = offline.compactMap { messageByDevice[$0.deviceID]?.id }
            let markedNow = try await store.fallBack(app: app.id, ids: offlineIDs, at: now)
            fallbacks.increment(by: markedNow.count)
            throughAPNs = withoutDevice.map { ($0.index, $0.recipient, nil) }
            for entry in offline {
                guard let message = messageByDevice[entry.deviceID] else { continue }
                if markedNow.contains(message.id) {
                    throughAPNs.append((entry.index, entry.recipient, payload(message)))
                } else {
                    // Acknowledged already, or fallen back by an earlier holder of the chunk.
                    tally.set(entry.index, .accepted)
                }
            }
            if !throughAPNs.isEmpty {
                try await sendThroughAPNs(throughAPNs, of: recipients, template: template, app: app, into: tally, held: held, signals: signals)
            }
            held?.giveBack(withoutDevice.map(\.index) + offline.map(\.index))

            // Connected: what is not acknowledged in time (from when the last message was handed over) goes through
            // APNs. Each device's place is given back as its acknowledgement is seen, so the device's later
            // notifications wait for nothing more.
            await channel
            let waiting = withDevice.filter { connected.contains($0.deviceID) }
            guard !waiting.isEmpty else { return }
            let waitingIDs = waiting.compactMap { messageByDevice[$0.deviceID]?.id }
            let recipientByMessage = Dictionary(
                waiting.compactMap { entry in messageByDevice[entry.deviceID].map { ($0.id, entry.index) } }, uniquingKeysWith: { first, _ in first })
            let unacknowledged = try await waitForAcks(app: app.id, ids: waitingIDs, within: .milliseconds(online.ackTimeoutMilliseconds)) {
                held?.giveBack($0.compactMap { recipientByMessage[$0] })
            }
            if let unacknowledged {
                // This node is stopping: neither acknowledged nor late yet. Left unrecorded, each is waited for again
                // by whichever node takes the chunk up (its device connects there, or it falls back then).
                var left = 0
                for entry in waiting {
                    if let message = messageByDevice[entry.deviceID], unacknowledged.contains(message.id) {
                        left += 1
                    } else {
                        tally.set(entry.index, .accepted)
                    }
                }
                tally.unsettled(left)
                return
            }
            let late = try await store.fallBack(app: app.id, ids: waitingIDs, at: clocks.wall.now)
            fallbacks.increment(by: late.count)
            var lateAPNs: [(index: Int, recipient: Recipient, payload: [UInt8]?)] = []
            for entry in waiting {
                if let message = messageByDevice[entry.deviceID], late.contains(message.id) {
                    lateAPNs.append((entry.index, entry.recipient, payload(message)))
                } else {
                    tally.set(entry.index, .accepted)
                }
            }
            if !lateAPNs.isEmpty {
                try await sendThroughAPNs(lateAPNs, of: recipients, template: template, app: app, into: tally, held: held, signals: signals)
            }
        }
    }

    /// Gives the connected devices their messages: a channel message never overtakes an APNs notification pushed
    /// before it to the device and sent only through APNs (an `apns` push's). Nearly always at once; a device whose
    /// line holds such a notification (`waitFor` gives its place) gets its message once that place's turn comes,
    /// and the place is given back then if `giveBack` (an `online` push's; an `auto` push keeps its places for the
    /// fallbacks). Cancelled, a device still waiting gets nothing (the chunk is sent again).
    private func handOverInTurn(
        _ devices: [(index: Int, deviceID: String)], messages: [String: DeviceMessage], nodeByDevice: [String: String], app: String,
        keptAt now: Date, waitFor: (Int) -> DeliveryOrder.Ticket?, giveBack: Bool
    ) async {
        var ready: [String] = []
        var waiting: [(deviceID: String, ticket: DeliveryOrder.Ticket)] = []
        for device in devices {
            if let ticket = waitFor(device.index) { waiting.append((device.deviceID, ticket)) } else { ready.append(device.deviceID) }
        }
        ring(ready, messages: messages, nodeByDevice: nodeByDevice, app: app, keptAt: now)
        guard !waiting.isEmpty else { return }
        await withDiscardingTaskGroup { group in
            for device in waiting {
                group.addTask {
                    let turn = await self.order.turn(device.ticket)
                    if case .go = turn {
                        self.ring([device.deviceID], messages: messages, nodeByDevice: nodeByDevice, app: app, keptAt: now)
                    }
                    if giveBack { self.order.giveBack([device.ticket]) }
                }
            }
        }
    }

    /// Rings these devices' connections, wherever they are (`nodeByDevice`). A message kept now goes to this node's
    /// connection directly (which wakes it); one kept by an earlier holder of the chunk may have been acknowledged
    /// since, so its connection is only woken, to read the store.
    private func ring(_ deviceIDs: [String], messages: [String: DeviceMessage], nodeByDevice: [String: String], app: String, keptAt now: Date) {
        var handed: [DeviceMessage] = []
        var woken: Set<String> = []
        var remote: [String: [String]] = [:]
        for deviceID in deviceIDs {
            guard let node = nodeByDevice[deviceID] else { continue }
            if node != connections.node {
                remote[node, default: []].append(deviceID)
            } else if let message = messages[deviceID], message.createdAt == now {
                handed.append(message)
            } else {
                woken.insert(deviceID)
            }
        }
        connections.handOver(handed)
        if !woken.isEmpty { connections.ring(app: app, deviceIDs: woken) }
        for (node, devices) in remote {
            for event in DeviceConnections.wakeEvents(node: node, app: app, deviceIDs: devices) { coordinator.announce(event) }
        }
    }

    /// Waits until every one of these messages is acknowledged, or `timeout` has passed, telling `acknowledged` the ones
    /// seen acknowledged at each look. The acknowledgements may come to any node, so the store is asked, every
    /// ``ackCheckInterval``: a chunk whose devices all answer in milliseconds is done then, not at the end of its
    /// `ackTimeout`.
    /// - Returns: the messages still unacknowledged, if the node began to stop first (its connections are closed by
    ///   then, so no acknowledgement can come to it); nil otherwise.
    private func waitForAcks(
        app: String, ids: [String], within timeout: Duration, acknowledged: ([String]) -> Void
    ) async throws -> Set<String>? {
        var waiting = ids
        var stopped = false
        try await Self.poll(on: clocks.timer, every: Self.ackCheckInterval, for: timeout) {
            let left = try await store.unacknowledged(app: app, ids: waiting)
            acknowledged(waiting.filter { !left.contains($0) })
            waiting = Array(left)
            stopped = self.stopping.load(ordering: .relaxed)
            return waiting.isEmpty || stopped
        }
        return stopped && !waiting.isEmpty ? Set(waiting) : nil
    }

    /// Asks `done` every `interval` until it says yes or `timeout` has passed on `clock`.
    private static func poll<C: Clock<Duration>>(
        on clock: C, every interval: Duration, for timeout: Duration, _ done: () async throws -> Bool
    ) async throws {
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let left = clock.now.duration(to: deadline)
            guard left > .zero else { return }
            try await clock.sleep(for: min(left, interval))
            if try await done() { return }
        }
    }

    /// How often ``waitForAcks(app:ids:within:)`` asks the store.
    static let ackCheckInterval: Duration = .milliseconds(100)

    /// Sends these recipients' notifications through APNs, one per token at a time, and classifies the results.
    /// `items` name the chunk's `recipients` by index. Their places in line are taken now, or were taken in the chunk's
    /// turn (`held`; what they do not use is given back).
    private func sendThroughAPNs(
        _ items: [(index: Int, recipient: Recipient, payload: [UInt8]?)], of recipients: [Recipient], template: NotificationTemplate,
        app: AppRecord, into tally: ChunkLedger, held: HeldPlaces? = nil, signals: ChunkSignals
    ) async throws {
        var payloads: [Int: [UInt8]] = [:]
        for item in items { if let payload = item.payload { payloads[item.index] = payload } }
        let (clientsByEnvironment, addressed) = await address(items.map(\.index), of: recipients, app: app, into: tally)
        var seen: Set<DeviceToken> = []
        let unique = addressed.filter { seen.insert($0.token).inserted }
        let tickets: [DeliveryOrder.Ticket?]?
        if let held {
            tickets = unique.map { held.take($0.index) }
            // Not addressed (no client, a token that is not hex) or a token twice: nothing of theirs goes.
            held.giveBack(items.map(\.index))
        } else {
            tickets = places(unique)
        }
        var batches: [APNsEnvironment?: Batch] = [:]
        var ids = FastUUIDGenerator()
        for (position, (index, token)) in unique.enumerated() {
            let environment = recipients[index].environment ?? app.environment.apnsEnvironment
            batches[environment, default: Batch()].append(
                QueuedNotification(notification: template.notification(to: token, payload: payloads[index], ids: &ids), ticket: tickets?[position] ?? nil),
                recipient: index)
        }
        await sendBatches(
            batches, pushType: template.metadata.pushType, clients: clientsByEnvironment, recipients: recipients, app: app, into: tally,
            signals: signals)
    }

    /// Every token's place in its line, in the chunk's order and under one lock (nil when ordering is off). Each key is
    /// made where its token lies: a copy of the token would retain and release its two references.
    private func places(_ addressed: [(index: Int, token: DeviceToken)]) -> [DeliveryOrder.Ticket]? {
        settings.delivery.ordering ? order.enqueue(keys: addressed.map { DeliveryOrder.LineKey($0.token) }) : nil
    }

    /// Sends each environment's batch through its client (``OrderedBatch``) and classifies every result into the
    /// chunk's ledger, a bunch of results at a time; each batch says whose each notification is (an index into
    /// `recipients`, which is the ledger's).
    ///
    /// A batch takes none of the node's permits before its endpoint has a connection ready: while it waits for one, the
    /// chunk takes no room and no more of the app's chunks are claimed (`signals`), so an app whose endpoint is down
    /// holds up no other app. It waits a send's time at most; then its notifications fail, each with the connect error.
    /// Then each notification takes a slot of its endpoint's window before a permit (``EndpointWindow``), waiting the
    /// same way: an endpoint that answers nothing holds only its window's permits, and its notifications fail
    /// (`notAnswering`) once a timeout shows it silent.
    private func sendBatches(
        _ batches: [APNsEnvironment?: Batch], pushType: APNsPushType, tokens: RecipientTokens = .device,
        clients: [APNsEnvironment?: any NotificationSender], recipients: [Recipient], app: AppRecord, into tally: ChunkLedger,
        signals: ChunkSignals
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for (environment, batch) in batches {
                guard let client = clients[environment] else { continue }
                group.addTask {
                    var waited = false
                    await client.waitForConnection {
                        waited = true
                        signals.waitingForEndpoint(true)
                    }
                    if waited { signals.waitingForEndpoint(false) }
                    await OrderedBatch.send(
                        batch.notifications, client: client, order: self.order, concurrency: self.settings.delivery.concurrency,
                        permits: self.permits, gate: client.gate, onWaiting: signals.waitingForEndpoint
                    ) { results in
                        let now = self.clocks.wall.now
                        var settled: [(index: Int, outcome: ChunkLedger.Outcome, holdsPermit: Bool)] = []
                        settled.reserveCapacity(results.count)
                        var unsettled = 0
                        var unsettledPermits = 0
                        var dead: [(index: Int, failure: PushFailure, holdsPermit: Bool, token: TokenDeactivation)] = []
                        // APNs' answers, accepted and rejected outright, for ``OutrightRejections``.
                        var answeredAccepted = 0
                        var rejectedOutright = 0
                        for (item, outcome) in results {
                            let index = batch.recipients[item]
                            // The usual answer, without copying the recipient (five strings) to classify it.
                            if outcome.isAcceptedAnswer {
                                answeredAccepted += 1
                                settled.append((index, .accepted, true))
                                continue
                            }
                            switch Self.verdict(
                                outcome, recipient: recipients[index], pushType: pushType, registeredForType: tokens != .device, at: now)
                            {
                            case .unsettled:
                                unsettled += 1
                                if outcome.tookPermit { unsettledPermits += 1 }
                            case .accepted:
                                settled.append((index, .accepted, outcome.tookPermit))
                            case .failed(let failure):
                                settled.append((index, .failed(failure, pruned: false), outcome.tookPermit))
                            case .deadToken(let failure, let reason, let invalidSince, let apnsTimestamp):
                                let token = TokenDeactivation(
                                    token: recipients[index].token, reason: reason, invalidSince: invalidSince, apnsTimestamp: apnsTimestamp)
                                // No time of death: rejected outright (`BadDeviceToken`, `DeviceTokenNotForTopic`).
                                if invalidSince == nil { rejectedOutright += 1 }
                                dead.append((index, failure, outcome.tookPermit, token))
                            }
                        }
                        if answeredAccepted + rejectedOutright > 0,
                            !self.outrightRejectionsDeactivate(app: app, accepted: answeredAccepted, rejected: rejectedOutright)
                        {
                            // The app is doubted: its outright rejections fail, their tokens kept.
                            for entry in dead where entry.token.invalidSince == nil {
                                var failure = entry.failure
                                failure.detail = OutrightRejections.keptDetail
                                settled.append((entry.index, .failed(failure, pruned: false), entry.holdsPermit))
                            }
                            dead.removeAll { $0.token.invalidSince == nil }
                        }
                        if !dead.isEmpty {
                            let pruned = await self.prune(dead.map(\.token), of: tokens, app: app, at: now)
                            for entry in dead {
                                settled.append((entry.index, .failed(entry.failure, pruned: pruned.contains(entry.token.token)), entry.holdsPermit))
                            }
                        }
                        tally.unsettled(unsettled)
                        // A second notification to a recipient that has its result: counted once, its permit back.
                        // One without a result never will have one here: its permit back too.
                        self.permits.release(tally.set(settled) + unsettledPermits)
                    }
                }
            }
        }
    }

    /// The id of push `pushID`'s message to `deviceID`: the same whichever node keeps it (a name-based UUID).
    static func messageID(pushID: String, deviceID: String) -> String {
        let digest = Array(SHA256.hash(data: Array("\(pushID)\u{0}\(deviceID)".utf8)))
        var bytes = Array(digest.prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let uuid = UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        return uuid.uuidString.lowercased()
    }

    /// What an answer means for the recipient (``AnswerVerdict``).
    private static func verdict(
        _ outcome: BatchOutcome, recipient: Recipient, pushType: APNsPushType, registeredForType: Bool, at now: Date
    ) -> AnswerVerdict {
        let ending: AnswerVerdict.Ending =
            switch outcome {
            case .sent(.success(let delivery)): .answered(delivery.response)
            case .sent(.failure(let error)): .clientError(error.code, message: error.message)
            case .superseded: .superseded
            case .notSent: .notSent
            case .refused(let refusal): .refused(refusal)
            }
        return AnswerVerdict.of(ending, recipient: recipient, pushType: pushType, registeredForType: registeredForType, at: now)
    }

    /// Counts a bunch of `app`'s answers (``OutrightRejections``) and logs a change of doubt. - Returns: whether its
    /// outright rejections may deactivate their tokens.
    private func outrightRejectionsDeactivate(app: AppRecord, accepted: Int, rejected: Int) -> Bool {
        let (deactivate, change) = rejections.withLock { rejections in
            // One hash of the app's id a bunch, on the way of every bunch of answers.
            rejections[app.id, default: OutrightRejections(topic: app.topic)].answered(accepted: accepted, rejected: rejected, topic: app.topic)
        }
        switch change {
        case .doubting?:
            logger.error(
                "APNs refuses nearly every token of the app outright (BadDeviceToken, DeviceTokenNotForTopic): its topic or its devices' environment looks wrong, not the tokens; those tokens are kept, not deactivated, until APNs accepts most of the app's notifications again",
                metadata: ["app": "\(app.id)", "topic": "\(app.topic)"])
        case .trusting?:
            logger.notice("APNs accepts the app's notifications again: outright rejections deactivate their tokens again", metadata: ["app": "\(app.id)"])
        case nil:
            break
        }
        return deactivate
    }

    /// Deactivates the dead tokens of a bunch of answers, in one transaction (one commit for them all, and on
    /// PostgreSQL one turn at the app's event lock): device tokens, or the devices' tokens of `kind`. - Returns: the
    /// tokens it deactivated; none when the store cannot be reached (``pruneFailures`` says so).
    private func prune(_ tokens: [TokenDeactivation], of holders: RecipientTokens, app: AppRecord, at now: Date) async -> Set<String> {
        do {
            let pruned =
                switch holders {
                case .device: Set(try await store.deactivateTokens(app: app.id, tokens, at: now).map(\.token))
                case .kind(let kind): Set(try await store.deactivatePushTokens(app: app.id, kind: kind, tokens, at: now))
                case .activity: Set(try await store.removeDeadActivityTokens(app: app.id, tokens))
                }
            pruneFailures.succeeded()
            return pruned
        } catch {
            pruneFailures.failed(["app": "\(app.id)", "tokens": "\(tokens.count)", "error": "\(error)"])
            return []
        }
    }
}

