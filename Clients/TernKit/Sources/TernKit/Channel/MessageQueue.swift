import Foundation

/// The messages received and not yet taken by the app: a bounded buffer between the channel (and the APNs path) and
/// the app's `for await message in tern.messages` loop.
///
/// The policy when it is full: the channel waits for room before it reads the next frame (``waitForRoom(epoch:)``), so
/// nothing is dropped; a message that came through APNs is not queued (``offer(_:)`` says so) and comes again over
/// the channel, since nothing acknowledged it. The channel may append one frame while the APNs path filled the last
/// place, so it holds at most `capacity + 1`.
final class MessageQueue: Sendable {
    private struct State {
        var items: [TernMessage] = []
        var takers: [(id: UInt64, continuation: CheckedContinuation<TernMessage?, Never>)] = []
        var roomWaiter: CheckedContinuation<Bool, Never>?
        var nextTaker: UInt64 = 0
        /// Bumped by ``interrupt()``: a wait for room made for an older epoch (a connection since closed) ends.
        var epoch: UInt64 = 0
    }

    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { state.withLock { $0.items.count } }

    func contains(id: String) -> Bool {
        state.withLock { $0.items.contains { $0.id == id } }
    }

    /// Queues `message` if there is room (or hands it to a waiting taker). - Returns: false if it is full.
    @discardableResult
    func offer(_ message: TernMessage) -> Bool {
        enqueue(message, force: false)
    }

    /// Queues `message` whatever the count (the channel, after ``waitForRoom(epoch:)``).
    func append(_ message: TernMessage) {
        _ = enqueue(message, force: true)
    }

    private func enqueue(_ message: TernMessage, force: Bool) -> Bool {
        let taker = state.withLock { state -> CheckedContinuation<TernMessage?, Never>?? in
            if !state.takers.isEmpty { return state.takers.removeFirst().continuation }
            guard force || state.items.count < capacity else { return .none }
            state.items.append(message)
            return .some(nil)
        }
        switch taker {
        case .none: return false
        case .some(nil): return true
        case .some(let continuation?):
            continuation.resume(returning: message)
            return true
        }
    }

    /// Takes `id` out of the buffer if it waits there: the app has the message another way (the user opened its
    /// notification), so it must not be handed to `messages` as well. Its place is free for the channel again.
    /// - Returns: whether it was there.
    @discardableResult
    func remove(id: String) -> Bool {
        let id = id.lowercased()
        let (removed, room) = state.withLock { state -> (Bool, CheckedContinuation<Bool, Never>?) in
            guard let index = state.items.firstIndex(where: { $0.id.lowercased() == id }) else { return (false, nil) }
            state.items.remove(at: index)
            let room = state.items.count < capacity ? state.roomWaiter : nil
            if room != nil { state.roomWaiter = nil }
            return (true, room)
        }
        room?.resume(returning: true)
        return removed
    }

    /// The current epoch: take it before a connection opens, and wait for room with it.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Returns true once there is room, false if ``interrupt()`` was called since `epoch` was taken (before or
    /// during the wait) or the task was cancelled.
    func waitForRoom(epoch: UInt64) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if state.epoch != epoch { return false }
                    if state.items.count < capacity { return true }
                    if Task.isCancelled { return false }
                    state.roomWaiter?.resume(returning: false)
                    state.roomWaiter = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            interrupt()
        }
    }

    /// Ends the waits for room of the current epoch, now and to come, with false (the connection is closing).
    func interrupt() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.epoch += 1
            defer { state.roomWaiter = nil }
            return state.roomWaiter
        }
        waiter?.resume(returning: false)
    }

    /// The oldest message, waiting for one if there is none. - Returns: nil if the task was cancelled.
    func take() async -> TernMessage? {
        let id = state.withLock { state -> UInt64 in
            state.nextTaker += 1
            return state.nextTaker
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TernMessage?, Never>) in
                let (now, room) = state.withLock { state -> (TernMessage??, CheckedContinuation<Bool, Never>?) in
                    if !state.items.isEmpty {
                        let message = state.items.removeFirst()
                        // One place is free now: the channel may read on.
                        let room = state.items.count < capacity ? state.roomWaiter : nil
                        if room != nil { state.roomWaiter = nil }
                        return (.some(message), room)
                    }
                    if Task.isCancelled { return (.some(nil), nil) }
                    state.takers.append((id, continuation))
                    return (.none, nil)
                }
                room?.resume(returning: true)
                if case .some(let message) = now { continuation.resume(returning: message) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<TernMessage?, Never>? in
                guard let index = state.takers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.takers.remove(at: index).continuation
            }
            waiting?.resume(returning: nil)
        }
    }
}

/// The app's stream of messages (``Tern/messages``): each message received, over the channel or through APNs, once.
/// Taking a message is what acknowledges it to the server: a message TernKit holds and the app never took is sent
/// again on the next connection (or falls back to APNs). Iterate it from one place: each message goes to one
/// iterator. The loop ends when its task is cancelled.
public struct TernMessages: AsyncSequence, Sendable {
    public typealias Element = TernMessage

    let queue: MessageQueue
    let handed: @Sendable (TernMessage) async -> Void

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let queue: MessageQueue
        let handed: @Sendable (TernMessage) async -> Void

        public mutating func next() async -> TernMessage? {
            guard let message = await queue.take() else { return nil }
            await handed(message)
            return message
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(queue: queue, handed: handed)
    }
}
