import Foundation
import NIOCore
import Synchronization
import TernAPNs

/// Counts wrong secrets per client address: failed console sign-ins, and wrong admin tokens on the API. Past `limit`
/// a window, the address is answered 429 whatever secret it sends, the right one too, so the answers tell a guesser
/// nothing more until the window is over.
///
/// App secrets and the server's own have 256 bits: for them the limit only keeps a prober from costing the server and
/// the logs unbounded work. The admin token is the one secret an operator may choose (16 characters at least), and
/// the limit is what keeps guessing it slow: ten a minute from one address. At most `capacity` addresses are
/// tracked; past that, windows that are over go, then the oldest.
///
/// An address is counted by ``key(for:)``: an IPv6 client by its /64, the least a network hands one subscriber, so
/// one who holds a /64 cannot take 2^64 addresses' worth of guesses.
final class SecretGuessLimiter: Sendable {
    let limit: Int
    let window: TimeInterval
    let capacity: Int
    private let clock: any WallClock
    private let windows = Mutex<[String: (start: Date, failures: Int)]>([:])

    init(limit: Int = 10, window: TimeInterval = 60, capacity: Int = 10_000, clock: any WallClock) {
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self.clock = clock
    }

    /// What a client is counted by: its IPv4 address (an IPv4-mapped IPv6 one too), its IPv6 /64, or `unknown` for a
    /// request without a peer (the in-process router tests').
    static func key(for address: SocketAddress?) -> String {
        guard let bytes = address?.unmappedIPBytes else { return "unknown" }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// Seconds to wait before `address` may try again, or nil while it is under the limit.
    func retryAfter(_ address: String) -> Int? {
        let now = clock.now
        return windows.withLock { windows in
            guard let entry = windows[address], now.timeIntervalSince(entry.start) < window, entry.failures >= limit else { return nil }
            return max(1, Int((window - now.timeIntervalSince(entry.start)).rounded(.up)))
        }
    }

    /// Counts a wrong secret from `address`. - Returns: whether this one reached the limit (say so once a window).
    @discardableResult
    func recordFailure(_ address: String) -> Bool {
        let now = clock.now
        return windows.withLock { windows in
            var entry = windows[address].flatMap { now.timeIntervalSince($0.start) < window ? $0 : nil } ?? (start: now, failures: 0)
            if windows[address] == nil, windows.count >= capacity {
                windows = windows.filter { now.timeIntervalSince($0.value.start) < window }
                if windows.count >= capacity, let oldest = windows.min(by: { $0.value.start < $1.value.start })?.key { windows[oldest] = nil }
            }
            entry.failures += 1
            windows[address] = entry
            return entry.failures == limit
        }
    }
}
