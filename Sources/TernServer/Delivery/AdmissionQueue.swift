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
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
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
    /// (or to ``give(up:)``), or the queue stops.
    func admit<T>(_ place: UInt64, _ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { continuation in
            let goesNow = state.withLock { state -> Bool in
                if !state.busy, state.places.first == place {
                    state.busy = true
                    return true
                }
                state.waiters[place] = continuation
                return false
            }
            if goesNow { continuation.resume() }
        }
        defer { leave(place) }
        return try await body()
    }

    /// Reserves a place and waits its turn: for a push's later pages.
    func admit<T>(_ body: () async throws -> T) async rethrows -> T {
        try await admit(reserve(), body)
    }

    /// Gives up a reserved place without using it.
    func give(up place: UInt64) {
        leave(place, holding: false)
    }

    private func leave(_ place: UInt64, holding: Bool = true) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.places.removeAll { $0 == place }
            if holding { state.busy = false }
            guard !state.busy, let first = state.places.first, let waiter = state.waiters.removeValue(forKey: first) else { return nil }
            state.busy = true
            return waiter
        }
        next?.resume()
    }
}
