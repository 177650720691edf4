import Foundation

/// Holds opened notifications (``OpenHolder``) until something takes them: the app's `for await` over
/// ``Tern/openedNotifications``, or the route handler given to ``Tern/ready(_:)``.
final class OpenRouter: Sendable {
    private struct State {
        var holder: OpenHolder
        var takers: [(id: UInt64, continuation: CheckedContinuation<OpenedNotification?, Never>)] = []
        var nextTaker: UInt64 = 0
    }

    private let state: Locked<State>

    init(holder: OpenHolder = OpenHolder()) {
        state = Locked(State(holder: holder))
    }

    /// - Returns: false if it is a second report of an open already taken or held.
    func opened(_ notification: OpenedNotification) -> Bool {
        let (new, handOver) = state.withLock { state -> (Bool, (CheckedContinuation<OpenedNotification?, Never>, OpenedNotification)?) in
            guard state.holder.opened(notification) else { return (false, nil) }
            guard !state.takers.isEmpty, let next = state.holder.take() else { return (true, nil) }
            return (true, (state.takers.removeFirst().continuation, next))
        }
        if let (taker, next) = handOver { taker.resume(returning: next) }
        return new
    }

    var held: [OpenedNotification] { state.withLock { $0.holder.held } }

    /// The next open, waiting until there is one. - Returns: nil if the task was cancelled.
    func next() async -> OpenedNotification? {
        let id = state.withLock { state -> UInt64 in
            state.nextTaker += 1
            return state.nextTaker
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<OpenedNotification?, Never>) in
                let now = state.withLock { state -> OpenedNotification?? in
                    if let next = state.holder.take() { return .some(next) }
                    if Task.isCancelled { return .some(nil) }
                    state.takers.append((id, continuation))
                    return .none
                }
                if case .some(let next) = now { continuation.resume(returning: next) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<OpenedNotification?, Never>? in
                guard let index = state.takers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.takers.remove(at: index).continuation
            }
            waiting?.resume(returning: nil)
        }
    }
}

/// The notifications the user opened, each once, from the first `next()` on: iterating is how the app says its UI is
/// ready to route (seed 004 #7). In SwiftUI, in the root view:
///
/// ```swift
/// .task { for await opened in tern.openedNotifications { router.show(opened) } }
/// ```
///
/// The one that launched the app is held until then, however long the app takes to get there. Each open goes to one
/// iterator; the loop ends when its task is cancelled.
public struct OpenedNotifications: AsyncSequence, Sendable {
    public typealias Element = OpenedNotification
    let router: OpenRouter

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let router: OpenRouter

        public mutating func next() async -> OpenedNotification? {
            await router.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(router: router)
    }
}
