import Foundation

/// A value behind a lock, for the few places that must be reached from synchronous code (an iterator's
/// cancellation handler, a callback from Apple's frameworks). `Mutex` from the Synchronization module would do, but
/// it needs iOS 18 and macOS 15; TernKit supports iOS 15 and macOS 12.
///
/// `@unchecked Sendable`: every access to `value` goes through `lock`, and `withLock` never lets the value escape by
/// reference.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Wakes one waiting task: the loop that keeps the online channel is told that something changed (the app came to
/// the foreground, a registration finished, a wake push arrived) instead of polling. A ring while nobody waits is
/// kept, so it cannot be lost between a check and the wait.
final class Bell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

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

    /// Returns when rung (at once if it was rung since the last wait), after `timeout` if one is given, or when the
    /// task is cancelled. One task waits at a time, and it looks again at whatever it waits for after any return.
    func wait(upTo timeout: Duration? = nil) async {
        guard let timeout else { return await waitForRing() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// A back-off: returns at `deadline`, or earlier only once `ended` says that what the wait is for changed (or the
    /// task is cancelled). A ring alone does not end it: a ring kept from before the wait began, or one for something
    /// else the owner of the bell follows, only makes it look at `ended` again. (``wait(upTo:)`` returns for any
    /// ring, which is right for a loop that looks at everything again, and wrong for a wait a server asked for.)
    func wait(until deadline: ContinuousClock.Instant, unless ended: @Sendable () -> Bool = { false }) async {
        while !Task.isCancelled, !ended() {
            let left = deadline - .now
            guard left > .zero else { return }
            await wait(upTo: left)
        }
    }

    private func waitForRing() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    if Task.isCancelled { return true }
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
