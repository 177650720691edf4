import Synchronization
import Testing
import TernTestSupport


/// A value that changes from event-loop callbacks, and that a test can wait on until it satisfies a condition:
/// no polling, no sleeping.
final class Observed<Value: Sendable>: Sendable {
    private struct Waiter {
        let id: Int
        let predicate: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Value, any Error>
    }

    private struct Inner {
        var value: Value
        var waiters: [Waiter] = []
        var nextID = 0
    }

    private let inner: Mutex<Inner>

    init(_ value: Value) {
        inner = Mutex(Inner(value: value))
    }

    var value: Value { inner.withLock { $0.value } }

    func update(_ body: (inout Value) -> Void) {
        let ready = inner.withLock { state -> [(CheckedContinuation<Value, any Error>, Value)] in
            body(&state.value)
            var ready: [(CheckedContinuation<Value, any Error>, Value)] = []
            let value = state.value
            state.waiters.removeAll { waiter in
                guard waiter.predicate(value) else { return false }
                ready.append((waiter.continuation, value))
                return true
            }
            return ready
        }
        for (continuation, value) in ready { continuation.resume(returning: value) }
    }

    /// Waits until `predicate` holds (returns at once if it already does). Throws `CancellationError` if cancelled.
    func wait(until predicate: @escaping @Sendable (Value) -> Bool) async throws -> Value {
        let id = inner.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let immediate = inner.withLock { state -> Result<Value, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if predicate(state.value) { return .success(state.value) }
                    state.waiters.append(Waiter(id: id, predicate: predicate, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter = inner.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// ``wait(until:)`` under a timeout.
    func wait(
        _ what: String, timeout seconds: Double = 10, until predicate: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value {
        try await withTimeout(seconds, what) { try await self.wait(until: predicate) }
    }
}
