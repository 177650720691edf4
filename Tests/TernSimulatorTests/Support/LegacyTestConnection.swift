import NIOCore
import NIOPosix
import NIOSSL
import TernSimulator
import TernTestSupport

/// A raw TLS connection to one of the simulator's legacy ports: writes the bytes given, in the chunks given, then
/// reads until the simulator closes, or (given `until`) waits for a condition on the simulator and closes itself.
/// What a provider library would see, byte for byte.
enum LegacyTestConnection {
    struct Exchange {
        /// Every byte the simulator sent before it closed.
        var received: [UInt8]
        /// The TLS handshake or the connection failed (for example, no client certificate).
        var failed: Bool
    }

    static func exchange(
        port: Int, trusting authorityPEM: String, certificate: IssuedCertificate?, writing chunks: [[UInt8]] = [],
        until condition: (@Sendable () -> Bool)? = nil, timeout: Double = 10
    ) async throws -> Exchange {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(authorityPEM.utf8), format: .pem)])
        if let certificate {
            tls.certificateChain = [.certificate(try NIOSSLCertificate(bytes: Array(certificate.certificatePEM.utf8), format: .pem))]
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem))
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await withTimeout(timeout, "the simulator to close the legacy connection") {
            try await channel.executeThenClose { inbound, outbound in
                var failed = false
                do {
                    for chunk in chunks { try await outbound.write(ByteBuffer(bytes: chunk)) }
                } catch {
                    failed = true
                }
                if let condition {
                    while !condition() { try await Task.sleep(for: .milliseconds(5)) }
                    return Exchange(received: [], failed: failed)
                }
                var received: [UInt8] = []
                do {
                    for try await buffer in inbound { received += buffer.readableBytesView }
                } catch let error as NIOSSLError where error == .uncleanShutdown {
                    // The gateway closes right after its error response, as Apple's did.
                } catch {
                    failed = true
                }
                return Exchange(received: received, failed: failed)
            }
        }
    }
}
