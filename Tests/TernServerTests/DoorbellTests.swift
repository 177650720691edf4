import TernTestSupport
import Testing

@testable import TernServer

/// The doorbell the dispatcher and the chunk recorders sleep on between polls, and the race of an event against a
/// timeout under it (``firstOf(_:orTimeout:on:timedOut:)``), on a manual clock.
struct DoorbellTests {
    @Test func aRingWhileNobodyWaitsIsKeptForTheNextWait() async throws {
        let doorbell = Doorbell()
        let clock = ManualClock()
        doorbell.ring()
        try await withTimeout(10, "the wait to return") { await doorbell.wait(upTo: .seconds(60), on: clock) }
        #expect(clock.now == .init(offset: .zero), "no time passed")
    }

    @Test func aWaitReturnsAtTheRingNotAtItsTimeout() async throws {
        let doorbell = Doorbell()
        let clock = ManualClock()
        // Once the wait sleeps on the clock, only the ring can end it before the clock moves.
        try await Self.wait(on: doorbell, upTo: .seconds(60), clock: clock) { doorbell.ring() }
        #expect(clock.now == .init(offset: .zero), "no time passed")
        #expect(clock.sleepers.isEmpty, "the timeout's sleep was cancelled")
    }

    @Test func withoutARingTheWaitEndsAtItsTimeout() async throws {
        let doorbell = Doorbell()
        let clock = ManualClock()
        try await Self.wait(on: doorbell, upTo: .milliseconds(250), clock: clock) { clock.advance(by: .milliseconds(250)) }
        // The ring after the timed-out wait is kept for the next one, not lost with the cancelled waiter.
        doorbell.ring()
        try await withTimeout(10, "the next wait to return") { await doorbell.wait(upTo: .seconds(60), on: clock) }
        #expect(clock.now == .init(offset: .milliseconds(250)))
    }

    @Test func aCancelledWaitReturnsAtOnce() async throws {
        let doorbell = Doorbell()
        let clock = ManualClock()
        let waiting = Task { await doorbell.wait(upTo: .seconds(60), on: clock) }
        await clock.waitUntilSleeping(until: .init(offset: .seconds(60)))
        waiting.cancel()
        try await withTimeout(10, "the cancelled wait to return") { await waiting.value }
        #expect(clock.now == .init(offset: .zero))
    }

    @Test func theEventsValueWinsOverTheTimeoutsAndTheOtherWayRound() async throws {
        let clock = ManualClock()
        let answered = try await withTimeout(10, "the race to end") {
            await firstOf({ 7 }, orTimeout: .seconds(1), on: clock, timedOut: 0)
        }
        #expect(answered == 7)
        let timedOut = try await withTimeout(10, "the race to end") {
            await withTaskGroup(of: Int.self) { group in
                group.addTask {
                    await firstOf({ await Doorbell().wait(); return 7 }, orTimeout: .seconds(1), on: clock, timedOut: 0)
                }
                await clock.waitUntilSleeping(until: .init(offset: .seconds(1)))
                clock.advance(by: .seconds(1))
                return await group.next()!
            }
        }
        #expect(timedOut == 0, "the event never came: the timeout's value")
    }

    /// Waits on `doorbell` for up to `timeout`, and once the wait sleeps on `clock`, does `then` (which must end it).
    private static func wait(on doorbell: Doorbell, upTo timeout: Duration, clock: ManualClock, then: @escaping @Sendable () -> Void) async throws {
        try await withTimeout(10, "the wait to return") {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await doorbell.wait(upTo: timeout, on: clock) }
                await clock.waitUntilSleeping(until: .init(offset: timeout))
                then()
                await group.next()
            }
        }
    }
}
