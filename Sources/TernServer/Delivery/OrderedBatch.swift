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
    /// Its endpoint's window refused it (``EndpointWindow``: the endpoint answers nothing, or refuses the app's
    /// credentials): it failed at once, unsent, holding no permit.
    case refused(EndpointWindow.Refusal)

    /// APNs accepted it: the usual answer, told without copying the delivery.
    var isAcceptedAnswer: Bool {
        if case .sent(.success(let delivery)) = self { delivery.response.isSuccess } else { false }
    }

    /// Whether the notification took a permit, in a batch sent with an ``InFlightLimit``.
    var tookPermit: Bool {
        switch self {
        case .sent: true
        case .superseded, .refused: false
        case .notSent(let tookPermit): tookPermit
        }
    }
}

/// Sends a batch through one APNs client with at most `concurrency` in flight. Notifications whose token is free go
/// at once; the others join the batch as their turn comes. Every notification ends in `onResults` exactly once, by
/// its place in `batch`, and every ticket's turn is handed on, so no token's line ever stalls.
///
/// Results come in bunches, as the client hands them over: one call, one lock on the batch's ``BatchFeed``, one on
/// the permits and one on the token lines per bunch, not per notification.
///
/// With `permits`, each notification takes one of the node's permits before it goes (``InFlightLimit``); the caller
/// gives it back once the result is recorded (``BatchOutcome/sent(_:)`` and ``BatchOutcome/notSent(tookPermit:)``
/// say whether one was taken).
///
/// With `gate`, each notification first takes a slot of its endpoint's window (``EndpointGate``), before any permit,
/// and gives it back when it ends: while the window is full the batch waits holding no permit (`onWaiting` is told
/// when it begins and ends), and while the endpoint is silent its notifications fail at once
/// (``BatchOutcome/refused``).
enum OrderedBatch {
    /// What an answer says of its endpoint: that it answers, and whether it refused the app's credentials
    /// (``EndpointWindow/credentialsReasons``).
    static func ending(_ response: APNsResponse) -> EndpointWindow.Ending {
        guard !response.isSuccess, let reason = response.reason, EndpointWindow.credentialsReasons.contains(reason) else { return .answered }
        return .credentialsRefused(reason)
    }

    typealias Result = (item: Int, outcome: BatchOutcome)

    static func send(
        _ batch: [QueuedNotification], client: any NotificationSender, order: DeliveryOrder, concurrency: Int,
        permits: InFlightLimit? = nil, gate: EndpointGate? = nil, onWaiting: @escaping @Sendable (Bool) -> Void = { _ in },
        onResults: @escaping @Sendable ([Result]) async -> Void
    ) async {
        guard !batch.isEmpty else { return }
        // One push's notifications: one topic, which the endpoint's window keeps refusals of credentials by.
        let topic = batch[0].notification.metadata.topic ?? ""
        let input = NotificationFeed()
        let feed = SharedFeed(count: batch.count)
        var free: [Int] = []
        var waiting: [Int] = []
        // By index, reading the ticket in place: a copy of each queued notification would retain and release its
        // references (the token's, the payload's, the collapse id's) once more.
        for item in batch.indices {
            if let ticket = batch[item].ticket, !ticket.goesNow { waiting.append(item) } else { free.append(item) }
        }
        /// Items that will not go: their results, and their tokens' turns pass on.
        @Sendable func drop(_ items: [Int], tookPermit: Bool) async {
            guard !items.isEmpty else { return }
            await onResults(items.map { ($0, .notSent(tookPermit: tookPermit)) })
            order.finish(items.lazy.compactMap { batch[$0].ticket })
        }
        @Sendable func skip(_ count: Int = 1) {
            let ends = feed.state.withLock { feed in (0..<count).reduce(false) { ends, _ in feed.skip() || ends } }
            if ends { input.finish() }
        }
        /// Hands the items to the client, in their order, as many at a time as the endpoint's window and the permits
        /// let go (one lock on the window, the permits, the feed and the client's input per bunch, not per item).
        /// Cancelled while it waits for a slot or a permit, or after the client stopped taking work, the rest do not
        /// go.
        @Sendable func go(_ items: [Int]) async {
            var rest = items[...]
            while !rest.isEmpty {
                var granted = rest.count
                if let gate {
                    var waited = false
                    let admission: EndpointWindow.Admission
                    do {
                        admission = try await gate.admit(rest.count, topic: topic) {
                            waited = true
                            onWaiting(true)
                        }
                        if waited { onWaiting(false) }
                    } catch {
                        if waited { onWaiting(false) }
                        skip(rest.count)
                        return await drop(Array(rest), tookPermit: false)
                    }
                    switch admission {
                    case .send(let count):
                        granted = count
                    case .refuse(let count, let refusal):
                        let refused = Array(rest.prefix(count))
                        rest = rest.dropFirst(count)
                        skip(refused.count)
                        await onResults(refused.map { ($0, .refused(refusal)) })
                        order.finish(refused.lazy.compactMap { batch[$0].ticket })
                        continue
                    case .wait:
                        preconditionFailure("an endpoint's gate answers only once it sends or refuses")
                    }
                }
                if let permits {
                    do {
                        let taken = try await permits.acquire(upTo: granted)
                        gate?.giveBack(granted - taken)
                        granted = taken
                    } catch {
                        gate?.giveBack(granted)
                        skip(rest.count)
                        return await drop(Array(rest), tookPermit: false)
                    }
                }
                let bunch = rest.prefix(granted)
                rest = rest.dropFirst(granted)
                let now = ContinuousClock.now
                // Under the lock, so the client reads the items in the order of their places.
                let refused = feed.state.withLock { feed -> [Int] in
                    var refused: [Int] = []
                    var sent: [Int] = []
                    sent.reserveCapacity(bunch.count)
                    var last = false
                    for item in bunch {
                        guard case .send(let isLast) = feed.handOver(item, at: now) else {
                            refused.append(item)
                            continue
                        }
                        sent.append(item)
                        last = last || isLast
                    }
                    // Copied from the batch straight into the client's input: a notification is five references,
                    // each retained and released again by a copy in between.
                    input.yield(contentsOf: sent.lazy.map { batch[$0].notification })
                    if last { input.finish() }
                    return refused
                }
                if !refused.isEmpty {
                    permits?.release(refused.count)
                    gate?.giveBack(refused.count)
                    await drop(refused, tookPermit: false)
                }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await client.sendAll(input, concurrency: concurrency) { results in
                        let now = ContinuousClock.now
                        var outcomes: [Result] = []
                        var roundTrips: [Duration] = []
                        var endings: [EndpointWindow.Ending] = []
                        outcomes.reserveCapacity(results.count)
                        if gate != nil { endings.reserveCapacity(results.count) }
                        feed.state.withLock { feed in
                            for result in results {
                                guard let (item, sentAt) = feed.answer(at: result.index) else { continue }
                                outcomes.append((item, .sent(result.result)))
                                // The round trip moves the node's limit (``ConcurrencyLimit``); an answer that is the
                                // client's own error (a timeout, a connection that failed) says nothing about APNs'
                                // speed.
                                switch result.result {
                                case .success(let delivery):
                                    roundTrips.append(sentAt.duration(to: now))
                                    if gate != nil { endings.append(Self.ending(delivery.response)) }
                                case .failure(let error):
                                    if gate != nil { endings.append(error.code == .timedOut ? .timedOut(sentAt: sentAt) : .other) }
                                }
                            }
                        }
                        if let permits, !roundTrips.isEmpty { permits.observe(roundTrips: roundTrips, at: now) }
                        gate?.record(endings, topic: topic, at: now)
                        await onResults(outcomes)
                        order.finish(outcomes.lazy.compactMap { batch[$0.item].ticket })
                    }
                } catch {
                    // Cancelled: what was not answered is handed on below.
                }
                input.finish()
                // Handed over but never answered (the client stopped early), at once: they hold permits (and slots)
                // that the items still to go may be waiting for.
                let unanswered = feed.state.withLock { $0.close() }
                gate?.giveBack(unanswered.count)
                await drop(unanswered, tookPermit: permits != nil)
            }
            group.addTask { [free] in
                await go(free)
            }
            for item in waiting {
                guard let ticket = batch[item].ticket else { continue }
                group.addTask {
                    switch await order.turn(ticket) {
                    case .go:
                        await go([item])
                    case .superseded:
                        skip()
                        await onResults([(item, .superseded)])
                    case .cancelled:
                        // Out of its line already: no turn to hand on.
                        skip()
                        await onResults([(item, .notSent(tookPermit: false))])
                    }
                }
            }
        }
    }
}

/// A batch's ``BatchFeed``, shared by the tasks that feed the client and the one that takes its results.
private final class SharedFeed: Sendable {
    let state: Mutex<BatchFeed>

    init(count: Int) {
        state = Mutex(BatchFeed(count: count))
    }
}
