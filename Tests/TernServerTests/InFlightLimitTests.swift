import Testing

@testable import TernServer

/// The node-wide bound on notifications sent and not recorded.
struct InFlightLimitTests {
    @Test func permitsGoToWaitersInTheOrderTheyCame() async throws {
        let limit = InFlightLimit(limit: 2)
        try await limit.acquire()
        try await limit.acquire()
        #expect(limit.inUse == 2)
        let (order, input) = AsyncStream.makeStream(of: Int.self)
        var woken = order.makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for waiter in 0..<3 {
                group.addTask {
                    try await limit.acquire()
                    input.yield(waiter)
                }
                // Each waiter queues before the next starts.
                while limit.waiting < waiter + 1 { await Task.yield() }
            }
            // One permit at a time: each goes to the longest waiting.
            for expected in 0..<3 {
                limit.release(1)
                #expect(await woken.next() == expected)
                #expect(limit.inUse == 2)
            }
            try await group.waitForAll()
        }
        #expect(limit.waiting == 0)
    }

    @Test func aCancelledWaiterGivesUpItsPlaceAndTakesNoPermit() async throws {
        let limit = InFlightLimit(limit: 1)
        try await limit.acquire()
        let waiter = Task { try await limit.acquire() }
        while limit.waiting < 1 { await Task.yield() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(limit.waiting == 0)
        limit.release(1)
        #expect(limit.inUse == 0, "the cancelled waiter did not take the permit given back")
    }
}
