import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing
import TernTestSupport

extension ClientFaultTests {
    @Suite struct Deadlines {
        @Test func aServerThatNeverAnswersEndsEverySendWithTimedOutInTime() async throws {
            let sendTimeout = Duration.seconds(3)
            try await Harness.withSimulatorAndClient(configureClient: {
                $0.sendTimeout = sendTimeout
                // The whole send's limit must win over the (longer) per-attempt one.
                $0.attemptTimeout = .seconds(30)
            }) { simulator, client in
                try simulator.state.setLatency(.init(fixedMilliseconds: 3_600_000))
                let notifications = (0..<200).map { Harness.notification($0) }
                let started = ContinuousClock.now
                let outcomes = try await withTimeout(10, "200 sends to a server that never answers") {
                    await Harness.sendConcurrently(client, notifications)
                }
                let total = ContinuousClock.now - started

                #expect(outcomes.filter { $0.clientError?.code != .timedOut }.map { "\($0.result)" } == [])
                #expect(outcomes.allSatisfy { $0.elapsed <= sendTimeout + .seconds(2) })
                // They waited for their answer rather than failing early for another reason.
                #expect(outcomes.allSatisfy { $0.elapsed >= sendTimeout - .milliseconds(500) })
                #expect(total <= sendTimeout + .seconds(2))
                // The requests reached the server: the deadline is what ended them.
                #expect(simulator.state.stats().requests == 200)
            }
        }

        @Test func withNoServerSendsTimeOutNamingTheConnectError() async throws {
            try await withClosedPort { port in
                var configuration = Harness.configuration(port: port, sendTimeout: .seconds(3))
                configuration.reconnectBackoff = .init(initial: .milliseconds(200), maximum: .seconds(30))
                let log = LogRecorder()
                try await APNsClient.withClient(configuration, logger: log.logger) { client in
                    let notifications = (0..<20).map { Harness.notification($0) }
                    let outcomes = try await withTimeout(10, "sends with no server") {
                        await Harness.sendConcurrently(client, notifications)
                    }
                    for outcome in outcomes {
                        let error = try #require(outcome.clientError, "\(outcome.result)")
                        #expect(error.code == .timedOut)
                        #expect(error.message.contains("127.0.0.1:\(port)"), "\(error.message)")
                        #expect(error.message.lowercased().contains("refused"), "\(error.message)")
                        #expect(outcome.elapsed >= .milliseconds(2500))
                        #expect(outcome.elapsed <= .seconds(5))
                    }
                    #expect(client.openConnections == 0)
                    // Refused connects are retried with back-off, not in a tight loop.
                    let connects = log.count("APNs connect failed")
                    #expect(connects >= 2, "the client gave up connecting while sends waited")
                    #expect(connects < 15, "\(connects) connects in 3 s: no back-off")
                }
            }
        }

        @Test func onceNoConnectionHasWorkedForASendsWholeTimeSendsFailAtOnceNamingTheConnectError() async throws {
            try await withClosedPort { port in
                let configuration = Harness.configuration(port: port, sendTimeout: .seconds(1))
                try await APNsClient.withClient(configuration, logger: LogRecorder().logger) { client in
                    // The first sends wait out their second each (an outage shorter than that is waited out), until
                    // the endpoint has been unreachable for longer than a send may wait.
                    var codes: [APNsClientError.Code] = []
                    for number in 0..<4 {
                        let outcome = await Harness.send(client, Harness.notification(number))
                        codes.append(try #require(outcome.clientError, "\(outcome.result)").code)
                        if codes.last == .connectionFailed { break }
                    }
                    #expect(codes.first == .timedOut)
                    #expect(codes.last == .connectionFailed, "\(codes)")
                    // From then on a send fails at once, not at its deadline, and says why.
                    let next = await Harness.send(client, Harness.notification(9))
                    let error = try #require(next.clientError, "\(next.result)")
                    #expect(error.code == .connectionFailed)
                    #expect(error.message.contains("127.0.0.1:\(port)") && error.message.lowercased().contains("refused"), "\(error.message)")
                    #expect(next.elapsed < .milliseconds(500))
                }
            }
        }

        @Test func waitingForAConnectionOpensOneAndSendsNothing() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                let waited = Counter()
                try await withTimeout(10, "the first connection") { try await client.waitForConnection { waited.increment() } }
                #expect(waited.value == 1, "no connection was open: it waited")
                #expect(client.openConnections == 1)
                // A connection is ready now: at once, without waiting.
                try await client.waitForConnection { waited.increment() }
                #expect(waited.value == 1)
                #expect(simulator.state.stats().requests == 0, "nothing was sent")
                #expect(simulator.state.stats().connectionsOpened == 1)
            }
        }

        @Test func waitingForAConnectionToAnEndpointThatIsDownEndsAtTheSendTimeoutAndThenSendsFailAtOnce() async throws {
            try await withClosedPort { port in
                let configuration = Harness.configuration(port: port, sendTimeout: .seconds(1))
                try await APNsClient.withClient(configuration, logger: LogRecorder().logger) { client in
                    let started = ContinuousClock.now
                    let waitError = await #expect(throws: APNsClientError.self) { try await client.waitForConnection() }
                    #expect(waitError?.code == .timedOut)
                    #expect(waitError?.message.lowercased().contains("refused") == true, "\(String(describing: waitError))")
                    #expect(ContinuousClock.now - started >= .milliseconds(900))
                    // It waited a whole send time in vain: the endpoint counts as unreachable, and a send fails at once
                    // (it does not wait out its own second as well), as a second wait does.
                    let send = await Harness.send(client, Harness.notification(1))
                    let sendError = try #require(send.clientError, "\(send.result)")
                    #expect(sendError.code == .connectionFailed)
                    #expect(send.elapsed < .milliseconds(500))
                    let again = ContinuousClock.now
                    let secondError = await #expect(throws: APNsClientError.self) { try await client.waitForConnection() }
                    #expect(secondError?.code == .connectionFailed)
                    #expect(ContinuousClock.now - again < .milliseconds(500))
                }
            }
        }

        @Test func aCancelledWaitForAConnectionEndsAtOnce() async throws {
            try await withClosedPort { port in
                let configuration = Harness.configuration(port: port, sendTimeout: .seconds(30))
                try await APNsClient.withClient(configuration, logger: LogRecorder().logger) { client in
                    let waiting = OneTimeSignal()
                    let wait = Task { try await client.waitForConnection { waiting.fire() } }
                    await waiting.wait()
                    wait.cancel()
                    let result = try await withTimeout(5, "the cancelled wait") { await wait.result }
                    #expect(throws: CancellationError.self) { try result.get() }
                }
            }
        }

        @Test func aServerThatHangsUpAtOnceIsNotReconnectedInATightLoopNorAfterShutdown() async throws {
            let accepted = Counter()
            let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .childChannelInitializer { channel in
                    accepted.increment()
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(CloseOnActive())
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            let port = try #require(server.localAddress?.port)
            do {
                var configuration = Harness.configuration(port: port, sendTimeout: .seconds(3))
                configuration.reconnectBackoff = .init(initial: .milliseconds(200), maximum: .seconds(1))
                let client = try APNsClient(configuration: configuration, logger: LogRecorder().logger)
                let notifications = (0..<20).map { Harness.notification($0) }
                let outcomes = try await withTimeout(10, "sends to a server that hangs up") {
                    await Harness.sendConcurrently(client, notifications)
                }
                for outcome in outcomes {
                    let error = try #require(outcome.clientError, "\(outcome.result)")
                    #expect(error.code == .timedOut)
                    // The operator learns where and why no connection could be used.
                    #expect(error.message.contains("127.0.0.1:\(port)"), "\(error.message)")
                    #expect(outcome.elapsed <= .seconds(5))
                }
                let attempts = accepted.value
                #expect(attempts >= 2, "the client gave up reconnecting while sends waited")
                #expect(attempts < 15, "\(attempts) connects in 3 s: no back-off")

                // A reconnect still in its back-off when the client shuts down never happens.
                try await withTimeout(5, "shutdown") { await client.shutdown() }
                // (A connect already under way when shutdown began may still arrive; it is closed at once.)
                try await Task.sleep(for: .milliseconds(100))
                let atShutdown = accepted.value
                try await Task.sleep(for: .milliseconds(1500))
                #expect(accepted.value == atShutdown, "the client connected after shutdown")
            } catch {
                try? await server.close()
                throw error
            }
            try await server.close()
        }

        @Test func aServerCertificateTheClientDoesNotTrustEndsSendsNamingTheTLSFailure() async throws {
            let otherAuthority = try SimulatorCertificateAuthority.generate(commonName: "Some Other CA")
            let logs = LogRecorder()
            try await Harness.withSimulatorAndClient(
                configureClient: {
                    $0.endpoint.trustRootsPEM = otherAuthority.certificatePEM
                    $0.sendTimeout = .seconds(2)
                }, logs: logs
            ) { simulator, client in
                let outcome = await Harness.sendConcurrently(client, [Harness.notification(1)])[0]
                let error = try #require(outcome.clientError, "\(outcome.result)")
                #expect(error.code == .timedOut)
                #expect(error.message.contains("127.0.0.1:\(simulator.port)"), "\(error.message)")
                #expect(error.message.lowercased().contains("certificate"), "\(error.message)")
                #expect(simulator.state.stats().requests == 0)
                // And the log says so, as it says a refused connection: a probe's app with the wrong CA had every push
                // time out with no line in the log.
                #expect(!logs.messages(containing: "APNs connection failed before its first answer").isEmpty)
            }
        }
    }
}

/// Hangs up as soon as a connection is accepted.
final class CloseOnActive: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.add(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}
