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
/// Nothing waits for these writes. One that fails is logged and lost, which only costs a repeat: an
/// unacknowledged message is sent again on the device's next connection, and it shows it once by id.
final class ChannelRecorder: Sendable {
    private struct Pending {
        var delivered: [(app: String, deviceID: String, sequence: Int64)] = []
        var acks: [(app: String, deviceID: String, id: String)] = []
        var isEmpty: Bool { delivered.isEmpty && acks.isEmpty }
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
        let dropped = pending.withLock { pending -> Int in
            change(&pending)
            let over = pending.delivered.count + pending.acks.count - Self.capacity
            guard over > 0 else { return 0 }
            let fromDelivered = min(over, pending.delivered.count)
            pending.delivered.removeFirst(fromDelivered)
            pending.acks.removeFirst(min(over - fromDelivered, pending.acks.count))
            return over
        }
        if dropped > 0 { logger.warning("channel reports dropped: the database is not keeping up", metadata: ["dropped": "\(dropped)"]) }
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

    /// Writes everything reported so far (tests call it to wait for the writes).
    func flush() async {
        while true {
            let batch = pending.withLock { pending -> Pending in
                defer { pending = Pending() }
                return pending
            }
            guard !batch.isEmpty else { return }
            do {
                let counted = try await store.recordChannel(delivered: batch.delivered, acks: batch.acks, at: clock.now)
                acksCounter.increment(by: counted.acked)
                lateAcks.increment(by: counted.afterFallback)
            } catch {
                logger.error(
                    "cannot record the devices' reports; their unacknowledged messages will be sent again",
                    metadata: ["error": "\(error)", "acks": "\(batch.acks.count)", "sent": "\(batch.delivered.count)"])
                // A pause, so a database that is away does not make this spin.
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
