import Foundation
import Synchronization

/// Wall-clock time, injected wherever a rule depends on it (JWT age and refresh, 410 timestamps, retention),
/// so tests move time forward instead of sleeping.
public protocol WallClock: Sendable {
    var now: Date { get }
}

/// The system's real time.
public struct SystemWallClock: WallClock {
    public init() {}
    public var now: Date { Date() }
}

/// A clock that only moves when told to. For tests and simulations.
public final class ManualWallClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        self.current = Mutex(start)
    }

    public var now: Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }

    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
