import Foundation
import Synchronization
import TernAPNs

/// A `Clock` that moves only when a test says so, and a wall clock (``wall``) that moves with it: code that waits
/// on this clock and dates what it does with ``wall`` sees one time, which the test drives with ``advance(by:)``
/// instead of sleeping.
///
/// A sleep suspends until an advance reaches its deadline (or its task is cancelled: it then throws
/// `CancellationError`, as `Task.sleep` does). An advance that comes before the code under test got to its sleep
/// does not wake it, since its deadline counts from the time it starts sleeping: ``waitUntilSleeping(until:label:)``
/// waits for that moment, so a test advances only once the code waits. Several pieces of code that sleep on one clock
/// can sleep until the same instant (two loops of a second each): each sleeps on a ``labeled(_:)`` view of the clock,
/// and the test waits for the one it means by its label.
///
/// (swift-clocks' `TestClock` would do, but the copy on this machine needs a newer toolchain and a package that is
/// not here; this is the part of it the tests need.)
public final class ManualClock: Clock {
    /// A point on the clock: the time since it was made.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "+\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var label: String?
        var continuation: CheckedContinuation<Void, any Error>
    }

    /// A test waiting for some task to sleep until `deadline` (with `label`, if it gives one).
    private struct Watcher {
        var deadline: Instant
        var label: String?
        var continuation: CheckedContinuation<Void, Never>

        func matches(_ sleeper: Sleeper) -> Bool { sleeper.deadline == deadline && (label == nil || label == sleeper.label) }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Int: Sleeper] = [:]
        var watchers: [Int: Watcher] = [:]

        mutating func makeID() -> Int {
            nextID += 1
            return nextID
        }

        /// The watchers that `sleeper` lets go.
        mutating func takeWatchers(for sleeper: Sleeper) -> [CheckedContinuation<Void, Never>] {
            let matching = watchers.filter { $0.value.matches(sleeper) }
            for id in matching.keys { watchers[id] = nil }
            return matching.values.map(\.continuation)
        }
    }

    private let state = Mutex(State())
    /// Wall-clock time that moves with this clock (for the code's `any WallClock`).
    public let wall: ManualWallClock

    /// - Parameter wallStart: where ``wall`` starts; the present by default, so dates the code compares with the
    ///   system's (a simulator's timestamps, tokens minted by the test) stay close.
    public init(wallStart: Date = Date()) {
        wall = ManualWallClock(wallStart)
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The deadlines of the tasks sleeping now, soonest first.
    public var sleepers: [Instant] { state.withLock { $0.sleepers.values.map(\.deadline) }.sorted() }

    /// How many ``waitUntilSleeping(until:label:)`` calls are waiting now (none of them matched a sleeper yet).
    public var watching: Int { state.withLock { $0.watchers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await sleep(until: deadline, label: nil)
    }

    /// This clock, with each sleep on it named `label` for ``waitUntilSleeping(until:label:)``.
    public func labeled(_ label: String) -> Labeled { Labeled(clock: self, label: label) }

    /// A view of a ``ManualClock`` whose sleeps carry a label: the same time, the same advances.
    public struct Labeled: Clock {
        public let clock: ManualClock
        public let label: String

        public var now: Instant { clock.now }
        public var minimumResolution: Duration { .zero }

        public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
            try await clock.sleep(until: deadline, label: label)
        }
    }

    private func sleep(until deadline: Instant, label: String?) async throws {
        let id = state.withLock { $0.makeID() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (early, watchers) = state.withLock { state -> (Result<Void, any Error>?, [CheckedContinuation<Void, Never>]) in
                    // A task cancelled before it got here finds no sleeper to cancel: it checks for itself.
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    if deadline <= state.now { return (.success(()), []) }
                    let sleeper = Sleeper(deadline: deadline, label: label, continuation: continuation)
                    state.sleepers[id] = sleeper
                    return (nil, state.takeWatchers(for: sleeper))
                }
                if let early { continuation.resume(with: early) }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves this clock and ``wall`` forward by `duration`, and wakes every sleep whose deadline it reaches, soonest
    /// first. What they do once awake runs after this returns: wait for its effect.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a manual clock only moves forward")
        // The wall clock first, so a task woken below dates its work at the new time.
        let (seconds, attoseconds) = duration.components
        wall.advance(by: TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18)
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once some task sleeps until `deadline` (at once, if one does): the code under test got to that wait,
    /// so an advance from here on reaches it. With `label`, only a sleep on ``labeled(_:)`` with that label counts.
    /// Returns early if the waiting task is cancelled.
    public func waitUntilSleeping(until deadline: Instant, label: String? = nil) async {
        let id = state.withLock { $0.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    let watcher = Watcher(deadline: deadline, label: label, continuation: continuation)
                    if Task.isCancelled || state.sleepers.values.contains(where: watcher.matches) { return true }
                    state.watchers[id] = watcher
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { $0.watchers.removeValue(forKey: id) }
            watcher?.continuation.resume()
        }
    }
}
