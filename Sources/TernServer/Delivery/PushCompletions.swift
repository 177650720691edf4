import Synchronization

/// Tells the requests that wait for a push (`POST …/pushes?wait=`) that this node completed it, so they need not ask
/// the store every few milliseconds.
///
/// Only this node's completions are told: a push another node completes is seen when the waiting request next reads
/// the store, so a request still reads it now and then (``PushesAPI``). The last ``rememberedCount`` completions are
/// kept, so a request that starts waiting just after its push completed returns at once.
final class PushCompletions: Sendable {
    static let rememberedCount = 256

    private struct Waiter {
        var pushID: String
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var nextWaiter = 0
        var waiters: [Int: Waiter] = [:]
        /// Completed pushes, oldest first, at most ``rememberedCount``; `recentSet` holds the same ids.
        var recent: [String] = []
        var recentSet: Set<String> = []
    }

    private let state = Mutex(State())

    init() {}

    /// This node recorded the push's last chunk: every request waiting for it returns.
    func complete(_ pushID: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.recentSet.insert(pushID).inserted {
                state.recent.append(pushID)
                if state.recent.count > Self.rememberedCount { state.recentSet.remove(state.recent.removeFirst()) }
            }
            let keys = state.waiters.filter { $0.value.pushID == pushID }.map(\.key)
            return keys.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waits until this node completes the push (at once if it did lately), `timeout` passes on `clock`, or the task
    /// is cancelled, whichever is first. - Returns: whether the push's completion was told.
    @discardableResult
    func wait(for pushID: String, upTo timeout: Duration, on clock: any Clock<Duration> = ContinuousClock()) async -> Bool {
        await firstOf({ await self.waitForCompletion(of: pushID) }, orTimeout: timeout, on: clock, timedOut: false)
    }

    /// How many requests wait now (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// - Returns: true when the completion was told, false when cancelled.
    private func waitForCompletion(of pushID: String) async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.recentSet.contains(pushID) || Task.isCancelled { return true }
                    state.waiters[id] = Waiter(pushID: pushID, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
        return state.withLock { $0.recentSet.contains(pushID) }
    }
}
