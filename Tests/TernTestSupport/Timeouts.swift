import Synchronization

/// An operation that did not finish in time. Thrown (so the test fails with this text) instead of hanging.
public struct TimeoutError: Error, CustomStringConvertible {
    public let what: String
    public let seconds: Double

    public init(what: String, seconds: Double) {
        self.what = what
        self.seconds = seconds
    }

    public var description: String { "timed out after \(seconds) s waiting for \(what)" }
}

/// Runs `operation`, failing with ``TimeoutError`` if it takes longer than `seconds`. The operation is cancelled on
/// timeout; one that ignores cancellation (awaiting another task's value, say) is left behind rather than waited
/// for, so a test that would hang fails instead. That is why it runs in a task of its own, not a child task.
public func withTimeout<T: Sendable>(
    _ seconds: Double = 10, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = Race<T>()
    let work = Task { () -> Void in
        do {
            race.finish(.success(try await operation()))
        } catch {
            race.finish(.failure(error))
        }
    }
    let timer = Task {
        try? await Task.sleep(for: .seconds(seconds))
        guard !Task.isCancelled else { return }
        if race.finish(.failure(TimeoutError(what: what, seconds: seconds))) { work.cancel() }
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { race.start($0) }
    } onCancel: {
        work.cancel()
    }
}

/// Whichever of an operation and its timer finishes first resumes the caller; the other is ignored.
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var result: Result<T, any Error>?
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLock { state -> Result<T, any Error>? in
            if let result = state.result { return result }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// - Returns: whether this result is the one the caller gets.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (won, continuation) = state.withLock { state -> (Bool, CheckedContinuation<T, any Error>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.continuation = nil }
            return (true, state.continuation)
        }
        continuation?.resume(with: result)
        return won
    }
}

/// Asks `condition` every `interval` until it holds, failing with ``TimeoutError`` after `seconds`.
///
/// The one polling helper, for state that another process or the network owns (a server's counts, a simulator's
/// arrival log), where there is no event to await. It proves that something happens, never that something does
/// not: for that, wait for the event that would come instead, or advance a manual clock.
public func waitUntil(
    _ what: String, within seconds: Double = 10, every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimeoutError(what: what, seconds: seconds) }
        try await Task.sleep(for: interval)
    }
}

/// ``waitUntil(_:within:every:_:)`` for long work whose speed is the machine's (a push to 100,000 devices by
/// debug-built processes on two shared cores): `check` says whether it is done and where it is, and the wait fails
/// when that place has not changed for `stalledFor` seconds, or after `seconds` in all. So a slow machine passes and a
/// stuck one fails in a minute, not at a deadline tuned to one machine's speed.
public func waitUntil<Place: Equatable>(
    _ what: String, stalledFor: Double, within seconds: Double, every interval: Duration = .milliseconds(20),
    _ check: () async throws -> (done: Bool, place: Place)
) async throws {
    let start = ContinuousClock.now
    var (done, place) = try await check()
    var moved = start
    while !done {
        let now = ContinuousClock.now
        guard now - moved < .seconds(stalledFor) else {
            throw TimeoutError(what: "\(what), with no change in that time", seconds: stalledFor)
        }
        guard now - start < .seconds(seconds) else { throw TimeoutError(what: what, seconds: seconds) }
        try await Task.sleep(for: interval)
        let previous = place
        (done, place) = try await check()
        if place != previous { moved = ContinuousClock.now }
    }
}
