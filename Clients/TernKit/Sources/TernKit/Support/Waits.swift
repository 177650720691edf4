import Foundation

extension Duration {
    /// `seconds` as a wait, whatever the number: NaN and negatives are no wait, and anything past
    /// ``TernClient/longestRetryAfter`` waits that long. A wait comes from arithmetic on what a server (or a proxy in
    /// front of it) said, and converting an unbounded `Double` to an integer traps.
    static func wait(seconds: TimeInterval) -> Duration {
        guard seconds > 0 else { return .zero }
        return .milliseconds(Int64(min(seconds, TernClient.longestRetryAfter) * 1000))
    }
}

extension Duration {
    /// The duration in seconds, for the APIs that take a `TimeInterval`.
    var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
