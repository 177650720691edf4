import DequeModule
import Synchronization

/// One APNs endpoint's ``EndpointWindow``, shared by the batches that send to it: a batch takes slots here before it
/// takes the node's permits, so a batch that waits for its endpoint holds none of them.
///
/// Waiters are served first come, first served, as their window frees up; when a timeout says the endpoint is
/// silent, those waiting are refused at once rather than left to wait.
final class EndpointGate: Sendable {
    private struct Waiter {
        var id: UInt64
        var wanted: Int
        /// Their topic.
        var topic: String
        /// The window's ``EndpointWindow/silences`` when it began to wait.
        var since: Int
        var continuation: CheckedContinuation<EndpointWindow.Admission, any Error>
    }

    private struct State {
        var window: EndpointWindow
        var waiters: Deque<Waiter> = []
        var nextID: UInt64 = 0

        /// Admits waiters in turn while the window lets them go (or refuses them).
        mutating func wake(at now: ContinuousClock.Instant) -> [(CheckedContinuation<EndpointWindow.Admission, any Error>, EndpointWindow.Admission)] {
            var woken: [(CheckedContinuation<EndpointWindow.Admission, any Error>, EndpointWindow.Admission)] = []
            while let first = waiters.first {
                // Waiters who came later began no earlier: none of them is refused while the first waits.
                let admission = window.admit(first.wanted, topic: first.topic, waitingSince: first.since, at: now)
                if admission == .wait { break }
                waiters.removeFirst()
                woken.append((first.continuation, admission))
            }
            return woken
        }
    }

    private let state: Mutex<State>
    /// Told (outside the lock) when the endpoint begins or stops answering nothing.
    private let onChange: @Sendable (EndpointWindow.Change) -> Void
    /// The time admissions are decided at (a probe of refused credentials waits for its interval).
    private let now: @Sendable () -> ContinuousClock.Instant

    init(
        initial: Int, maximum: Int, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        onChange: @escaping @Sendable (EndpointWindow.Change) -> Void = { _ in }
    ) {
        state = Mutex(State(window: EndpointWindow(initial: initial, maximum: maximum)))
        self.now = now
        self.onChange = onChange
    }

    /// The window as it stands (for tests and logs).
    var window: EndpointWindow { state.withLock { $0.window } }

    /// Batches waiting for the window.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Slots for up to `wanted` notifications: ``EndpointWindow/Admission/send(_:)`` or
    /// ``EndpointWindow/Admission/refuse(_:_:)``, waiting while the window is full (`onWaiting` is called first, only
    /// then). Throws `CancellationError` if the task is cancelled while it waits.
    func admit(_ wanted: Int, topic: String = "", onWaiting: () -> Void = {}) async throws -> EndpointWindow.Admission {
        let instant = now()
        let (atOnce, id, since) = state.withLock { state -> (EndpointWindow.Admission?, UInt64, Int) in
            if state.waiters.isEmpty {
                let admission = state.window.admit(wanted, topic: topic, at: instant)
                if admission != .wait { return (admission, 0, 0) }
            }
            defer { state.nextID += 1 }
            return (nil, state.nextID, state.window.silences)
        }
        if let atOnce { return atOnce }
        onWaiting()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<EndpointWindow.Admission, any Error>) in
                let woken = state.withLock { state -> [(CheckedContinuation<EndpointWindow.Admission, any Error>, EndpointWindow.Admission)]? in
                    if Task.isCancelled { return nil }
                    state.waiters.append(Waiter(id: id, wanted: wanted, topic: topic, since: since, continuation: continuation))
                    // The window may have freed up since it was found full.
                    return state.wake(at: now())
                }
                guard let woken else { return continuation.resume(throwing: CancellationError()) }
                for (waiter, admission) in woken { waiter.resume(returning: admission) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<EndpointWindow.Admission, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Notifications of `topic` admitted here ended at `now`.
    func record(_ endings: [EndpointWindow.Ending], topic: String = "", at now: ContinuousClock.Instant) {
        guard !endings.isEmpty else { return }
        let (change, woken) = state.withLock { state in
            let change = state.window.record(endings, topic: topic, at: now)
            return (change, state.wake(at: now))
        }
        if let change { onChange(change) }
        for (waiter, admission) in woken { waiter.resume(returning: admission) }
    }

    /// Gives back slots whose notifications did not go, or ended saying nothing of the endpoint (the client stopped
    /// before they were answered).
    func giveBack(_ count: Int) {
        guard count > 0 else { return }
        let woken = state.withLock { state in
            state.window.giveBack(count)
            return state.wake(at: now())
        }
        for (waiter, admission) in woken { waiter.resume(returning: admission) }
    }
}
