import DequeModule
import Synchronization

/// The node's notifications sent and not yet recorded, shared by every chunk it sends: `delivery.concurrency` of them
/// at most, and fewer while APNs answers fast enough that more would only queue (``ConcurrencyLimit`` moves the
/// limit from the round trips reported to ``observe(roundTrip:at:)``).
///
/// A chunk takes a permit before it hands a notification to an APNs client and gives it back only when the
/// notification's result is in the store (``ChunkLedger``), not when APNs answers. So whenever the process dies, at
/// most `limit` notifications were sent without a record of them, and a node that takes the chunks over sends at most
/// that many again. Permits go to waiters first come, first served, so chunks keep the order they were claimed in.
///
/// Nothing that holds a permit waits for another permit: a result is recorded whatever else is in flight, so every
/// permit comes back.
final class InFlightLimit: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var decision: ConcurrencyLimit
        var inUse = 0
        var waiters: Deque<Waiter> = []
        var nextID: UInt64 = 0

        var hasFreePermit: Bool { inUse < decision.limit && waiters.isEmpty }

        /// Hands freed permits to waiters, first come first served, while the limit allows.
        mutating func wake() -> [CheckedContinuation<Void, any Error>] {
            var woken: [CheckedContinuation<Void, any Error>] = []
            while inUse < decision.limit, let waiter = waiters.popFirst() {
                inUse += 1
                woken.append(waiter.continuation)
            }
            return woken
        }
    }

    private let state: Mutex<State>
    /// The limit, readable without the lock (the ledgers ask at every answer).
    private let currentLimit: Atomic<Int>

    /// - Parameters:
    ///   - limit: the most permits out at once.
    ///   - minimum: where the moving limit starts and the least it goes down to (at most `limit`); `limit` itself
    ///     for a fixed limit.
    /// Called (outside the lock) with each new limit.
    private let onChange: @Sendable (Int) -> Void

    init(limit: Int, minimum: Int? = nil, onChange: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.onChange = onChange
        let decision = ConcurrencyLimit(maximum: limit, minimum: minimum ?? limit)
        self.state = Mutex(State(decision: decision))
        self.currentLimit = Atomic(decision.limit)
    }

    /// Permits taken and not given back.
    var inUse: Int { state.withLock { $0.inUse } }

    /// How many permits may be out now.
    var limit: Int { currentLimit.load(ordering: .relaxed) }

    /// Tasks waiting for a permit.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a permit, waiting for one if none is free. Throws `CancellationError` if the task is cancelled first.
    func acquire() async throws {
        // Most of the time one is free: no suspension then.
        let taken = state.withLock { state -> Bool in
            guard state.hasFreePermit else { return false }
            state.inUse += 1
            return true
        }
        if taken { return }
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.hasFreePermit {
                        state.inUse += 1
                        return .success(())
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Takes between one and `wanted` permits: as many as are free, waiting (first come, first served, like
    /// ``acquire()``) only while none is. A batch hands that many notifications to its client together, under one
    /// lock each, rather than one at a time. - Returns: how many it took. Throws `CancellationError` if the task is
    /// cancelled while it waits.
    func acquire(upTo wanted: Int) async throws -> Int {
        precondition(wanted > 0, "at least one permit")
        let taken = takeFree(upTo: wanted)
        if taken > 0 { return taken }
        try await acquire()
        return 1 + (wanted > 1 ? takeFree(upTo: wanted - 1) : 0)
    }

    /// Up to `wanted` of the free permits, unless others wait for them.
    private func takeFree(upTo wanted: Int) -> Int {
        state.withLock { state in
            guard state.waiters.isEmpty else { return 0 }
            let taken = max(0, min(wanted, state.decision.limit - state.inUse))
            state.inUse += taken
            return taken
        }
    }

    /// Gives `count` permits back, waking as many waiters.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let woken = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.inUse -= count
            precondition(state.inUse >= 0, "more permits given back than taken")
            return state.wake()
        }
        for continuation in woken { continuation.resume() }
    }

    /// A notification's round trip, from its send to its answer, at `now`. It counts as held back by the limit when
    /// every permit is out or others wait for one as it comes.
    /// - Returns: the new limit, when this changed it.
    @discardableResult
    func observe(roundTrip: Duration, at now: ContinuousClock.Instant = .now) -> Int? {
        observe(roundTrips: CollectionOfOne(roundTrip), at: now)
    }

    /// A bunch of answers that came together at `now`, under one lock. - Returns: the new limit, when they changed it.
    @discardableResult
    func observe(roundTrips: some Collection<Duration>, at now: ContinuousClock.Instant = .now) -> Int? {
        let (changed, woken) = state.withLock { state -> (Int?, [CheckedContinuation<Void, any Error>]) in
            let limited = state.inUse >= state.decision.limit || !state.waiters.isEmpty
            var changed: Int?
            for roundTrip in roundTrips {
                if let limit = state.decision.record(.init(roundTrip: roundTrip, limited: limited), at: now) { changed = limit }
            }
            guard let changed else { return (nil, []) }
            currentLimit.store(changed, ordering: .relaxed)
            return (changed, state.wake())
        }
        for continuation in woken { continuation.resume() }
        if let changed { onChange(changed) }
        return changed
    }
}
