import CTernHeap
import Logging
import ServiceLifecycle

/// Gives back to the system the memory that the C library's allocator keeps free after a burst of work.
///
/// A burst (thousands of devices reconnecting at once, a large push) frees most of what it allocated, but glibc's
/// malloc keeps the freed pages in its per-thread arenas, between the objects that stay. Measured with 10,000 idle
/// device connections just after they connected: 28 KiB of RSS per connection, 15 KiB once `malloc_trim` had run
/// (docs/benchmarks.md, "The online channel on NIO handlers"). So every ``interval``, if the allocator holds more
/// than ``threshold`` free, the pages are returned. Not more often: `malloc_trim` walks every arena under its lock,
/// a few milliseconds for a heap of a few hundred MiB, while other threads wait to allocate.
struct HeapTrimmer: Service {
    /// The allocator's side: how much it holds free, and the call that returns it.
    struct Heap: Sendable {
        var freeBytes: @Sendable () -> Int
        var trim: @Sendable () -> Void

        /// glibc's malloc (elsewhere, nothing to do: it reports 0 free).
        static let system = Heap(freeBytes: { Int(tern_heap_free_bytes()) }, trim: { _ = tern_heap_trim() })
    }

    var interval: Duration = .seconds(10)
    /// Free memory below this is left to the allocator, which reuses it soon anyway.
    var threshold = 32 << 20
    var heap = Heap.system
    let timer: any Clock<Duration>
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while true {
                do { try await timer.sleep(for: interval) } catch { return }
                let free = heap.freeBytes()
                guard free > threshold else { continue }
                let start = ContinuousClock.now
                heap.trim()
                logger.debug(
                    "returned the allocator's free memory to the system",
                    metadata: ["free": "\(free >> 20) MiB", "took": "\(ContinuousClock.now - start)"])
            }
        }
    }
}
