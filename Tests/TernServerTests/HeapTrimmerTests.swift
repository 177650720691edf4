import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TernTestSupport
import Testing

@testable import TernServer

/// The heap trimmer on a manual clock, with a stand-in for the allocator.
struct HeapTrimmerTests {
    @Test func itReturnsFreeMemoryOncePerIntervalAndOnlyAboveTheThreshold() async throws {
        let clock = ManualClock()
        let free = Mutex(10 << 20)
        let trims = Mutex(0)
        let heap = HeapTrimmer.Heap(
            freeBytes: { free.withLock { $0 } },
            trim: {
                trims.withLock { $0 += 1 }
                free.withLock { $0 = 1 << 20 }
            })
        let trimmer = HeapTrimmer(interval: .seconds(10), threshold: 32 << 20, heap: heap, timer: clock, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await trimmer.run() }
            // Under the threshold: looked at, left alone.
            for tick in 1...2 {
                try await withTimeout(10, "the trimmer to wait") { await clock.waitUntilSleeping(until: .init(offset: .seconds(10 * tick))) }
                clock.advance(by: .seconds(10))
            }
            try await withTimeout(10, "the trimmer to wait") { await clock.waitUntilSleeping(until: .init(offset: .seconds(30))) }
            #expect(trims.withLock { $0 } == 0)
            // A burst left 200 MiB free: given back at the next turn, once.
            free.withLock { $0 = 200 << 20 }
            clock.advance(by: .seconds(10))
            try await withTimeout(10, "the trimmer to wait") { await clock.waitUntilSleeping(until: .init(offset: .seconds(40))) }
            #expect(trims.withLock { $0 } == 1)
            clock.advance(by: .seconds(10))
            try await withTimeout(10, "the trimmer to wait") { await clock.waitUntilSleeping(until: .init(offset: .seconds(50))) }
            #expect(trims.withLock { $0 } == 1)
            group.cancelAll()
        }
    }

    #if os(Linux)
    @Test func glibcsFreeMemoryIsRead() {
        // Every other block of 100 MiB freed: glibc keeps those holes (they are not at the top of the heap, which it
        // returns by itself), and says so. Free memory is read after the blocks are taken: taking them first uses up
        // what was free before (the other suites' leftovers, about 41 MiB in a CI run), which would hide the holes. The
        // 50 MiB of holes leave room for the other suites' allocations while this one frees.
        let heap = HeapTrimmer.Heap.system
        let blocks = (0..<100_000).map { _ in malloc(1024) }
        let before = heap.freeBytes()
        for index in stride(from: 0, to: blocks.count, by: 2) { free(blocks[index]) }
        let after = heap.freeBytes()
        #expect(after - before >= 10 << 20, "free before \(before), after \(after)")
        // The rest freed, and all of it given back, so the suites after this one do not run beside 100 MiB it left.
        for index in stride(from: 1, to: blocks.count, by: 2) { free(blocks[index]) }
        heap.trim()
    }
    #endif
}
