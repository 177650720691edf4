import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

extension ClientFaultTests {
    @Suite struct ConnectionFaults {
        @Test func goAwayEveryThousandStreamsLosesAndDuplicatesNothing() async throws {
            let count = 10_000
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.logCapacity = count * 2 },
                configureClient: { $0.sendTimeout = .seconds(10) }
            ) { simulator, client in
                try simulator.state.setGoAway(.init(afterStreams: 1000))
                let results = ResultsBox()
                try await client.sendAll(GeneratedNotifications(count: count), concurrency: 500) { await results.add($0) }

                #expect(await results.failed == [])
                #expect(await results.delivered == count)
                let stats = simulator.state.stats()
                #expect(stats.goAwaysSent >= 5, "GOAWAY was not exercised")
                // Connections that got GOAWAY were replaced while work remained (10,000 delivered, each connection sent
                // away after about 1000 streams); the last one may end with its GOAWAY, so opened ≥ GOAWAYs, not >.
                #expect(stats.connectionsOpened >= stats.goAwaysSent)
                #expect(stats.accepted == count)
                let arrivals = Harness.arrivalsByToken(simulator)
                #expect(arrivals.count == count)
                let duplicated = arrivals.filter { $0.value != 1 }
                #expect(duplicated.isEmpty, "tokens that arrived more than once: \(duplicated.count)")
            }
        }

        @Test func droppedConnectionsLoseNothingAndDuplicateOnlyWhatWasInFlight() async throws {
            let count = 5_000
            let concurrency = 200
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.logCapacity = count * 2 },
                configureClient: { $0.sendTimeout = .seconds(10) }
            ) { simulator, client in
                try simulator.state.setDrop(.init(afterStreams: 700, connections: 2))
                let results = ResultsBox()
                try await client.sendAll(GeneratedNotifications(count: count), concurrency: concurrency) { await results.add($0) }

                #expect(await results.failed == [])
                #expect(await results.delivered == count)
                let stats = simulator.state.stats()
                #expect(stats.connectionsDropped == 2)
                let arrivals = Harness.arrivalsByToken(simulator)
                #expect(arrivals.count == count, "notifications lost: \(count - arrivals.count)")
                #expect(arrivals.values.allSatisfy { $0 >= 1 })
                // Only requests in flight on a dropped connection may have arrived and been sent again: at most
                // `concurrency` per drop.
                let duplicates = arrivals.values.reduce(0) { $0 + $1 - 1 }
                #expect(duplicates <= stats.connectionsDropped * concurrency)
                #expect(stats.accepted == count + duplicates)
            }
        }

        @Test func theServersStreamLimitIsNeverExceeded() async throws {
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.maxConcurrentStreams = 1 },
                configureClient: {
                    $0.connections = 1
                    $0.sendTimeout = .seconds(10)
                }
            ) { simulator, client in
                // A little latency keeps every stream open long enough for a second one to collide with it.
                try simulator.state.setLatency(.init(fixedMilliseconds: 2))
                let outcomes = await Harness.sendConcurrently(client, (0..<200).map { Harness.notification($0) })

                #expect(outcomes.filter { !$0.isDelivered }.map { "\($0.result)" } == [])
                #expect(outcomes.allSatisfy { $0.delivery?.attempts == 1 })
                let stats = simulator.state.stats()
                #expect(stats.streamsRefused == 0)
                #expect(stats.connectionsOpened == 1)
                #expect(stats.accepted == 200)
            }
        }
    }
}
