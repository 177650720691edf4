import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TernAPNs
import TernSimulator
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

            guard case .failed(let message) = outcomes.first else {
                Issue.record("expected a failure, got \(outcomes)")
                return
            }
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

            guard case .failed(let message) = outcomes.first else {
                Issue.record("expected a failure (nothing can have been sent), got \(outcomes)")
                return
            }
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

            guard case .failed(let message) = outcomes.first else {
                Issue.record("expected a timeout, got \(outcomes)")
                return
            }
            #expect(message.hasPrefix("timed out"), "\(message)")
            #expect(peer.connections == 1)
        }
    }
}

/// A legacy gateway or feedback service on 127.0.0.1 that misbehaves in one way, with a server certificate from a CA
/// of its own and a client certificate from the same CA.
final class HostileLegacyPeer: Sendable {
    enum Behaviour: Sendable {
        /// Accepts TCP and says nothing, not even the TLS handshake.
        case silentTCP
        /// Completes the handshake, sends this error response and closes.
        case errorResponse(LegacyErrorResponse)
        /// Completes the handshake and sends valid feedback tuples for ever.
        case endlessFeedback
    }

    let port: Int
    let trustRootsPEM: String
    let client: (certificatePEM: String, privateKeyPEM: String)
    private let server: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let connections = Atomic<Int>(0)
        let bytesSent = Atomic<Int>(0)
    }

    var connections: Int { counters.connections.load(ordering: .relaxed) }
    var bytesSent: Int { counters.bytesSent.load(ordering: .relaxed) }

    private init(port: Int, trustRootsPEM: String, client: (String, String), server: any Channel, counters: Counters) {
        self.port = port
        self.trustRootsPEM = trustRootsPEM
        self.client = client
        self.server = server
        self.counters = counters
    }

    static func start(_ behaviour: Behaviour) async throws -> HostileLegacyPeer {
        let authority = try SimulatorCertificateAuthority.generate()
        let serverCertificate = try authority.issueServerCertificate()
        let clientCertificate = try authority.issuePushCertificate(bundleID: Harness.topic)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(serverCertificate.certificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverCertificate.privateKeyPEM.utf8), format: .pem)))
        let sslContext = try NIOSSLContext(configuration: tls)
        let counters = Counters()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                counters.connections.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    switch behaviour {
                    case .silentTCP:
                        break
                    case .errorResponse(let response):
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        try channel.pipeline.syncOperations.addHandler(AnswerAndClose(response: response))
                    case .endlessFeedback:
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        try channel.pipeline.syncOperations.addHandler(EndlessFeedback(counters: counters))
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HostileLegacyPeer(
            port: try #require(server.localAddress?.port), trustRootsPEM: authority.certificatePEM,
            client: (clientCertificate.certificatePEM, clientCertificate.privateKeyPEM), server: server, counters: counters)
    }

    func stop() async {
        try? await server.close()
    }

    /// Writes the error response (NIOSSL sends it once the handshake is done) and closes once it has left.
    private final class AnswerAndClose: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let response: LegacyErrorResponse

        init(response: LegacyErrorResponse) { self.response = response }

        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: response.encoded))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }

    /// Valid 38-byte tuples, 4,000 to a write, the next write as soon as the last has left: for ever.
    private final class EndlessFeedback: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let counters: Counters
        let chunk: [UInt8] = Array(
            repeating: try! FeedbackTuple(timestamp: 1_700_000_000, token: Array(repeating: 0xab, count: 32)).encoded(), count: 4_000
        ).flatMap { $0 }

        init(counters: Counters) { self.counters = counters }

        func channelActive(context: ChannelHandlerContext) {
            send(context)
            context.fireChannelActive()
        }

        private func send(_ context: ChannelHandlerContext) {
            context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: chunk))).assumeIsolated().whenSuccess {
                self.counters.bytesSent.add(self.chunk.count, ordering: .relaxed)
                self.send(context)
            }
        }
    }
}
