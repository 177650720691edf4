import DequeModule
import Synchronization

/// The node's notifications sent and not yet recorded, shared by every chunk it sends: `delivery.concurrency` of them
/// at most.
///
/// A chunk takes a permit before it hands a notification to an APNs client and gives it back only when the
/// notification's result is in the store (``ChunkLedger``), not when APNs answers. So whenever the process dies, at
/// most `limit` notifications were sent without a record of them, and a node that takes the chunks over sends at most
/// that many again. Permits go to waiters first come, first served, so chunks keep the order they were claimed in.
///
/// Nothing that holds a permit waits for another permit: a result is recorded whatever else is in flight, so every
/// permit comes back.
final class InFlightLimit: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var available: Int
        var waiters: Deque<Waiter> = []
        var nextID: UInt64 = 0
    }

    let limit: Int
    private let state: Mutex<State>

    init(limit: Int) {
        self.limit = max(1, limit)
        self.state = Mutex(State(available: max(1, limit)))
    }

    /// Permits taken and not given back.
    var inUse: Int { state.withLock { limit - $0.available } }

    /// Tasks waiting for a permit.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a permit, waiting for one if none is free. Throws `CancellationError` if the task is cancelled first.
    func acquire() async throws {
        // Most of the time one is free: no suspension then.
        let taken = state.withLock { state -> Bool in
            guard state.available > 0, state.waiters.isEmpty else { return false }
            state.available -= 1
            return true
        }
        if taken { return }
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.available > 0, state.waiters.isEmpty {
                        state.available -= 1
                        return .success(())
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Gives `count` permits back, waking as many waiters.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let woken = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.available += count
            precondition(state.available <= limit, "more permits given back than taken")
            var woken: [CheckedContinuation<Void, any Error>] = []
            while state.available > 0, let waiter = state.waiters.popFirst() {
                state.available -= 1
                woken.append(waiter.continuation)
            }
            return woken
        }
        for continuation in woken { continuation.resume() }
    }
}
