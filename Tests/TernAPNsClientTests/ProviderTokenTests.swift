import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing
import TernTestSupport

extension ClientFaultTests {
    @Suite struct ProviderTokens {
        /// Sends `count` notifications (series `series`) at once; returns those not delivered at the first attempt.
        private static func sendLoad(_ client: APNsClient, series: Int, count: Int = 400) async -> [String] {
            let outcomes = await Harness.sendConcurrently(client, (0..<count).map { Harness.notification($0, series: series) })
            return outcomes.compactMap { outcome in
                guard let delivery = outcome.delivery else { return "\(outcome.result)" }
                if delivery.isDelivered && delivery.attempts == 1 { return nil }
                return "\(delivery.response.status) \(delivery.response.reason?.rawValue ?? "") after \(delivery.attempts) attempt(s)"
            }
        }

        @Test func theTokenIsRenewedOnceAfterFiftyMinutesAndNeverTooOften() async throws {
            let clock = ManualWallClock(Date())
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.clock = clock },
                configureClient: {
                    $0.clock = clock
                    $0.connections = 4
                    $0.sendTimeout = .seconds(10)
                }
            ) { simulator, client in
                // Load until all four connections are open and carry the first token.
                var series = 0
                repeat {
                    #expect(await Self.sendLoad(client, series: series) == [])
                    series += 1
                } while simulator.state.stats().connectionsOpened < 4 && series < 20
                #expect(simulator.state.stats().connectionsOpened == 4)

                clock.advance(by: 21 * 60)
                #expect(await Self.sendLoad(client, series: 100) == [])
                var stats = simulator.state.stats()
                #expect(stats.rejectedByReason["TooManyProviderTokenUpdates"] == nil)
                #expect(stats.rejected == 0)

                clock.advance(by: 30 * 60)  // 51 minutes: past the refresh interval
                #expect(await Self.sendLoad(client, series: 101) == [])
                clock.advance(by: 60)  // and a minute later the new token is still in use
                #expect(await Self.sendLoad(client, series: 102) == [])
                clock.advance(by: 30 * 60)  // 81 minutes: the second token is 30 minutes old, the first long expired
                #expect(await Self.sendLoad(client, series: 103) == [])

                stats = simulator.state.stats()
                #expect(stats.rejectedByReason["TooManyProviderTokenUpdates"] == nil)
                #expect(stats.rejectedByReason["ExpiredProviderToken"] == nil)
                #expect(stats.rejected == 0)
                // The same four connections throughout: no renewal needed a new connection.
                #expect(stats.connectionsOpened == 4)
            }
        }

        @Test func theFirstTokenIsKeptUntilTheRefreshIntervalThenReplacedOnce() async throws {
            // The simulator's clock stays at the start while the client's moves on. A token the client signed later
            // would be "issued in the future" there (more than 5 minutes) and refused, so every acceptance proves
            // the first token is still in use.
            let start = Date()
            let clientClock = ManualWallClock(start)
            let simulatorClock = ManualWallClock(start)
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.clock = simulatorClock },
                configureClient: {
                    $0.clock = clientClock
                    $0.connections = 4
                    $0.sendTimeout = .seconds(10)
                }
            ) { simulator, client in
                #expect(await Self.sendLoad(client, series: 0) == [])
                clientClock.advance(by: 21 * 60)
                #expect(await Self.sendLoad(client, series: 1) == [])
                clientClock.advance(by: 28 * 60)  // 49 minutes
                #expect(await Self.sendLoad(client, series: 2) == [])
                #expect(simulator.state.stats().rejected == 0)

                // 51 minutes: the client has a new token, which the simulator (still at the start) sees as issued
                // 51 minutes in the future.
                clientClock.advance(by: 2 * 60)
                let probe = try await client.send(Harness.notification(0, series: 3))
                #expect(probe.response.reason == .invalidProviderToken)

                // With the simulator's clock caught up, the one new token is accepted on every connection.
                simulatorClock.advance(by: 51 * 60)
                #expect(await Self.sendLoad(client, series: 4) == [])
                let stats = simulator.state.stats()
                #expect(stats.rejectedByReason == ["InvalidProviderToken": 1])
                // None was replaced for the new token. (How many of the four the pool had opened by now is its own
                // business: on a busy machine the load can finish before the last one's handshake does.)
                #expect(stats.connectionsOpened <= 4)
            }
        }

        @Test func aConnectionOpenedLateInATokensLifeDoesNotFailSendsAfterTheRenewal() async throws {
            // APNs refuses a second token on one connection within 20 minutes of its first, and keeps refusing.
            // A connection opened (after a GOAWAY) when the shared token is 45 minutes old gets the renewed token
            // 6 minutes later: the client must move its sends to a connection that takes the new token.
            let clock = ManualWallClock(Date())
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.clock = clock },
                configureClient: {
                    $0.clock = clock
                    $0.connections = 1
                }
            ) { simulator, client in
                #expect(try await client.send(Harness.notification(1)).isDelivered)
                clock.advance(by: 45 * 60)
                try simulator.state.setGoAway(.init(afterStreams: 1, connections: 1))
                #expect(try await client.send(Harness.notification(2)).isDelivered)
                try await waitUntil("the first connection to close") { simulator.state.stats().connectionsActive == 0 }
                // A new connection, whose first token is the 45-minute-old one.
                #expect(try await client.send(Harness.notification(3)).isDelivered)
                #expect(simulator.state.stats().connectionsOpened == 2)

                clock.advance(by: 6 * 60)  // 51 minutes: the client renews
                let afterRenewal = try await client.send(Harness.notification(4))
                #expect(afterRenewal.isDelivered, "\(afterRenewal.response.status) \(afterRenewal.response.reason?.rawValue ?? "")")
                #expect(afterRenewal.attempts <= 2)
                // And the sends that follow go through at once.
                let outcomes = await Harness.sendConcurrently(client, (5..<25).map { Harness.notification($0) })
                #expect(outcomes.allSatisfy { $0.isDelivered && $0.delivery?.attempts == 1 })
                #expect((simulator.state.stats().rejectedByReason["TooManyProviderTokenUpdates"] ?? 0) <= 1)
            }
        }

        @Test func anExpiredProviderTokenIsRenewedAndTheSendSucceeds() async throws {
            // Separate clocks: APNs' runs 61 minutes ahead while the client's moves 21 minutes, so the client would
            // not have refreshed on its own (50 minutes) but may renew (20-minute floor) when APNs says expired.
            let start = Date()
            let clientClock = ManualWallClock(start)
            let simulatorClock = ManualWallClock(start)
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.clock = simulatorClock },
                configureClient: {
                    $0.clock = clientClock
                    $0.connections = 1
                }
            ) { simulator, client in
                let first = try await client.send(Harness.notification(1))
                #expect(first.isDelivered)

                simulatorClock.advance(by: 61 * 60)
                clientClock.advance(by: 21 * 60)
                let renewed = try await client.send(Harness.notification(2))
                #expect(renewed.isDelivered)
                #expect(renewed.attempts == 2)

                // The renewed token holds for the sends that follow.
                let outcomes = await Harness.sendConcurrently(client, (3..<50).map { Harness.notification($0) })
                #expect(outcomes.allSatisfy { $0.isDelivered && $0.delivery?.attempts == 1 })

                let stats = simulator.state.stats()
                #expect(stats.rejectedByReason == ["ExpiredProviderToken": 1])
                #expect(stats.accepted == 49)
            }
        }
    }
}
