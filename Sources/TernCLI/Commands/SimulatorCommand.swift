import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TernAPNs
import TernSimulator

struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "A local APNs to develop and test against, with no Apple account.",
        subcommands: [Run.self, IssueCert.self],
        defaultSubcommand: Run.self
    )
}

extension SimulatorCommand {
    /// Where the simulator keeps its CA, demo key and issued certificates between runs.
    struct StateOptions: ParsableArguments {
        @Option(name: .long, help: "Folder for the CA, the demo token key, issued certificates and the broadcast channels.")
        var stateDir: String = ".tern/simulator"

        var url: URL { URL(fileURLWithPath: stateDir, isDirectory: true) }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Run the simulator (the default: `tern simulator` is `tern simulator run`).",
            discussion: """
                It listens for the APNs HTTP/2 API over TLS (ALPN h2, or HTTP/2 with prior knowledge) and serves a \
                JSON control API over plain HTTP/1.1: mark tokens unregistered, bind tokens to a topic, inject \
                faults and latency, send GOAWAY or drop connections, read the arrival log and counters.

                It also plays Apple's retired binary interface, for certificate connections only: the legacy \
                gateway (--legacy-port, Apple's 2195) and the feedback service (--feedback-port, Apple's 2196), \
                which lists the tokens marked unregistered once.

                With no --key it creates a demo token key (SIMKEY0001, team SIMTEAM001) in the state folder. \
                With no --cert it issues a server certificate from its own CA, written to <state-dir>/ca.pem for \
                clients to trust. Client certificates from `tern simulator issue-cert` work for certificate auth.

                Examples:
                  tern simulator
                  tern simulator --port 0 --control-port 0 --environment production
                  tern simulator --key ABC123DEFG:TEAM123456:AuthKey_ABC123DEFG.p8
                """
        )

        @Option(name: .long, help: "Address to listen on.")
        var host = "127.0.0.1"

        @Option(name: .long, help: "HTTP/2 port (0 picks a free one).")
        var port = 2197

        @Option(name: .long, help: "Control API port (0 picks a free one).")
        var controlPort = 2198

        @Flag(name: .long, help: "Do not serve the control API.")
        var noControl = false

        @Option(name: .long, help: "Legacy binary gateway port (0 picks a free one).")
        var legacyPort = 2195

        @Option(name: .long, help: "Legacy feedback service port (0 picks a free one).")
        var feedbackPort = 2196

        @Flag(name: .long, help: "Do not serve the legacy gateway and feedback service.")
        var noLegacy = false

        @Option(name: .long, help: "The environment to play: development or production.")
        var environment = "development"

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A provider-token key to trust, as KEYID:TEAMID:FILE (FILE: a .p8 or a PEM public key). Repeatable.",
                valueName: "key"))
        var key: [String] = []

        @Option(name: .long, help: "Server certificate chain (PEM) to use instead of one from the simulator's CA.")
        var cert: String?

        @Option(name: .long, help: "Private key (PEM) for --cert.")
        var certKey: String?

        @Option(name: .long, help: "MAX_CONCURRENT_STREAMS once a connection is authenticated.")
        var maxConcurrentStreams = 1000

        @Flag(
            name: .long,
            help: "Answer a stream over MAX_CONCURRENT_STREAMS with RST_STREAM REFUSED_STREAM (that stream only) instead of APNs' GOAWAY.")
        var resetExcessStreams = false

        @Option(name: .long, help: "Initial flow-control window in bytes (APNs uses 64 KiB).")
        var initialWindowSize = 65_535

        @Option(name: .long, help: "How many accepted notifications the arrival log keeps.")
        var logCapacity = 100_000

        @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
        var logLevel = Logger.Level.info

        @OptionGroup var state: StateOptions

        func validate() throws {
            _ = try parsedEnvironment()
            if (cert == nil) != (certKey == nil) { throw ValidationError("--cert and --cert-key go together") }
            // Checked again by the simulator's configuration; here so the message names the option (exit 64).
            for (option, value) in [("--port", port), ("--control-port", controlPort), ("--legacy-port", legacyPort), ("--feedback-port", feedbackPort)]
            where !(0...65_535).contains(value) {
                throw ValidationError("\(option) must be 0-65535 (0 picks a free port), not \(value)")
            }
            guard (1...100_000).contains(maxConcurrentStreams) else {
                throw ValidationError("--max-concurrent-streams must be 1-100000, not \(maxConcurrentStreams)")
            }
            guard (65_535...1_073_741_824).contains(initialWindowSize) else {
                throw ValidationError("--initial-window-size must be 65535-1073741824 bytes, not \(initialWindowSize)")
            }
        }

        private func parsedEnvironment() throws -> APNsEnvironment {
            do {
                return try APNsEnvironment(environment)
            } catch {
                throw ValidationError("--environment must be development or production, not '\(environment)'")
            }
        }

        func run() async throws {
            // Read every input before touching the state folder, so a typo leaves nothing behind.
            let environment = try parsedEnvironment()
            let trustedKeys = try key.map(Self.parseKey)
            var serverCertificate: IssuedCertificate?
            if let cert, let certKey {
                do {
                    serverCertificate = try IssuedCertificate(
                        certificatePEM: readTextFile(cert, option: "--cert"),
                        privateKeyPEM: readTextFile(certKey, option: "--cert-key"))
                } catch let error as APNsCredentialError {
                    throw ValidationError("--cert \(cert): \(error.message)")
                }
            }
            bootstrapLogging(logLevel)
            let logger = Logger(label: "tern.simulator")
            let authority = try SimulatorCertificateAuthority.loadOrCreate(in: state.url)
            var configuration = APNsSimulator.Configuration(certificateAuthority: authority)
            configuration.host = host
            configuration.port = port
            configuration.controlPort = noControl ? nil : controlPort
            configuration.legacyGatewayPort = noLegacy ? nil : legacyPort
            configuration.feedbackPort = noLegacy ? nil : feedbackPort
            configuration.environment = environment
            configuration.maxConcurrentStreams = maxConcurrentStreams
            configuration.resetExcessStreams = resetExcessStreams
            configuration.initialWindowSize = initialWindowSize
            configuration.logCapacity = logCapacity
            configuration.serverCertificate = serverCertificate
            // One file an environment: Apple keeps each environment's channels apart.
            configuration.channelsFile = state.url.appendingPathComponent("channels-\(environment).jsonl")
            var demoKey: (keyID: String, teamID: String, file: URL)?
            if trustedKeys.isEmpty {
                let demo = try Self.loadOrCreateDemoKey(in: state.url)
                configuration.tokenKeys = [demo.key]
                demoKey = (demo.key.keyID, demo.key.teamID, demo.file)
            } else {
                configuration.tokenKeys = trustedKeys
            }

            let simulator = APNsSimulator(configuration: configuration, logger: logger)
            let group = ServiceGroup(
                configuration: .init(services: [simulator], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await simulator.waitUntilReady()
                printBanner(simulator, demoKey: demoKey)
                try await tasks.waitForAll()
            }
        }

        private func printBanner(_ simulator: APNsSimulator, demoKey: (keyID: String, teamID: String, file: URL)?) {
            let caFile = displayPath(state.url.appendingPathComponent("ca.pem"))
            let displayHost = host.contains(":") ? "[\(host)]" : host
            var lines = [
                "Tern APNs simulator (\(simulator.configuration.environment) environment)",
                "  APNs HTTP/2 API  https://\(displayHost):\(simulator.port)",
            ]
            if let controlPort = simulator.controlPort {
                lines.append("  control API      http://\(displayHost):\(controlPort)")
            }
            if let legacyPort = simulator.legacyGatewayPort, let feedbackPort = simulator.feedbackPort {
                lines.append("  legacy gateway   \(displayHost):\(legacyPort) (binary, certificates only)")
                lines.append("  feedback         \(displayHost):\(feedbackPort)")
            }
            lines.append("  CA certificate   \(caFile)")
            // The binary as it was started (`.build/debug/tern` under `swift run`), so the line can be pasted.
            let invoked = CommandLine.arguments.first ?? "tern"
            let tern = invoked.contains("/") ? displayPath(URL(fileURLWithPath: invoked)) : invoked
            if let demoKey {
                lines.append("  token key        \(demoKey.keyID) (team \(demoKey.teamID)), \(displayPath(demoKey.file))")
                lines += [
                    "",
                    "Send a push:",
                    "  curl --http2 --cacert \(caFile) \\",
                    "    -H \"authorization: bearer $(\(tern) token --key-file \(displayPath(demoKey.file)) --key-id \(demoKey.keyID) --team-id \(demoKey.teamID))\" \\",
                    "    -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' \\",
                    "    -d '{\"aps\":{\"alert\":\"Hello from Tern\"}}' \\",
                    "    https://localhost:\(simulator.port)/3/device/\(String(repeating: "ab", count: 32))",
                ]
            } else {
                lines.append("  token keys       \(simulator.configuration.tokenKeys.map(\.keyID).joined(separator: ", "))")
            }
            lines.append("")
            lines.append("Press Ctrl-C to stop (connections get GOAWAY {\"reason\":\"Shutdown\"}).")
            // Written unbuffered, so the banner shows at once when stdout is a pipe or a file.
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }

        static func parseKey(_ text: String) throws -> ProviderTokenKey {
            let parts = text.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
                throw ValidationError("--key takes KEYID:TEAMID:FILE, not '\(text)'")
            }
            let pem = try readTextFile(parts[2], option: "--key")
            do {
                return try ProviderTokenKey(keyID: parts[0], teamID: parts[1], pem: pem)
            } catch let error as APNsCredentialError {
                throw ValidationError("--key \(parts[2]): \(error.message)")
            }
        }

        static let demoKeyID = "SIMKEY0001"
        static let demoTeamID = "SIMTEAM001"

        static func loadOrCreateDemoKey(in directory: URL) throws -> (key: ProviderTokenKey, file: URL) {
            let file = directory.appendingPathComponent("\(demoKeyID).p8")
            let pem: String
            if let existing = try? String(contentsOf: file, encoding: .utf8) {
                pem = existing
            } else {
                pem = APNsSigningKey.generate(keyID: demoKeyID, teamID: demoTeamID).pemRepresentation
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                guard FileManager.default.createFile(atPath: file.path, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600]) else {
                    throw ValidationError("cannot write the demo key to \(file.path)")
                }
            }
            return (try ProviderTokenKey(keyID: demoKeyID, teamID: demoTeamID, pem: pem), file)
        }
    }

    struct IssueCert: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-cert",
            abstract: "Write a push client certificate, signed by the simulator's CA, for certificate auth.",
            discussion: """
                Like Apple's push certificate, it names the app as UID and lists the topics <topic>, <topic>.voip \
                and <topic>.complication. The simulator takes the default topic from it.

                Example:
                  tern simulator issue-cert --topic com.example.app
                  curl --http2 --cacert .tern/simulator/ca.pem \\
                    --cert .tern/simulator/com.example.app.pem --key .tern/simulator/com.example.app-key.pem \\
                    -H 'apns-topic: com.example.app' -d '{"aps":{"alert":"hi"}}' \\
                    https://localhost:2197/3/device/<token>
                """
        )

        @Option(name: .long, help: "The app's bundle id.")
        var topic: String

        @Option(name: .long, help: "development, production or both.")
        var environment = "both"

        @Option(name: .long, help: "Days the certificate is valid.")
        var days = 365

        @Option(name: .long, help: "Folder to write <topic>.pem and <topic>-key.pem to (default: the state folder).")
        var out: String?

        @OptionGroup var state: StateOptions

        func validate() throws {
            guard !topic.isEmpty, topic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else {
                throw ValidationError("--topic must be a bundle id such as com.example.app")
            }
            guard ["development", "production", "both"].contains(environment) else {
                throw ValidationError("--environment must be development, production or both")
            }
            guard (1...3650).contains(days) else { throw ValidationError("--days must be 1…3650") }
        }

        func run() throws {
            let authority = try SimulatorCertificateAuthority.loadOrCreate(in: state.url)
            let environments: Set<APNsEnvironment> =
                environment == "both" ? [.development, .production] : [try APNsEnvironment(environment)]
            let issued = try authority.issuePushCertificate(
                bundleID: topic, environments: environments, validFor: TimeInterval(days) * 86400)
            let folder = out.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? state.url
            let paths = try issued.write(to: folder, name: topic)
            print("certificate  \(displayPath(paths.certificate))")
            print("private key  \(displayPath(paths.privateKey))")
            print("topics       \(topic), \(topic).voip, \(topic).complication (\(environments.map(\.rawValue).sorted().joined(separator: ", ")))")
        }
    }
}
