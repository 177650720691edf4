import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import TernAPNs

/// APNs' answer to one notification, after any retries.
public struct APNsDelivery: Sendable {
    public var deviceToken: DeviceToken
    /// The `apns-id` the notification carried on every attempt.
    public var apnsID: UUID
    /// Status 200, or APNs' rejection with its reason (and, for 410, its timestamp). `response.outcomeClass` says
    /// what to do about it.
    public var response: APNsResponse
    /// Attempts made, including any that APNs never processed.
    public var attempts: Int

    public var isDelivered: Bool { response.isSuccess }
}

extension APNsDelivery {
    init(_ notification: APNsNotification, _ answer: SendAnswer) {
        self.deviceToken = notification.deviceToken
        self.apnsID = notification.metadata.apnsID
        self.response = answer.response
        self.attempts = answer.attempts
    }
}

/// An answer in full: every header and the whole body (kept for requests other than notifications, whose answers
/// carry more than a reason: a channel's id, a list of channels). A class, so that a notification's outcome, which
/// has none, carries one word for it.
public final class APNsFullAnswer: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header of this name (names are lowercase on HTTP/2).
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// One notification's result in a batch.
public struct APNsBatchResult: Sendable {
    public var notification: APNsNotification
    public var result: Result<APNsDelivery, APNsClientError>
    /// The notification's place in the sequence it was read from, counting from 0: a caller that keeps what it
    /// sent in an array finds it again without hashing the token.
    public var index: Int

    public init(notification: APNsNotification, result: Result<APNsDelivery, APNsClientError>, index: Int) {
        self.notification = notification
        self.result = result
        self.index = index
    }
}

/// Sends notifications to APNs over a pool of long-lived HTTP/2 connections.
///
/// Every send ends: APNs' answer (accepted or a classified rejection), or an ``APNsClientError`` (`timedOut`,
/// `connectionFailed`, `shutDown`) within ``APNsClientConfiguration/sendTimeout``. Retryable answers (429, 500,
/// 503, an expired provider token) and lost connections are retried with back-off and the same `apns-id`, never
/// past the notification's expiration; requests APNs did not process (above a GOAWAY's last stream, refused
/// streams) go out again on another connection at once.
///
/// ```swift
/// try await APNsClient.withClient(configuration) { client in
///     let delivery = try await client.send(notification)
/// }
/// ```
public final class APNsClient: Service, Sendable {
    public let configuration: APNsClientConfiguration
    private let pool: APNsConnectionPool
    private let context: SendContext
    private let logger: Logger

    public init(
        configuration: APNsClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "tern.apns")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        let sslContext = try ClientTLS.context(
            authentication: configuration.authentication, endpoint: configuration.endpoint, applicationProtocols: ["h2"])
        var tokens: ProviderTokenCache?
        if case .token(let key) = configuration.authentication {
            tokens = ProviderTokenCache(key: key, refreshInterval: configuration.tokenRefreshInterval, clock: configuration.clock)
        }
        let metrics = APNsClientMetrics()
        self.pool = APNsConnectionPool(
            configuration: configuration, sslContext: sslContext, eventLoopGroup: eventLoopGroup, logger: logger,
            metrics: metrics)
        self.context = SendContext(configuration: configuration, pool: pool, tokens: tokens, metrics: metrics)
    }

    /// Runs a client for the duration of `body`, then shuts it down gracefully.
    public static func withClient<T: Sendable>(
        _ configuration: APNsClientConfiguration, logger: Logger = Logger(label: "tern.apns"),
        _ body: (APNsClient) async throws -> T
    ) async throws -> T {
        let client = try APNsClient(configuration: configuration, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Serves until graceful shutdown, then shuts down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Stops taking sends, lets in-flight ones finish and closes the connections.
    public func shutdown() async {
        await pool.shutdown()
    }

    /// Open connections (for metrics and tests).
    public var openConnections: Int { pool.openConnections }

    /// The event loop of each open connection, in no order (for tests: how the pool spreads over the group).
    var openConnectionEventLoops: [any EventLoop] { pool.openConnectionEventLoops }

    /// Waits until a connection to APNs is ready, opening one if none is, and sends nothing. Returns at once while a
    /// connection is ready. A sender with much to send asks first, so that it commits nothing (the permits a server
    /// shares between its apps, say) to an endpoint it cannot reach.
    /// - Parameter onWaiting: called before the wait when no connection is ready yet, and not at all otherwise.
    /// - Throws: ``APNsClientError`` when no connection is ready within the send timeout (`timedOut`, with the last
    ///   connect error), at once when the endpoint has been unreachable for longer than that (`connectionFailed`), or
    ///   when the client is shut down; `CancellationError` when the task is cancelled while it waits.
    public func waitForConnection(onWaiting: () -> Void = {}) async throws {
        if Task.isCancelled { throw CancellationError() }
        let id = context.nextOperationID()
        let deadline = NIODeadline.now() + configuration.sendTimeout.timeAmount
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let waits = pool.awaitConnection(id: id, deadline: deadline) { continuation.resume(with: $0) }
                guard waits else { return }
                onWaiting()
                // Cancelled before it joined the waiters: the handler below found nothing to end.
                if Task.isCancelled { pool.cancelWaiter(id) }
            }
        } onCancel: {
            pool.cancelWaiter(id)
        }
    }

    // MARK: Sending

    /// Sends one notification and returns APNs' final answer.
    /// - Throws: ``APNsClientError`` when there is no answer in time, every attempt failed on the connection, or
    ///   the client is shut down; `CancellationError` when the calling task is cancelled while the send waits for
    ///   a stream or between retries (a request already on the wire waits for its answer).
    public func send(_ notification: APNsNotification) async throws -> APNsDelivery {
        if Task.isCancelled { throw CancellationError() }
        let answer = try await perform(SendOperation(notification, context: context))
        return APNsDelivery(notification, answer)
    }

    /// Runs one send to its end; cancelling the task cancels it.
    func perform(_ operation: SendOperation) async throws -> SendAnswer {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                operation.start { continuation.resume(with: $0) }
            }
        } onCancel: {
            operation.cancel()
        }
    }

    /// Sends a request other than a notification (a broadcast, a channel's management) and returns APNs' answer.
    func send(_ request: APNsRequest) async throws -> SendAnswer {
        if Task.isCancelled { throw CancellationError() }
        return try await perform(SendOperation(request, context: context))
    }

    /// Sends every notification of `notifications` with at most `concurrency` in flight, calling `onResult` for
    /// each as it completes (one call at a time, while the sequence is read: a result does not wait for the next
    /// notification). The sequence is read only as fast as sends complete and their results are taken, so a fan-out
    /// of millions never holds more than `concurrency` notifications in memory; a slow `onResult` slows the sending
    /// down.
    ///
    /// When the calling task is cancelled it stops reading the sequence, ends the sends still waiting for a stream
    /// or a retry with ``APNsClientError/Code/cancelled``, reports every send it started and returns.
    public func sendAll<Notifications: AsyncSequence>(
        _ notifications: Notifications, concurrency: Int = 1000,
        onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async throws where Notifications.Element == APNsNotification {
        try await sendAllBunched(notifications, concurrency: concurrency) { results in
            for result in results { await onResult(result) }
        }
    }

    /// ``sendAll(_:concurrency:onResult:)`` with the results handed over in bunches, as they come off the
    /// connections (up to 64 at a time): one call, and one wake-up of the caller, per bunch rather than per result.
    public func sendAllBunched<Notifications: AsyncSequence>(
        _ notifications: Notifications, concurrency: Int = 1000,
        onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async throws where Notifications.Element == APNsNotification {
        let window = BatchWindow(concurrency: concurrency)
        try await withTaskCancellationHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The drainer: results go to the caller as they come, whether or not the sequence has more yet.
                group.addTask {
                    while true {
                        let results = await window.next()
                        if results.isEmpty { return }
                        await onResults(results)
                        window.handedBack(results.count)
                    }
                }
                // The feeder, here: a slot, then the next notification, then its send.
                do {
                    var iterator = notifications.makeAsyncIterator()
                    var index = 0
                    while !Task.isCancelled {
                        await window.waitForSlot()
                        guard !Task.isCancelled, let notification = try await iterator.next() else { break }
                        let operation = SendOperation(notification, context: context)
                        window.add(operation)
                        operation.start { [window, index] result in
                            window.complete(
                                operation.id,
                                APNsBatchResult(
                                    notification: notification, result: result.map { APNsDelivery(notification, $0) }.mapError(Self.batchError),
                                    index: index))
                        }
                        index += 1
                    }
                } catch {
                    window.finishInput()
                    try await group.waitForAll()
                    throw error
                }
                window.finishInput()
                try await group.waitForAll()
            }
        } onCancel: {
            window.cancelAll()
        }
    }

    private static func batchError(_ error: any Error) -> APNsClientError {
        error as? APNsClientError ?? APNsClientError(code: .cancelled, message: "the send was cancelled")
    }
}
