import Foundation
import TernAPNs

/// Faults and behaviours the simulator can be told to show. Every type here is also the JSON of the control API.
public enum SimulatorScenario {
    /// Answer some requests with a server-side error (429, 500 or 503) instead of accepting them.
    public struct Fault: Codable, Hashable, Sendable {
        public var status: Int
        /// Defaults to the documented reason for the status (`TooManyRequests`, `InternalServerError`, `ServiceUnavailable`).
        public var reason: String?
        /// Fail each request with this probability (0…1).
        public var rate: Double?
        /// Or fail exactly the next `count` requests, then stop.
        public var count: Int?

        public init(status: Int, reason: String? = nil, rate: Double? = nil, count: Int? = nil) {
            self.status = status
            self.reason = reason
            self.rate = rate
            self.count = count
        }

        func validated() throws(ScenarioError) -> Fault {
            guard [429, 500, 503].contains(status) else {
                throw ScenarioError(field: "status", "injected faults are 429, 500 or 503, not \(status)")
            }
            if let reason {
                let parsed = APNsReason(rawValue: reason)
                guard parsed.status == status else {
                    throw ScenarioError(field: "reason", "reason \(reason) does not go with status \(status)")
                }
            }
            switch (rate, count) {
            case (let rate?, nil):
                guard rate.isFinite, (0...1).contains(rate) else { throw ScenarioError(field: "rate", "rate must be between 0 and 1") }
            case (nil, let count?):
                guard count > 0 else { throw ScenarioError(field: "count", "count must be 1 or more") }
            default:
                throw ScenarioError(field: "rate", "give either rate (a probability) or count (the next N requests)")
            }
            return self
        }

        var apnsReason: APNsReason {
            if let reason { return APNsReason(rawValue: reason) }
            switch status {
            case 429: return .tooManyRequests
            case 500: return .internalServerError
            default: return .serviceUnavailable
            }
        }
    }

    /// Delay every answer: a fixed time, or a random time in a range, drawn per request.
    public struct Latency: Codable, Hashable, Sendable {
        public var fixedMilliseconds: Int?
        public var minMilliseconds: Int?
        public var maxMilliseconds: Int?

        public init(fixedMilliseconds: Int) {
            self.fixedMilliseconds = fixedMilliseconds
        }

        public init(minMilliseconds: Int, maxMilliseconds: Int) {
            self.minMilliseconds = minMilliseconds
            self.maxMilliseconds = maxMilliseconds
        }

        func validated() throws(ScenarioError) -> Latency {
            switch (fixedMilliseconds, minMilliseconds, maxMilliseconds) {
            case (let fixed?, nil, nil):
                guard (0...3_600_000).contains(fixed) else {
                    throw ScenarioError(field: "fixedMilliseconds", "latency must be 0…3600000 ms")
                }
            case (nil, let low?, let high?):
                guard low >= 0, high >= low, high <= 3_600_000 else {
                    throw ScenarioError(field: "maxMilliseconds", "need 0 ≤ minMilliseconds ≤ maxMilliseconds ≤ 3600000")
                }
            default:
                throw ScenarioError(field: "fixedMilliseconds", "give fixedMilliseconds, or minMilliseconds and maxMilliseconds")
            }
            return self
        }

        func draw() -> Int {
            if let fixedMilliseconds { return fixedMilliseconds }
            return Int.random(in: (minMilliseconds ?? 0)...(maxMilliseconds ?? 0))
        }
    }

    /// Act on a connection once it has carried `afterStreams` streams: send GOAWAY, or drop it without a word.
    public struct ConnectionEvent: Codable, Hashable, Sendable {
        public var afterStreams: Int
        /// For GOAWAY: the reason in its debug data.
        public var reason: String?
        /// How many connections this applies to; nil for every connection from now on.
        public var connections: Int?

        public init(afterStreams: Int, reason: String? = nil, connections: Int? = nil) {
            self.afterStreams = afterStreams
            self.reason = reason
            self.connections = connections
        }

        func validated() throws(ScenarioError) -> ConnectionEvent {
            guard afterStreams >= 1 else { throw ScenarioError(field: "afterStreams", "afterStreams must be 1 or more") }
            if let connections, connections < 1 {
                throw ScenarioError(field: "connections", "connections must be 1 or more (omit it for every connection)")
            }
            return self
        }
    }

    /// Make the legacy gateway go down for maintenance: the connection that takes the `afterNotifications`-th
    /// notification from now answers status 10 (Shutdown) naming it as the last one taken, and closes. Used up then.
    public struct LegacyShutdown: Codable, Hashable, Sendable {
        public var afterNotifications: Int

        public init(afterNotifications: Int) {
            self.afterNotifications = afterNotifications
        }

        func validated() throws(ScenarioError) -> LegacyShutdown {
            guard afterNotifications >= 1 else {
                throw ScenarioError(field: "afterNotifications", "afterNotifications must be 1 or more")
            }
            return self
        }
    }

    /// What the simulator knows about one device token.
    public struct TokenState: Codable, Hashable, Sendable {
        /// The topic the token belongs to, push type suffix included (`com.example.app` for a device token,
        /// `com.example.app.voip` for a PushKit token); pushes to another topic get `DeviceTokenNotForTopic`.
        public var topic: String?
        /// The environment the token belongs to; in the other one it is a `BadDeviceToken`.
        public var environment: APNsEnvironment?
        /// When set, pushes get 410 with this timestamp (epoch milliseconds).
        public var unregisteredAt: Int64?
        /// `Unregistered` (default) or `ExpiredToken`.
        public var unregisteredReason: String?
        /// The legacy feedback service has listed this unregistration (its list is cleared once read).
        public var feedbackRead: Bool?

        public init(topic: String? = nil, environment: APNsEnvironment? = nil, unregisteredAt: Int64? = nil, unregisteredReason: String? = nil) {
            self.topic = topic
            self.environment = environment
            self.unregisteredAt = unregisteredAt
            self.unregisteredReason = unregisteredReason
        }
    }
}

/// A scenario the simulator cannot take, naming the field at fault.
public struct ScenarioError: Error, Hashable, Sendable, CustomStringConvertible {
    public let field: String
    public let message: String
    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}
