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

/// One notification's result in a batch.
public struct APNsBatchResult: Sendable {
    public var notification: APNsNotification
    public var result: Result<APNsDelivery, APNsClientError>
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
    private let tokens: ProviderTokenCache?
    private let logger: Logger
    private let metrics = APNsClientMetrics()

    public init(
        configuration: APNsClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "tern.apns")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if let roots = configuration.endpoint.trustRootsPEM {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(roots.utf8)))
            } catch {
                throw APNsClientError.invalidCredentials("the endpoint's trusted CA is not PEM certificates")
            }
        }
        switch configuration.authentication {
        case .token(let key):
            self.tokens = ProviderTokenCache(key: key, refreshInterval: configuration.tokenRefreshInterval, clock: configuration.clock)
        case .certificate(let chainPEM, let privateKeyPEM):
            self.tokens = nil
            do {
                tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8)).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem))
            } catch {
                throw APNsClientError.invalidCredentials("the client certificate or its key is not PEM")
            }
        case .pkcs12(let bytes, let passphrase):
            self.tokens = nil
            do {
                let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: Array(passphrase.utf8))
                tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                tls.privateKey = .privateKey(bundle.privateKey)
            } catch {
                throw APNsClientError.invalidCredentials("the PKCS#12 bundle cannot be opened (wrong passphrase or not PKCS#12)")
            }
        }
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw APNsClientError.invalidCredentials("TLS cannot be set up with these credentials: \(error)")
        }
        self.pool = APNsConnectionPool(
            configuration: configuration, sslContext: sslContext, eventLoopGroup: eventLoopGroup, logger: logger,
            metrics: metrics)
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

    // MARK: Sending

    /// Sends one notification and returns APNs' final answer.
    /// - Throws: ``APNsClientError`` when there is no answer in time, every attempt failed on the connection, or
    ///   the client is shut down; `CancellationError` when the calling task is cancelled while the send waits for
    ///   a stream or between retries (a request already on the wire waits for its answer).
    public func send(_ notification: APNsNotification) async throws -> APNsDelivery {
        let started = ContinuousClock.now
        let deadline = NIODeadline.now() + configuration.sendTimeout.timeAmount
        let path = "/3/device/" + notification.deviceToken.hex
        let baseHeaders = notification.metadata.headers.map { ($0.name, $0.value) }
        var attempts = 0
        var failures = 0
        var unprocessed = 0
        var lastProblem: String?
        while true {
            if NIODeadline.now() >= deadline {
                metrics.error()
                throw APNsClientError.timedOut(attempts: attempts, lastProblem: lastProblem)
            }
            var headers = baseHeaders
            var token: ProviderToken?
            if let tokens {
                do {
                    token = try tokens.currentToken()
                } catch {
                    throw APNsClientError.invalidCredentials("the provider token cannot be signed")
                }
                headers.append(("authorization", token!.authorizationHeader))
            }
            let lease: ConnectionLease
            do {
                lease = try await pool.acquire(deadline: deadline)
            } catch let error as APNsClientError {
                metrics.error()
                throw error
            }
            attempts += 1
            metrics.attempt()
            let promise = lease.channel.eventLoop.makePromise(of: StreamOutcome.self)
            let remaining = deadline - NIODeadline.now()
            let timeout = min(configuration.attemptTimeout.timeAmount, max(remaining, .milliseconds(1)))
            let request = WireRequest(path: path, headers: headers, payload: notification.payload)
            lease.channel.eventLoop.execute { lease.handler.value.send(request, timeout: timeout, promise: promise) }
            let outcome = (try? await promise.futureResult.get()) ?? .failed("the connection went away")
            pool.release(lease)
            if case .answered(let response) = outcome, response.reason == .tooManyProviderTokenUpdates {
                // APNs takes no new token on this connection for 20 minutes (it first saw a token less than 20
                // minutes ago); a new connection takes the current one as its first.
                pool.retire(lease)
            }

            let retryDelay: Duration
            switch outcome {
            case .answered(let response):
                if response.isSuccess || failures + 1 >= configuration.maxAttempts || !mayRetry(response, notification) {
                    metrics.finished(response, after: ContinuousClock.now - started)
                    return APNsDelivery(
                        deviceToken: notification.deviceToken, apnsID: notification.metadata.apnsID, response: response,
                        attempts: attempts)
                }
                failures += 1
                lastProblem = "\(response.status) \(response.reason?.rawValue ?? "")"
                if response.reason == .expiredProviderToken, let token, let tokens {
                    // Renew (no sooner than 20 minutes after the last token) and go again at once. When the cache
                    // keeps the same token (APNs' clock is ahead of ours by more than the token's age), another try
                    // would only be rejected again: that rejection is the answer.
                    let renewed = try? tokens.tokenAfterRejection(of: token)
                    guard let renewed, renewed != token else {
                        metrics.finished(response, after: ContinuousClock.now - started)
                        return APNsDelivery(
                            deviceToken: notification.deviceToken, apnsID: notification.metadata.apnsID,
                            response: response, attempts: attempts)
                    }
                    retryDelay = .zero
                } else {
                    retryDelay = configuration.retryBackoff.delay(afterFailures: failures)
                }
            case .unprocessed(let reason):
                // Not processed by APNs: safe to send again, on another connection, without delay.
                unprocessed += 1
                lastProblem = reason
                guard unprocessed <= 100 else {
                    metrics.error()
                    throw APNsClientError.connectionFailed("APNs kept refusing the request: \(reason)")
                }
                continue
            case .failed(let reason):
                failures += 1
                lastProblem = reason
                guard failures < configuration.maxAttempts else {
                    metrics.error()
                    throw APNsClientError.connectionFailed("\(attempts) attempt(s) failed; last: \(reason)")
                }
                retryDelay = configuration.retryBackoff.delay(afterFailures: failures)
            case .timedOut:
                metrics.error()
                throw APNsClientError.timedOut(attempts: attempts, lastProblem: "no answer within \(timeout)")
            }
            metrics.retry()
            if retryDelay > .zero {
                let wait = min(retryDelay, .nanoseconds((deadline - NIODeadline.now()).nanoseconds))
                if wait > .zero { try await Task.sleep(for: wait) }
            }
        }
    }

    /// Whether a rejection is worth another attempt: retryable by class, and the notification not yet expired.
    private func mayRetry(_ response: APNsResponse, _ notification: APNsNotification) -> Bool {
        guard response.outcomeClass == .retryLater else { return false }
        switch notification.metadata.expiration {
        case .immediately: return false
        case .at(let date): return configuration.clock.now < date
        case .none: return true
        }
    }

    /// Sends every notification of `notifications` with at most `concurrency` in flight, calling `onResult` as
    /// each completes. The sequence is read only as fast as sends complete, so a fan-out of millions never holds
    /// more than `concurrency` notifications in memory; a slow `onResult` slows the sending down.
    public func sendAll<Notifications: AsyncSequence>(
        _ notifications: Notifications, concurrency: Int = 1000,
        onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async throws where Notifications.Element == APNsNotification {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for try await notification in notifications {
                if running >= max(1, concurrency) {
                    try await group.next()
                    running -= 1
                }
                group.addTask {
                    let result: Result<APNsDelivery, APNsClientError>
                    do {
                        result = .success(try await self.send(notification))
                    } catch let error as APNsClientError {
                        result = .failure(error)
                    } catch {
                        result = .failure(APNsClientError(code: .cancelled, message: "the send was cancelled"))
                    }
                    await onResult(APNsBatchResult(notification: notification, result: result))
                }
                running += 1
            }
            try await group.waitForAll()
        }
    }
}
