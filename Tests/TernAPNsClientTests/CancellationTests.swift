import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing
import TernTestSupport

extension ClientFaultTests {
    @Suite struct Cancellation {
        /// One connection with one stream, held for a second by a first send; `body` gets the client while the
        /// stream is busy.
        private static func withBusyStream(_ body: (APNsSimulator, APNsClient) async throws -> Void) async throws {
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.maxConcurrentStreams = 1 },
                configureClient: {
                    $0.connections = 1
                    $0.sendTimeout = .seconds(5)
                }
            ) { simulator, client in
                try simulator.state.setLatency(.init(fixedMilliseconds: 1000))
                let holder = Task { await Harness.send(client, Harness.notification(0)) }
                try await waitUntil("the first send on the wire") { simulator.state.stats().requests == 1 }
                try await body(simulator, client)
                #expect(await holder.value.isDelivered)
                // A send made now queues behind anything still waiting for the one stream: once it is answered, a
                // wrongly kept send would have gone first.
                try simulator.state.setLatency(.init(fixedMilliseconds: 0))
                #expect(await Harness.send(client, Harness.notification(99)).isDelivered)
                #expect(simulator.state.stats().requests == 2, "the holder and the later send, nothing else")
            }
        }

        @Test func aSendCancelledWhileWaitingForAStreamEndsAtOnceAndIsNeverSent() async throws {
            try await Self.withBusyStream { simulator, client in
                let waiting = Task { await Harness.send(client, Harness.notification(1)) }
                try await Task.sleep(for: .milliseconds(200))
                waiting.cancel()
                let outcome = await waiting.value
                #expect(throws: CancellationError.self) { try outcome.result.get() }
                #expect(outcome.elapsed < .milliseconds(700))
            }
        }

        @Test func aSendCancelledDuringItsRetryBackOffEndsAtOnceWithoutAnotherAttempt() async throws {
            try await Harness.withSimulatorAndClient(configureClient: {
                $0.retryBackoff = .init(initial: .seconds(3), maximum: .seconds(3))
                $0.sendTimeout = .seconds(10)
            }) { simulator, client in
                try simulator.state.setFaults([.init(status: 503, count: 1)])
                let sending = Task { await Harness.send(client, Harness.notification(1)) }
                try await waitUntil("the first attempt answered 503") { simulator.state.stats().faultsInjected == 1 }
                try await Task.sleep(for: .milliseconds(200))
                sending.cancel()
                let outcome = await sending.value
                #expect(throws: CancellationError.self) { try outcome.result.get() }
                #expect(outcome.elapsed < .seconds(1), "ended at the cancellation, not after the 3 s back-off")
                try await Task.sleep(for: .seconds(3))
                #expect(simulator.state.stats().requests == 1, "the back-off's attempt never went out")
            }
        }

        @Test func aSendCancelledBeforeItStartsWaitingEndsAtOnceAndIsNeverSent() async throws {
            try await Self.withBusyStream { simulator, client in
                let cancelled = Task { await Harness.send(client, Harness.notification(1)) }
                cancelled.cancel()
                let outcome = await cancelled.value
                #expect(throws: CancellationError.self) { try outcome.result.get() }
                #expect(outcome.elapsed < .milliseconds(500))
            }
        }
    }
}
