import Synchronization

/// The sends of one `sendAll` between being started and having their result handed to the caller.
///
/// Two tasks share it. The *feeder* reads the caller's sequence and starts sends, waiting for a slot
/// (``waitForSlot()``) while `concurrency` are outstanding. Sends complete on the connections' event loops and leave
/// their result here. The *drainer* takes results in bunches (``next()``), so it is woken about once per `wakeBatch`
/// results rather than once per send, hands them to the caller and says so (``handedBack(_:)``). `outstanding`
/// counts sends started and not yet handed back, which bounds the sends in flight and the results waiting together.
///
/// Results never wait for the feeder: a caller that feeds the sequence only after it has seen earlier results (it
/// gives back a permit when a result is recorded, say) gets them while the feeder waits for input.
final class BatchWindow: Sendable {
    private struct State {
        var outstanding = 0
        var results: [APNsBatchResult] = []
        /// Taken by the drainer and not yet handed back.
        var inHand = 0
        var drainer: CheckedContinuation<[APNsBatchResult], Never>?
        var feeder: CheckedContinuation<Void, Never>?
        var operations: [Int: SendOperation] = [:]
        var cancelled = false
        /// The feeder will start no more sends.
        var inputFinished = false
    }

    private let state = Mutex(State())
    private let limit: Int
    private let wakeBatch: Int

    init(concurrency: Int) {
        limit = max(1, concurrency)
        wakeBatch = max(1, min(64, concurrency / 16))
    }

    /// Sends started and not yet handed back.
    var outstanding: Int { state.withLock { $0.outstanding } }

    /// Waits until fewer than `concurrency` sends are outstanding, or the window is cancelled.
    func waitForSlot() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                guard state.outstanding >= limit, !state.cancelled else { return true }
                state.feeder = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Registers a send about to start. After ``cancelAll()`` the send is cancelled at once.
    func add(_ operation: SendOperation) {
        let cancelled = state.withLock { state -> Bool in
            state.outstanding += 1
            state.operations[operation.id] = operation
            return state.cancelled
        }
        if cancelled { operation.cancel() }
    }

    /// A send's result; wakes the drainer once enough are ready (or every outstanding one is).
    func complete(_ operationID: Int, _ result: APNsBatchResult) {
        let wake = state.withLock { state -> (CheckedContinuation<[APNsBatchResult], Never>, [APNsBatchResult])? in
            state.operations.removeValue(forKey: operationID)
            state.results.append(result)
            guard let drainer = state.drainer, state.results.count >= min(wakeBatch, state.outstanding - state.inHand) else { return nil }
            state.drainer = nil
            return (drainer, Self.take(&state))
        }
        if let (drainer, results) = wake { drainer.resume(returning: results) }
    }

    /// The drainer handed `count` results to the caller: their slots are free.
    func handedBack(_ count: Int) {
        let feeder = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.outstanding -= count
            state.inHand -= count
            guard state.outstanding < limit else { return nil }
            defer { state.feeder = nil }
            return state.feeder
        }
        feeder?.resume()
    }

    /// The feeder starts no more sends: the drainer ends once every outstanding result is handed back.
    func finishInput() {
        let drainer = state.withLock { state -> CheckedContinuation<[APNsBatchResult], Never>? in
            state.inputFinished = true
            guard state.outstanding == 0, let drainer = state.drainer else { return nil }
            state.drainer = nil
            return drainer
        }
        drainer?.resume(returning: [])
    }

    /// Waits for results: a bunch of them, or all that are outstanding. Returns `[]` once the input is finished and
    /// every result handed back.
    func next() async -> [APNsBatchResult] {
        await withCheckedContinuation { (continuation: CheckedContinuation<[APNsBatchResult], Never>) in
            let ready = state.withLock { state -> [APNsBatchResult]? in
                let enough = !state.results.isEmpty && state.results.count >= min(wakeBatch, state.outstanding - state.inHand)
                guard enough || (state.outstanding == 0 && state.inputFinished) else {
                    state.drainer = continuation
                    return nil
                }
                return Self.take(&state)
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Cancels every send still running and every one added later, and lets a waiting feeder go.
    func cancelAll() {
        let (operations, feeder) = state.withLock { state -> ([SendOperation], CheckedContinuation<Void, Never>?) in
            state.cancelled = true
            defer { state.feeder = nil }
            return (Array(state.operations.values), state.feeder)
        }
        for operation in operations { operation.cancel() }
        feeder?.resume()
    }

    private static func take(_ state: inout State) -> [APNsBatchResult] {
        defer { state.results = [] }
        state.inHand += state.results.count
        return state.results
    }
}
