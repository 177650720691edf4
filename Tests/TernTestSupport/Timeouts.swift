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
/// timeout, so it must react to cancellation.
public func withTimeout<T: Sendable>(
    _ seconds: Double = 10, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimeoutError(what: what, seconds: seconds)
        }
        defer { group.cancelAll() }
        return try await group.next()!
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
