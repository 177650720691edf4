import Foundation
import TernSimulator
import TernTestSupport
import Testing

/// `tern send` as a user runs it: a real process against a real `tern simulator` over TLS.
@Suite(.serialized)
struct SendCommandTests {
    static let token = String(repeating: "ab", count: 32)

    private func keyFile(_ simulator: SimulatorProcess) -> String {
        simulator.stateDirectory.appendingPathComponent("SIMKEY0001.p8").path
    }

    private func tokenAuth(_ simulator: SimulatorProcess) -> [String] {
        ["--key-file", keyFile(simulator), "--key-id", "SIMKEY0001", "--team-id", "SIMTEAM001"]
    }

    /// `tern send` to the simulator with the given auth and content.
    private func send(
        _ simulator: SimulatorProcess, _ extra: [String], token: String = Self.token, environment: [String: String] = [:],
        stdin: Data? = nil
    ) throws -> CommandResult {
        try Commands.run(
            Commands.tern,
            [
                "send", "--host", "localhost", "--port", String(simulator.port),
                "--ca-file", simulator.stateDirectory.appendingPathComponent("ca.pem").path,
                "--topic", "com.example.app", "--token", token,
            ] + extra,
            environment: environment, stdin: stdin)
    }

    private func controlAPI(_ simulator: SimulatorProcess, _ path: String, _ arguments: [String] = []) throws -> String {
        try Commands.curl(arguments + ["http://127.0.0.1:\(simulator.controlPort)\(path)"]).stdout
    }

    private func apnsID(in output: String, after prefix: String) -> UUID? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
            let range = line.range(of: "apns-id ")
        else { return nil }
        return UUID(uuidString: String(line[range.upperBound...].prefix(36)))
    }

    @Test func tokenAuthIsAcceptedAndPrintsTheApnsID() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let result = try send(simulator, tokenAuth(simulator) + ["--title", "Hello", "--body", "From the CLI test", "--badge", "3"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let id = apnsID(in: result.stdout, after: "accepted  apns-id ")
        #expect(id != nil, "stdout: \(result.stdout)")
        // The development simulator answers with apns-unique-id, as APNs' sandbox does.
        #expect(result.stdout.contains("apns-unique-id "))
        let log = try controlAPI(simulator, "/notifications")
        #expect(log.contains(id?.uuidString.lowercased() ?? "-"), "log: \(log)")
        #expect(log.contains(#"\"badge\":3"#), "log: \(log)")
    }

    @Test func aBackgroundPushGetsPushTypeBackgroundAndPriorityFive() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let result = try send(simulator, tokenAuth(simulator) + ["--content-available", "--data", #"{"sync":"inbox"}"#])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let log = try controlAPI(simulator, "/notifications")
        #expect(log.contains(#""pushType":"background""#), "log: \(log)")
        #expect(log.contains(#""priority":5"#), "log: \(log)")
        #expect(log.contains(#"\"sync\":\"inbox\""#), "log: \(log)")
    }

    @Test func aRawPayloadFromStdinIsSentAsIs() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let payload = #"{"aps":{"alert":"raw"},"id":42}"#
        let result = try send(simulator, tokenAuth(simulator) + ["--payload", "-"], stdin: Data(payload.utf8))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let log = try controlAPI(simulator, "/notifications")
        #expect(log.contains(#"{\"aps\":{\"alert\":\"raw\"},\"id\":42}"#), "log: \(log)")
    }

    @Test func certificateAuthWithAnIssuedCertificateIsAccepted() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let certificate = try simulator.issueCertificate()
        let result = try send(
            simulator,
            [
                "--cert", certificate.certificate,
                "--cert-key", certificate.privateKey, "--alert", "Hi",
            ])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(apnsID(in: result.stdout, after: "accepted  apns-id ") != nil, "stdout: \(result.stdout)")
    }

    @Test func aPKCS12BundleWithThePassphraseFromTheEnvironmentIsAccepted() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let certificate = try simulator.issueCertificate()
        let bundle = simulator.stateDirectory.appendingPathComponent("push.p12").path
        let export = try Commands.run(
            "/usr/bin/env",
            [
                "openssl", "pkcs12", "-export", "-in", certificate.certificate,
                "-inkey", certificate.privateKey, "-out", bundle,
                "-passout", "pass:s3cret-phrase",
            ])
        try #require(export.status == 0, "openssl could not make a .p12: \(export.stderr)")
        let result = try send(
            simulator, ["--p12", bundle, "--passphrase-env", "TERN_TEST_P12", "--alert", "Hi"],
            environment: ["TERN_TEST_P12": "s3cret-phrase"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.hasPrefix("accepted  apns-id "), "stdout: \(result.stdout)")
        #expect(!(result.stdout + result.stderr).contains("s3cret-phrase"))

        let wrong = try send(
            simulator, ["--p12", bundle, "--passphrase-env", "TERN_TEST_P12", "--alert", "Hi"],
            environment: ["TERN_TEST_P12": "not-it"])
        #expect(wrong.status == 64)
        #expect(wrong.stderr.contains("--p12"), "stderr: \(wrong.stderr)")
    }

    @Test func anUnregisteredTokenIsRejectedWith410AndItsTimestamp() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        _ = try controlAPI(
            simulator, "/tokens/\(Self.token)/unregister", ["-X", "POST", "-d", #"{"timestamp":1700000000000}"#])
        let result = try send(simulator, tokenAuth(simulator) + ["--alert", "Are you there?"])
        #expect(result.status == 1, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stdout.hasPrefix("rejected  410 Unregistered  apns-id "), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("timestamp 2023-11-14T22:13:20Z"), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("token is invalid: remove it"), "stdout: \(result.stdout)")
    }

    @Test func anExpiredCertificateIsNamedAsTheCauseAndOneNearItsEndIsWarnedOf() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        // From the simulator's own CA, which `issue-cert` uses, but ended a day ago.
        let authority = try SimulatorCertificateAuthority.loadOrCreate(in: simulator.stateDirectory)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-send-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let expired = try authority.issuePushCertificate(bundleID: "com.example.app", validFor: -86400).write(to: folder, name: "expired")
        let refused = try send(simulator, ["--cert", expired.certificate.path, "--cert-key", expired.privateKey.path, "--alert", "Hi"])
        #expect(refused.status == 2, "stdout: \(refused.stdout) stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("warning: --cert: the certificate expired on"), "stderr: \(refused.stderr)")

        let near = try authority.issuePushCertificate(bundleID: "com.example.app", validFor: 5 * 86400 + 3600).write(to: folder, name: "near")
        let accepted = try send(simulator, ["--cert", near.certificate.path, "--cert-key", near.privateKey.path, "--alert", "Hi"])
        #expect(accepted.status == 0, "stderr: \(accepted.stderr)")
        #expect(accepted.stderr.contains("warning: --cert: the certificate expires on"), "stderr: \(accepted.stderr)")
        #expect(accepted.stderr.contains("in 5 days"), "stderr: \(accepted.stderr)")

        // A year left: nothing to say.
        let fresh = try simulator.issueCertificate()
        let quiet = try send(simulator, ["--cert", fresh.certificate, "--cert-key", fresh.privateKey, "--alert", "Hi"])
        #expect(quiet.status == 0, "stderr: \(quiet.stderr)")
        #expect(!quiet.stderr.contains("warning"), "stderr: \(quiet.stderr)")
    }

    @Test func aServerThatIsNotThereIsAClientErrorWithExitStatus2() throws {
        let simulator = try SimulatorProcess()
        let port = simulator.port
        let ca = simulator.stateDirectory.appendingPathComponent("ca.pem").path
        let key = keyFile(simulator)
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("tern-send-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: copy) }
        try FileManager.default.copyItem(atPath: ca, toPath: copy.appendingPathComponent("ca.pem").path)
        try FileManager.default.copyItem(atPath: key, toPath: copy.appendingPathComponent("key.p8").path)
        _ = simulator.interrupt()
        let result = try Commands.run(
            Commands.tern,
            [
                "send", "--host", "127.0.0.1", "--port", String(port), "--ca-file", copy.appendingPathComponent("ca.pem").path,
                "--key-file", copy.appendingPathComponent("key.p8").path, "--key-id", "SIMKEY0001", "--team-id", "SIMTEAM001",
                "--topic", "com.example.app", "--token", Self.token, "--alert", "Hi", "--timeout", "2",
            ])
        #expect(result.status == 2, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stderr.contains("timedOut"), "stderr: \(result.stderr)")
    }

    @Test func throughAnEgressProxyTheSendIsAcceptedInOneTunnel() async throws {
        let proxy = try await ConnectProxy(credentials: "ops:pa55")
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let result = try send(simulator, tokenAuth(simulator) + ["--alert", "Hi", "--proxy", "http://ops:pa55@127.0.0.1:\(proxy.port)"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.hasPrefix("accepted  apns-id "), "stdout: \(result.stdout)")
        #expect(proxy.tunnels == ["localhost:\(simulator.port)"])

        let refused = try send(simulator, tokenAuth(simulator) + ["--alert", "Hi", "--timeout", "1", "--proxy", "http://ops:wrong@127.0.0.1:\(proxy.port)"])
        #expect(refused.status == 2, "stdout: \(refused.stdout)")
        #expect(refused.stderr.contains("the proxy http://127.0.0.1:\(proxy.port) opened no tunnel to localhost:\(simulator.port)"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("wrong"))
        await proxy.close()
    }

    @Test func badInputExitsNonZeroNamingTheOptionAndSendsNothing() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let auth = tokenAuth(simulator)
        let certAuth = ["--cert", keyFile(simulator), "--cert-key", keyFile(simulator)]
        let cases: [(arguments: [String], token: String, option: String)] = [
            (auth + ["--alert", "Hi"], "not-hex", "--token"),
            (auth + ["--alert", "Hi"], "abc", "--token"),
            (auth + ["--alert", "Hi", "--data", #"{"unterminated": "#], Self.token, "--data"),
            (auth + ["--alert", "Hi", "--data", "[1, 2]"], Self.token, "--data"),
            (auth + certAuth + ["--alert", "Hi"], Self.token, "--cert"),
            (["--alert", "Hi"], Self.token, "--key-file"),
            (auth + ["--alert", "Hi", "--push-type", "carrier-pigeon"], Self.token, "--push-type"),
            (auth + ["--alert", "Hi", "--priority", "7"], Self.token, "--priority"),
            (auth + ["--alert", "Hi", "--apns-id", "not-a-uuid"], Self.token, "--apns-id"),
            (auth + ["--alert", "Hi", "--expiration", "tomorrow"], Self.token, "--expiration"),
            (auth + ["--alert", "Hi", "--collapse-id", String(repeating: "c", count: 65)], Self.token, "--collapse-id"),
            (auth + ["--alert", "Hi", "--title", "Also"], Self.token, "--alert"),
            (auth + ["--alert", "Hi", "--push-type", "voip"], Self.token, "--topic"),
            (auth + ["--alert", "Hi", "--environment", "production"], Self.token, "--environment"),
            (auth + ["--body", String(repeating: "x", count: 5000)], Self.token, "--alert/--title/--body"),
            (auth + ["--alert", "Hi", "--proxy", "https://proxy.example:3128"], Self.token, "--proxy"),
            (auth + ["--alert", "Hi", "--proxy", "proxy.example"], Self.token, "--proxy"),
        ]
        for (arguments, token, option) in cases {
            let result = try send(simulator, arguments, token: token)
            #expect(result.status == 64, "\(arguments): status \(result.status), stdout: \(result.stdout)")
            let firstLine = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(firstLine.hasPrefix("Error: \(option):"), "\(arguments): stderr: \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments): stdout: \(result.stdout)")
        }
        let stats = try controlAPI(simulator, "/stats")
        #expect(stats.contains(#""requests":0"#), "the simulator saw requests: \(stats)")
        #expect(stats.contains(#""connectionsOpened":0"#), "the simulator saw connections: \(stats)")
    }

    @Test func noOutputShowsTheKeyOrTheProviderToken() throws {
        let simulator = try SimulatorProcess()
        defer { _ = simulator.interrupt() }
        let key = try String(contentsOfFile: keyFile(simulator), encoding: .utf8)
        let secrets = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        try #require(!secrets.isEmpty)
        var outputs: [CommandResult] = []
        // Success, rejection, bad input, a wrong key id and a wrong team, all with the most verbose logging.
        outputs.append(try send(simulator, tokenAuth(simulator) + ["--alert", "Hi", "--log-level", "trace"]))
        outputs.append(
            try send(
                simulator,
                ["--key-file", keyFile(simulator), "--key-id", "OTHERKEY01", "--team-id", "SIMTEAM001", "--alert", "Hi", "--log-level", "trace"]))
        outputs.append(try send(simulator, tokenAuth(simulator) + ["--alert", "Hi", "--priority", "3"]))
        outputs.append(try send(simulator, ["--key-file", keyFile(simulator), "--key-id", "bad id!", "--team-id", "T", "--alert", "Hi"]))
        outputs.append(try send(simulator, ["--cert", keyFile(simulator), "--cert-key", keyFile(simulator), "--alert", "Hi"]))
        #expect(outputs[0].status == 0)
        #expect(outputs[1].status == 1)
        #expect(outputs[1].stdout.contains("403 InvalidProviderToken"), "stdout: \(outputs[1].stdout)")
        for output in outputs {
            let text = output.stdout + output.stderr
            for secret in secrets {
                #expect(!text.contains(secret), "output shows the key: \(text)")
            }
            // A JWT's header is base64url of `{"alg":"ES256"…`.
            #expect(!text.contains("eyJhbGci"), "output shows a provider token: \(text)")
            #expect(!text.lowercased().contains("bearer "), "output shows an authorization header: \(text)")
        }
    }

    @Test func helpExplainsTheOptionsWithExamples() throws {
        let result = try Commands.run(Commands.tern, ["send", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("Examples:"))
        #expect(result.stdout.contains("--ca-file .tern/simulator/ca.pem"))
        #expect(result.stdout.contains("--key-file AuthKey_ABC123DEFG.p8"))
        #expect(result.stdout.contains("--passphrase-env"))
    }
}
