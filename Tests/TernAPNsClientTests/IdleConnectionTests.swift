import TernAPNs
@testable import TernAPNsClient
import TernSimulator
import TernTestSupport
import Testing

extension ClientFaultTests {
    /// Connections that carry nothing are closed, so a node with many quiet apps holds no descriptors for them.
    @Suite struct IdleConnectionTests {
        @Test func connectionsIdleForTheIdleTimeoutAreClosedAndTheNextSendOpensOneAgain() async throws {
            // One stream per connection, so a burst opens the pool's four.
            try await Harness.withSimulatorAndClient(configureSimulator: { $0.maxConcurrentStreams = 1 }, configureClient: {
                $0.connections = 4
                $0.idleTimeout = .seconds(1)
                $0.sendTimeout = .seconds(10)
            }) { simulator, client in
                let results = ResultsBox()
                try await client.sendAll(GeneratedNotifications(count: 200), concurrency: 50) { await results.add($0) }
                #expect(await results.delivered == 200)
                #expect(client.openConnections > 1, "the burst opened more than one connection")

                // Idle for one to two seconds: every one closes, on both sides.
                try await waitUntil("the idle connections to close", within: 10) {
                    client.openConnections == 0 && simulator.state.stats().connectionsActive == 0
                }
                let opened = simulator.state.stats().connectionsOpened

                // The next notification opens one again, at once (a connection closed by choice is no failed connect).
                let delivery = try await client.send(Harness.notification(1))
                #expect(delivery.isDelivered)
                #expect(client.openConnections == 1)
                #expect(simulator.state.stats().connectionsOpened == opened + 1)
            }
        }

        @Test func anIdleTimeoutUnderASecondIsRefusedNamingIt() throws {
            var configuration = APNsClientConfiguration(authentication: .token(Harness.key), endpoint: .init(host: "127.0.0.1", port: 443))
            configuration.idleTimeout = .milliseconds(500)
            let error = #expect(throws: APNsClientError.self) { try APNsClient(configuration: configuration) }
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.message.contains("idleTimeout") == true, "\(String(describing: error))")
        }
    }
}
