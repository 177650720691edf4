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
    /// The batch ended before it could go (the client stopped taking work, or the batch was cancelled);
    /// `tookPermit` if it had taken a permit of the batch's ``InFlightLimit``.
    case notSent(tookPermit: Bool)

    /// Whether the notification took a permit, in a batch sent with an ``InFlightLimit``.
    var tookPermit: Bool {
        switch self {
        case .sent: true
        case .superseded: false
        case .notSent(let tookPermit): tookPermit
        }
    }
}

/// Sends a batch through one APNs client with at most `concurrency` in flight. Notifications whose token is free go
/// at once; the others join the batch as their turn comes. Every notification ends in `onResult` exactly once, and
/// every ticket's turn is handed on, so no token's line ever stalls.
///
/// With `permits`, each notification takes one of the node's permits before it goes (``InFlightLimit``); the caller
/// gives it back once the result is recorded (``BatchOutcome/sent(_:)`` and ``BatchOutcome/notSent(tookPermit:)``
/// say whether one was taken).
enum OrderedBatch {
    static func send(
        _ batch: [QueuedNotification], client: any NotificationSender, order: DeliveryOrder, concurrency: Int,
        permits: InFlightLimit? = nil, onResult: @escaping @Sendable (APNsNotification, BatchOutcome) async -> Void
    ) async {
        guard !batch.isEmpty else { return }
        let (stream, input) = AsyncStream.makeStream(of: APNsNotification.self)
        let progress = BatchProgress(count: batch.count)
        var free: [QueuedNotification] = []
        var waiting: [QueuedNotification] = []
        for item in batch {
            if let ticket = item.ticket, !ticket.goesNow {
                waiting.append(item)
            } else {
                free.append(item)
            }
        }
        /// An item that will not go: its result, and its token's turn passes on.
        @Sendable func drop(_ item: QueuedNotification, tookPermit: Bool) async {
            await onResult(item.notification, .notSent(tookPermit: tookPermit))
            if item.ticket != nil { order.finish(item.notification.deviceToken.hex) }
        }
        /// Hands the item to the client once it has a permit. Cancelled while it waits, or after the client stopped
        /// taking work, it does not go.
        @Sendable func go(_ item: QueuedNotification) async {
            if let permits {
                do {
                    try await permits.acquire()
                } catch {
                    progress.skipped(into: input)
                    return await drop(item, tookPermit: false)
                }
            }
            guard progress.yielded(item, into: input) else {
                permits?.release(1)
                return await drop(item, tookPermit: false)
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await client.sendAll(stream, concurrency: concurrency) { result in
                        let sent = progress.answered(result.notification.deviceToken.hex)
                        // The round trip moves the node's limit (``ConcurrencyLimit``); an answer that is the
                        // client's own error (a timeout, a connection that failed) says nothing about APNs' speed.
                        if let sent, let permits, case .success = result.result {
                            let now = ContinuousClock.now
                            permits.observe(roundTrip: sent.at.duration(to: now), at: now)
                        }
                        await onResult(result.notification, .sent(result.result))
                        if sent?.item.ticket != nil { order.finish(result.notification.deviceToken.hex) }
                    }
                } catch {
                    // Cancelled: what was not answered is handed on below.
                }
                input.finish()
                // Handed over but never answered (the client stopped early), at once: they hold permits that the
                // items still to go may be waiting for.
                for item in progress.close() { await drop(item, tookPermit: permits != nil) }
            }
            group.addTask { [free] in
                for item in free { await go(item) }
            }
            for item in waiting {
                guard let ticket = item.ticket else { continue }
                group.addTask {
                    switch await order.turn(ticket) {
                    case .go:
                        await go(item)
                    case .superseded:
                        progress.skipped(into: input)
                        await onResult(item.notification, .superseded)
                    case .cancelled:
                        // Out of its line already: no turn to hand on.
                        progress.skipped(into: input)
                        await onResult(item.notification, .notSent(tookPermit: false))
                    }
                }
            }
        }
    }
}

/// What a batch has handed to the client and what came back.
private final class BatchProgress: Sendable {
    /// A notification handed to the client, and when.
    struct Sent: Sendable {
        var item: QueuedNotification
        var at: ContinuousClock.Instant
    }

    private struct State {
        var remaining: Int
        /// Handed to the client, not answered yet, by token.
        var outstanding: [String: Sent] = [:]
        /// The client stopped taking work.
        var closed = false
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(remaining: count))
    }

    /// Hands the item to the client. - Returns: false if the client stopped taking work (the item did not go).
    func yielded(_ item: QueuedNotification, into input: AsyncStream<APNsNotification>.Continuation) -> Bool {
        let now = ContinuousClock.now
        let (taken, finish) = state.withLock { state -> (Bool, Bool) in
            state.remaining -= 1
            guard !state.closed else { return (false, false) }
            state.outstanding[item.notification.deviceToken.hex] = Sent(item: item, at: now)
            return (true, state.remaining == 0)
        }
        if taken { input.yield(item.notification) }
        if finish { input.finish() }
        return taken
    }

    func skipped(into input: AsyncStream<APNsNotification>.Continuation) {
        let finish = state.withLock { state -> Bool in
            state.remaining -= 1
            return state.remaining == 0
        }
        if finish { input.finish() }
    }

    /// - Returns: the answered notification, as it was handed over.
    func answered(_ token: String) -> Sent? {
        state.withLock { $0.outstanding.removeValue(forKey: token) }
    }

    /// The client takes no more: what it was handed and did not answer.
    func close() -> [QueuedNotification] {
        state.withLock { state in
            state.closed = true
            defer { state.outstanding = [:] }
            return state.outstanding.values.map(\.item)
        }
    }
}
