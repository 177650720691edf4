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

    @Test func aBunchTakesWhatIsFreeAndWaitsOnlyWhenNothingIs() async throws {
        let limit = InFlightLimit(limit: 5)
        #expect(try await limit.acquire(upTo: 3) == 3)
        #expect(try await limit.acquire(upTo: 10) == 2, "only two were free")
        #expect(limit.inUse == 5)
        let bunch = Task { try await limit.acquire(upTo: 4) }
        while limit.waiting < 1 { await Task.yield() }
        // Three come back: the waiting bunch takes all three, not only the one it waited for.
        limit.release(3)
        #expect(try await bunch.value == 3)
        #expect(limit.inUse == 5)
    }

    @Test func aBunchDoesNotJumpTheQueue() async throws {
        let limit = InFlightLimit(limit: 2)
        try await limit.acquire()
        try await limit.acquire()
        let first = Task { try await limit.acquire() }
        while limit.waiting < 1 { await Task.yield() }
        limit.release(2)
        try await first.value
        // The waiter came first: it had its permit, and the bunch gets the one left.
        #expect(try await limit.acquire(upTo: 2) == 1)
        #expect(limit.inUse == 2)
    }
}
