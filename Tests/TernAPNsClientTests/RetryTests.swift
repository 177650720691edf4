import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

extension ClientFaultTests {
    @Suite struct Retries {
        @Test(arguments: [429, 500, 503])
        func aBurstOfServerErrorsIsRetriedToSuccessWithTheSameApnsID(_ status: Int) async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                try simulator.state.setFaults([.init(status: status, count: 3)])
                let notification = Harness.notification(1)
                let delivery = try await client.send(notification)

                #expect(delivery.isDelivered)
                #expect(delivery.attempts == 4)
                #expect(delivery.response.apnsID == notification.metadata.apnsID)
                let stats = simulator.state.stats()
                #expect(stats.requests == 4)
                #expect(stats.faultsInjected == 3)
                #expect(stats.accepted == 1)
                let arrivals = Harness.arrivals(simulator)
                #expect(arrivals.count == 1)
                #expect(arrivals.first?.token == notification.deviceToken.hex)
                #expect(arrivals.first?.apnsID == notification.metadata.apnsID.apnsString)
            }
        }

        @Test func randomServerErrorsOverABatchAllEndDelivered() async throws {
            // At a 30% fault rate, 5 attempts would leave about one send in 400 failed; 15 leave one in 70 million.
            try await Harness.withSimulatorAndClient(configureClient: {
                $0.maxAttempts = 15
                $0.retryBackoff = .init(initial: .milliseconds(2), maximum: .milliseconds(20))
            }) { simulator, client in
                try simulator.state.setFaults([.init(status: 503, rate: 0.3)])
                let count = 500
                let results = ResultsBox()
                try await client.sendAll(GeneratedNotifications(count: count), concurrency: 100) { await results.add($0) }

                #expect(await results.failed == [])
                #expect(await results.delivered == count)
                let stats = simulator.state.stats()
                #expect(stats.faultsInjected > count / 10, "the fault rate was not in force")
                #expect(stats.accepted == count)
                // Every fault cost exactly one more attempt, and nothing else did.
                #expect(await results.attempts == count + stats.faultsInjected)
                let arrivals = Harness.arrivalsByToken(simulator)
                #expect(arrivals.count == count)
                #expect(arrivals.values.allSatisfy { $0 == 1 })
            }
        }

        @Test func retriesStopAtMaxAttemptsWithTheLastRejection() async throws {
            try await Harness.withSimulatorAndClient(configureClient: { $0.maxAttempts = 3 }) { simulator, client in
                try simulator.state.setFaults([.init(status: 503, count: 10)])
                let delivery = try await client.send(Harness.notification(1))

                #expect(!delivery.isDelivered)
                #expect(delivery.response.status == 503)
                #expect(delivery.response.reason == .serviceUnavailable)
                #expect(delivery.response.outcomeClass == .retryLater)
                #expect(delivery.attempts == 3)
                #expect(simulator.state.stats().requests == 3)
                #expect(simulator.state.notifications().isEmpty)
            }
        }

        @Test func aNotificationThatMustNotBeStoredIsTriedOnce() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                try simulator.state.setFaults([.init(status: 503, count: 1)])
                let delivery = try await client.send(Harness.notification(1, expiration: .immediately))

                #expect(delivery.response.status == 503)
                #expect(delivery.attempts == 1)
                #expect(simulator.state.stats().requests == 1)
            }
        }

        @Test func anExpiredNotificationIsNotRetriedByTheClientsClock() async throws {
            let clock = ManualWallClock(Date())
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.clock = clock }, configureClient: { $0.clock = clock }
            ) { simulator, client in
                try simulator.state.setFaults([.init(status: 503, count: 2)])
                let expired = try await client.send(Harness.notification(1, expiration: .at(clock.now.addingTimeInterval(-1))))
                #expect(expired.response.status == 503)
                #expect(expired.attempts == 1)
                #expect(simulator.state.stats().requests == 1)

                // The same fault for a notification still inside its expiration: retried.
                let live = try await client.send(Harness.notification(2, expiration: .at(clock.now.addingTimeInterval(3600))))
                #expect(live.isDelivered)
                #expect(live.attempts == 2)
            }
        }
    }
}
