import Synchronization

/// Fires once; those who wait are let go when it fires, or when their own task is cancelled.
public final class OneTimeSignal: Sendable {
    private struct Waiting {
        var continuations: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextID = 0
        /// Waits cancelled before they were added.
        var cancelled: Set<Int> = []
    }

    private let waiting = Mutex(Waiting())
    /// Set under the lock, so a wait that finds it unset is let go by ``fire()``; read without the lock by
    /// ``wait()``'s fast path.
    private let fired = Atomic(false)

    public init() {}

    public var hasFired: Bool { fired.load(ordering: .acquiring) }

    /// Waits under way (for tests).
    var waiters: Int { waiting.withLock { $0.continuations.count } }

    public func fire() {
        let continuations = waiting.withLock { waiting in
            fired.store(true, ordering: .releasing)
            defer { waiting.continuations = [:] }
            return waiting.continuations.values
        }
        for continuation in continuations { continuation.resume() }
    }

    /// Returns once the signal has fired, or when the task is cancelled (whichever comes first; the caller checks
    /// ``hasFired`` or `Task.isCancelled` if it matters which).
    public func wait() async {
        if hasFired { return }
        let id = waiting.withLock { waiting in
            defer { waiting.nextID += 1 }
            return waiting.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = waiting.withLock { waiting -> Bool in
                    if hasFired || waiting.cancelled.remove(id) != nil { return true }
                    waiting.continuations[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let continuation = waiting.withLock { waiting in
                guard let continuation = waiting.continuations.removeValue(forKey: id) else {
                    if !hasFired { waiting.cancelled.insert(id) }
                    return nil as CheckedContinuation<Void, Never>?
                }
                return continuation
            }
            continuation?.resume()
        }
    }
}
