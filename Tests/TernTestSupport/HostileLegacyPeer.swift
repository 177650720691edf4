import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TernAPNs
import TernSimulator

/// A legacy gateway or feedback service on 127.0.0.1 that misbehaves in one way, with a server certificate from a CA
/// of its own and a client certificate from the same CA.
public final class HostileLegacyPeer: Sendable {
    public enum Behaviour: Sendable {
        /// Accepts TCP and says nothing, not even the TLS handshake.
        case silentTCP
        /// Completes the handshake, sends this error response and closes.
        case errorResponse(LegacyErrorResponse)
        /// Completes the handshake and sends valid feedback tuples for ever.
        case endlessFeedback
    }

    public let port: Int
    /// The CA that issued both certificates, as PEM: the client trusts it.
    public let trustRootsPEM: String
    /// A push certificate for the peer's topic and its key, as PEM.
    public let client: (certificatePEM: String, privateKeyPEM: String)
    private let server: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let connections = Atomic<Int>(0)
        let bytesSent = Atomic<Int>(0)
    }

    /// TCP connections accepted so far.
    public var connections: Int { counters.connections.load(ordering: .relaxed) }
    /// Feedback bytes that have left for the client.
    public var bytesSent: Int { counters.bytesSent.load(ordering: .relaxed) }

    private init(port: Int, trustRootsPEM: String, client: (String, String), server: any Channel, counters: Counters) {
        self.port = port
        self.trustRootsPEM = trustRootsPEM
        self.client = client
        self.server = server
        self.counters = counters
    }

    /// Listens on a free port of 127.0.0.1, behaving as `behaviour` on every connection.
    public static func start(_ behaviour: Behaviour, topic: String = "com.example.app") async throws -> HostileLegacyPeer {
        let authority = try SimulatorCertificateAuthority.generate()
        let serverCertificate = try authority.issueServerCertificate()
        let clientCertificate = try authority.issuePushCertificate(bundleID: topic)
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
        guard let port = server.localAddress?.port else { throw HTTPTestClientError(description: "the hostile peer has no port") }
        return HostileLegacyPeer(
            port: port, trustRootsPEM: authority.certificatePEM,
            client: (clientCertificate.certificatePEM, clientCertificate.privateKeyPEM), server: server, counters: counters)
    }

    public func stop() async {
        try? await server.close()
    }

    /// Writes the CA, the client certificate and its key as PEM files into `folder` (for a command's options).
    public func writeFiles(to folder: URL) throws -> (ca: String, certificate: String, key: String) {
        let files = (
            ca: folder.appendingPathComponent("ca.pem").path, certificate: folder.appendingPathComponent("client.pem").path,
            key: folder.appendingPathComponent("client-key.pem").path
        )
        try trustRootsPEM.write(toFile: files.ca, atomically: true, encoding: .utf8)
        try client.certificatePEM.write(toFile: files.certificate, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: files.key, atomically: true, encoding: .utf8)
        return files
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
