import Foundation
import NIOCore
import Synchronization
import TernAPNs

/// What every send of one client shares: the pool, the provider tokens, the rules and the instruments.
final class SendContext: Sendable {
    let configuration: APNsClientConfiguration
    let pool: APNsConnectionPool
    let tokens: ProviderTokenCache?
    let metrics: APNsClientMetrics
    private let operationIDs = Atomic<Int>(0)

    init(configuration: APNsClientConfiguration, pool: APNsConnectionPool, tokens: ProviderTokenCache?, metrics: APNsClientMetrics) {
        self.configuration = configuration
        self.pool = pool
        self.tokens = tokens
        self.metrics = metrics
    }

    func nextOperationID() -> Int { operationIDs.add(1, ordering: .relaxed).newValue }
}

/// What one send carries: a notification to a device, or another request to APNs (a broadcast to a channel, a
/// channel's management).
enum SendSubject: Sendable {
    case notification(APNsNotification)
    case request(APNsRequest)
}

/// A request to APNs other than a notification to a device: a broadcast, or a call to manage channels.
struct APNsRequest: Sendable {
    var method: String
    var path: String
    var headers: [(name: String, value: String)]
    var body: [UInt8] = []
    /// The most of the answer's body kept (a list of channels is long).
    var largestAnswer = 4096
    /// Whether sending it twice does no harm. One that does (a channel's creation) is sent again only when APNs
    /// certainly did not take it (a refused stream, above a GOAWAY's last stream, 429 or 503), never after a
    /// connection lost with it in flight.
    var idempotent = true
}

/// APNs' final answer to one send, and the attempts it took.
struct SendAnswer: Sendable {
    var response: APNsResponse
    var attempts: Int
    /// Every header and the whole body, for a request other than a notification.
    var full: APNsFullAnswer?
}

/// One notification's (or request's) way to APNs: a stream from the pool, the request, APNs' answer, and the
/// retries, until it ends in an answer or an error.
///
/// It runs on callbacks (the pool lending a stream, the connection reporting the stream's outcome, a back-off
/// timer), not in a task of its own, so a send costs no task, no continuation and no event-loop hop of its own.
/// Exactly one step runs at a time; `progress` orders them and lets ``cancel()`` find the send wherever it is.
final class SendOperation: Sendable {
    typealias Completion = @Sendable (Result<SendAnswer, any Error>) -> Void

    private enum Phase {
        case starting
        case waitingForStream
        case onTheWire
        /// Between a retryable answer and the next attempt: the back-off timer, once it is scheduled.
        case backingOff(Scheduled<Void>?)
        case finished
    }

    private struct Progress {
        var phase = Phase.starting
        var cancelled = false
        var completion: Completion?
        var attempts = 0
        /// Attempts that APNs answered with a retryable status or that failed on the connection.
        var failures = 0
        /// Attempts APNs certainly did not process (refused stream, above a GOAWAY's last stream).
        var unprocessed = 0
        var lastProblem: String?
    }

    let id: Int
    private let subject: SendSubject
    private let context: SendContext
    private let started = ContinuousClock.now
    private let deadline: NIODeadline
    private let path: String
    private let progress = Mutex(Progress())

    init(_ notification: APNsNotification, context: SendContext) {
        self.id = context.nextOperationID()
        self.subject = .notification(notification)
        self.context = context
        self.deadline = NIODeadline.now() + context.configuration.sendTimeout.timeAmount
        self.path = "/3/device/" + notification.deviceToken.hex
    }

    init(_ request: APNsRequest, context: SendContext) {
        self.id = context.nextOperationID()
        self.subject = .request(request)
        self.context = context
        self.deadline = NIODeadline.now() + context.configuration.sendTimeout.timeAmount
        self.path = request.path
    }

    /// Starts the send; `completion` is called exactly once, on whatever thread the send ends on.
    func start(_ completion: @escaping Completion) {
        progress.withLock { $0.completion = completion }
        attempt()
    }

    /// Ends the send with `CancellationError` if it is waiting for a stream or between attempts. A request already
    /// on the wire waits for its answer (APNs may have delivered it).
    func cancel() {
        enum Action {
            case none
            case stopWaiting
            case stopBackingOff(Scheduled<Void>?)
        }
        let action = progress.withLock { progress -> Action in
            progress.cancelled = true
            switch progress.phase {
            case .waitingForStream: return .stopWaiting
            case .backingOff(let timer): return .stopBackingOff(timer)
            case .starting, .onTheWire, .finished: return .none
            }
        }
        switch action {
        case .none: break
        case .stopWaiting: context.pool.cancelWaiter(id)
        case .stopBackingOff(let timer):
            timer?.cancel()
            finish(.failure(CancellationError()))
        }
    }

    // MARK: Steps

    private func attempt() {
        if NIODeadline.now() >= deadline {
            let (attempts, lastProblem) = progress.withLock { ($0.attempts, $0.lastProblem) }
            fail(APNsClientError.timedOut(attempts: attempts, lastProblem: lastProblem))
            return
        }
        var headers =
            switch subject {
            case .notification(let notification): notification.metadata.headers(reservingRoomFor: 1)
            case .request(let request): request.headers
            }
        var token: ProviderToken?
        if let tokens = context.tokens {
            do {
                token = try tokens.currentToken()
            } catch {
                fail(APNsClientError.invalidCredentials("the provider token cannot be signed"))
                return
            }
            headers.append(("authorization", token!.authorizationHeader))
        }
        let proceed = progress.withLock { progress -> Bool in
            guard !progress.cancelled else { return false }
            progress.phase = .waitingForStream
            return true
        }
        guard proceed else {
            finish(.failure(CancellationError()))
            return
        }
        let waits = context.pool.acquire(id: id, deadline: deadline) { [self, headers, token] result in
            switch result {
            case .success(let lease): self.transmit(on: lease, headers: headers, token: token)
            case .failure(let error as APNsClientError): self.fail(error)
            case .failure(let error): self.finish(.failure(error))
            }
        }
        // Cancelled between the check above and joining the queue: `cancel()` found no waiter to end.
        if waits, progress.withLock({ $0.cancelled }) { context.pool.cancelWaiter(id) }
    }

    private func transmit(on lease: ConnectionLease, headers: [(name: String, value: String)], token: ProviderToken?) {
        let proceed = progress.withLock { progress -> Bool in
            guard !progress.cancelled else { return false }
            progress.phase = .onTheWire
            progress.attempts += 1
            return true
        }
        guard proceed else {
            context.pool.release(lease)
            finish(.failure(CancellationError()))
            return
        }
        context.metrics.attempt()
        let now = NIODeadline.now()
        let attemptDeadline = min(now + context.configuration.attemptTimeout.timeAmount, max(deadline, now + .milliseconds(1)))
        let conclude: @Sendable (StreamOutcome) -> Void = { [self] outcome in
            self.conclude(outcome, on: lease, token: token, attemptTime: attemptDeadline - now)
        }
        switch subject {
        case .notification(let notification):
            lease.outbox.submit(WireRequest(path: path, headers: headers, payload: notification.payload, deadline: attemptDeadline, onOutcome: conclude))
        case .request(let request):
            lease.outbox.submit(WireRequest(
                path: path, headers: headers, payload: request.body, deadline: attemptDeadline, onOutcome: conclude,
                other: OtherRequest(method: request.method, largestAnswer: request.largestAnswer)))
        }
    }

    /// Runs on the connection's event loop with what the attempt came to: the answer, a retry, or an error.
    private func conclude(_ outcome: StreamOutcome, on lease: ConnectionLease, token: ProviderToken?, attemptTime: TimeAmount) {
        context.pool.release(lease)
        if case .answered(let response, _) = outcome, response.reason == .tooManyProviderTokenUpdates {
            // APNs takes no new token on this connection for 20 minutes (it first saw a token less than 20 minutes
            // ago); a new connection takes the current one as its first.
            context.pool.retire(lease)
        }

        let retryDelay: Duration
        switch outcome {
        case .answered(let response, let full):
            let failures = progress.withLock { $0.failures }
            if response.isSuccess || failures + 1 >= context.configuration.maxAttempts || !mayRetry(response) {
                answer(response, full: full)
                return
            }
            progress.withLock { progress in
                progress.failures += 1
                progress.lastProblem = "\(response.status) \(response.reason?.rawValue ?? "")"
            }
            if response.reason == .expiredProviderToken, let token, let tokens = context.tokens {
                // Renew (no sooner than 20 minutes after the last token) and go again at once. When the cache keeps
                // the same token (APNs' clock is ahead of ours by more than the token's age), another try would
                // only be rejected again: that rejection is the answer.
                let renewed = try? tokens.tokenAfterRejection(of: token)
                guard let renewed, renewed != token else {
                    answer(response, full: full)
                    return
                }
                retryDelay = .zero
            } else {
                retryDelay = context.configuration.retryBackoff.delay(afterFailures: failures + 1)
            }
        case .unprocessed(let reason):
            // Not processed by APNs: safe to send again, on another connection, without delay.
            let unprocessed = progress.withLock { progress -> Int in
                progress.unprocessed += 1
                progress.lastProblem = reason
                return progress.unprocessed
            }
            guard unprocessed <= 100 else {
                fail(APNsClientError.connectionFailed("APNs kept refusing the request: \(reason)"))
                return
            }
            retryDelay = .zero
        case .failed(let reason):
            if case .request(let request) = subject, !request.idempotent {
                fail(APNsClientError.connectionFailed(
                    "the connection failed with the request in flight (\(reason)); it may have reached APNs, so it is not sent again"))
                return
            }
            let (failures, attempts) = progress.withLock { progress -> (Int, Int) in
                progress.failures += 1
                progress.lastProblem = reason
                return (progress.failures, progress.attempts)
            }
            guard failures < context.configuration.maxAttempts else {
                fail(APNsClientError.connectionFailed("\(attempts) attempt(s) failed; last: \(reason)"))
                return
            }
            retryDelay = context.configuration.retryBackoff.delay(afterFailures: failures)
        case .timedOut:
            let attempts = progress.withLock { $0.attempts }
            fail(APNsClientError.timedOut(attempts: attempts, lastProblem: "no answer within \(attemptTime)"))
            return
        }

        if case .unprocessed = outcome {} else { context.metrics.retry() }
        let wait = min(retryDelay, .nanoseconds((deadline - NIODeadline.now()).nanoseconds))
        guard wait > .zero else {
            attempt()
            return
        }
        progress.withLock { $0.phase = .backingOff(nil) }
        let timer = lease.channel.eventLoop.scheduleTask(in: wait.timeAmount) { [self] in self.attempt() }
        let cancelled = progress.withLock { progress -> Bool in
            if progress.cancelled { return true }
            // Unless the timer already fired and the next attempt began.
            if case .backingOff = progress.phase { progress.phase = .backingOff(timer) }
            return false
        }
        if cancelled {
            timer.cancel()
            finish(.failure(CancellationError()))
        }
    }

    /// Whether a rejection is worth another attempt: retryable by class, and the notification not yet expired.
    private func mayRetry(_ response: APNsResponse) -> Bool {
        guard response.outcomeClass == .retryLater else { return false }
        switch subject {
        case .request(let request):
            // Throttled, unavailable or refused for its provider token: not taken. A 500 may have been.
            return request.idempotent || response.status == 429 || response.status == 503 || response.reason == .expiredProviderToken
        case .notification(let notification):
            switch notification.metadata.expiration {
            case .immediately: return false
            case .at(let date): return context.configuration.clock.now < date
            case .none: return true
            }
        }
    }

    // MARK: Endings

    private func answer(_ response: APNsResponse, full: APNsFullAnswer?) {
        context.metrics.finished(response, after: ContinuousClock.now - started)
        let attempts = progress.withLock { $0.attempts }
        finish(.success(SendAnswer(response: response, attempts: attempts, full: full)))
    }

    private func fail(_ error: APNsClientError) {
        context.metrics.error()
        finish(.failure(error))
    }

    /// Calls the completion, once, whichever step gets here first.
    private func finish(_ result: Result<SendAnswer, any Error>) {
        let completion = progress.withLock { progress -> Completion? in
            if case .finished = progress.phase { return nil }
            progress.phase = .finished
            defer { progress.completion = nil }
            return progress.completion
        }
        completion?(result)
    }
}
