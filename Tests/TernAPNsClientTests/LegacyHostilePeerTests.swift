import Foundation
import TernAPNs
import TernTestSupport
import Testing

@testable import TernAPNsClient

extension ClientFaultTests {
    /// The legacy clients against peers that misbehave where the behaviour lives: on real sockets.
    @Suite struct LegacyHostilePeer {
        static func configuration(_ peer: HostileLegacyPeer) -> LegacyClientConfiguration {
            var configuration = LegacyClientConfiguration(
                authentication: .certificate(chainPEM: peer.client.certificatePEM, privateKeyPEM: peer.client.privateKeyPEM),
                endpoint: .init(host: "127.0.0.1", port: peer.port, trustRootsPEM: peer.trustRootsPEM))
            configuration.replayWindow = .milliseconds(50)
            configuration.reconnectBackoff = .init(initial: .milliseconds(100), maximum: .milliseconds(100))
            return configuration
        }

        /// The message of the first outcome, if it is a failure.
        static func failure(_ outcomes: [LegacyOutcome]) -> String? {
            if case .failed(let message)? = outcomes.first { message } else { nil }
        }

        static let notification = LegacyNotification(
            token: Harness.token(1).bytes, payload: Array(#"{"aps":{"alert":"Hi"}}"#.utf8))

        @Test func anEndlessFeedbackStreamEndsAtTheTupleBoundAndHandsBackNothing() async throws {
            let peer = try await HostileLegacyPeer.start(.endlessFeedback)
            var configuration = Self.configuration(peer)
            configuration.feedbackMaxTuples = 10_000
            configuration.feedbackTimeout = .seconds(20)
            let feedback = configuration
            let error = try await withTimeout(30, "a feedback read of an endless stream") {
                await #expect(throws: APNsClientError.self) { _ = try await LegacyFeedbackClient.fetch(feedback) }
            }
            await peer.stop()
            // Not a timeout: the read stopped at the bound, with memory for 10,000 tuples, however much was coming.
            #expect(error?.code == .connectionFailed, "\(String(describing: error))")
            #expect(error?.message.contains("more than 10000 tuples") == true, "\(String(describing: error))")
            #expect(peer.bytesSent > 10_000 * 38, "the peer sent only \(peer.bytesSent) bytes")
        }

        @Test func anErrorResponseAboutANotificationNeverSentIsNotProgress() {
            typealias Settlement = LegacyGatewayCore.ErrorSettlement
            let written: [UInt32] = [1, 2, 3]
            let stranger = Settlement(LegacyErrorResponse(status: .invalidToken, identifier: 0xdead_beef), written: written)
            #expect(stranger.accepted == 0 && stranger.named == nil)
            #expect(!stranger.isProgress, "an answer about no notification sent must not reset the fruitless-connection count")
            let shutdownAfterSettled = Settlement(LegacyErrorResponse(status: .shutdown, identifier: 0xdead_beef), written: written)
            #expect(!shutdownAfterSettled.isProgress)

            let rejection = Settlement(LegacyErrorResponse(status: .invalidToken, identifier: 2), written: written)
            #expect(rejection.accepted == 1 && rejection.named == .rejected(.invalidToken) && rejection.isProgress)
            let shutdown = Settlement(LegacyErrorResponse(status: .shutdown, identifier: 3), written: written)
            #expect(shutdown.accepted == 2 && shutdown.named == .accepted && shutdown.isProgress)
        }

        @Test func aGatewayThatAnswersEveryConnectionAboutAStrangerBacksOffAndFails() async throws {
            let peer = try await HostileLegacyPeer.start(.errorResponse(LegacyErrorResponse(status: .invalidToken, identifier: 0xdead_beef)))
            var configuration = Self.configuration(peer)
            configuration.maxConnectFailures = 3
            // A backstop, so that a client that never gives up fails this test rather than hanging it.
            configuration.sendTimeout = .seconds(10)
            let client = try LegacyGatewayClient(configuration: configuration)
            let started = ContinuousClock.now
            let outcomes = await client.send([Self.notification])
            let elapsed = ContinuousClock.now - started
            await client.shutdown()
            await peer.stop()

            let message = try #require(Self.failure(outcomes), "expected a failure, got \(outcomes)")
            #expect(message.contains("not one this connection carried"), "\(message)")
            #expect(!message.hasPrefix("timed out"), "\(message)")
            #expect(peer.connections == 3, "\(peer.connections) connections: the client did not count them as fruitless")
            // Two waits between three connections, each at least half the initial back-off.
            #expect(elapsed >= .milliseconds(100))
        }

        @Test func aGatewayThatNeverFinishesTheHandshakeGetsNothingCountedAccepted() async throws {
            let peer = try await HostileLegacyPeer.start(.silentTCP)
            var configuration = Self.configuration(peer)
            configuration.connectTimeout = .milliseconds(300)
            configuration.maxConnectFailures = 2
            let client = try LegacyGatewayClient(configuration: configuration)
            let outcomes = await client.send([Self.notification])
            await client.shutdown()
            await peer.stop()

            let message = try #require(Self.failure(outcomes), "expected a failure, got \(outcomes)")
            #expect(message.contains("no TLS handshake"), "\(message)")
            #expect(peer.connections == 2)
        }

        @Test func aSendTimeoutEndsASendStuckBehindAHandshake() async throws {
            let peer = try await HostileLegacyPeer.start(.silentTCP)
            var configuration = Self.configuration(peer)
            configuration.sendTimeout = .milliseconds(300)
            let client = try LegacyGatewayClient(configuration: configuration)
            let outcomes = try await withTimeout(10, "a send with a 300 ms send timeout") { await client.send([Self.notification]) }
            await client.shutdown()
            await peer.stop()

            let message = try #require(Self.failure(outcomes), "expected a failure, got \(outcomes)")
            #expect(message.hasPrefix("timed out"), "\(message)")
            #expect(peer.connections == 1)
        }

        /// How a wait for a connection ended: nil when it returned, else its error.
        static func waitForConnection(_ client: LegacyGatewayClient, onWaiting: () -> Void = {}) async -> (any Error)? {
            do {
                try await client.waitForConnection(onWaiting: onWaiting)
                return nil
            } catch {
                return error
            }
        }

        @Test func aWaitForAConnectionEndsAtTheSendTimeoutAndThenWaitsAndSendsFailAtOnceWithoutConnecting() async throws {
            let peer = try await HostileLegacyPeer.start(.silentTCP)
            var configuration = Self.configuration(peer)
            configuration.sendTimeout = .milliseconds(300)
            // One connection a minute while the gateway is unreachable: none in this test.
            configuration.reconnectBackoff = .init(initial: .milliseconds(100), maximum: .seconds(60))
            let client = try LegacyGatewayClient(configuration: configuration)

            var waited = false
            // Bounded by the send timeout under test.
            let first = await Self.waitForConnection(client) { waited = true }
            #expect(waited, "no connection was ready, so the caller hears that it waits")
            let timedOut = try #require(first as? APNsClientError, "\(String(describing: first))")
            #expect(timedOut.code == .timedOut, "\(timedOut)")
            #expect(timedOut.message.contains("no connection to the gateway in time"), "\(timedOut)")

            // The gateway now counts as unreachable: a wait and a send fail at once, with why, and nothing connects.
            let second = try #require(await Self.waitForConnection(client) as? APNsClientError)
            #expect(second.code == .connectionFailed, "\(second)")
            #expect(second.message.hasPrefix("not sent: the gateway is unreachable"), "\(second)")
            let outcomes = await client.send([Self.notification, Self.notification])
            #expect(outcomes.count == 2)
            for outcome in outcomes {
                guard case .failed(let message) = outcome else {
                    Issue.record("expected a failure at once, got \(outcome)")
                    continue
                }
                #expect(message.hasPrefix("not sent: the gateway is unreachable"), "\(message)")
            }
            #expect(peer.connections == 1, "\(peer.connections) connections: the client tried the gateway again at once")
            await client.shutdown()
            await peer.stop()
        }

        @Test func aWaitWithoutASendTimeoutGivesUpAfterTheFruitlessConnectionsAndACancelledWaitEndsAtOnce() async throws {
            let peer = try await HostileLegacyPeer.start(.silentTCP)
            var configuration = Self.configuration(peer)
            configuration.connectTimeout = .milliseconds(200)
            configuration.maxConnectFailures = 2
            let client = try LegacyGatewayClient(configuration: configuration)
            // Nothing written: a connection without a handshake is still closed at its connect timeout.
            let error = try await withTimeout(10, "a wait through two 200 ms connects") { await Self.waitForConnection(client) }
            let failed = try #require(error as? APNsClientError, "\(String(describing: error))")
            #expect(failed.code == .connectionFailed, "\(failed)")
            #expect(failed.message.contains("no TLS handshake"), "\(failed)")
            #expect(peer.connections == 2)
            await client.shutdown()

            // Cancelled while it waits (a fresh client, whose connect timeout is far off): it ends at once.
            configuration.connectTimeout = .seconds(60)
            let patient = try LegacyGatewayClient(configuration: configuration)
            let (waiting, nowWaiting) = AsyncStream.makeStream(of: Void.self)
            let waiter = Task { await Self.waitForConnection(patient) { nowWaiting.yield() } }
            for await _ in waiting { break }
            waiter.cancel()
            let cancelled = try await withTimeout(10, "a cancelled wait") { await waiter.value }
            #expect(cancelled is CancellationError, "\(String(describing: cancelled))")
            await patient.shutdown()
            await peer.stop()
        }
    }
}
