import Foundation
import Synchronization
import TernAPNs

/// Counts wrong device secrets per device, so guessing one is answered 429 after `limit` failures a window.
///
/// Only wrong secrets are counted and limited: the device's own secret is judged before this is asked, so a device
/// under attack keeps working (a secret has 256 bits; the limit keeps a prober from costing the server and the logs
/// unbounded work, it is not what makes guessing hopeless). The count is per node and in memory, and at most
/// `capacity` devices are tracked: past that, the entries whose window is over go, then the oldest.
final class DeviceSecretLimiter: Sendable {
    /// What a failure did.
    enum Outcome: Equatable {
        /// Counted; still under the limit.
        case counted
        /// Over the limit: answer 429 with this many seconds to wait. `firstTime` once per window (log it once).
        case limited(retryAfter: Int, firstTime: Bool)
    }

    struct Key: Hashable {
        var app: String
        var deviceID: String
    }

    struct Window {
        var start: Date
        var failures: Int
        var reported = false
    }

    let limit: Int
    let window: TimeInterval
    let capacity: Int
    private let clock: any WallClock
    private let windows = Mutex<[Key: Window]>([:])

    init(limit: Int = 10, window: TimeInterval = 60, capacity: Int = 100_000, clock: any WallClock = SystemWallClock()) {
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self.clock = clock
    }

    /// Counts a wrong secret for the device.
    func recordFailure(app: String, deviceID: String) -> Outcome {
        let now = clock.now
        let key = Key(app: app, deviceID: deviceID)
        return windows.withLock { windows in
            var entry = windows[key].flatMap { now.timeIntervalSince($0.start) < window ? $0 : nil } ?? Window(start: now, failures: 0)
            if windows[key] == nil, windows.count >= capacity { Self.makeRoom(&windows, capacity: capacity, now: now, window: window) }
            entry.failures += 1
            defer { windows[key] = entry }
            guard entry.failures > limit else { return .counted }
            let retryAfter = max(1, Int((window - now.timeIntervalSince(entry.start)).rounded(.up)))
            let firstTime = !entry.reported
            entry.reported = true
            return .limited(retryAfter: retryAfter, firstTime: firstTime)
        }
    }

    /// How many devices are tracked now.
    var trackedDevices: Int { windows.withLock { $0.count } }

    /// Drops the windows that are over, and if that is not enough, the oldest one.
    private static func makeRoom(_ windows: inout [Key: Window], capacity: Int, now: Date, window: TimeInterval) {
        windows = windows.filter { now.timeIntervalSince($0.value.start) < window }
        if windows.count >= capacity, let oldest = windows.min(by: { $0.value.start < $1.value.start })?.key {
            windows[oldest] = nil
        }
    }
}
