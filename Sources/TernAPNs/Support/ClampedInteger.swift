extension Int64 {
    /// `value` (already rounded as the caller wants) as the nearest `Int64`: past either end it is that end, and NaN
    /// is `max`. `Int64(_:)` traps on all of those, and a date from a peer or a stored row must not take a node down.
    public init(clamping value: Double) {
        // ±2^63 are the first Doubles outside Int64; NaN fails the first comparison.
        if !(value < 9_223_372_036_854_775_808.0) {
            self = .max
        } else if value < -9_223_372_036_854_775_808.0 {
            self = .min
        } else {
            self.init(value)
        }
    }
}
