import Synchronization

/// Calls that write, queued while a group of them is being written and then written together, in arrival order.
///
/// On SQLite every statement is a hand-off to the database's thread and back, and on PostgreSQL a round trip, costing
/// far more than the rows it writes: written one call at a time, a burst of small writes (registrations, devices'
/// reports of a broadcast) waits on those. Here the first caller starts a writer task (on ``WriterExecutor``) that
/// writes what is queued, then what queued meanwhile, until nothing is left, so a group takes a fixed number of
/// statements whatever its size. A cancelled caller's write is made all the same.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    private struct Waiting {
        let item: Item
        let continuation: CheckedContinuation<Output, any Error>
    }

    private struct Queue {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let queue = Mutex(Queue())

    /// Queues `item`; the writer answers it with its result. - Parameter write: writes a group, in order, and gives
    /// each item's result in that order (the writer uses the one its starter gave: every caller gives the same).
    func submit(_ item: Item, write: @escaping @Sendable ([Item]) async -> [Result<Output, any Error>]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let startWriter = queue.withLock { queue -> Bool in
                queue.waiting.append(Waiting(item: item, continuation: continuation))
                guard !queue.writing else { return false }
                queue.writing = true
                return true
            }
            // Unstructured on purpose: the writer outlives the call that started it, answering the calls queued
            // behind it, and ends when the queue is empty.
            if startWriter { Task(executorPreference: WriterExecutor.shared) { await self.drain(write) } }
        }
    }

    /// Writes what is queued, then what queued meanwhile, until the queue is empty.
    private func drain(_ write: @Sendable ([Item]) async -> [Result<Output, any Error>]) async {
        while true {
            let queued = queue.withLock { queue -> [Waiting] in
                let taken = queue.waiting
                queue.waiting.removeAll(keepingCapacity: true)
                if taken.isEmpty { queue.writing = false }
                return taken
            }
            guard !queued.isEmpty else { return }
            let results = await write(queued.map(\.item))
            precondition(results.count == queued.count, "a group's writer answers every item")
            for (waiting, result) in zip(queued, results) { waiting.continuation.resume(with: result) }
        }
    }
}
