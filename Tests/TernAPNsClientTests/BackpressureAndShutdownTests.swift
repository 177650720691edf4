import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing
import TernTestSupport

/// How far a lazily produced sequence ran ahead of the results `sendAll` reported.
actor ProductionLedger {
    private(set) var produced = 0
    private(set) var completed = 0
    /// The most notifications ever produced but not yet reported back.
    private(set) var mostAhead = 0
    private var target: (count: Int, continuation: CheckedContinuation<Void, Never>)?

    func produce() {
        produced += 1
        mostAhead = max(mostAhead, produced - completed)
    }

    func complete() {
        completed += 1
        if let target, completed >= target.count {
            self.target = nil
            target.continuation.resume()
        }
    }

    /// Returns once `count` results were reported.
    func waitForCompleted(_ count: Int) async {
        guard completed < count else { return }
        await withCheckedContinuation { target = (count, $0) }
    }
}

/// Notifications made one at a time, as `sendAll` asks for them, counted in a ledger; ends when its task is
/// cancelled.
struct LedgeredNotifications: AsyncSequence, Sendable {
    typealias Element = APNsNotification
    let count: Int
    let ledger: ProductionLedger

    struct AsyncIterator: AsyncIteratorProtocol {
        let count: Int
        let ledger: ProductionLedger
        var next = 0
        mutating func next() async -> APNsNotification? {
            guard next < count, !Task.isCancelled else { return nil }
            await ledger.produce()
            defer { next += 1 }
            return Harness.notification(next)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count, ledger: ledger) }
}

extension ClientFaultTests {
    @Suite struct BackpressureAndShutdown {
        @Test func sendAllReadsTheSequenceOnlyAsFastAsSendsComplete() async throws {
            let concurrency = 200
            try await Harness.withSimulatorAndClient(configureClient: { $0.sendTimeout = .seconds(10) }) { simulator, client in
                try simulator.state.setLatency(.init(fixedMilliseconds: 20))
                let ledger = ProductionLedger()
                let sending = Task {
                    try await client.sendAll(LedgeredNotifications(count: 100_000, ledger: ledger), concurrency: concurrency) { _ in
                        await ledger.complete()
                    }
                }
                do {
                    try await withTimeout(40, "2,000 results") { await ledger.waitForCompleted(2_000) }
                } catch {
                    sending.cancel()
                    throw error
                }
                sending.cancel()
                try await withTimeout(5, "sendAll to end after cancellation") { try await sending.value }

                let produced = await ledger.produced
                let completed = await ledger.completed
                #expect(await ledger.mostAhead <= concurrency + 2)
                // Stopped early: the sequence was read little further than the results reported.
                #expect(produced < 4_000)
                #expect(produced == completed, "every notification read got a result")
            }
        }

        @Test func shutdownLetsInFlightSendsFinishAndRefusesNewOnes() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                try simulator.state.setLatency(.init(fixedMilliseconds: 200))
                let notifications = (0..<100).map { Harness.notification($0) }
                try await withThrowingTaskGroup(of: SendOutcome.self) { group in
                    for notification in notifications {
                        group.addTask { await Harness.send(client, notification) }
                    }
                    // Every send is on the wire (the simulator has decided it and is holding the answer).
                    try await waitUntil("100 requests at the simulator") { simulator.state.stats().requests == 100 }

                    let started = ContinuousClock.now
                    try await withTimeout(5, "shutdown") { await client.shutdown() }
                    #expect(ContinuousClock.now - started < .seconds(2))

                    var delivered = 0
                    var problems: [String] = []
                    for try await outcome in group {
                        if outcome.isDelivered { delivered += 1 } else { problems.append("\(outcome.result)") }
                    }
                    #expect(problems == [])
                    #expect(delivered == 100)
                }
                #expect(client.openConnections == 0)
                #expect(simulator.state.stats().accepted == 100)

                let error = await #expect(throws: APNsClientError.self) {
                    _ = try await client.send(Harness.notification(1000))
                }
                #expect(error?.code == .shutDown)
            }
        }
    }
}
