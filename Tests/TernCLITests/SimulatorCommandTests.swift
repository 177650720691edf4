import Foundation
import TernAPNs
import Testing

/// `tern simulator` and `tern token` as a user runs them: a real process, real TLS, curl as the client.
@Suite(.serialized)
struct SimulatorCommandTests {
    static let token = String(repeating: "ab", count: 32)

    private func providerToken(_ simulator: SimulatorProcess) throws -> String {
        let keyFile = simulator.stateDirectory.appendingPathComponent("SIMKEY0001.p8").path
        let result = try Commands.run(
            Commands.tern, ["token", "--key-file", keyFile, "--key-id", "SIMKEY0001", "--team-id", "SIMTEAM001"])
        #expect(result.status == 0, "tern token failed: \(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func push(_ simulator: SimulatorProcess, extra: [String]) throws -> CommandResult {
        try Commands.curl(
            [
                "--http2", "--include", "--cacert", simulator.stateDirectory.appendingPathComponent("ca.pem").path,
                "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                "-d", #"{"aps":{"alert":"Hello from the CLI test"}}"#,
            ] + extra + ["https://localhost:\(simulator.port)/3/device/\(Self.token)"])
    }

    @Test func startsPrintsPortsAndCAFileAndStopsOnCtrlC() throws {
        let simulator = try SimulatorProcess()
        #expect(simulator.banner.contains("CA certificate"))
        #expect(simulator.banner.contains("ca.pem"))
        #expect(FileManager.default.fileExists(atPath: simulator.stateDirectory.appendingPathComponent("ca.pem").path))
        #expect(simulator.banner.contains("SIMKEY0001"))
        #expect(simulator.interrupt() == 0)
    }

    @Test func curlWithValidProviderTokenGets200AndApnsID() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let jwt = try providerToken(simulator)
        let result = try push(simulator, extra: ["-H", "authorization: bearer \(jwt)"])
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        #expect(result.stdout.hasPrefix("HTTP/2 200"), "got: \(result.stdout)")
        let apnsID = result.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("apns-id: ") }
        #expect(apnsID.map { UUID(uuidString: String($0.dropFirst("apns-id: ".count))) != nil } == true)
    }

    @Test func curlWithWrongProviderTokenGetsTheExactAPNsError() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let jwt = try providerToken(simulator)
        // Same header and claims, signature of another key: the signature does not verify.
        let forged = jwt.split(separator: ".").prefix(2).joined(separator: ".") + ".AAAA"
        let result = try push(simulator, extra: ["-H", "authorization: bearer \(forged)"])
        #expect(result.stdout.hasPrefix("HTTP/2 403"), "got: \(result.stdout)")
        #expect(result.stdout.hasSuffix(#"{"reason":"InvalidProviderToken"}"#))
        let missing = try push(simulator, extra: [])
        #expect(missing.stdout.hasSuffix(#"{"reason":"MissingProviderToken"}"#))
    }

    @Test func issuedClientCertificateAuthenticatesWithoutAToken() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let certificate = try simulator.issueCertificate()
        let result = try push(
            simulator,
            extra: [
                "--cert", certificate.certificate,
                "--key", certificate.privateKey,
            ])
        #expect(result.stdout.hasPrefix("HTTP/2 200"), "got: \(result.stdout)")
    }

    @Test func controlAPIMarksATokenUnregistered() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let mark = try Commands.curl([
            "--include", "-X", "POST", "-d", #"{"timestamp":1700000000000}"#,
            "http://127.0.0.1:\(simulator.controlPort)/tokens/\(Self.token)/unregister",
        ])
        #expect(mark.stdout.hasPrefix("HTTP/1.1 204"), "got: \(mark.stdout)")
        let result = try push(simulator, extra: ["-H", "authorization: bearer \(try providerToken(simulator))"])
        #expect(result.stdout.hasPrefix("HTTP/2 410"), "got: \(result.stdout)")
        #expect(result.stdout.hasSuffix(#"{"reason":"Unregistered","timestamp":1700000000000}"#))
    }

    @Test(arguments: [
        (["simulator", "--environment", "staging"], "--environment"),
        (["simulator", "--key", "not-a-key"], "--key"),
        (["simulator", "--cert", "/tmp/only-a-cert.pem"], "--cert"),
        (["simulator", "issue-cert", "--topic", "bad topic"], "--topic"),
        (["simulator", "--port", "70000"], "--port must be 0-65535"),
        (["simulator", "--feedback-port", "99999"], "--feedback-port must be 0-65535"),
        (["simulator", "--max-concurrent-streams", "0"], "--max-concurrent-streams must be 1-100000"),
        (["simulator", "--initial-window-size", "10"], "--initial-window-size must be 65535-1073741824"),
        (["token", "--key-file", "/nonexistent/AuthKey.p8", "--key-id", "ABC", "--team-id", "DEF"], "/nonexistent/AuthKey.p8"),
    ])
    func badArgumentsExitNonZeroWithAMessageNamingTheOption(arguments: [String], mentioned: String) throws {
        let result = try Commands.run(Commands.tern, arguments)
        #expect(result.status != 0)
        #expect(result.stderr.contains(mentioned), "stderr was: \(result.stderr)")
        #expect(!result.stderr.contains("Fatal error") && !result.stderr.contains("backtrace"), "stderr was: \(result.stderr)")
    }

    @Test func aPortInUseIsAClearErrorNamingIt() throws {
        let running = try SimulatorProcess()
        defer { _ = running.interrupt() }
        let state = running.stateDirectory.appendingPathComponent("second").path
        let result = try Commands.run(
            Commands.tern, ["simulator", "--port", String(running.port), "--control-port", "0", "--state-dir", state])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot serve the APNs API on 127.0.0.1:\(running.port)"), "stderr was: \(result.stderr)")
    }

    @Test func tokenRejectsAFileThatIsNotAKeyWithoutEchoingIt() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-key-\(UUID().uuidString).p8")
        try "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXNlY3JldA==\n-----END PRIVATE KEY-----\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try Commands.run(
            Commands.tern, ["token", "--key-file", file.path, "--key-id", "ABC123DEFG", "--team-id", "TEAM123456"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("not a PEM-encoded P-256 private key"))
        #expect(!result.stderr.contains("c2VjcmV0LXNlY3JldA"))
    }

    /// `--help` says the ids are 10 characters, as Apple's are; a shorter one was signed into a token that APNs refuses.
    @Test func tokenRefusesIdsThatAreNotApplesTenCharacters() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey-\(UUID().uuidString).p8")
        try APNsSigningKey.generate(keyID: "ABC123DEFG", teamID: "TEAM123456").pemRepresentation.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        for (keyID, teamID, option) in [("ABC", "TEAM123456", "--key-id"), ("ABC123DEFG", "TEAM12345678", "--team-id")] {
            let result = try Commands.run(Commands.tern, ["token", "--key-file", file.path, "--key-id", keyID, "--team-id", teamID])
            #expect(result.status == 64, "\(keyID) \(teamID): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains(option) && result.stderr.contains("10 letters or digits"), "\(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        let good = try Commands.run(Commands.tern, ["token", "--key-file", file.path, "--key-id", "ABC123DEFG", "--team-id", "TEAM123456"])
        #expect(good.status == 0, "\(good.stderr)")
    }

    @Test func helpExplainsTheSimulatorWithExamples() throws {
        let result = try Commands.run(Commands.tern, ["simulator", "run", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("Examples:"))
        #expect(result.stdout.contains("--control-port"))
    }
}
