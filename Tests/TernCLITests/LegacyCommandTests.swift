import Foundation
import NIOCore
import NIOPosix
// NIOSSL and TernSimulator (for a CA) reach this target through TernCLI; Package.swift does not list them here. The
// hostile gateways below need a TLS server of their own.
import NIOSSL
import Synchronization
import TernAPNs
import TernSimulator
import Testing

/// `tern send --legacy` and `tern feedback` as a user runs them, against a real `tern simulator`'s binary ports.
@Suite(.serialized)
struct LegacyCommandTests {
    static let token = String(repeating: "cd", count: 32)

    private func tls(_ simulator: SimulatorProcess) throws -> [String] {
        let (certificate, key) = try simulator.issueCertificate()
        return ["--host", "localhost", "--ca-file", simulator.stateDirectory.appendingPathComponent("ca.pem").path, "--cert", certificate, "--cert-key", key]
    }

    private func sendLegacy(_ simulator: SimulatorProcess, _ extra: [String] = []) throws -> CommandResult {
        try Commands.run(
            Commands.tern,
            ["send", "--legacy", "--port", String(simulator.legacyPort), "--topic", "com.example.app", "--token", Self.token, "--alert", "Hi"]
                + (try tls(simulator)) + extra)
    }

    @Test func sendLegacyDeliversThroughTheGateway() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let result = try sendLegacy(simulator, ["--legacy-format", "enhanced"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.hasPrefix("accepted  legacy enhanced format"))
        let log = try Commands.curl(["http://127.0.0.1:\(simulator.controlPort)/notifications"]).stdout
        #expect(log.contains(#""transport":"legacy""#))
        #expect(log.contains(Self.token))
    }

    @Test func sendLegacyReportsTheGatewaysStatus() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        // The simulator plays development; a production token is an invalid token to its gateway.
        _ = try Commands.curl(["-X", "PUT", "-d", #"{"environment":"production"}"#, "http://127.0.0.1:\(simulator.controlPort)/tokens/\(Self.token)"])
        let result = try sendLegacy(simulator)
        #expect(result.status == 1)
        #expect(result.stdout.contains("rejected  status 8 (invalidToken)"), "stdout: \(result.stdout)")
    }

    @Test func sendLegacyRefusesATokenKeyAndAnOversizedPayload() throws {
        let key = try Commands.run(
            Commands.tern,
            ["send", "--legacy", "--host", "localhost", "--key-file", "/dev/null", "--key-id", "K", "--team-id", "T", "--topic", "t", "--token", Self.token, "--alert", "x"])
        #expect(key.status == 64)
        let big = try Commands.run(
            Commands.tern,
            ["send", "--legacy", "--legacy-format", "simple", "--host", "localhost", "--cert", "/dev/null", "--cert-key", "/dev/null",
             "--topic", "t", "--token", Self.token, "--alert", String(repeating: "x", count: 300)])
        #expect(big.status == 64)
        #expect(big.stderr.contains("--cert") || big.stderr.contains("--legacy-format"), "stderr: \(big.stderr)")
    }

    @Test func feedbackPrintsTheListOnceWithItsTimes() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        _ = try Commands.curl(["-X", "POST", "-d", #"{"timestamp":1700000000000}"#, "http://127.0.0.1:\(simulator.controlPort)/tokens/\(Self.token)/unregister"])
        let arguments = ["feedback", "--port", String(simulator.feedbackPort)] + (try tls(simulator))
        let first = try Commands.run(Commands.tern, arguments)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(first.stdout == "2023-11-14T22:13:20Z  \(Self.token)\n")
        #expect(first.stderr.contains("1 token listed"))
        let second = try Commands.run(Commands.tern, arguments)
        #expect(second.status == 0)
        #expect(second.stdout.isEmpty)
    }

    @Test func feedbackWithNothingListeningExitsTwo() throws {
        let simulator = try SimulatorProcess()
        let tls = try tls(simulator)
        let port = simulator.feedbackPort
        _ = simulator.interrupt()
        let result = try Commands.run(Commands.tern, ["feedback", "--port", String(port), "--timeout", "5"] + tls)
        #expect(result.status == 2)
        #expect(result.stderr.contains("cannot connect"), "stderr: \(result.stderr)")
    }

    // MARK: Hostile gateways

    /// `tern send --legacy` against `gateway`, with its certificates, and how long it took.
    private func sendLegacy(to gateway: HostileGateway, timeout: Double) throws -> (CommandResult, Duration) {
        let started = ContinuousClock.now
        let result = try Commands.run(
            Commands.tern,
            ["send", "--legacy", "--host", "127.0.0.1", "--port", String(gateway.port), "--ca-file", gateway.files.ca,
             "--cert", gateway.files.certificate, "--cert-key", gateway.files.key, "--topic", "com.example.app",
             "--token", Self.token, "--alert", "Hi", "--timeout", String(timeout)],
            timeout: 60)
        return (result, ContinuousClock.now - started)
    }

    @Test func sendLegacyToAGatewayThatAnswersAboutAStrangerGivesUpWithoutHammeringIt() async throws {
        let gateway = try await HostileGateway.start(answering: LegacyErrorResponse(status: .invalidToken, identifier: 0xdead_beef))
        let (result, elapsed) = try sendLegacy(to: gateway, timeout: 10)
        await gateway.stop()
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stderr.contains("not one this connection carried"), "stderr: \(result.stderr)")
        // `send` gives up after 3 fruitless connections, backing off between them; before, it reconnected at once, for ever.
        #expect(gateway.connections == 3, "\(gateway.connections) connections")
        #expect(elapsed < .seconds(10), "took \(elapsed)")
    }

    @Test func sendLegacyHonoursItsTimeoutWhenTheHandshakeNeverCompletes() async throws {
        let gateway = try await HostileGateway.start(answering: nil)
        let (result, elapsed) = try sendLegacy(to: gateway, timeout: 2)
        await gateway.stop()
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(!result.stdout.contains("accepted"), "stdout: \(result.stdout)")
        #expect(result.stderr.contains("timed out"), "stderr: \(result.stderr)")
        #expect(elapsed < .seconds(6), "--timeout 2 took \(elapsed)")
    }
}

/// A legacy gateway on 127.0.0.1 that completes the TLS handshake, sends one error response and closes, on every
/// connection; or, answering nil, accepts TCP and never says a word (no handshake). Certificates from a CA of its
/// own are written to a temporary folder for `tern send`.
final class HostileGateway: Sendable {
    let port: Int
    let files: (ca: String, certificate: String, key: String)
    private let folder: URL
    private let server: any Channel
    private let counter: Counter

    var connections: Int { counter.accepted.load(ordering: .relaxed) }

    private init(port: Int, files: (String, String, String), folder: URL, server: any Channel, counter: Counter) {
        self.port = port
        self.files = files
        self.folder = folder
        self.server = server
        self.counter = counter
    }

    static func start(answering response: LegacyErrorResponse?) async throws -> HostileGateway {
        let authority = try SimulatorCertificateAuthority.generate()
        let serverCertificate = try authority.issueServerCertificate()
        let client = try authority.issuePushCertificate(bundleID: "com.example.app")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let files = (
            ca: folder.appendingPathComponent("ca.pem").path, certificate: folder.appendingPathComponent("client.pem").path,
            key: folder.appendingPathComponent("client-key.pem").path
        )
        try authority.certificatePEM.write(toFile: files.ca, atomically: true, encoding: .utf8)
        try client.certificatePEM.write(toFile: files.certificate, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: files.key, atomically: true, encoding: .utf8)
        let sslContext = try NIOSSLContext(
            configuration: .makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(serverCertificate.certificatePEM.utf8)).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverCertificate.privateKeyPEM.utf8), format: .pem))))
        let counter = Counter()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                counter.accepted.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    guard let response else { return }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(AnswerAndClose(response: response))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = server.localAddress?.port else { throw CLITestError("the hostile gateway has no port") }
        return HostileGateway(port: port, files: files, folder: folder, server: server, counter: counter)
    }

    func stop() async {
        try? await server.close()
        try? FileManager.default.removeItem(at: folder)
    }

    private final class Counter: Sendable {
        let accepted = Atomic<Int>(0)
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
}
