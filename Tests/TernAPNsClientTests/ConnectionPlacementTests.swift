import NIOCore
import NIOPosix
import TernAPNs
@testable import TernAPNsClient
import TernSimulator
import Testing

extension ClientFaultTests {
    /// Where the pool's connections live: spread over the event loop group's threads, not all on one.
    @Suite struct ConnectionPlacementTests {
        /// A connection planned from a loop's own callback (the first one opened, the next one wanted) used to go on
        /// that loop (`EventLoopGroup.any()`), so a pool of four sent everything from one thread of two. The pool's
        /// state machine now names the least used loop for each (its value tests cover replacements).
        @Test func connectionsAreSpreadEvenlyOverTheGroupsLoops() async throws {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
            // One stream per connection: every connection after the first is planned in a loop's callback (one
            // opened with callers still waiting), the case that put them all on that loop.
            let loops: [any EventLoop]
            do {
                loops = try await Harness.withSimulator(configure: { $0.maxConcurrentStreams = 1 }) { simulator in
                    var configuration = Harness.clientConfiguration(for: simulator)
                    configuration.connections = 4
                    configuration.sendTimeout = .seconds(10)
                    let client = try APNsClient(configuration: configuration, eventLoopGroup: group)
                    let results = ResultsBox()
                    // More callers than streams: the pool grows to its four.
                    try await client.sendAll(GeneratedNotifications(count: 500), concurrency: 100) { await results.add($0) }
                    let loops = client.openConnectionEventLoops
                    await client.shutdown()
                    #expect(await results.delivered == 500)
                    return loops
                }
            } catch {
                try? await group.shutdownGracefully()
                throw error
            }
            try await group.shutdownGracefully()

            #expect(loops.count == 4)
            let perLoop = Dictionary(grouping: loops, by: { ObjectIdentifier($0) }).mapValues(\.count)
            #expect(perLoop.count == 2, "connections per loop: \(perLoop.values.sorted())")
            #expect(perLoop.values.allSatisfy { $0 == 2 }, "connections per loop: \(perLoop.values.sorted())")
        }
    }
}
