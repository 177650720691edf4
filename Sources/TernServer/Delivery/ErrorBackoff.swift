/// How a background loop waits after repeated errors: doubling from `initial` up to `maximum`, and what to log.
///
/// A loop that failed and looked again at once would spin (a store that is away answers in microseconds) and write
/// a line per turn; this makes it wait longer each time and speak once per step, so a store that stays away costs one
/// line per `maximum` at worst.
struct ErrorBackoff: Sendable, Equatable {
    let initial: Duration
    let maximum: Duration
    /// Failures in a row.
    private(set) var failures = 0

    init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(30)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// After a failure: how long to wait before trying again. Log each failure with it: the waits grow, so a store
    /// that stays away is one line per back-off step, then one per `maximum`.
    mutating func failed() -> Duration {
        failures += 1
        var wait = initial
        for _ in 1..<min(failures, 64) where wait < maximum { wait = min(wait * 2, maximum) }
        return wait
    }

    /// After a success: the next failure starts from `initial` again. - Returns: whether it had been failing.
    mutating func succeeded() -> Bool {
        defer { failures = 0 }
        return failures > 0
    }
}
