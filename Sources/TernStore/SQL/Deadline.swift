import Synchronization

/// Runs `body`, failing with ``StoreError/unavailable(_:)`` if it has not finished after `timeout`, and with
/// `CancellationError` at once if the caller is cancelled. A call past its deadline (or cancelled) is cancelled and
/// left to finish on its own: postgres-nio (1.33) can leave a query waiting for ever when the server goes away
/// mid-call, and whoever waits for it would wait with it. That is why `body` runs in a task of its own rather than a
/// child task: a task group would wait for it.
///
/// `cutoff`, if given, ends the call early the same way, with the error it is cut with.
func withDeadline<T: Sendable>(
    _ timeout: Duration, cutoff: CallCutoff? = nil, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let call = Deadline<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            guard call.start(continuation) else { return }
            cutoff?.arm { error in call.finish(.failure(error)) }
            let work = Task {
                do {
                    call.finish(.success(try await body()))
                } catch {
                    call.finish(.failure(error))
                }
            }
            call.work = work
            call.timer = Task {
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                call.finish(.failure(StoreError.unavailable("the database did not answer within \(timeout)")))
            }
        }
    } onCancel: {
        call.finish(.failure(CancellationError()))
    }
}

/// Ends a call from outside before its deadline, as the deadline would (the pool it runs on was retired): its caller
/// is answered with the error at once, and its work is cancelled. A cut that comes before the call is armed ends it as
/// soon as it is.
final class CallCutoff: Sendable {
    private struct State {
        var end: (@Sendable (StoreError) -> Void)?
        var error: StoreError?
    }

    private let state = Mutex(State())

    init() {}

    func arm(_ end: @escaping @Sendable (StoreError) -> Void) {
        let error = state.withLock { state -> StoreError? in
            if state.error == nil { state.end = end }
            return state.error
        }
        if let error { end(error) }
    }

    func cut(_ error: StoreError) {
        let end = state.withLock { state -> (@Sendable (StoreError) -> Void)? in
            guard state.error == nil else { return nil }
            state.error = error
            defer { state.end = nil }
            return state.end
        }
        end?(error)
    }
}

/// One call against its deadline and its caller's cancellation: whichever finishes first resumes the caller, and the
/// others are cancelled.
private final class Deadline<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        /// Set once the caller is resumed; a cancellation that came before the continuation resumes it at once.
        var outcome: Result<T, any Error>?
        var timer: Task<Void, Never>?
        var work: Task<Void, Never>?
    }

    private let state = Mutex(State())

    /// Keeps the caller's continuation. - Returns: false if the call is over already (cancelled before it started),
    /// in which case the continuation was resumed with that outcome.
    func start(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        let outcome = state.withLock { state -> Result<T, any Error>? in
            if state.outcome == nil { state.continuation = continuation }
            return state.outcome
        }
        guard let outcome else { return true }
        continuation.resume(with: outcome)
        return false
    }

    /// The timer, cancelled when the call finishes first.
    var timer: Task<Void, Never>? {
        get { state.withLock { $0.timer } }
        set { keep(newValue, at: \.timer) }
    }

    /// The task running the body, cancelled when the deadline or the caller's cancellation comes first.
    var work: Task<Void, Never>? {
        get { state.withLock { $0.work } }
        set { keep(newValue, at: \.work) }
    }

    private func keep(_ task: Task<Void, Never>?, at path: WritableKeyPath<State, Task<Void, Never>?>) {
        let finished = state.withLock { state -> Bool in
            state[keyPath: path] = task
            return state.outcome != nil
        }
        if finished { task?.cancel() }
    }

    /// Resumes the caller with `result`, and cancels the timer and the body, unless the call is over already.
    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard state.outcome == nil else { return (nil, []) }
            state.outcome = result
            defer { state.continuation = nil }
            return (state.continuation, [state.timer, state.work].compactMap { $0 })
        }
        for task in tasks { task.cancel() }
        continuation?.resume(with: result)
    }
}
