import TernTestSupport
import Testing

@testable import TernServer

/// The in-flight limit that follows APNs' round trips, decided from values.
struct ConcurrencyLimitTests {
    /// The time the answers come at: a manual clock, moved by the tests.
    private var now = ContinuousClock.now

    /// Feeds `count` answers with this round trip, all at the test's `now`, and returns the limits it moved to.
    private func answers(
        _ count: Int, roundTrip: Duration, limited: Bool = true, into limit: inout ConcurrencyLimit
    ) -> [Int] {
        var changes: [Int] = []
        for _ in 0..<count {
            if let changed = limit.record(.init(roundTrip: roundTrip, limited: limited), at: now) { changes.append(changed) }
        }
        return changes
    }

    @Test func aDistantAPNsThatAnswersWithoutQueueingGetsMoreInFlightUpToTheMaximum() {
        var limit = ConcurrencyLimit(maximum: 4000, minimum: 500)
        #expect(limit.limit == 500)
        // 50 ms every time: more in flight would go out at the same speed. Doubling, then capped.
        let changes = answers(10_000, roundTrip: .milliseconds(50), into: &limit)
        #expect(changes == [1000, 2000, 4000])
        #expect(limit.limit == 4000)
        #expect(limit.baseLatency == .milliseconds(50))
    }

    @Test func aNearbyAPNsKeepsTheMinimumBecauseMoreWouldOnlyQueue() {
        // A saturated node: the fast answers among the queued ones stay the base for as long as they count.
        var limit = ConcurrencyLimit(maximum: 4000, minimum: 500)
        // The first window sets the base: a fast answer among slower ones (those queued behind others).
        _ = limit.record(.init(roundTrip: .microseconds(300), limited: true), at: now)
        let changes = answers(5000, roundTrip: .milliseconds(4), into: &limit)
        #expect(changes.isEmpty, "4 ms against a 0.3 ms base is queueing: the limit stays where it is")
        #expect(limit.limit == 500)
        #expect(!limit.startingUp)
    }

    @Test func queueingAfterGrowingShrinksTheLimitByATenthPerWindow() {
        var limit = ConcurrencyLimit(maximum: 4000, minimum: 500)
        _ = answers(10_000, roundTrip: .milliseconds(50), into: &limit)
        #expect(limit.limit == 4000)
        // The node or the connections cannot keep up: answers take 120 ms.
        let shrinking = answers(2000, roundTrip: .milliseconds(120), into: &limit)
        #expect(shrinking.first == 3600)
        #expect(shrinking == shrinking.sorted(by: >), "only down while the queue lasts")
        // The queue gone, it grows again, by a tenth now (no longer starting up).
        let before = limit.limit
        let growing = answers(limit.limit, roundTrip: .milliseconds(50), into: &limit)
        #expect(growing.first == before + before / 10)
    }

    @Test func aLimitTheWindowDidNotUseDoesNotGrow() {
        var limit = ConcurrencyLimit(maximum: 4000, minimum: 500)
        // Few notifications at a time (a small push): nothing waited for a permit, so nothing says more would help.
        let changes = answers(5000, roundTrip: .milliseconds(50), limited: false, into: &limit)
        #expect(changes.isEmpty)
        #expect(limit.limit == 500)
    }

    @Test func neverBelowTheMinimumNorAboveTheMaximum() {
        var limit = ConcurrencyLimit(maximum: 600, minimum: 500)
        _ = answers(5000, roundTrip: .milliseconds(50), into: &limit)
        #expect(limit.limit == 600)
        _ = answers(2000, roundTrip: .seconds(2), into: &limit)
        #expect(limit.limit == 500)
    }

    @Test func aFixedLimitWhenTheMinimumIsTheMaximum() {
        var limit = ConcurrencyLimit(maximum: 25, minimum: 500)
        #expect(limit.minimum == 25)
        #expect(answers(1000, roundTrip: .milliseconds(50), into: &limit).isEmpty)
        #expect(answers(1000, roundTrip: .seconds(1), into: &limit).isEmpty)
        #expect(limit.limit == 25)
    }

    @Test mutating func theBaseFollowsAnAPNsThatGotSlowerForGood() {
        var limit = ConcurrencyLimit(maximum: 4000, minimum: 500)
        _ = answers(600, roundTrip: .milliseconds(5), into: &limit)
        #expect(limit.baseLatency == .milliseconds(5))
        // APNs moved 40 ms further away: queueing, as far as the limit can tell, for as long as the fast answers
        // count …
        _ = answers(3000, roundTrip: .milliseconds(45), into: &limit)
        #expect(limit.baseLatency == .milliseconds(5))
        #expect(limit.limit == 500)
        // … and once they are older than the base's memory, 45 ms is the new base and the limit can grow again.
        now += ConcurrencyLimit.baseMemory + .seconds(1)
        _ = answers(1000, roundTrip: .milliseconds(45), into: &limit)
        #expect(limit.baseLatency == .milliseconds(45))
        let before = limit.limit
        _ = answers(4 * before, roundTrip: .milliseconds(45), into: &limit)
        #expect(limit.limit > before)
    }

    /// The base is the lowest of the windows that closed within ``ConcurrencyLimit/baseMemory``, whatever order
    /// their lowest round trips came in: checked, after every window, against that minimum worked out by hand.
    @Test mutating func theBaseIsTheLowestOfTheWindowsStillRemembered() {
        // The minimum is the maximum, so every window has 32 answers; a window's lowest is its first answer.
        var limit = ConcurrencyLimit(maximum: 32, minimum: 32)
        var closed: [(at: ContinuousClock.Instant, lowest: Duration)] = []
        // Lowest round trips that rise, fall and repeat (a pseudo-random walk, the same every run), a window every
        // 0.7 s, so windows keep leaving the 10-second memory in between.
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<200 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let lowest = Duration.milliseconds(1 + Int(state >> 58))
            _ = answers(1, roundTrip: lowest, into: &limit)
            _ = answers(31, roundTrip: lowest * 3, into: &limit)
            closed.append((now, lowest))
            let remembered = closed.filter { $0.at >= now - ConcurrencyLimit.baseMemory }.map(\.lowest)
            #expect(limit.baseLatency == remembered.min())
            now += .milliseconds(700)
        }
    }
}

/// The permits follow the decision: more given out at once when it grows.
struct InFlightLimitFollowsTheDecisionTests {
    @Test func aGrowingLimitWakesTheWaiters() async throws {
        let permits = InFlightLimit(limit: 100, minimum: 40)
        for _ in 0..<40 { try await permits.acquire() }
        let waiter = Task { try await permits.acquire() }
        while permits.waiting < 1 { await Task.yield() }
        // A window of answers at a steady round trip, while every permit is out and one more is wanted.
        var changed: Int?
        for _ in 0..<32 where changed == nil {
            changed = permits.observe(roundTrip: .milliseconds(50))
        }
        #expect(changed == 80)
        _ = try await withTimeout(10, "the waiter to get a permit of the grown limit") { try await waiter.value }
        #expect(permits.inUse == 41)
    }

    @Test func aShrunkLimitGivesNoPermitUntilEnoughCameBack() async throws {
        let permits = InFlightLimit(limit: 100, minimum: 40)
        for _ in 0..<40 { try await permits.acquire() }
        for _ in 0..<32 { permits.observe(roundTrip: .milliseconds(50)) }
        #expect(permits.limit == 80)
        for _ in 0..<40 { try await permits.acquire() }
        // Queueing: down by a tenth, to 72, while 80 are out.
        for _ in 0..<40 { permits.observe(roundTrip: .milliseconds(500)) }
        #expect(permits.limit == 72)
        let waiter = Task { try await permits.acquire() }
        while permits.waiting < 1 { await Task.yield() }
        permits.release(8)
        #expect(permits.waiting == 1, "72 out of 72: no permit yet")
        permits.release(1)
        _ = try await withTimeout(10, "the waiter to get the permit") { try await waiter.value }
        #expect(permits.inUse == 72)
    }
}
