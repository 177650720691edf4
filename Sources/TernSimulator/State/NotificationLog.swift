import Foundation

/// One notification the simulator accepted, as the control API shows it.
public struct RecordedNotification: Codable, Hashable, Sendable {
    /// Arrival order across all connections, from 1.
    public var sequence: UInt64
    /// Milliseconds since the epoch, by the simulator's clock.
    public var receivedAt: Int64
    public var connection: Int
    public var stream: Int
    public var token: String
    public var topic: String
    public var pushType: String
    public var priority: Int
    public var expiration: Int64?
    public var collapseID: String?
    /// Empty for a legacy binary notification, which has none.
    public var apnsID: String
    public var payload: String
    /// `http2`, or `legacy` for the binary gateway.
    public var transport: String
    /// The identifier a legacy binary notification carried.
    public var legacyIdentifier: UInt32?
}

/// What the ring holds: the request's own buffers, moved in without copying. A `RecordedNotification` (with the
/// payload as text) is made only when the control API reads the entry.
struct LogEntry {
    var sequence: UInt64
    var receivedAt: Int64
    var connection: Int
    var stream: Int
    var request: AcceptedRequest

    var recorded: RecordedNotification {
        RecordedNotification(
            sequence: sequence, receivedAt: receivedAt, connection: connection, stream: stream, token: request.token,
            topic: request.topic, pushType: request.pushType.rawValue, priority: request.priority.rawValue,
            expiration: request.expiration, collapseID: request.collapseID, apnsID: request.apnsID,
            payload: String(decoding: request.payload, as: UTF8.self),
            transport: request.legacyIdentifier == nil ? "http2" : "legacy", legacyIdentifier: request.legacyIdentifier)
    }
}

/// A fixed-size ring of the most recent accepted notifications, so memory stays flat however long the simulator
/// runs. Not thread-safe: ``SimulatorState`` guards it.
struct NotificationLog {
    private(set) var capacity: Int
    private var entries: [LogEntry] = []
    private var head = 0  // index of the oldest entry once the ring is full
    private(set) var nextSequence: UInt64 = 1

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { entries.count }

    mutating func append(_ make: (UInt64) -> LogEntry) {
        let sequence = nextSequence
        nextSequence += 1
        guard capacity > 0 else { return }
        let entry = make(sequence)
        if entries.count < capacity {
            entries.append(entry)
        } else {
            entries[head] = entry
            head = (head + 1) % capacity
        }
    }

    /// Entries with a sequence greater than `after`, oldest first, optionally only for one token.
    func page(after: UInt64, limit: Int, token: String?) -> [RecordedNotification] {
        guard !entries.isEmpty, limit > 0 else { return [] }
        let oldest = entries[head].sequence
        let startOffset = after < oldest ? 0 : Int(after - oldest + 1)
        var result: [RecordedNotification] = []
        var offset = startOffset
        while offset < entries.count, result.count < limit {
            let entry = entries[(head + offset) % entries.count]
            if token == nil || entry.request.token == token { result.append(entry.recorded) }
            offset += 1
        }
        return result
    }

    mutating func removeAll() {
        entries.removeAll(keepingCapacity: false)
        head = 0
    }
}
