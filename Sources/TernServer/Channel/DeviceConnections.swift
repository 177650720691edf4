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

    /// Wakes the connections of these devices that are on this node: they have new messages.
    func ring(app: String, deviceIDs: some Sequence<String>) {
        let connections = live.withLock { live in deviceIDs.compactMap { live[Key(app: app, deviceID: $0)] } }
        for connection in connections { connection.doorbell.ring() }
    }

    /// Hands messages just kept to their devices' connections on this node, so they need not read them back from
    /// the store (a connection that finds a gap reads the store all the same).
    func handOver(_ messages: [DeviceMessage]) {
        let targets = live.withLock { live in messages.compactMap { message in live[Key(app: message.appID, deviceID: message.deviceID)].map { ($0, message) } } }
        for (connection, message) in targets { connection.handOver(message) }
    }

    /// Closes every connection (the node stops): each device reconnects, to this node or another.
    func closeAll() async {
        let all = live.withLock { Array($0.values) }
        for connection in all { await connection.close(.goingAway) }
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

/// One device's live connection: its doorbell (new messages), and a way to close it from elsewhere.
final class DeviceConnection: Sendable {
    let app: String
    let deviceID: String
    /// Unique per connection: the presence table's entry is removed only by the connection that wrote it.
    let id = UUID().uuidString.lowercased()
    let doorbell = Doorbell()
    /// Messages handed over by this node's dispatcher, not sent yet (a few at most: beyond them, the store).
    private let handedOver = Mutex<[DeviceMessage]>([])
    static let handOverLimit = 64
    private let closer: @Sendable (ChannelCloseCode) async -> Void
    private let closing = Mutex<(started: Bool, code: ChannelCloseCode?)>((false, nil))

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

    func handOver(_ message: DeviceMessage) {
        handedOver.withLock { handed in
            if handed.count < Self.handOverLimit { handed.append(message) }
        }
        doorbell.ring()
    }

    /// The handed-over messages that follow `sequence` without a gap, in order; nil if there is a gap (or none were
    /// handed over), so the caller reads the store. Those at or before `sequence` are dropped (sent already).
    func takeHandedOver(after sequence: Int64) -> [DeviceMessage]? {
        handedOver.withLock { handed in
            defer { handed.removeAll() }
            let next = handed.filter { $0.sequence > sequence }.sorted { $0.sequence < $1.sequence }
            guard let first = next.first, first.sequence == sequence + 1 else { return nil }
            for (offset, message) in next.enumerated() where message.sequence != first.sequence + Int64(offset) { return nil }
            return next
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
