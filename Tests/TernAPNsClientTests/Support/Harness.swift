import Foundation
import Logging
import Synchronization
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing
import TernTestSupport

/// The client's tests against a real simulator. They run one at a time: several of them measure time (deadlines,
/// back-off, shutdown) or push thousands of notifications, and on a small machine they would disturb each other's
/// timing.
@Suite(.serialized, .timeLimit(.minutes(2)))
enum ClientFaultTests {}

/// A real simulator over TLS on a free port, and clients that trust its CA.
enum Harness {
    static let key = APNsSigningKey.generate(keyID: "KEY0000001", teamID: "TEAM000001")
    static let topic = "com.example.app"

    /// A simulator (token key trusted, no control API, short shutdown grace) for the duration of `body`.
    static func withSimulator<T: Sendable>(
        configure: (inout APNsSimulator.Configuration) -> Void = { _ in },
        _ body: (APNsSimulator) async throws -> T
    ) async throws -> T {
        var configuration = try APNsSimulator.Configuration()
        configuration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
        configuration.controlPort = nil
        configuration.shutdownGracePeriod = .seconds(1)
        configure(&configuration)
        return try await APNsSimulator.withRunning(configuration, body)
    }

    /// Token auth against `simulator`, with short deadlines and back-offs so a fault test fails fast.
    static func clientConfiguration(for simulator: APNsSimulator) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(
            authentication: .token(key),
            endpoint: .init(host: "127.0.0.1", port: simulator.port, trustRootsPEM: simulator.certificateAuthority.certificatePEM))
        configuration.sendTimeout = .seconds(3)
        configuration.attemptTimeout = .seconds(3)
        configuration.retryBackoff = .init(initial: .milliseconds(10), maximum: .milliseconds(100))
        configuration.reconnectBackoff = .init(initial: .milliseconds(50), maximum: .seconds(1))
        return configuration
    }

    static func withSimulatorAndClient<T: Sendable>(
        configureSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        configureClient: (inout APNsClientConfiguration) -> Void = { _ in },
        logs: LogRecorder? = nil,
        _ body: (APNsSimulator, APNsClient) async throws -> T
    ) async throws -> T {
        try await withSimulator(configure: configureSimulator) { simulator in
            var configuration = clientConfiguration(for: simulator)
            configureClient(&configuration)
            if let logs { return try await APNsClient.withClient(configuration, logger: logs.logger) { client in try await body(simulator, client) } }
            return try await APNsClient.withClient(configuration) { client in try await body(simulator, client) }
        }
    }

    /// A distinct 32-byte token per (`index`, `series`).
    static func token(_ index: Int, series: Int = 0) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%08x%056x", series, index))
    }

    static func notification(
        _ index: Int, series: Int = 0, expiration: APNsExpiration = .none
    ) -> APNsNotification {
        try! APNsNotification(
            deviceToken: token(index, series: series),
            metadata: APNsRequestMetadata(topic: topic, expiration: expiration),
            payload: APNsPayload(alert: .string("Hello \(index)")))
    }

    /// Sends one notification, timing it.
    static func send(_ client: APNsClient, _ notification: APNsNotification) async -> SendOutcome {
        let started = ContinuousClock.now
        do {
            let delivery = try await client.send(notification)
            return SendOutcome(result: .success(delivery), elapsed: .now - started)
        } catch {
            return SendOutcome(result: .failure(error), elapsed: .now - started)
        }
    }

    /// Sends every notification at once, each in its own task; results in the order given.
    static func sendConcurrently(_ client: APNsClient, _ notifications: [APNsNotification]) async -> [SendOutcome] {
        await withTaskGroup(of: (Int, SendOutcome).self) { group in
            for (index, notification) in notifications.enumerated() {
                group.addTask { (index, await send(client, notification)) }
            }
            var outcomes = [SendOutcome?](repeating: nil, count: notifications.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes.map { $0! }
        }
    }

    /// Every accepted notification in the simulator's arrival log, paged as the control API does.
    static func arrivals(_ simulator: APNsSimulator) -> [RecordedNotification] {
        var all: [RecordedNotification] = []
        var after: UInt64 = 0
        while true {
            let page = simulator.state.notifications(after: after, limit: 1000)
            guard let last = page.last else { return all }
            all += page
            after = last.sequence
        }
    }

    /// A client's configuration for 127.0.0.1:`port` with a token key, giving up on each send after `sendTimeout`.
    static func configuration(port: Int, sendTimeout: Duration) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(authentication: .token(key), endpoint: .init(host: "127.0.0.1", port: port))
        configuration.sendTimeout = sendTimeout
        return configuration
    }

    /// How often each token arrived.
    static func arrivalsByToken(_ simulator: APNsSimulator) -> [String: Int] {
        arrivals(simulator).reduce(into: [:]) { counts, entry in counts[entry.token, default: 0] += 1 }
    }
}

/// One send's result and how long it took.
struct SendOutcome: Sendable {
    var result: Result<APNsDelivery, any Error>
    var elapsed: Duration

    var delivery: APNsDelivery? { try? result.get() }
    var isDelivered: Bool { delivery?.isDelivered == true }
    var clientError: APNsClientError? {
        if case .failure(let error) = result { return error as? APNsClientError }
        return nil
    }
}


actor ResultsBox {
    var delivered = 0
    var failed: [String] = []
    var attempts = 0
    func add(_ result: APNsBatchResult) {
        switch result.result {
        case .success(let delivery) where delivery.isDelivered:
            delivered += 1
            attempts += delivery.attempts
        case .success(let delivery): failed.append("\(delivery.response.status) \(delivery.response.reason?.rawValue ?? "")")
        case .failure(let error): failed.append("\(error)")
        }
    }
}

/// `count` notifications as an `AsyncSequence`, made one at a time as they are read.
struct GeneratedNotifications: AsyncSequence, Sendable {
    typealias Element = APNsNotification
    let count: Int
    var series = 0

    struct AsyncIterator: AsyncIteratorProtocol {
        let count: Int
        let series: Int
        var next = 0
        mutating func next() async -> APNsNotification? {
            guard next < count else { return nil }
            defer { next += 1 }
            return Harness.notification(next, series: series)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count, series: series) }
}
