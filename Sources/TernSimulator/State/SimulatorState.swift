import Foundation
import Synchronization
import TernAPNs

/// Counters the control API reports at `GET /stats`.
public struct SimulatorStats: Codable, Hashable, Sendable {
    public var connectionsOpened = 0
    public var connectionsActive = 0
    /// Requests that reached a decision (accepted or rejected).
    public var requests = 0
    public var accepted = 0
    public var rejected = 0
    /// Rejections by APNs reason.
    public var rejectedByReason: [String: Int] = [:]
    public var faultsInjected = 0
    public var goAwaysSent = 0
    public var connectionsDropped = 0
    /// Streams refused with REFUSED_STREAM for exceeding MAX_CONCURRENT_STREAMS.
    public var streamsRefused = 0
    public var logCapacity = 0
    public var logCount = 0
    /// Legacy binary gateway (port 2195 at Apple): connections, notifications taken, error responses by status.
    public var legacyConnectionsOpened = 0
    public var legacyAccepted = 0
    public var legacyRejected = 0
    public var legacyRejectedByStatus: [String: Int] = [:]
    /// Taken by the gateway for a token marked unregistered: never delivered, listed by the feedback service.
    public var legacyUndelivered = 0
    /// Connections closed without a packet because their bytes could not be framed.
    public var legacyUnframeable = 0
    /// Feedback service (port 2196): connections served and tuples sent.
    public var feedbackConnections = 0
    public var feedbackTuplesSent = 0
    /// Broadcasts to channels taken (iOS 18).
    public var broadcasts = 0
}

/// What the simulator does with one request that passed protocol validation.
struct StateDecision {
    enum ConnectionAction {
        case none
        /// Answer, then send GOAWAY with this reason and stop taking new streams.
        case goAway(reason: String)
        /// Close the connection at once, without answering.
        case drop
    }

    var rejection: (reason: APNsReason, timestamp: Date?)?
    var delayMilliseconds: Int
    var connectionAction: ConnectionAction
    /// Accepted with a delay: log the arrival (``SimulatorState/recordArrival(_:connection:stream:)``) when the
    /// delay is over, as that is when APNs would hand it to the device.
    var logWhenAnswered = false
}

/// What the legacy gateway does with what one read of a connection brought.
struct LegacyDecision {
    /// How many of the notifications it took (in order); the rest are discarded.
    var taken: Int
    /// The error response to send before closing, if any.
    var stop: LegacyErrorResponse?
}

/// Everything the simulator's connections share: token registry, scenarios, the arrival log and counters.
/// One lock, taken once per request.
public final class SimulatorState: Sendable {
    private struct ArmedEvent {
        var event: SimulatorScenario.ConnectionEvent
        /// Streams each connection had carried when the event was set: it counts streams from then on.
        var baselines: [Int: Int]
        var fired: Set<Int> = []
    }

    private struct Inner {
        var tokens: [String: SimulatorScenario.TokenState] = [:]
        var faults: [SimulatorScenario.Fault] = []
        var latency: SimulatorScenario.Latency?
        var goAway: ArmedEvent?
        var drop: ArmedEvent?
        var streamsByConnection: [Int: Int] = [:]
        var legacyShutdown: SimulatorScenario.LegacyShutdown?
        var nextConnectionID = 1
        var log: NotificationLog
        var stats = SimulatorStats()
        /// Broadcast channels by bundle id, in the order they were made.
        var channels: [String: [SimulatedChannel]] = [:]
        /// Where the channels are kept across restarts, once ``SimulatorState/keepChannels(in:)`` opened it.
        var channelJournal: ChannelJournal?
        /// The latest broadcasts taken, oldest first (at most ``SimulatorState/broadcastsKept``).
        var broadcasts: [RecordedBroadcast] = []
    }

    let environment: APNsEnvironment
    let clock: any WallClock
    private let inner: Mutex<Inner>

    init(environment: APNsEnvironment, logCapacity: Int, clock: any WallClock) {
        self.environment = environment
        self.clock = clock
        self.inner = Mutex(Inner(log: NotificationLog(capacity: logCapacity)))
    }

    // MARK: Connections

    func connectionOpened() -> Int {
        inner.withLock { state in
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.streamsByConnection[id] = 0
            state.stats.connectionsOpened += 1
            state.stats.connectionsActive += 1
            return id
        }
    }

    func connectionClosed(_ id: Int) {
        inner.withLock { state in
            if state.streamsByConnection.removeValue(forKey: id) != nil {
                state.stats.connectionsActive -= 1
            }
        }
    }

    func recordGoAway() {
        inner.withLock { $0.stats.goAwaysSent += 1 }
    }

    func recordRefusedStreams(_ count: Int) {
        inner.withLock { $0.stats.streamsRefused += count }
    }

    // MARK: Requests

    func recordRejection(_ reason: APNsReason) {
        inner.withLock { state in
            state.stats.requests += 1
            state.stats.rejected += 1
            state.stats.rejectedByReason[reason.rawValue, default: 0] += 1
        }
    }

    /// A request other than a notification (a broadcast, a channel's management) that was taken.
    func recordAcceptance() {
        inner.withLock { state in
            state.stats.requests += 1
            state.stats.accepted += 1
        }
    }

    /// The decision for a request that passed validation and auth: injected faults first, then the token's
    /// registered state, and if all is well it is recorded as accepted.
    func decide(_ request: AcceptedRequest, connection: Int, stream: Int) -> StateDecision {
        let now = clock.now
        return inner.withLock { state in
            let streams = (state.streamsByConnection[connection] ?? 0) + 1
            state.streamsByConnection[connection] = streams
            let delay = state.latency?.draw() ?? 0

            if Self.fire(&state.drop, connection: connection, streams: streams) != nil {
                state.stats.connectionsDropped += 1
                return StateDecision(rejection: nil, delayMilliseconds: 0, connectionAction: .drop)
            }
            var action = StateDecision.ConnectionAction.none
            if let event = Self.fire(&state.goAway, connection: connection, streams: streams) {
                action = .goAway(reason: event.reason ?? "Shutdown")
            }

            state.stats.requests += 1
            if let reason = Self.injectFault(&state.faults) {
                state.stats.faultsInjected += 1
                state.stats.rejected += 1
                state.stats.rejectedByReason[reason.rawValue, default: 0] += 1
                return StateDecision(rejection: (reason, nil), delayMilliseconds: delay, connectionAction: action)
            }
            if let token = state.tokens[request.token] {
                var rejection: (APNsReason, Date?)?
                if let environment = token.environment, environment != self.environment {
                    rejection = (.badDeviceToken, nil)
                } else if let topic = token.topic, topic != request.topic {
                    // The topic, push type suffix included, as APNs binds it: an app's device token is not its
                    // PushKit or Live Activity token, so the app's VoIP topic is another topic for it.
                    rejection = (.deviceTokenNotForTopic, nil)
                } else if let milliseconds = token.unregisteredAt {
                    let reason = token.unregisteredReason.map(APNsReason.init(rawValue:)) ?? .unregistered
                    rejection = (reason, Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000))
                }
                if let rejection {
                    state.stats.rejected += 1
                    state.stats.rejectedByReason[rejection.0.rawValue, default: 0] += 1
                    return StateDecision(rejection: rejection, delayMilliseconds: delay, connectionAction: action)
                }
            }
            state.stats.accepted += 1
            guard delay == 0 else {
                return StateDecision(rejection: nil, delayMilliseconds: delay, connectionAction: action, logWhenAnswered: true)
            }
            Self.log(request, connection: connection, stream: stream, at: now, in: &state)
            return StateDecision(rejection: nil, delayMilliseconds: delay, connectionAction: action)
        }
    }

    /// A broadcast's or channel request's turn at the scenarios, as a notification's: it counts as one of the
    /// connection's streams for a drop (answered with nothing, the connection closed), then takes an injected fault.
    func scenario(forChannelRequestOn connection: Int) -> (drop: Bool, fault: APNsReason?) {
        inner.withLock { state in
            let streams = (state.streamsByConnection[connection] ?? 0) + 1
            state.streamsByConnection[connection] = streams
            if Self.fire(&state.drop, connection: connection, streams: streams) != nil {
                state.stats.connectionsDropped += 1
                return (true, nil)
            }
            guard let reason = Self.injectFault(&state.faults) else { return (false, nil) }
            state.stats.faultsInjected += 1
            return (false, reason)
        }
    }

    /// Logs an accepted notification whose answer was delayed, now that it is answered.
    func recordArrival(_ request: AcceptedRequest, connection: Int, stream: Int) {
        let now = clock.now
        inner.withLock { Self.log(request, connection: connection, stream: stream, at: now, in: &$0) }
    }

    private static func log(_ request: AcceptedRequest, connection: Int, stream: Int, at now: Date, in state: inout Inner) {
        let receivedAt = Int64((now.timeIntervalSince1970 * 1000).rounded())
        state.log.append { sequence in
            LogEntry(sequence: sequence, receivedAt: receivedAt, connection: connection, stream: stream, request: request)
        }
    }

    private static func fire(_ armed: inout ArmedEvent?, connection: Int, streams: Int) -> SimulatorScenario.ConnectionEvent? {
        guard var current = armed, !current.fired.contains(connection) else { return nil }
        let counted = streams - (current.baselines[connection] ?? 0)
        guard counted >= current.event.afterStreams else { return nil }
        current.fired.insert(connection)
        let event = current.event
        if let limit = event.connections, current.fired.count >= limit {
            armed = nil
        } else {
            armed = current
        }
        return event
    }

    private static func injectFault(_ faults: inout [SimulatorScenario.Fault]) -> APNsReason? {
        for index in faults.indices {
            if let count = faults[index].count {
                let reason = faults[index].apnsReason
                if count <= 1 { faults.remove(at: index) } else { faults[index].count = count - 1 }
                return reason
            }
            if let rate = faults[index].rate, rate > 0, Double.random(in: 0..<1) < rate {
                return faults[index].apnsReason
            }
        }
        return nil
    }

    // MARK: Legacy binary gateway and feedback

    func legacyConnectionOpened() -> Int {
        inner.withLock { state in
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.stats.legacyConnectionsOpened += 1
            return id
        }
    }

    /// Decides a run of notifications from one connection, in order, under one lock: the shutdown scenario first
    /// (the notification that uses it up is the last one taken), then the token: one that belongs to another
    /// environment or app is an invalid token (8), where the gateway stops. Taken notifications go to the arrival
    /// log, except for tokens marked unregistered, which the gateway takes and drops (the feedback service lists them).
    func decideLegacy(
        _ notifications: [LegacyNotification], identity: PushCertificateIdentity, connection: Int, firstPosition: Int
    ) -> LegacyDecision {
        let now = clock.now
        let receivedAt = Int64((now.timeIntervalSince1970 * 1000).rounded())
        return inner.withLock { state in
            for (index, notification) in notifications.enumerated() {
                let hex = DeviceToken.hex(notification.token)
                if let token = state.tokens[hex], Self.isForeign(token, identity: identity, environment: environment) {
                    state.stats.legacyRejected += 1
                    state.stats.legacyRejectedByStatus[LegacyStatus.invalidToken.name, default: 0] += 1
                    return LegacyDecision(
                        taken: index, stop: LegacyErrorResponse(status: .invalidToken, identifier: notification.identifier))
                }
                state.stats.legacyAccepted += 1
                if state.tokens[hex]?.unregisteredAt != nil {
                    state.stats.legacyUndelivered += 1
                } else {
                    let request = AcceptedRequest(
                        token: hex, topic: identity.bundleID, bundleID: identity.bundleID, pushType: .alert,
                        priority: notification.priority == 5 ? .throttled : .immediate,
                        expiration: notification.expiration == 0 ? nil : Int64(notification.expiration), collapseID: nil,
                        apnsID: "", payload: notification.payload, legacyIdentifier: notification.identifier)
                    state.log.append { sequence in
                        LogEntry(
                            sequence: sequence, receivedAt: receivedAt, connection: connection, stream: firstPosition + index,
                            request: request)
                    }
                }
                if var shutdown = state.legacyShutdown {
                    shutdown.afterNotifications -= 1
                    state.legacyShutdown = shutdown.afterNotifications > 0 ? shutdown : nil
                    if shutdown.afterNotifications == 0 {
                        state.stats.legacyRejectedByStatus[LegacyStatus.shutdown.name, default: 0] += 1
                        return LegacyDecision(
                            taken: index + 1, stop: LegacyErrorResponse(status: .shutdown, identifier: notification.identifier))
                    }
                }
            }
            return LegacyDecision(taken: notifications.count, stop: nil)
        }
    }

    private static func isForeign(_ token: SimulatorScenario.TokenState, identity: PushCertificateIdentity, environment: APNsEnvironment) -> Bool {
        if let tokenEnvironment = token.environment, tokenEnvironment != environment { return true }
        if let topic = token.topic, topic != identity.bundleID, !identity.topics.contains(topic) { return true }
        return false
    }

    /// A notification the gateway could frame but not take (sizes, missing items), or a connection it closed
    /// without a packet.
    func recordLegacyRejection(_ status: LegacyStatus?) {
        inner.withLock { state in
            guard let status else {
                state.stats.legacyUnframeable += 1
                return
            }
            state.stats.legacyRejected += 1
            state.stats.legacyRejectedByStatus[status.name, default: 0] += 1
        }
    }

    /// Tokens marked unregistered that the feedback service has not listed yet, for `identity`'s app in this
    /// environment, oldest first.
    public func pendingFeedback(for identity: PushCertificateIdentity? = nil) -> [FeedbackTuple] {
        inner.withLock { Self.pendingFeedback(in: $0, identity: identity, environment: environment) }
    }

    private static func pendingFeedback(in state: Inner, identity: PushCertificateIdentity?, environment: APNsEnvironment) -> [FeedbackTuple] {
        var tuples: [FeedbackTuple] = []
        for (hex, token) in state.tokens {
            guard let milliseconds = token.unregisteredAt, token.feedbackRead != true else { continue }
            if let identity, isForeign(token, identity: identity, environment: environment) { continue }
            guard let bytes = try? DeviceToken(hex: hex).bytes else { continue }
            tuples.append(FeedbackTuple(timestamp: UInt32(clamping: milliseconds / 1000), token: bytes))
        }
        return tuples.sorted { $0.timestamp != $1.timestamp ? $0.timestamp < $1.timestamp : $0.token.lexicographicallyPrecedes($1.token) }
    }

    /// What the feedback service sends one connection: the pending tuples for its app.
    func feedbackForConnection(_ identity: PushCertificateIdentity) -> [FeedbackTuple] {
        inner.withLock { state in
            state.stats.feedbackConnections += 1
            return Self.pendingFeedback(in: state, identity: identity, environment: environment)
        }
    }

    /// The service's list is cleared once read: marks the tuples a connection received in full, unless the token
    /// was unregistered again since.
    func feedbackDelivered(_ tuples: [FeedbackTuple]) {
        inner.withLock { state in
            state.stats.feedbackTuplesSent += tuples.count
            for tuple in tuples {
                let hex = DeviceToken.hex(tuple.token)
                guard var token = state.tokens[hex], let milliseconds = token.unregisteredAt,
                    UInt32(clamping: milliseconds / 1000) == tuple.timestamp
                else { continue }
                token.feedbackRead = true
                state.tokens[hex] = token
            }
        }
    }

    /// Answer status 10 (Shutdown) on the gateway connection that takes the `afterNotifications`-th notification
    /// from now, naming it as the last one taken, and close that connection.
    public func setLegacyShutdown(_ shutdown: SimulatorScenario.LegacyShutdown?) throws(ScenarioError) {
        let checked = try shutdown?.validated()
        inner.withLock { $0.legacyShutdown = checked }
    }

    // MARK: Scenario API

    /// Registers what the simulator should know about a token (topic, environment, unregistration).
    public func setToken(_ token: DeviceToken, _ tokenState: SimulatorScenario.TokenState) {
        inner.withLock { $0.tokens[token.hex] = tokenState }
    }

    /// Binds a token to a topic and environment: pushes elsewhere get `DeviceTokenNotForTopic` / `BadDeviceToken`.
    public func bind(_ token: DeviceToken, topic: String?, environment: APNsEnvironment?) {
        inner.withLock { state in
            var current = state.tokens[token.hex] ?? .init()
            current.topic = topic
            current.environment = environment
            state.tokens[token.hex] = current
        }
    }

    /// Marks a token unregistered as of `at` (default: now): pushes to it get 410 with that timestamp.
    public func unregister(_ token: DeviceToken, at: Date? = nil, reason: APNsReason = .unregistered) {
        let when = at ?? clock.now
        inner.withLock { state in
            var current = state.tokens[token.hex] ?? .init()
            current.unregisteredAt = Int64((when.timeIntervalSince1970 * 1000).rounded())
            current.unregisteredReason = reason.rawValue
            current.feedbackRead = nil
            state.tokens[token.hex] = current
        }
    }

    public func forgetToken(_ token: DeviceToken) {
        _ = inner.withLock { $0.tokens.removeValue(forKey: token.hex) }
    }

    public func tokens() -> [String: SimulatorScenario.TokenState] {
        inner.withLock { $0.tokens }
    }

    public func setFaults(_ faults: [SimulatorScenario.Fault]) throws(ScenarioError) {
        var checked: [SimulatorScenario.Fault] = []
        for (index, fault) in faults.enumerated() {
            do {
                checked.append(try fault.validated())
            } catch {
                // The body is a JSON array: name the field by its path in it, as decoding errors do.
                throw ScenarioError(field: "[\(index)].\(error.field)", error.message)
            }
        }
        inner.withLock { $0.faults = checked }
    }

    public func setLatency(_ latency: SimulatorScenario.Latency?) throws(ScenarioError) {
        let checked = try latency?.validated()
        inner.withLock { $0.latency = checked }
    }

    /// Send GOAWAY on connections once they have carried `afterStreams` more streams.
    public func setGoAway(_ event: SimulatorScenario.ConnectionEvent?) throws(ScenarioError) {
        let checked = try event?.validated()
        inner.withLock { state in
            state.goAway = checked.map { ArmedEvent(event: $0, baselines: state.streamsByConnection) }
        }
    }

    /// Drop connections without a word once they have carried `afterStreams` more streams.
    public func setDrop(_ event: SimulatorScenario.ConnectionEvent?) throws(ScenarioError) {
        let checked = try event?.validated()
        inner.withLock { state in
            state.drop = checked.map { ArmedEvent(event: $0, baselines: state.streamsByConnection) }
        }
    }

    /// The current scenarios, as the control API shows them.
    public func scenarios() -> ScenarioSnapshot {
        inner.withLock {
            ScenarioSnapshot(
                faults: $0.faults, latency: $0.latency, goAway: $0.goAway?.event, drop: $0.drop?.event,
                legacyShutdown: $0.legacyShutdown)
        }
    }

    /// Clears scenarios, tokens, the log, the counters and the channels, their file too (connections stay open).
    public func reset() {
        inner.withLock { state in
            state.tokens = [:]
            state.faults = []
            state.latency = nil
            state.goAway = nil
            state.drop = nil
            state.legacyShutdown = nil
            state.log.removeAll()
            state.channels = [:]
            // A file the system would not empty brings the channels back at the next start; nothing else to do here.
            _ = state.channelJournal?.clear()
            state.broadcasts = []
            let active = state.stats.connectionsActive
            state.stats = SimulatorStats()
            state.stats.connectionsActive = active
        }
    }

    // MARK: Broadcast channels

    /// How many of the latest broadcasts the control API can list.
    public static let broadcastsKept = 1_000

    /// Keeps the channels in `url` from now on, and takes the ones it holds (replacing those in memory).
    /// - Returns: how many lines of the file could not be read (and are gone from it now).
    /// - Throws: ``ChannelJournalError`` when the file cannot be read or written.
    func keepChannels(in url: URL) throws(ChannelJournalError) -> Int {
        let (journal, contents) = try ChannelJournal.load(from: url)
        keepChannels(with: journal, channels: contents.channels)
        return contents.linesSkipped
    }

    func keepChannels(with journal: ChannelJournal, channels: [String: [SimulatedChannel]]) {
        inner.withLock { state in
            state.channels = channels
            state.channelJournal = journal
        }
    }

    /// Whether the channels are kept in a file (``keepChannels(in:)``, until ``stopKeepingChannels()``).
    var keepsChannels: Bool { inner.withLock { $0.channelJournal != nil } }

    /// Closes the channels file: changes from now on are kept in memory only.
    func stopKeepingChannels() {
        inner.withLock { $0.channelJournal = nil }
    }

    /// What became of a request to make or delete a channel.
    enum ChannelChange: Equatable {
        case done
        /// Making it: the app has its ``APNsBroadcastRules/maximumChannels``. Deleting it: there is none by that id.
        case refused
        /// The channels file would not take the change (a full disk): nothing changed.
        case notKept
    }

    /// Makes a channel with a new random id.
    func createChannel(bundleID: String, storesMessages: Bool) -> (ChannelChange, id: String) {
        var random = SystemRandomNumberGenerator()
        let id = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
        return inner.withLock { state in
            guard state.channels[bundleID, default: []].count < APNsBroadcastRules.maximumChannels else { return (.refused, id) }
            if let journal = state.channelJournal,
                !journal.append(.init(op: .create, bundleID: bundleID, id: id, storesMessages: storesMessages))
            {
                return (.notKept, id)
            }
            state.channels[bundleID, default: []].append(SimulatedChannel(bundleID: bundleID, id: id, storesMessages: storesMessages))
            return (.done, id)
        }
    }

    /// Deletes a channel.
    func deleteChannel(bundleID: String, id: String) -> ChannelChange {
        inner.withLock { state in
            guard let index = state.channels[bundleID]?.firstIndex(where: { $0.id == id }) else { return .refused }
            if let journal = state.channelJournal, !journal.append(.init(op: .delete, bundleID: bundleID, id: id)) {
                return .notKept
            }
            state.channels[bundleID]?.remove(at: index)
            return .done
        }
    }

    /// The app's channel `id`, if it has one: found under the lock, not in a copy of the app's list.
    func channel(bundleID: String, id: String) -> SimulatedChannel? {
        inner.withLock { $0.channels[bundleID]?.first { $0.id == id } }
    }

    /// An app's channels, oldest first; every app's when `bundleID` is nil.
    public func channels(bundleID: String? = nil) -> [SimulatedChannel] {
        inner.withLock { state in
            if let bundleID { return state.channels[bundleID] ?? [] }
            return state.channels.keys.sorted().flatMap { state.channels[$0] ?? [] }
        }
    }

    func recordBroadcast(_ broadcast: RecordedBroadcast) {
        inner.withLock { state in
            state.broadcasts.append(broadcast)
            if state.broadcasts.count > Self.broadcastsKept { state.broadcasts.removeFirst(state.broadcasts.count - Self.broadcastsKept) }
            state.stats.broadcasts += 1
        }
    }

    /// The latest broadcasts taken, oldest first.
    public func broadcasts() -> [RecordedBroadcast] {
        inner.withLock { $0.broadcasts }
    }

    // MARK: Log and stats

    /// Accepted notifications with a sequence number above `after`, oldest first.
    public func notifications(after: UInt64 = 0, limit: Int = 100, token: String? = nil) -> [RecordedNotification] {
        inner.withLock { $0.log.page(after: after, limit: limit, token: token) }
    }

    public func clearLog() {
        inner.withLock { $0.log.removeAll() }
    }

    public func stats() -> SimulatorStats {
        inner.withLock { state in
            var stats = state.stats
            stats.logCapacity = state.log.capacity
            stats.logCount = state.log.count
            return stats
        }
    }
}

/// The scenarios in force.
public struct ScenarioSnapshot: Codable, Hashable, Sendable {
    public var faults: [SimulatorScenario.Fault]
    public var latency: SimulatorScenario.Latency?
    public var goAway: SimulatorScenario.ConnectionEvent?
    public var drop: SimulatorScenario.ConnectionEvent?
    public var legacyShutdown: SimulatorScenario.LegacyShutdown?
}
