import DequeModule

/// How many notifications a node may have sent and not recorded, following APNs' latency: the decision, as a value.
///
/// By Little's law, the notifications in flight are the send rate times the time each one is out. A fixed number is
/// wrong one way or the other: 1,000 in flight is more than a nearby APNs needs (answers in a millisecond or two,
/// and the extra ones only queue on this node, and are sent twice if it dies), and too few for one 50 ms away
/// (1,000 ÷ 50 ms caps a push at 20,000 notifications/s whatever the connection could carry).
///
/// So the limit moves between `minimum` and `maximum` (`delivery.concurrency`, which stays the most a crash can send
/// twice), from the round trips of the notifications sent: send to answer, as the dispatcher measures them.
/// - The **base latency** is the lowest round trip of the last ``baseMemory`` (10 s, as BBR keeps its minimum round
///   trip): what a notification takes when nothing queues in front of it. Over that many answers, some always
///   went out with nothing in front of them; and an APNs that got slower for good is the new base 10 s later.
/// - Each **window** gathers the answers to about half the limit's worth of notifications. When it closes, its mean
///   round trip is compared with the base: up to ``tolerance`` times the base, more in flight would go out at the
///   same speed, so the limit grows, if the window used it (``Sample/limited``): doubling until the first sign of a
///   queue, then by a tenth. Beyond that, notifications wait on this node or on the connections' streams, which
///   adds time and no speed: the limit shrinks by a tenth.
///
/// The same idea as TCP Vegas or Netflix's concurrency limits, kept to what a push needs: one rule, no smoothing
/// constants to tune, and decisions that tests drive with plain values.
struct ConcurrencyLimit: Sendable {
    /// One answered notification.
    struct Sample: Sendable {
        /// From the moment it was handed to the client to its answer.
        var roundTrip: Duration
        /// Whether the node was at its limit when the answer came (every permit out, or others waiting for one):
        /// only then does the limit say anything about the speed.
        var limited: Bool
    }

    /// A mean round trip up to this many times the base counts as no queue.
    static let tolerance = 2.0
    /// How long a window's lowest round trip counts for the base latency.
    static let baseMemory: Duration = .seconds(10)

    let minimum: Int
    let maximum: Int
    private(set) var limit: Int
    /// Doubling until the first window with a queue.
    private(set) var startingUp = true

    private var count = 0
    private var total: Duration = .zero
    private var lowest: Duration?
    private var limitedCount = 0
    /// The recent windows' lowest round trips that can still be the base, with when their window closed: oldest
    /// first, each lower than every one after it. A window's lowest that is not below a later one's never will be
    /// the base again, so it is dropped when the later one comes; the base is then the first, and a window closes
    /// in constant time however many closed in the last ``baseMemory`` (a fan-out closes about a hundred a second).
    private var baseCandidates: Deque<(closed: ContinuousClock.Instant, lowest: Duration)> = []

    /// - Parameters:
    ///   - maximum: the most in flight (`delivery.concurrency`).
    ///   - minimum: the least; the limit starts there. At most `maximum`.
    init(maximum: Int, minimum: Int = 500) {
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = self.minimum
    }

    /// The lowest round trip lately, nil before the first window closed.
    var baseLatency: Duration? { baseCandidates.first?.lowest }

    /// Adds an answer that came at `now`. - Returns: the new limit when this answer closed a window and the limit
    /// changed.
    mutating func record(_ sample: Sample, at now: ContinuousClock.Instant) -> Int? {
        count += 1
        total += sample.roundTrip
        lowest = min(lowest ?? sample.roundTrip, sample.roundTrip)
        if sample.limited { limitedCount += 1 }
        guard count >= max(32, limit / 2) else { return nil }
        return closeWindow(at: now)
    }

    private mutating func closeWindow(at now: ContinuousClock.Instant) -> Int? {
        let mean = total / count
        let usedTheLimit = limitedCount * 2 >= count
        while let oldest = baseCandidates.first, oldest.closed < now - Self.baseMemory { baseCandidates.removeFirst() }
        let windowLowest = lowest ?? mean
        while let newest = baseCandidates.last, newest.lowest >= windowLowest { baseCandidates.removeLast() }
        baseCandidates.append((now, windowLowest))
        count = 0
        total = .zero
        lowest = nil
        limitedCount = 0

        let base = baseLatency!
        let before = limit
        if mean <= base * Self.tolerance {
            guard usedTheLimit else { return nil }
            limit = startingUp ? min(maximum, limit * 2) : min(maximum, limit + max(1, limit / 10))
        } else {
            startingUp = false
            limit = max(minimum, limit - max(1, limit / 10))
        }
        return limit == before ? nil : limit
    }
}
