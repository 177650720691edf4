import Synchronization

/// A first-come, first-served lock for async code: callers wait their turn without blocking a thread.
///
/// A waiter cancelled before its turn leaves the queue with `CancellationError`; one cancelled after it got the
/// lock keeps it, and releases it as usual. Either way the queue moves on.
final class AsyncLock: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var isLocked = false
        var nextID: UInt64 = 0
        var waiters: [Waiter] = []
    }

    private let state = Mutex(State())

    /// Runs `body` holding the lock.
    func withLock<T>(_ body: () async throws -> T) async throws -> T {
        try await lock()
        defer { unlock() }
        return try await body()
    }

    private func lock() async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case acquired, cancelled, queued }
                let outcome = state.withLock { state -> Outcome in
                    // Checked under the lock: a cancellation handler that ran before this found nothing to remove.
                    if Task.isCancelled { return .cancelled }
                    if !state.isLocked {
                        state.isLocked = true
                        return .acquired
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return .queued
                }
                switch outcome {
                case .acquired: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .queued: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    private func unlock() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiters.isEmpty else {
                state.isLocked = false
                return nil
            }
            // The lock passes straight to the next waiter: it stays locked.
            return state.waiters.removeFirst()
        }
        next?.continuation.resume()
    }
}
