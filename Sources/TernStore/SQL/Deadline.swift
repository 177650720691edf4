import Synchronization

/// Runs `body`, failing with ``StoreError/unavailable(_:)`` if it has not finished after `timeout`. A call past its
/// deadline is cancelled and left to finish on its own: postgres-nio (1.33) can leave a query waiting for ever when
/// the server goes away mid-call, and whoever waits for it would wait with it. That is why `body` runs in a task of
/// its own rather than a child task: a task group would wait for it.
func withDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let call = Deadline<T>()
    return try await withCheckedThrowingContinuation { continuation in
        call.start(continuation)
        let work = Task {
            do {
                call.finish(.success(try await body()))
            } catch {
                call.finish(.failure(error))
            }
        }
        call.timer = Task {
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            if call.finish(.failure(StoreError.unavailable("the database did not answer within \(timeout)"))) { work.cancel() }
        }
    }
}

/// One call against its deadline: whichever finishes first resumes the caller.
private final class Deadline<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var timer: Task<Void, Never>?
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// The timer, cancelled when the call finishes first.
    var timer: Task<Void, Never>? {
        get { state.withLock { $0.timer } }
        set {
            let finished = state.withLock { state -> Bool in
                state.timer = newValue
                return state.continuation == nil
            }
            if finished { newValue?.cancel() }
        }
    }

    /// Resumes the caller with `result` unless it was resumed already. - Returns: whether it did.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (continuation, timer) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.timer)
        }
        guard let continuation else { return false }
        timer?.cancel()
        continuation.resume(with: result)
        return true
    }
}
