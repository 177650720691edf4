import Foundation
import Logging
import Metrics
import Synchronization
import TernAPNs
import TernStore

/// Writes what the device connections report (connections opened and closed, messages sent online,
/// acknowledgements) in batches: whatever came in while the last batch was being written goes together, so a node
/// with thousands of connections writes a few transactions a second, not one per frame or per connection (15,000
/// devices reconnecting at once made 15,000 presence writes, one after another on SQLite's one connection).
///
/// A connection that opens waits for its batch: its presence must be stored before it reads its messages, or a
/// message another node keeps meanwhile could miss it (``arrived(_:)``). Nothing else waits for these writes. A
/// batch that fails goes back to the front and is tried again after a growing wait (``ErrorBackoff``); beyond
/// ``capacity`` the oldest reports are dropped, which only costs a repeat: an unacknowledged message is sent again
/// on the device's next connection, and it shows it once by id.
final class ChannelRecorder: Sendable {
    struct Pending {
        var delivered: [(app: String, deviceID: String, sequence: Int64, id: String)] = []
        var acks: [(app: String, deviceID: String, id: String)] = []
        /// Connections that closed: their presence entries go (each only if still its own).
        var departed: [PresenceEntry] = []
        /// Reports dropped past the capacity since the last log line about it.
        var dropped = 0
        var isEmpty: Bool { delivered.isEmpty && acks.isEmpty && departed.isEmpty }

        /// The batch as the store takes it: a message sent and acknowledged within the batch (most of them: a
        /// device acknowledges within milliseconds) is one write, not a sent mark and then an ack.
        func merged() -> (
            delivered: [(app: String, deviceID: String, sequence: Int64)], acks: [(app: String, deviceID: String, id: String)],
            both: [(app: String, deviceID: String, id: String)]
        ) {
            struct Key: Hashable {
                var app: String
                var deviceID: String
                var id: String
            }
            guard !delivered.isEmpty, !acks.isEmpty else { return (delivered.map { ($0.app, $0.deviceID, $0.sequence) }, acks, []) }
            let sent = Set(delivered.map { Key(app: $0.app, deviceID: $0.deviceID, id: $0.id) })
            var both: [(app: String, deviceID: String, id: String)] = []
            var merged = Set<Key>()
            var plainAcks: [(app: String, deviceID: String, id: String)] = []
            for ack in acks {
                let key = Key(app: ack.app, deviceID: ack.deviceID, id: ack.id)
                if sent.contains(key), merged.insert(key).inserted { both.append(ack) } else { plainAcks.append(ack) }
            }
            let plainDelivered = delivered.filter { !merged.contains(Key(app: $0.app, deviceID: $0.deviceID, id: $0.id)) }
            return (plainDelivered.map { ($0.app, $0.deviceID, $0.sequence) }, plainAcks, both)
        }

        /// Keeps at most `capacity` entries, dropping the oldest: sent marks first (they only feed a count), then
        /// goodbyes (an entry left behind only makes a push ring a connection that is gone, and the node's own
        /// entries go when it stops), then acknowledgements.
        mutating func trim(to capacity: Int) {
            let over = delivered.count + departed.count + acks.count - capacity
            guard over > 0 else { return }
            let fromDelivered = min(over, delivered.count)
            delivered.removeFirst(fromDelivered)
            let fromDeparted = min(over - fromDelivered, departed.count)
            departed.removeFirst(fromDeparted)
            acks.removeFirst(min(over - fromDelivered - fromDeparted, acks.count))
            dropped += over
        }
    }

    /// Connections that opened and wait for their presence to be stored (at most one per connection).
    private struct Arrival {
        var entry: PresenceEntry
        var waiter: CheckedContinuation<Bool, Never>
    }

    private let store: any TernStore
    private let clock: any WallClock
    private let logger: Logger
    private let pending = Mutex(Pending())
    /// Batches of presence that failed: said when they start failing, once a minute and when they work again, not for
    /// every batch of connections that open while the database is away.
    private let arrivalFailures: FailureLog
    /// Connections waiting for their presence to be stored; once the recorder stopped, none wait.
    private let arrivals = Mutex<(waiting: [Arrival], stopped: Bool)>(([], false))
    private let doorbell = Doorbell()
    /// Set by ``finish()``: the batches end with what is reported by then.
    private let finishing = Atomic<Bool>(false)
    /// Rung by ``finish()``: a batch waiting to be tried again stops waiting.
    private let finishBell = Doorbell()
    private let acksCounter = Counter(label: "tern_channel_acks_total")
    private let lateAcks = Counter(label: "tern_channel_acks_after_fallback_total")
    /// Most entries kept waiting: beyond it the oldest reports are dropped (and logged), so memory stays bounded
    /// while the database is away.
    static let capacity = 200_000

    /// Told of the earlier connections that connections opening replaced (their entries), to close those elsewhere.
    private let replaced: @Sendable ([PresenceEntry]) -> Void

    init(store: any TernStore, clock: any WallClock, logger: Logger, replaced: @escaping @Sendable ([PresenceEntry]) -> Void = { _ in }) {
        self.store = store
        self.clock = clock
        self.logger = logger
        self.replaced = replaced
        self.arrivalFailures = FailureLog(
            "cannot record the devices' connections; they read their messages, but other nodes find them only once they reconnect",
            logger: logger)
    }

    func delivered(app: String, deviceID: String, messages: [DeviceMessage]) {
        add { $0.delivered.append(contentsOf: messages.map { (app, deviceID, $0.sequence, $0.id) }) }
    }

    func acknowledged(app: String, deviceID: String, ids: [String]) {
        add { $0.acks.append(contentsOf: ids.map { (app, deviceID, $0) }) }
    }

    /// The connection `entry` opened: returns once its presence is stored (with the other connections that opened
    /// meanwhile), saying whether the device has messages waiting (not acknowledged, not expired) — if not, the
    /// connection need not read the store until it is rung. If the store cannot be written, it says so in the log
    /// and answers true (the connection works, reading its messages; other nodes do not find it until it
    /// reconnects).
    func arrived(_ entry: PresenceEntry) async -> Bool {
        await withCheckedContinuation { continuation in
            let stopped = arrivals.withLock { arrivals in
                if !arrivals.stopped { arrivals.waiting.append(Arrival(entry: entry, waiter: continuation)) }
                return arrivals.stopped
            }
            if stopped { continuation.resume(returning: true) } else { doorbell.ring() }
        }
    }

    /// The connection `entry` closed.
    func departed(_ entry: PresenceEntry) {
        add { $0.departed.append(entry) }
    }

    private func add(_ change: (inout Pending) -> Void) {
        pending.withLock { pending in
            change(&pending)
            pending.trim(to: Self.capacity)
        }
        doorbell.ring()
    }

    /// Writes batches until ``finish()``, then what is left (tried once); cancelled, it stops after the batch under
    /// way (on SQLite a cancelled task's statements are skipped, so a last batch could not be written then).
    func run() async {
        while !finishing.load(ordering: .acquiring), !Task.isCancelled {
            await doorbell.wait()
            await flush()
        }
        if !Task.isCancelled { await flush() }
        let left = arrivals.withLock { arrivals -> [Arrival] in
            arrivals.stopped = true
            defer { arrivals.waiting.removeAll() }
            return arrivals.waiting
        }
        for arrival in left { arrival.waiter.resume(returning: true) }
    }

    /// Ends ``run()``: what is reported until then is written (the connections' goodbyes among it), and a batch waiting
    /// to be tried again is tried once more now.
    func finish() {
        finishing.store(true, ordering: .releasing)
        doorbell.ring()
        finishBell.ring()
    }

    /// Writes everything reported so far (tests call it to wait for the writes); after a failure, waits and tries
    /// again while the store stays away, unless cancelled or finished.
    func flush() async {
        var backoff = ErrorBackoff(initial: .milliseconds(200), maximum: .seconds(10))
        while true {
            await storeArrivals()
            let (batch, dropped) = pending.withLock { pending -> (Pending, Int) in
                defer { pending = Pending() }
                return (pending, pending.dropped)
            }
            if dropped > 0 {
                logger.warning("channel reports dropped while the database did not keep up", metadata: ["dropped": "\(dropped)"])
            }
            guard !batch.isEmpty else { return }
            do {
                try await store.clearPresence(batch.departed)
                let (delivered, acks, both) = batch.merged()
                let counted = try await store.recordChannel(delivered: delivered, acks: acks, deliveredAndAcked: both, at: clock.now)
                acksCounter.increment(by: counted.acked)
                lateAcks.increment(by: counted.afterFallback)
                if backoff.succeeded() { logger.info("recording the devices' reports again") }
            } catch {
                // Back in front of what came meanwhile, within the capacity.
                pending.withLock { pending in
                    pending.delivered = batch.delivered + pending.delivered
                    pending.acks = batch.acks + pending.acks
                    pending.departed = batch.departed + pending.departed
                    pending.trim(to: Self.capacity)
                }
                let wait = backoff.failed()
                logger.error(
                    "cannot record the devices' reports; trying again",
                    metadata: [
                        "error": "\(error)", "retryIn": "\(wait)", "acks": "\(batch.acks.count)", "sent": "\(batch.delivered.count)",
                        "closed": "\(batch.departed.count)",
                    ])
                guard !Task.isCancelled, !finishing.load(ordering: .acquiring) else { return }
                await finishBell.wait(upTo: wait)
                if Task.isCancelled || finishing.load(ordering: .acquiring) { return }
            }
        }
    }

    /// Stores the presence of the connections that opened since the last batch, then tells each whether its device
    /// has messages waiting. Never retried: a connection does not wait for a database that is away.
    private func storeArrivals() async {
        let batch = arrivals.withLock { arrivals -> [Arrival] in
            defer { arrivals.waiting.removeAll() }
            return arrivals.waiting
        }
        guard !batch.isEmpty else { return }
        var waiting: Set<PresenceKey>?
        do {
            let now = clock.now
            // Committed before the messages are looked at: a message kept after that look finds the presence.
            let earlier = try await store.setPresence(batch.map(\.entry), at: now)
            if !earlier.isEmpty { replaced(earlier) }
            var found: Set<PresenceKey> = []
            for (app, entries) in Dictionary(grouping: batch.map(\.entry), by: \.app) {
                for deviceID in try await store.devicesWithMessages(app: app, deviceIDs: entries.map(\.deviceID), at: now) {
                    found.insert(PresenceKey(app: app, deviceID: deviceID))
                }
            }
            waiting = found
            arrivalFailures.succeeded()
        } catch {
            arrivalFailures.failed(["error": "\(error)", "connections": "\(batch.count)"])
        }
        for arrival in batch {
            arrival.waiter.resume(returning: waiting?.contains(PresenceKey(app: arrival.entry.app, deviceID: arrival.entry.deviceID)) ?? true)
        }
    }

    private struct PresenceKey: Hashable {
        var app: String
        var deviceID: String
    }
}

