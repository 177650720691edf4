import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

/// The client against a real simulator over TLS on loopback.
struct ClientSmokeTests {
    static let key = APNsSigningKey.generate(keyID: "KEY0000001", teamID: "TEAM000001")

    static func withSimulatorAndClient<T: Sendable>(
        configureSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        configureClient: (inout APNsClientConfiguration) -> Void = { _ in },
        _ body: (APNsSimulator, APNsClient) async throws -> T
    ) async throws -> T {
        var simulatorConfiguration = try APNsSimulator.Configuration()
        simulatorConfiguration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
        configureSimulator(&simulatorConfiguration)
        return try await APNsSimulator.withRunning(simulatorConfiguration) { simulator in
            var configuration = APNsClientConfiguration(
                authentication: .token(key),
                endpoint: .init(host: "127.0.0.1", port: simulator.port, trustRootsPEM: simulator.certificateAuthority.certificatePEM))
            configureClient(&configuration)
            return try await APNsClient.withClient(configuration) { client in try await body(simulator, client) }
        }
    }

    static func notification(_ index: Int) throws -> APNsNotification {
        let token = try DeviceToken(hex: String(format: "%064x", index))
        return try APNsNotification(
            deviceToken: token, metadata: APNsRequestMetadata(topic: "com.example.app"),
            payload: APNsPayload(alert: .string("Hello \(index)")))
    }

    @Test func oneNotificationIsAcceptedWithItsApnsID() async throws {
        try await Self.withSimulatorAndClient { simulator, client in
            let notification = try Self.notification(1)
            let delivery = try await client.send(notification)
            #expect(delivery.isDelivered)
            #expect(delivery.response.apnsID == notification.metadata.apnsID)
            let logged = simulator.state.notifications()
            #expect(logged.count == 1)
            #expect(logged.first?.apnsID == notification.metadata.apnsID.apnsString)
            #expect(logged.first?.payload == #"{"aps":{"alert":"Hello 1"}}"#)
        }
    }

    @Test func aBatchOfTwoThousandIsAcceptedExactlyOnceOverSeveralConnections() async throws {
        try await Self.withSimulatorAndClient(configureClient: { $0.connections = 4 }) { simulator, client in
            let count = 2000
            let results = ResultsBox()
            let notifications = AsyncStream<APNsNotification> { continuation in
                for index in 0..<count { continuation.yield(try! Self.notification(index)) }
                continuation.finish()
            }
            try await client.sendAll(notifications, concurrency: 500) { result in await results.add(result) }
            #expect(await results.delivered == count)
            let stats = simulator.state.stats()
            #expect(stats.accepted == count)
            #expect(stats.connectionsOpened <= 4)
        }
    }
}

actor ResultsBox {
    var delivered = 0
    var failed: [String] = []
    func add(_ result: APNsBatchResult) {
        switch result.result {
        case .success(let delivery) where delivery.isDelivered: delivered += 1
        case .success(let delivery): failed.append("\(delivery.response.status) \(delivery.response.reason?.rawValue ?? "")")
        case .failure(let error): failed.append("\(error)")
        }
    }
}
