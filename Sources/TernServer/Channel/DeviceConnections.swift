import Foundation
import Metrics
import NIOCore
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

    /// The presence entries of every connection on this node.
    func entries() -> [PresenceEntry] {
        live.withLock { live in live.map { PresenceEntry(app: $0.key.app, deviceID: $0.key.deviceID, node: node, connection: $0.value.id) } }
    }

    /// Those of these devices that are connected to this node, as the presence table would list them.
    func presence(app: String, deviceIDs: [String]) -> [DevicePresence] {
        live.withLock { live in
            deviceIDs.compactMap { deviceID in
                live[Key(app: app, deviceID: deviceID)].map { DevicePresence(deviceID: deviceID, node: node, connection: $0.id) }
            }
        }
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
    ///
    /// A connection with nothing else to send gets its messages written at once, without a sender task: the writes of
    /// all such connections on one event loop go in one hop to it (a push to 10,000 online devices is a handful of
    /// hops, not 10,000 tasks). The others queue them for their sender.
    func handOver(_ messages: [DeviceMessage]) {
        var byConnection: [ObjectIdentifier: (connection: DeviceConnection, messages: [DeviceMessage])] = [:]
        live.withLock { live in
            for message in messages {
                guard let connection = live[Key(app: message.appID, deviceID: message.deviceID)] else { continue }
                byConnection[ObjectIdentifier(connection), default: (connection, [])].messages.append(message)
            }
        }
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, writes: [(DeviceConnection, [DeviceMessage])])] = [:]
        for (connection, messages) in byConnection.values {
            guard let now = connection.handOver(messages) else { continue }
            let loop = connection.socket.channel.eventLoop
            byLoop[ObjectIdentifier(loop), default: (loop, [])].writes.append((connection, now))
        }
        for (loop, writes) in byLoop.values {
            loop.execute {
                for (connection, messages) in writes { connection.writeHandedOver(messages) }
            }
        }
    }

    /// Closes every connection (the node stops): each device reconnects, to this node or another. All at once: one
    /// after another, 15,000 connections took 14 s to close, during which the devices closed first were already
    /// backing off from a node that no longer answered. Returns once every close frame was written.
    func closeAll() async {
        let all = live.withLock { Array($0.values) }
        await withDiscardingTaskGroup { group in
            for connection in all { group.addTask { await connection.socket.close(.goingAway) } }
        }
    }

    /// Closes these devices' connections on this node (4401): their secret was replaced or they were deleted, and a
    /// connection opened with the old secret must not outlive it. Returns once the close frames were written.
    func disconnect(app: String, deviceIDs: [String]) async {
        let connections = live.withLock { live in deviceIDs.compactMap { live[Key(app: app, deviceID: $0)] } }
        await withDiscardingTaskGroup { group in
            for connection in connections { group.addTask { await connection.socket.close(.credentialsChanged) } }
        }
    }

    /// Closes every connection of `app` on this node (4401): the app was deleted, and a connection opened under it
    /// must not outlive it (an app made again under its id, and a device under a connection's id, would be sent to).
    func disconnect(app: String) async {
        let connections = live.withLock { live in live.filter { $0.key.app == app }.map(\.value) }
        await withDiscardingTaskGroup { group in
            for connection in connections { group.addTask { await connection.socket.close(.credentialsChanged) } }
        }
    }

    /// Closes these connections on this node (4409), each only if it is still its device's live one here: a newer
    /// connection of the device, on another node, took over. Returns once the close frames were written.
    func closeReplaced(app: String, connections replaced: [(deviceID: String, connection: String)]) async {
        let connections = live.withLock { live in
            replaced.compactMap { entry in live[Key(app: app, deviceID: entry.deviceID)].flatMap { $0.id == entry.connection ? $0 : nil } }
        }
        await withDiscardingTaskGroup { group in
            for connection in connections { group.addTask { await connection.socket.close(.replaced) } }
        }
    }

    // MARK: Events between nodes

    static let wakePrefix = "wake "
    static let dropPrefix = "drop "
    static let dropAppPrefix = "dropapp "
    static let replacedPrefix = "replaced "

    /// Coordinator events that wake devices connected to `node`, each under PostgreSQL's 8,000-byte NOTIFY payload.
    static func wakeEvents(node: String, app: String, deviceIDs: [String]) -> [String] {
        events(wakePrefix, naming: [node, app], deviceIDs)
    }

    /// The app and devices of a wake event meant for this node, or nil (another node's, or not a wake event).
    func wakeTarget(of event: String) -> (app: String, deviceIDs: [String])? {
        guard let (names, deviceIDs) = Self.words(of: event, Self.wakePrefix, names: 2), names[0] == node else { return nil }
        return (names[1], deviceIDs)
    }

    /// Coordinator events that close these devices' connections on whichever node has them (``disconnect(app:deviceIDs:)``).
    static func dropEvents(app: String, deviceIDs: [String]) -> [String] {
        events(dropPrefix, naming: [app], deviceIDs)
    }

    /// Coordinator events that close these connections of `node`'s (``closeReplaced(app:connections:)``): a newer
    /// connection of each device opened on another node. A device and its connection are two words, so 75 pairs an event.
    static func replacedEvents(node: String, app: String, connections: [(deviceID: String, connection: String)]) -> [String] {
        events(replacedPrefix, naming: [node, app], connections.flatMap { [$0.deviceID, $0.connection] })
    }

    /// The app and connections of a replaced event meant for this node, or nil (another node's, or not one).
    func replacedTarget(of event: String) -> (app: String, connections: [(deviceID: String, connection: String)])? {
        guard let (names, words) = Self.words(of: event, Self.replacedPrefix, names: 2), names[0] == node, words.count % 2 == 0 else {
            return nil
        }
        return (names[1], stride(from: 0, to: words.count, by: 2).map { (words[$0], words[$0 + 1]) })
    }

    /// The app and devices of a drop event, or nil (not one).
    static func dropTarget(of event: String) -> (app: String, deviceIDs: [String])? {
        words(of: event, dropPrefix, names: 1).map { ($0.names[0], $0.deviceIDs) }
    }

    /// The coordinator event that closes an app's connections on every node (``disconnect(app:)``).
    static func dropAppEvent(app: String) -> String { dropAppPrefix + app }

    /// The app of a drop-app event, or nil (not one).
    static func dropAppTarget(of event: String) -> String? { app(of: event, after: dropAppPrefix) }

    /// The app an event of one word after `prefix` names (`dropapp shop`), or nil: another kind of event, or not one
    /// word (no app id has a space).
    static func app(of event: String, after prefix: String) -> String? {
        guard event.hasPrefix(prefix) else { return nil }
        let app = event.dropFirst(prefix.count)
        return app.isEmpty || app.contains(" ") ? nil : String(app)
    }

    /// `prefix`, then `names`, then at most 150 device ids an event (under PostgreSQL's 8,000-byte NOTIFY payload),
    /// separated by spaces (no name or id has one).
    private static func events(_ prefix: String, naming names: [String], _ deviceIDs: [String]) -> [String] {
        stride(from: 0, to: deviceIDs.count, by: 150).map { start in
            prefix + (names + deviceIDs[start..<min(start + 150, deviceIDs.count)]).joined(separator: " ")
        }
    }

    /// An event of ``events(_:naming:_:)`` read back: its `names` first words and its device ids (at least one), or
    /// nil for another kind of event.
    private static func words(of event: String, _ prefix: String, names: Int) -> (names: [String], deviceIDs: [String])? {
        guard event.hasPrefix(prefix) else { return nil }
        let words = event.dropFirst(prefix.count).split(separator: " ").map(String.init)
        guard words.count > names else { return nil }
        return (Array(words[..<names]), Array(words[names...]))
    }
}

/// One device's live connection: its socket, what its sender is to do next, and what it may acknowledge.
///
/// The connection is served by NIO handlers (``DeviceSocketHandler``), not by a task; when there is something to
/// send, it asks for a sender (`startSender`), a short task that runs until there is nothing left (``SendingState``
/// says when), at most one at a time so the device gets its messages in order.
final class DeviceConnection: Sendable {
    let app: String
    let deviceID: String
    /// Unique per connection: the presence table's entry is removed only by the connection that wrote it.
    let id = UUID.random().uuidString.lowercased()
    let socket: DeviceSocket
    private let sending: Mutex<SendingState>
    private let startSender: @Sendable (DeviceConnection) -> Void
    private let delivered: @Sendable (DeviceConnection, [DeviceMessage]) -> Void

    /// - Parameters:
    ///   - after: the last sequence the device has (`?after=`).
    ///   - startSender: runs a sender for this connection (one at a time: it is called again only once the last
    ///     one's ``nextStep()`` said `.stop`).
    ///   - delivered: reports messages written to the socket without a sender (handed over).
    init(
        app: String, deviceID: String, after: Int64, socket: DeviceSocket, startSender: @escaping @Sendable (DeviceConnection) -> Void,
        delivered: @escaping @Sendable (DeviceConnection, [DeviceMessage]) -> Void = { _, _ in }
    ) {
        self.app = app
        self.deviceID = deviceID
        self.socket = socket
        self.sending = Mutex(SendingState(last: after))
        self.startSender = startSender
        self.delivered = delivered
    }

    /// Its presence is stored: it may send from now on, reading the store first if the device has messages waiting.
    /// - Returns: false if the connection closed meanwhile (its presence is to be removed again).
    func opened(readFirst: Bool) -> Bool {
        let (open, start) = sending.withLock { $0.opened(readFirst: readFirst) }
        if start { startSender(self) }
        return open
    }

    /// It ended. - Returns: whether it had opened (its presence is to be removed now; otherwise ``opened(readFirst:)``
    /// will say so when it comes).
    func closed() -> Bool {
        sending.withLock { $0.closed() }
    }

    /// Messages this node just kept for the device: they go without being read back from the store. - Returns: those
    /// to write now, on the socket's event loop (``writeHandedOver(_:)``), when nothing else is being sent; nil when
    /// they wait for the sender.
    func handOver(_ messages: [DeviceMessage]) -> [DeviceMessage]? {
        let (now, start) = sending.withLock { $0.handOver(messages) }
        if start { startSender(self) }
        if let now { sending(now) }
        return now
    }

    /// Writes what ``handOver(_:)`` said to write now; on the socket's event loop. Once written, they are reported
    /// and the sending goes on (a sender starts if something came meanwhile).
    func writeHandedOver(_ messages: [DeviceMessage]) {
        guard let written = socket.writeOnLoop(messages.map(ChannelFrame.encode)) else {
            sending.withLock { $0.senderStopped() }
            return
        }
        written.whenComplete { [self] result in
            guard case .success = result, let last = messages.last?.sequence else {
                sending.withLock { $0.senderStopped() }
                return
            }
            delivered(self, messages)
            if sending.withLock({ $0.written(through: last) }) { startSender(self) }
        }
    }

    /// The store has messages for the device that were not handed over.
    func wake() {
        if sending.withLock({ $0.wake() }) { startSender(self) }
    }

    /// The sender's next step (``SendingState/next()``).
    func nextStep() -> SendingState.Step { sending.withLock { $0.next() } }

    /// The sender wrote messages through `sequence`; `more` if it read a full page from the store (there may be more).
    func sent(through sequence: Int64, more: Bool = false) { sending.withLock { $0.sent(through: sequence, more: more) } }

    /// The sender could not read the store: it reads again on its next step.
    func readFailed() { sending.withLock { $0.storeHasMore = true } }

    /// The sender stopped before being told to (the connection's write failed, or the node is stopping).
    func senderStopped() { sending.withLock { $0.senderStopped() } }

    /// The ids of messages sent on this connection and not acknowledged yet, and how many ids it acknowledged that
    /// it was not sent (messages it had from an earlier connection or from APNs).
    private let acknowledgeable = Mutex<(sent: Set<String>, others: Int)>(([], 0))
    /// Most ids a connection may acknowledge that it was not sent: a device has a few such; a connection that sends
    /// more is made up, and each would cost a database write.
    static let otherAcksLimit = 1000

    /// Notes the messages about to be sent on this connection (before they go: the device may acknowledge one
    /// before the last is written).
    func sending(_ messages: [DeviceMessage]) {
        acknowledgeable.withLock { $0.sent.formUnion(messages.lazy.map(\.id)) }
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
}

/// One connection's sending, as a value: messages handed over by this node's dispatcher, whether the store has more,
/// the last sequence sent, and whether a sender runs. Each change says whether a sender must be started, so exactly
/// one runs while there is work and none while there is not.
struct SendingState {
    enum Phase {
        /// Upgraded; its presence is being stored. Nothing is sent yet, so a message kept meanwhile by another node
        /// (which finds it only once stored) is read, not missed.
        case opening
        case open
        case closed
    }

    /// The sender's next step.
    enum Step: Equatable {
        /// Send these, in this order: they follow the last message sent without a gap.
        case send([DeviceMessage])
        /// Read the store after this sequence (the last sent).
        case readStore(after: Int64)
        /// Nothing to do: the sender ends (a later change starts another).
        case stop
    }

    /// Most messages handed over and not sent yet; beyond them, the sender reads the store.
    static let handOverLimit = 64

    var phase = Phase.opening
    /// The last sequence sent (or the device's `after`).
    var last: Int64
    var handed: [DeviceMessage] = []
    /// The store has messages that were not handed over (kept by another node or an earlier holder of the chunk,
    /// past the limit, or a full page was read).
    var storeHasMore = false
    var senderRunning = false

    init(last: Int64) {
        self.last = last
    }

    private var hasWork: Bool { storeHasMore || !handed.isEmpty }

    /// Whether a sender must start now.
    private mutating func startIfNeeded() -> Bool {
        guard phase == .open, !senderRunning, hasWork else { return false }
        senderRunning = true
        return true
    }

    mutating func opened(readFirst: Bool) -> (open: Bool, startSender: Bool) {
        guard phase == .opening else { return (false, false) }
        phase = .open
        if readFirst { storeHasMore = true }
        return (true, startIfNeeded())
    }

    /// - Returns: whether it was open.
    mutating func closed() -> Bool {
        defer {
            phase = .closed
            handed = []
        }
        return phase == .open
    }

    /// Messages this node just kept. - Returns: `now`, the messages to write at once (the sender's turn is theirs
    /// until ``written(through:)``), when nothing else waits and they follow the last sent without a gap; otherwise
    /// they are queued, and whether a sender must start.
    mutating func handOver(_ messages: [DeviceMessage]) -> (now: [DeviceMessage]?, startSender: Bool) {
        guard phase != .closed else { return (nil, false) }
        let last = self.last
        let fresh = messages.filter { $0.sequence > last }.sorted { $0.sequence < $1.sequence }
        if phase == .open, !senderRunning, handed.isEmpty, !storeHasMore, let first = fresh.first, first.sequence == last + 1,
            fresh.indices.allSatisfy({ fresh[$0].sequence == first.sequence + Int64($0) })
        {
            senderRunning = true
            return (fresh, false)
        }
        for message in messages {
            if handed.count < Self.handOverLimit { handed.append(message) } else { storeHasMore = true }
        }
        return (nil, startIfNeeded())
    }

    /// The messages written at once are on the socket, through `sequence`. - Returns: whether a sender must start
    /// for what came meanwhile.
    mutating func written(through sequence: Int64) -> Bool {
        last = max(last, sequence)
        senderRunning = false
        return startIfNeeded()
    }

    mutating func wake() -> Bool {
        guard phase != .closed else { return false }
        storeHasMore = true
        return startIfNeeded()
    }

    /// Sends the handed-over messages that follow the last one sent without a gap; reads the store if there is a
    /// gap (the store has them all) or it has more; otherwise stops. Handed-over messages at or before the last
    /// sent are dropped (sent already).
    mutating func next() -> Step {
        guard phase == .open else {
            senderRunning = false
            return .stop
        }
        let last = self.last
        let pending = handed.filter { $0.sequence > last }.sorted { $0.sequence < $1.sequence }
        handed.removeAll()
        if let first = pending.first {
            let contiguous = first.sequence == last + 1 && pending.indices.allSatisfy { pending[$0].sequence == first.sequence + Int64($0) }
            if contiguous { return .send(pending) }
            storeHasMore = false
            return .readStore(after: last)
        }
        guard storeHasMore else {
            senderRunning = false
            return .stop
        }
        storeHasMore = false
        return .readStore(after: last)
    }

    mutating func sent(through sequence: Int64, more: Bool) {
        last = max(last, sequence)
        if more { storeHasMore = true }
    }

    mutating func senderStopped() {
        senderRunning = false
    }
}
