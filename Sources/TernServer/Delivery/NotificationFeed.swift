import DequeModule
import Synchronization
import TernAPNs

/// What one batch hands its APNs client: the notifications in the order they were handed over, read one at a time
/// by the client and added a bunch at a time by the batch (``OrderedBatch``).
///
/// An `AsyncStream` did this before. Its storage is generic and not specialized for the client's module, so every
/// read looked up its type metadata: about 4% of a fan-out's CPU, one notification at a time. This one is concrete
/// and takes a bunch under one lock. Like `AsyncStream`, a reader whose task is cancelled while it waits gets `nil`,
/// and the feed ends there (what is added later is dropped).
final class NotificationFeed: AsyncSequence, Sendable {
    typealias Element = APNsNotification

    private struct State {
        var buffer: Deque<APNsNotification> = []
        var finished = false
        /// The reader, waiting on an empty buffer.
        var reader: CheckedContinuation<APNsNotification?, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Adds notifications at the end; nothing once the feed is finished.
    func yield(contentsOf notifications: some Sequence<APNsNotification>) {
        let woken = state.withLock { state -> (CheckedContinuation<APNsNotification?, Never>, APNsNotification)? in
            guard !state.finished else { return nil }
            state.buffer.append(contentsOf: notifications)
            guard let reader = state.reader, let first = state.buffer.popFirst() else { return nil }
            state.reader = nil
            return (reader, first)
        }
        if let (reader, first) = woken { reader.resume(returning: first) }
    }

    /// No more notifications: the reader gets those already added, then `nil`.
    func finish() {
        let reader = state.withLock { state -> CheckedContinuation<APNsNotification?, Never>? in
            state.finished = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
    }

    /// The next notification, waiting for one if none is there; `nil` once the feed is finished and read, or when the
    /// reading task is cancelled while it waits.
    func next() async -> APNsNotification? {
        // Nearly always there is one: no continuation then.
        if let ready = state.withLock({ Self.take(&$0) }) { return ready }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<APNsNotification?, Never>) in
                let ready = state.withLock { state -> APNsNotification?? in
                    if let ready = Self.take(&state) { return ready }
                    if Task.isCancelled {
                        state.finished = true
                        return .some(nil)
                    }
                    state.reader = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let reader = state.withLock { state -> CheckedContinuation<APNsNotification?, Never>? in
                state.finished = true
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(returning: nil)
        }
    }

    /// The first buffered notification, `.some(nil)` at the end, `nil` when the reader has to wait.
    private static func take(_ state: inout State) -> APNsNotification?? {
        if let first = state.buffer.popFirst() { return .some(first) }
        return state.finished ? .some(nil) : nil
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let feed: NotificationFeed

        func next() async -> APNsNotification? { await feed.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(feed: self) }
}
