import Foundation

/// Why the online channel stopped and waits for the app to start it again (the next time it comes to the
/// foreground) rather than reconnecting.
public enum ChannelStop: Sendable, Equatable {
    /// 4409: a newer connection of this device took over (another process of the app, such as its Notification
    /// Service Extension reporting a receipt). Connecting back at once would only close that one: no fight.
    case replaced
    /// The server closed the connection over a frame it could not read (4400, 1003, 1007, 1009): a bug on one side,
    /// which reconnecting would repeat.
    case protocolError(code: Int, reason: String)
    /// The server refuses the connection (a wrong app key, a device it does not know even after registering again).
    case refused(TernError)
}

/// What the channel does when a connection ends or cannot be made: try again after a wait (jittered, growing while
/// attempts keep failing), register the device again first, or stop. A value: events in, decisions out, the time a
/// connection lasted and the random draw passed in, so tests drive it without clocks or sockets.
public struct ReconnectSchedule: Sendable {
    public enum Decision: Sendable, Equatable {
        /// Connect again after this many seconds.
        case reconnect(after: TimeInterval)
        /// The server no longer knows the device or its secret (403, 404): register again, then connect.
        case register
        case stop(ChannelStop)
    }

    public var backoff: RetryBackoff
    /// A connection that lasted this long was healthy: the next wait starts from the shortest again.
    public var stableAfter: TimeInterval
    /// Attempts that failed in a row (a connection that ended early counts as one).
    public private(set) var failures = 0
    /// Registrations asked for since the last connection that opened: one, then a refusal is final.
    private var registrationsAsked = 0

    public init(backoff: RetryBackoff = RetryBackoff(initial: 0.5, maximum: 60), stableAfter: TimeInterval = 30) {
        self.backoff = backoff
        self.stableAfter = stableAfter
    }

    /// The app came to the foreground (or asked for the channel): connect now, whatever failed before.
    public mutating func started() {
        failures = 0
    }

    /// A connection opened: the device's credentials are good.
    public mutating func opened() {
        registrationsAsked = 0
    }

    /// An open connection ended.
    /// - Parameters:
    ///   - code: the close code the server sent, nil if the connection broke without one.
    ///   - lasted: how long it was open.
    ///   - unit: a random number in 0...1 for the jitter.
    public mutating func closed(code: Int?, reason: String = "", lasted: TimeInterval, unit: Double) -> Decision {
        switch code {
        case 4409?:
            return .stop(.replaced)
        case 4400?, 1003?, 1007?, 1009?:
            return .stop(.protocolError(code: code ?? 0, reason: reason))
        default:
            // 1000 and 1001 (the server stops or a ping went unanswered), 1006 (the network went away): connect again.
            failures = lasted >= stableAfter ? 1 : failures + 1
            return .reconnect(after: backoff.delay(afterFailures: failures, unit: unit))
        }
    }

    /// No connection could be made (no network, a timeout, the server down).
    public mutating func couldNotConnect(unit: Double) -> Decision {
        failures += 1
        return .reconnect(after: backoff.delay(afterFailures: failures, unit: unit))
    }

    /// The upgrade was refused; `refusal` is why, as the same request without the upgrade answered (nil: it would be
    /// taken now, so the refusal was passing).
    public mutating func refused(_ refusal: TernError?, unit: Double) -> Decision {
        guard let refusal else { return couldNotConnect(unit: unit) }
        if refusal.isTemporary {
            failures += 1
            return .reconnect(after: max(refusal.retryAfter ?? 0, backoff.delay(afterFailures: failures, unit: unit)))
        }
        if refusal.status == 403 || refusal.status == 404, registrationsAsked == 0 {
            // The device's secret is not the server's (a wiped keychain) or the device was deleted: registering again
            // fixes both (under a new id for the first). Once: refused again, the channel stops.
            registrationsAsked += 1
            return .register
        }
        return .stop(.refused(refusal))
    }
}

/// The message ids already handed to the app, to hand each message over once whether it came over the channel,
/// through APNs, or both. Bounded: it remembers the last `capacity` ids and forgets the oldest first. (A message
/// that comes again after that many others is handed over again; the server stops sending a message once it is
/// acknowledged, so this only covers the time an acknowledgement is on its way.)
public struct MessageDeduplicator: Sendable {
    public let capacity: Int
    /// The ids remembered now: seen, and not forgotten since.
    private var remembered: Set<String> = []
    /// The ids in the order they were seen, as a ring of `capacity` slots; an id seen again after it was forgotten
    /// holds a second slot.
    private var order: [String] = []
    private var oldest = 0
    /// How many slots of the ring each id holds: an id leaves ``remembered`` when its last slot comes round, not its
    /// first (forgotten and seen again, its first slot came round early and took the id out of a full window).
    private var slots: [String: Int] = [:]

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// How many ids it remembers now.
    public var count: Int { remembered.count }

    /// Whether `id` is new; it is remembered from now on.
    public mutating func firstSighting(of id: String) -> Bool {
        let id = id.lowercased()
        guard !remembered.contains(id) else { return false }
        if order.count < capacity {
            order.append(id)
        } else {
            let leaving = order[oldest]
            if let held = slots[leaving], held > 1 {
                slots[leaving] = held - 1
            } else {
                slots[leaving] = nil
                remembered.remove(leaving)
            }
            order[oldest] = id
            oldest = (oldest + 1) % capacity
        }
        slots[id, default: 0] += 1
        remembered.insert(id)
        return true
    }

    public func contains(_ id: String) -> Bool {
        remembered.contains(id.lowercased())
    }

    /// Forgets `id` (it was not handed over after all). Its slot in the order stays until it comes round.
    public mutating func forget(_ id: String) {
        remembered.remove(id.lowercased())
    }
}
