import Foundation
import Metrics
import Synchronization
import TernStore

/// The devices connected to this node (the online channel), one live connection each.
///
/// A device's connection registers here when it opens and leaves when it ends; a newer connection of the same device
/// replaces the older one, which is told to close (``DeviceConnection/replace()``). Whoever keeps messages for a
/// device rings it (``ring(app:deviceIDs:)``); the connection then reads what is new from the store. Messages kept by
/// another node reach this one as a coordinator event naming this node and the devices (``wakeEvent(node:app:deviceIDs:)``).
final class DeviceConnections: Sendable {
    /// This node's name in the presence table and in wake events.
    let node: String
    private let live = Mutex<[Key: DeviceConnection]>([:])
    private let gauge = Gauge(label: "tern_channel_connections")

    struct Key: Hashable, Sendable {
        var app: String
        var deviceID: String
    }

    init(node: String) {
        self.node = node
    }

    /// How many devices are connected to this node now (the console's overview).
    var count: Int { live.withLock { $0.count } }

    /// Registers `connection` as its device's live one. - Returns: the one it replaces, if any (to be closed).
    func attach(_ connection: DeviceConnection) -> DeviceConnection? {
        let (previous, count) = live.withLock { live -> (DeviceConnection?, Int) in
            let previous = live.updateValue(connection, forKey: Key(app: connection.app, deviceID: connection.deviceID))
            return (previous, live.count)
        }
        gauge.record(count)
        return previous
    }

    /// Removes `connection` if it is still its device's live one. - Returns: whether it was.
    @discardableResult
    func detach(_ connection: DeviceConnection) -> Bool {
        let (removed, count) = live.withLock { live -> (Bool, Int) in
            let key = Key(app: connection.app, deviceID: connection.deviceID)
            guard live[key] === connection else { return (false, live.count) }
            live[key] = nil
            return (true, live.count)
        }
        gauge.record(count)
        return removed
    }

    /// Wakes the connections of these devices that are on this node: they have new messages, to read from the store.
    func ring(app: String, deviceIDs: some Sequence<String>) {
        let connections = live.withLock { live in deviceIDs.compactMap { live[Key(app: app, deviceID: $0)] } }
        for connection in connections { connection.wake() }
    }

    /// Wakes every connection on this node to read the store: wake-ups from other nodes may have been lost (the
    /// coordinator's subscription was interrupted), or a sweep's turn came (``rereadSlice(_:of:)``).
    func ringAll() {
        for connection in live.withLock({ Array($0.values) }) { connection.wake() }
    }

    /// Wakes the `part`-th of `parts` slices of this node's connections (by a hash of the device), so that a sweep
    /// that rings one slice per tick reaches every connection once per round without waking them all at once.
    func ringSlice(_ part: Int, of parts: Int) {
        let connections = live.withLock { live in
            live.filter { key, _ in Int(UInt(bitPattern: key.deviceID.hashValue) % UInt(parts)) == part }.map(\.value)
        }
        for connection in connections { connection.wake() }
    }

    /// Hands messages just kept to their devices' connections on this node, so they need not read them back from
    /// the store (a connection that finds a gap reads the store all the same).
    func handOver(_ messages: [DeviceMessage]) {
        let targets = live.withLock { live in messages.compactMap { message in live[Key(app: message.appID, deviceID: message.deviceID)].map { ($0, message) } } }
        for (connection, message) in targets { connection.handOver(message) }
    }

    /// Closes every connection (the node stops): each device reconnects, to this node or another. All at once: one
    /// after another, 15,000 connections took 14 s to close, during which the devices closed first were already
    /// backing off from a node that no longer answered.
    func closeAll() async {
        let all = live.withLock { Array($0.values) }
        await withDiscardingTaskGroup { group in
            for connection in all { group.addTask { await connection.close(.goingAway) } }
        }
    }

    // MARK: Wake events between nodes

    static let wakePrefix = "wake "

    /// Coordinator events that wake devices connected to `node`, each under PostgreSQL's 8,000-byte NOTIFY payload.
    static func wakeEvents(node: String, app: String, deviceIDs: [String]) -> [String] {
        stride(from: 0, to: deviceIDs.count, by: 150).map { start in
            let slice = deviceIDs[start..<min(start + 150, deviceIDs.count)]
            return wakePrefix + ([node, app] + slice).joined(separator: " ")
        }
    }

    /// The app and devices of a wake event meant for this node, or nil (another node's, or not a wake event).
    func wakeTarget(of event: String) -> (app: String, deviceIDs: [String])? {
        guard event.hasPrefix(Self.wakePrefix) else { return nil }
        let words = event.dropFirst(Self.wakePrefix.count).split(separator: " ").map(String.init)
        guard words.count >= 3, words[0] == node else { return nil }
        return (words[1], Array(words[2...]))
    }
}

/// One device's live connection: what its sender is to do next (messages handed over, or a read of the store), its
/// doorbell, and a way to close it from elsewhere.
final class DeviceConnection: Sendable {
    let app: String
    let deviceID: String
    /// Unique per connection: the presence table's entry is removed only by the connection that wrote it.
    let id = UUID().uuidString.lowercased()
    /// Rung whenever there is something for the sender to do (``next(after:)`` says what).
    let doorbell = Doorbell()
    private let outbox = Mutex(Outbox())
    /// Most messages handed over and not sent yet; beyond them, the sender reads the store.
    static let handOverLimit = 64
    private let closer: @Sendable (ChannelCloseCode) async -> Void
    private let closing = Mutex<(started: Bool, code: ChannelCloseCode?)>((false, nil))

    /// What waits for the sender: messages this node's dispatcher just kept, and whether the store has messages
    /// that were not handed over (kept by another node or an earlier holder of the chunk, or past the limit).
    private struct Outbox {
        var handed: [DeviceMessage] = []
        var storeHasMore = false
    }

    /// The sender's next step.
    enum Step: Equatable {
        /// Send these, in this order: they follow the last message sent without a gap.
        case send([DeviceMessage])
        /// Read the store after the last message sent.
        case readStore
        /// Nothing to do until the doorbell rings.
        case wait
    }

    init(app: String, deviceID: String, close: @escaping @Sendable (ChannelCloseCode) async -> Void) {
        self.app = app
        self.deviceID = deviceID
        self.closer = close
    }

    /// Why the server is closing it, once it decided to.
    var closeReason: ChannelCloseCode? { closing.withLock { $0.code } }

    /// Closes the connection with `code` (once; later calls do nothing), then wakes its sender so it stops: in that
    /// order, so the handler cannot end (and the library close with 1000) before this close frame is written.
    func close(_ code: ChannelCloseCode) async {
        let first = closing.withLock { closing -> Bool in
            guard !closing.started else { return false }
            closing.started = true
            return true
        }
        guard first else { return }
        await closer(code)
        closing.withLock { $0.code = code }
        doorbell.ring()
    }

    /// A message this node just kept for the device: the sender sends it without reading it back from the store.
    func handOver(_ message: DeviceMessage) {
        outbox.withLock { outbox in
            if outbox.handed.count < Self.handOverLimit { outbox.handed.append(message) } else { outbox.storeHasMore = true }
        }
        doorbell.ring()
    }

    /// The store has messages for the device that were not handed over.
    func wake() {
        outbox.withLock { $0.storeHasMore = true }
        doorbell.ring()
    }

    /// What the sender does next, the last message it sent being `sequence`: send the handed-over messages that
    /// follow it without a gap; read the store if there is a gap (the store has them all) or it has more; otherwise
    /// wait. Handed-over messages at or before `sequence` are dropped (sent already).
    func next(after sequence: Int64) -> Step {
        outbox.withLock { outbox in
            let handed = outbox.handed.filter { $0.sequence > sequence }.sorted { $0.sequence < $1.sequence }
            outbox.handed.removeAll()
            if let first = handed.first {
                let contiguous = first.sequence == sequence + 1
                    && handed.indices.allSatisfy { handed[$0].sequence == first.sequence + Int64($0) }
                if contiguous { return .send(handed) }
                outbox.storeHasMore = false
                return .readStore
            }
            guard outbox.storeHasMore else { return .wait }
            outbox.storeHasMore = false
            return .readStore
        }
    }

    /// The ids of messages sent on this connection and not acknowledged yet, and how many ids it acknowledged that
    /// it was not sent (messages it had from an earlier connection or from APNs).
    private let acknowledgeable = Mutex<(sent: Set<String>, others: Int)>(([], 0))
    /// Most ids a connection may acknowledge that it was not sent: a device has a few such; a connection that sends
    /// more is made up, and each would cost a database write.
    static let otherAcksLimit = 1000

    /// Notes the messages just sent on this connection.
    func sent(_ messages: [DeviceMessage]) {
        acknowledgeable.withLock { $0.sent.formUnion(messages.map(\.id)) }
    }

    /// Takes an ack's ids. - Throws: ``ChannelCloseCode/badFrame(_:)`` once the connection acknowledged more ids it
    /// was not sent than ``otherAcksLimit``.
    func acknowledge(_ ids: [String]) throws(ChannelCloseCode) {
        let others = acknowledgeable.withLock { state -> Int in
            for id in ids where state.sent.remove(id) == nil { state.others += 1 }
            return state.others
        }
        if others > Self.otherAcksLimit {
            throw .badFrame("ids: more than \(Self.otherAcksLimit) acknowledged that this connection was not sent")
        }
    }

    /// A newer connection of the same device took over.
    func replace() async { await close(.replaced) }
}
