import ArgumentParser
import Foundation
import Logging
import TernAPNs
import TernAPNsClient

struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Read the legacy feedback service and print the dead tokens it lists.",
        discussion: """
            Connects with a client certificate, reads to the end of the stream and \
            prints one line per token: when the app was found gone (UTC) and the \
            token, hex. The service clears its list once read, so keep the output. \
            A token should be dropped only if it was not registered again after that \
            time (`tern serve` applies this rule itself for apps on the legacy \
            transport).

            Exit status: 0 read (even if empty), 2 no connection or a broken \
            stream, 64 bad input.

            Examples:
              # `tern simulator`'s feedback port, with a certificate it issued:
              tern feedback --host localhost --port 2196 \\
                --ca-file .tern/simulator/ca.pem \\
                --cert .tern/simulator/com.example.app.pem \\
                --cert-key .tern/simulator/com.example.app-key.pem
            """
    )

    @Option(name: .long, help: ArgumentHelp("Apple's service to read: production or development (the default).", valueName: "env"))
    var environment: String?

    @Option(name: .long, help: "Read this host instead of Apple's (e.g. `tern simulator`'s).")
    var host: String?

    @Option(name: .long, help: "Port for --host (default 2196).")
    var port: Int?

    @Option(name: .long, help: ArgumentHelp("PEM certificates to trust for the server (e.g. .tern/simulator/ca.pem).", valueName: "pem"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("The push certificate (PEM).", valueName: "pem"))
    var cert: String?

    @Option(name: .long, help: ArgumentHelp("The certificate's private key (PEM).", valueName: "pem"))
    var certKey: String?

    @Option(name: .long, help: ArgumentHelp("A PKCS#12 bundle (.p12) instead of --cert/--cert-key.", valueName: "file"))
    var p12: String?

    @Option(name: .long, help: "Passphrase for --p12.")
    var passphrase: String?

    @Option(name: .long, help: ArgumentHelp("Read the --p12 passphrase from this environment variable.", valueName: "var"))
    var passphraseEnv: String?

    @Option(
        name: .long,
        help: ArgumentHelp("An HTTP proxy to reach the service through (a CONNECT tunnel; TLS stays end to end).", valueName: "http://[user:password@]host:port"))
    var proxy: String?

    @Option(name: .long, help: ArgumentHelp("Give up after this many seconds.", valueName: "seconds"))
    var timeout: Double = 60

    func run() async throws {
        var configuration: LegacyClientConfiguration
        do {
            let endpoint = try ProviderOptions.endpoint(
                host: host, port: port, environment: environment, caFile: caFile, defaultPort: 2196,
                apple: LegacyClientConfiguration.appleFeedback)
            let (authentication, _) = try ProviderOptions.authentication(
                keyFile: nil, keyID: nil, teamID: nil, cert: cert, certKey: certKey, p12: p12, passphrase: passphrase,
                passphraseEnv: passphraseEnv)
            guard timeout > 0, timeout <= 3600 else { throw CommandInputError("--timeout", "must be more than 0 and at most 3600 seconds") }
            configuration = LegacyClientConfiguration(authentication: authentication, endpoint: endpoint)
            configuration.proxy = try ProviderOptions.proxy(proxy)
            configuration.feedbackTimeout = .milliseconds(Int64((timeout * 1000).rounded(.up)))
        } catch let error as CommandInputError {
            printError("Error: \(error)")
            throw ExitCode.validationFailure
        }
        if let warning = ProviderOptions.certificateWarning(configuration.authentication, option: p12 != nil ? "--p12" : "--cert") {
            printError(warning)
        }
        let tuples: [FeedbackTuple]
        do {
            tuples = try await LegacyFeedbackClient.fetch(configuration)
        } catch let error as APNsClientError where error.code == .invalidCredentials {
            printError("Error: \(p12 != nil ? "--p12" : "--cert"): \(error.message)")
            throw ExitCode.validationFailure
        } catch {
            printError("error  \(error)")
            throw ExitCode(2)
        }
        for tuple in tuples {
            print("\(SendCommand.iso8601(Date(timeIntervalSince1970: TimeInterval(tuple.timestamp))))  \(DeviceToken.hex(tuple.token))")
        }
        printError("\(tuples.count) token\(tuples.count == 1 ? "" : "s") listed; the service has cleared its list")
    }
}
