import Synchronization

/// Lets pages into their admission (inbox, badges, places in line) one at a time, in the order their places were
/// reserved. The dispatcher reserves a push's first place when it starts the push, oldest push first, so pushes
/// sent in quick succession to one device are counted and queued in the order they were made, however their
/// tasks get scheduled.
final class AdmissionQueue: Sendable {
    private struct State {
        var nextPlace: UInt64 = 0
        /// Reserved places, in order; the first one's holder may go.
        var places: [UInt64] = []
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var busy = false
    }

    private let state = Mutex(State())

    init() {}

    /// Takes the next place in the queue.
    func reserve() -> UInt64 {
        state.withLock { state in
            defer { state.nextPlace += 1 }
            state.places.append(state.nextPlace)
            return state.nextPlace
        }
    }

    /// Waits for the place's turn, runs `body`, and lets the next place in. Every reserved place must come here
    /// (or to ``give(up:)``), or the queue stops. Cancelled while it waits, it gives the place up and throws
    /// `CancellationError`.
    func admit<T>(_ place: UInt64, _ body: () async throws -> T) async throws -> T {
        let admitted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let goesNow = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if !state.busy, state.places.first == place {
                        state.busy = true
                        return true
                    }
                    state.waiters[place] = continuation
                    return nil
                }
                if let goesNow { continuation.resume(returning: goesNow) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: place) }
            waiter?.resume(returning: false)
        }
        guard admitted else {
            give(up: place)
            throw CancellationError()
        }
        defer { leave(place) }
        return try await body()
    }

    /// Reserves a place and waits its turn: for a push's later pages.
    func admit<T>(_ body: () async throws -> T) async throws -> T {
        try await admit(reserve(), body)
    }

    /// Places waiting for their turn (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Gives up a reserved place without using it.
    func give(up place: UInt64) {
        leave(place, holding: false)
    }

    private func leave(_ place: UInt64, holding: Bool = true) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.places.removeAll { $0 == place }
            if holding { state.busy = false }
            guard !state.busy, let first = state.places.first, let waiter = state.waiters.removeValue(forKey: first) else { return nil }
            state.busy = true
            return waiter
        }
        next?.resume(returning: true)
    }
}
