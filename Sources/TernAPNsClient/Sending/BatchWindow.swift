import Synchronization

/// The sends of one `sendAll` between being started and having their result handed to the caller.
///
/// Sends complete on the connections' event loops and leave their result here; the caller's task takes results in
/// bunches, so it is woken about once per `wakeBatch` results rather than once per send. `outstanding` counts sends
/// started and not yet handed back: the caller keeps it under the batch's concurrency, which bounds both the sends
/// in flight and the results waiting.
final class BatchWindow: Sendable {
    private struct State {
        var outstanding = 0
        var results: [APNsBatchResult] = []
        var waiter: CheckedContinuation<[APNsBatchResult], Never>?
        var operations: [Int: SendOperation] = [:]
        var cancelled = false
    }

    private let state = Mutex(State())
    private let wakeBatch: Int

    init(concurrency: Int) {
        wakeBatch = max(1, min(64, concurrency / 16))
    }

    /// Sends started and not yet handed back.
    var outstanding: Int { state.withLock { $0.outstanding } }

    /// Registers a send about to start, and returns any results ready meanwhile. After ``cancelAll()`` the send is
    /// cancelled at once.
    func add(_ operation: SendOperation) -> [APNsBatchResult] {
        let (ready, cancelled) = state.withLock { state -> ([APNsBatchResult], Bool) in
            state.outstanding += 1
            state.operations[operation.id] = operation
            guard !state.results.isEmpty else { return ([], state.cancelled) }
            defer { state.results = [] }
            state.outstanding -= state.results.count
            return (state.results, state.cancelled)
        }
        if cancelled { operation.cancel() }
        return ready
    }

    /// A send's result; wakes the caller once enough are ready (or every outstanding one is).
    func complete(_ operationID: Int, _ result: APNsBatchResult) {
        let wake = state.withLock { state -> (CheckedContinuation<[APNsBatchResult], Never>, [APNsBatchResult])? in
            state.operations.removeValue(forKey: operationID)
            state.results.append(result)
            guard let waiter = state.waiter, state.results.count >= min(wakeBatch, state.outstanding) else { return nil }
            state.waiter = nil
            defer { state.results = [] }
            state.outstanding -= state.results.count
            return (waiter, state.results)
        }
        if let (waiter, results) = wake { waiter.resume(returning: results) }
    }

    /// Waits for results: a bunch of them, or all that are outstanding. Returns `[]` when nothing is outstanding.
    func next() async -> [APNsBatchResult] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [APNsBatchResult]? in
                guard state.outstanding > 0, state.results.count < min(wakeBatch, state.outstanding) else {
                    defer { state.results = [] }
                    state.outstanding -= state.results.count
                    return state.results
                }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Cancels every send still running and every one added later.
    func cancelAll() {
        let operations = state.withLock { state -> [SendOperation] in
            state.cancelled = true
            return Array(state.operations.values)
        }
        for operation in operations { operation.cancel() }
    }
}
