import Foundation
import Logging
import Metrics
import Synchronization
import TernAPNs
import TernStore

/// Writes what the device connections report (messages sent online, acknowledgements) in batches: whatever came in
/// while the last batch was being written goes together in one transaction, so a node with thousands of
/// connections writes a few transactions a second, not one per frame.
///
/// Nothing waits for these writes. A batch that fails goes back to the front and is tried again after a growing wait
/// (``ErrorBackoff``); beyond ``capacity`` the oldest reports are dropped, which only costs a repeat: an
/// unacknowledged message is sent again on the device's next connection, and it shows it once by id.
final class ChannelRecorder: Sendable {
    struct Pending {
        var delivered: [(app: String, deviceID: String, sequence: Int64)] = []
        var acks: [(app: String, deviceID: String, id: String)] = []
        /// Reports dropped past the capacity since the last log line about it.
        var dropped = 0
        var isEmpty: Bool { delivered.isEmpty && acks.isEmpty }

        /// Keeps at most `capacity` entries, dropping the oldest (sent marks first: they only feed a count).
        mutating func trim(to capacity: Int) {
            let over = delivered.count + acks.count - capacity
            guard over > 0 else { return }
            let fromDelivered = min(over, delivered.count)
            delivered.removeFirst(fromDelivered)
            acks.removeFirst(min(over - fromDelivered, acks.count))
            dropped += over
        }
    }

    private let store: any TernStore
    private let clock: any WallClock
    private let logger: Logger
    private let pending = Mutex(Pending())
    private let doorbell = Doorbell()
    private let acksCounter = Counter(label: "tern_channel_acks_total")
    private let lateAcks = Counter(label: "tern_channel_acks_after_fallback_total")
    /// Most entries kept waiting: beyond it the oldest reports are dropped (and logged), so memory stays bounded
    /// while the database is away.
    static let capacity = 200_000

    init(store: any TernStore, clock: any WallClock, logger: Logger) {
        self.store = store
        self.clock = clock
        self.logger = logger
    }

    func delivered(app: String, deviceID: String, sequences: [Int64]) {
        add { $0.delivered.append(contentsOf: sequences.map { (app, deviceID, $0) }) }
    }

    func acknowledged(app: String, deviceID: String, ids: [String]) {
        add { $0.acks.append(contentsOf: ids.map { (app, deviceID, $0) }) }
    }

    private func add(_ change: (inout Pending) -> Void) {
        pending.withLock { pending in
            change(&pending)
            pending.trim(to: Self.capacity)
        }
        doorbell.ring()
    }

    /// Writes batches until cancelled, then what is left.
    func run() async {
        while !Task.isCancelled {
            await doorbell.wait()
            await flush()
        }
        await flush()
    }

    /// Writes everything reported so far (tests call it to wait for the writes); after a failure, waits and tries
    /// again while the store stays away, unless cancelled.
    func flush() async {
        var backoff = ErrorBackoff(initial: .milliseconds(200), maximum: .seconds(10))
        while true {
            let (batch, dropped) = pending.withLock { pending -> (Pending, Int) in
                defer { pending = Pending() }
                return (pending, pending.dropped)
            }
            if dropped > 0 {
                logger.warning("channel reports dropped while the database did not keep up", metadata: ["dropped": "\(dropped)"])
            }
            guard !batch.isEmpty else { return }
            do {
                let counted = try await store.recordChannel(delivered: batch.delivered, acks: batch.acks, at: clock.now)
                acksCounter.increment(by: counted.acked)
                lateAcks.increment(by: counted.afterFallback)
                if backoff.succeeded() { logger.info("recording the devices' reports again") }
            } catch {
                // Back in front of what came meanwhile, within the capacity.
                pending.withLock { pending in
                    pending.delivered = batch.delivered + pending.delivered
                    pending.acks = batch.acks + pending.acks
                    pending.trim(to: Self.capacity)
                }
                let wait = backoff.failed()
                logger.error(
                    "cannot record the devices' reports; trying again",
                    metadata: ["error": "\(error)", "retryIn": "\(wait)", "acks": "\(batch.acks.count)", "sent": "\(batch.delivered.count)"])
                guard !Task.isCancelled else { return }
                try? await Task.sleep(for: wait)
                if Task.isCancelled { return }
            }
        }
    }
}
