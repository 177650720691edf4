import TernTestSupport
import Testing

/// The shared test helpers' own decisions, where a wrong one would pass or fail other tests for the wrong reason.
@Suite struct TestSupportTests {
    /// Work that keeps moving is waited for past `stalledFor`; it ends when the work is done.
    @Test func aWaitOnMovingWorkOutlastsTheStallLimit() async throws {
        let start = ContinuousClock.now
        var step = 0
        // A second without a step would fail it (the suites run 32 at a time on two cores: a short limit could be
        // a pause of the machine's); it lasts one and a half.
        try await waitUntil("the steps", stalledFor: 1, within: 30, every: .milliseconds(10)) {
            step += 1
            return (ContinuousClock.now - start > .milliseconds(1_500), step)
        }
        #expect(ContinuousClock.now - start > .milliseconds(1_500))
    }

    /// Work whose place does not change fails after `stalledFor`, saying so, long before `within`.
    @Test func aWaitOnWorkThatStoppedMovingFailsAfterTheStallLimit() async throws {
        let start = ContinuousClock.now
        let error = await #expect(throws: TimeoutError.self) {
            try await waitUntil("the stuck work", stalledFor: 0.2, within: 30, every: .milliseconds(10)) { (false, 7) }
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(error?.description == "timed out after 0.2 s waiting for the stuck work, with no change in that time")
    }

    /// Work that moves for ever and never ends still fails at `within`.
    @Test func aWaitOnWorkThatNeverEndsFailsAtItsLimit() async throws {
        var step = 0
        let error = await #expect(throws: TimeoutError.self) {
            try await waitUntil("the endless work", stalledFor: 5, within: 0.3, every: .milliseconds(10)) {
                step += 1
                return (false, step)
            }
        }
        #expect(error?.description == "timed out after 0.3 s waiting for the endless work")
    }
}
