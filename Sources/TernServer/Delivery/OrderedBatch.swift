import Synchronization
import TernAPNs
import TernAPNsClient

/// One notification of a batch, with its place in its token's line (nil when ordering is off).
struct QueuedNotification: Sendable {
    var notification: APNsNotification
    var ticket: DeliveryOrder.Ticket?
}

/// How one notification of a batch ended.
enum BatchOutcome: Sendable {
    /// APNs answered, or the client gave up with a classified error.
    case sent(Result<APNsDelivery, APNsClientError>)
    /// A newer badge-only update for the token replaced it.
    case superseded
    /// The batch ended before it could go (the client stopped taking work).
    case notSent
}

/// Sends a batch through one APNs client with at most `concurrency` in flight. Notifications whose token is free go
/// at once; the others join the batch as their turn comes. Every notification ends in `onResult` exactly once, and
/// every ticket's turn is handed on, so no token's line ever stalls.
enum OrderedBatch {
    static func send(
        _ batch: [QueuedNotification], client: any NotificationSender, order: DeliveryOrder, concurrency: Int,
        onResult: @escaping @Sendable (APNsNotification, BatchOutcome) async -> Void
    ) async {
        guard !batch.isEmpty else { return }
        let (stream, input) = AsyncStream.makeStream(of: APNsNotification.self)
        let progress = BatchProgress(count: batch.count)
        var waiting: [QueuedNotification] = []
        for item in batch {
            if let ticket = item.ticket, !ticket.goesNow {
                waiting.append(item)
            } else {
                progress.yielded(item, into: input)
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await client.sendAll(stream, concurrency: concurrency) { result in
                        let ticket = progress.answered(result.notification.deviceToken.hex)
                        await onResult(result.notification, .sent(result.result))
                        if ticket != nil { order.finish(result.notification.deviceToken.hex) }
                    }
                } catch {
                    // Cancelled: what was not answered is handed on below.
                }
                input.finish()
            }
            for item in waiting {
                guard let ticket = item.ticket else { continue }
                group.addTask {
                    switch await order.turn(ticket) {
                    case .go:
                        progress.yielded(item, into: input)
                    case .superseded:
                        progress.skipped(into: input)
                        await onResult(item.notification, .superseded)
                    }
                }
            }
        }
        // Yielded but never answered (the client stopped early): their turn passes on.
        for item in progress.unanswered() {
            await onResult(item.notification, .notSent)
            if item.ticket != nil { order.finish(item.notification.deviceToken.hex) }
        }
    }
}

/// What a batch has handed to the client and what came back.
private final class BatchProgress: Sendable {
    private struct State {
        var remaining: Int
        /// Handed to the client, not answered yet, by token.
        var outstanding: [String: QueuedNotification] = [:]
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(remaining: count))
    }

    func yielded(_ item: QueuedNotification, into input: AsyncStream<APNsNotification>.Continuation) {
        let finish = state.withLock { state -> Bool in
            state.outstanding[item.notification.deviceToken.hex] = item
            state.remaining -= 1
            return state.remaining == 0
        }
        input.yield(item.notification)
        if finish { input.finish() }
    }

    func skipped(into input: AsyncStream<APNsNotification>.Continuation) {
        let finish = state.withLock { state -> Bool in
            state.remaining -= 1
            return state.remaining == 0
        }
        if finish { input.finish() }
    }

    /// - Returns: the answered notification's ticket, if it had one.
    func answered(_ token: String) -> DeliveryOrder.Ticket? {
        state.withLock { $0.outstanding.removeValue(forKey: token)?.ticket }
    }

    func unanswered() -> [QueuedNotification] {
        state.withLock { state in
            defer { state.outstanding = [:] }
            return Array(state.outstanding.values)
        }
    }
}
