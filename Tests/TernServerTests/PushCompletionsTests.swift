import Synchronization
import TernTestSupport
import Testing

@testable import TernServer

/// The completions a node tells the requests that wait for a push (`?wait=`), on a manual clock.
struct PushCompletionsTests {
    @Test func aWaitingRequestReturnsWhenThePushCompletesNotAtItsTimeout() async throws {
        let clock = ManualClock()
        let completions = PushCompletions()
        let told = try await withTimeout(10, "the wait to return") {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { await completions.wait(for: "p1", upTo: .seconds(1), on: clock) }
                try await waitUntil("the request waits") { completions.waiting == 1 }
                completions.complete("p2")
                #expect(completions.waiting == 1, "another push's completion lets it wait on")
                completions.complete("p1")
                return try await group.next()!
            }
        }
        #expect(told)
        #expect(completions.waiting == 0)
        #expect(clock.now == .init(offset: .zero), "no time passed")
    }

    @Test func aRequestThatWaitsAfterThePushCompletedReturnsAtOnce() async throws {
        let completions = PushCompletions()
        completions.complete("p1")
        let told = try await withTimeout(10, "the wait to return") {
            await completions.wait(for: "p1", upTo: .seconds(60), on: ManualClock())
        }
        #expect(told)
    }

    @Test func withoutACompletionTheWaitEndsAtItsTimeout() async throws {
        let completions = PushCompletions()
        #expect(try await Self.waitUntilTimeout(for: "p1", upTo: .milliseconds(20), in: completions) == false)
        #expect(completions.waiting == 0, "the timed-out request is not kept")
    }

    @Test func aCancelledRequestStopsWaiting() async throws {
        let completions = PushCompletions()
        let waiting = Task { await completions.wait(for: "p1", upTo: .seconds(60), on: ManualClock()) }
        try await waitUntil("the request waits") { completions.waiting == 1 }
        waiting.cancel()
        let told = try await withTimeout(10, "the cancelled wait to return") { await waiting.value }
        #expect(!told)
        #expect(completions.waiting == 0)
    }

    @Test func onlyTheLatestCompletionsAreRemembered() async throws {
        let completions = PushCompletions()
        for index in 0...PushCompletions.rememberedCount { completions.complete("p\(index)") }
        // p0 is the oldest of 257 and forgotten: its wait runs to the timeout. The newest returns at once.
        #expect(try await withTimeout(10, "the wait to return") { await completions.wait(for: "p\(PushCompletions.rememberedCount)", upTo: .seconds(1), on: ManualClock()) })
        #expect(try await Self.waitUntilTimeout(for: "p0", upTo: .seconds(1), in: completions) == false)
    }

    /// Waits for `pushID` on a fresh manual clock, moved by `timeout` once the wait sleeps. - Returns: what the wait
    /// returned.
    private static func waitUntilTimeout(for pushID: String, upTo timeout: Duration, in completions: PushCompletions) async throws -> Bool {
        let clock = ManualClock()
        return try await withTimeout(10, "the wait to return") {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { await completions.wait(for: pushID, upTo: timeout, on: clock) }
                await clock.waitUntilSleeping(until: .init(offset: timeout))
                clock.advance(by: timeout)
                return try await group.next()!
            }
        }
    }
}
