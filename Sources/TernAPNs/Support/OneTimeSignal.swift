import Synchronization

/// Fires once; those who wait are let go when it fires, or when their task is cancelled.
public final class OneTimeSignal: Sendable {
    private let state = Mutex<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    /// Read without the lock by ``wait()``'s fast path, once the signal has fired.
    private let fired = Atomic(false)

    public init() {}

    public var hasFired: Bool { fired.load(ordering: .acquiring) }

    public func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.fired = true
            fired.store(true, ordering: .releasing)
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the signal has fired, or when the task is cancelled (whichever comes first; the caller checks
    /// ``hasFired`` or `Task.isCancelled` if it matters which).
    public func wait() async {
        if hasFired { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.fired || Task.isCancelled { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            // Waiters are not told apart: each cancelled wait lets every waiter go, and those whose task is not
            // cancelled find the signal unfired. Its users wait once, at start.
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}
