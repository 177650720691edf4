import Foundation
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
}
