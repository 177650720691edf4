import Synchronization

/// Wakes a worker that sleeps between polls: `ring()` from anywhere, `wait(upTo:)` in the worker. A ring while
/// nobody waits is kept for the next wait.
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    init() {}

    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next ring (or at once if one is pending), after `timeout` on `clock`, or when the task is
    /// cancelled.
    func wait(upTo timeout: Duration, on clock: any Clock<Duration> = ContinuousClock()) async {
        await firstOf({ await self.waitForRing() }, orTimeout: timeout, on: clock, timedOut: ())
    }

    /// Returns at the next ring (or at once if one is pending), or when the task is cancelled.
    func wait() async {
        await waitForRing()
    }

    private func waitForRing() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.rung || Task.isCancelled {
                        state.rung = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
