import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

extension ClientFaultTests {
    /// The client against a real simulator over TLS on loopback.
    @Suite struct ClientSmokeTests {
        @Test func oneNotificationIsAcceptedWithItsApnsID() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                let notification = Harness.notification(1)
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
            try await Harness.withSimulatorAndClient(configureClient: {
                $0.connections = 4
                $0.sendTimeout = .seconds(10)
            }) { simulator, client in
                let count = 2000
                let results = ResultsBox()
                try await client.sendAll(GeneratedNotifications(count: count), concurrency: 500) { result in await results.add(result) }
                #expect(await results.delivered == count)
                let stats = simulator.state.stats()
                #expect(stats.accepted == count)
                #expect(stats.connectionsOpened <= 4)
            }
        }
    }
}
