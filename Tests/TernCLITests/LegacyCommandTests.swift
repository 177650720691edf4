import Foundation
import TernAPNs
import TernSimulator
import TernTestSupport
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

    @Test func feedbackWithAnExpiredCertificateSaysWhyTheServiceRefusesIt() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-feedback-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let expired = try SimulatorCertificateAuthority.loadOrCreate(in: simulator.stateDirectory)
            .issuePushCertificate(bundleID: "com.example.app", validFor: -86400).write(to: folder, name: "expired")
        let result = try Commands.run(
            Commands.tern,
            [
                "feedback", "--port", String(simulator.feedbackPort), "--host", "localhost", "--timeout", "10",
                "--ca-file", simulator.stateDirectory.appendingPathComponent("ca.pem").path,
                "--cert", expired.certificate.path, "--cert-key", expired.privateKey.path,
            ])
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stderr.contains("warning: --cert: the certificate expired on"), "stderr: \(result.stderr)")
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
    private func sendLegacy(to gateway: HostileLegacyPeer, timeout: Double) throws -> (CommandResult, Duration) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let files = try gateway.writeFiles(to: folder)
        let started = ContinuousClock.now
        let result = try Commands.run(
            Commands.tern,
            ["send", "--legacy", "--host", "127.0.0.1", "--port", String(gateway.port), "--ca-file", files.ca,
             "--cert", files.certificate, "--cert-key", files.key, "--topic", "com.example.app",
             "--token", Self.token, "--alert", "Hi", "--timeout", String(timeout)],
            timeout: 60)
        return (result, ContinuousClock.now - started)
    }

    @Test func sendLegacyToAGatewayThatAnswersAboutAStrangerGivesUpWithoutHammeringIt() async throws {
        let gateway = try await HostileLegacyPeer.start(.errorResponse(LegacyErrorResponse(status: .invalidToken, identifier: 0xdead_beef)))
        let (result, elapsed) = try sendLegacy(to: gateway, timeout: 10)
        await gateway.stop()
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stderr.contains("not one this connection carried"), "stderr: \(result.stderr)")
        // `send` gives up after 3 fruitless connections, backing off between them; before, it reconnected at once, for ever.
        #expect(gateway.connections == 3, "\(gateway.connections) connections")
        #expect(elapsed < .seconds(10), "took \(elapsed)")
    }

    @Test func sendLegacyHonoursItsTimeoutWhenTheHandshakeNeverCompletes() async throws {
        let gateway = try await HostileLegacyPeer.start(.silentTCP)
        let (result, elapsed) = try sendLegacy(to: gateway, timeout: 2)
        await gateway.stop()
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(!result.stdout.contains("accepted"), "stdout: \(result.stdout)")
        #expect(result.stderr.contains("timed out"), "stderr: \(result.stderr)")
        #expect(elapsed < .seconds(6), "--timeout 2 took \(elapsed)")
    }
}
