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
        var nextConnectionID = 1
        var log: NotificationLog
        var stats = SimulatorStats()
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
                } else if let topic = token.topic, topic != request.bundleID, topic != request.topic {
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
            ScenarioSnapshot(faults: $0.faults, latency: $0.latency, goAway: $0.goAway?.event, drop: $0.drop?.event)
        }
    }

    /// Clears scenarios, tokens, the log and the counters (connections stay open).
    public func reset() {
        inner.withLock { state in
            state.tokens = [:]
            state.faults = []
            state.latency = nil
            state.goAway = nil
            state.drop = nil
            state.log.removeAll()
            let active = state.stats.connectionsActive
            state.stats = SimulatorStats()
            state.stats.connectionsActive = active
        }
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
}
