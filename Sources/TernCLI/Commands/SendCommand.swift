import ArgumentParser
import Foundation
import Logging
import TernAPNs
import TernAPNsClient

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification to APNs (or to `tern simulator`) and print APNs' answer.",
        discussion: """
            The notification is checked against APNs' rules before anything is sent:
            a bad token, topic, header or payload is a one-line error naming the \
            option, and nothing goes out. The push type defaults to alert, or to \
            background when the only content is --content-available (priority then \
            defaults to 5).

            Prints `accepted  apns-id <uuid>`, or `rejected  <status> <Reason> \
            apns-id <uuid>` with what to do about it (and APNs' timestamp for a 410).
            Exit status: 0 accepted, 1 rejected, 2 no answer (connection failure, \
            timeout), 64 bad input.

            With --legacy it speaks Apple's retired binary protocol (gateway port \
            2195; `tern simulator` serves one) with a client certificate. That \
            gateway answers only failures, so "accepted" means no error response \
            came within --legacy-wait. Key material and provider tokens are never \
            printed; prefer --passphrase-env to --passphrase.

            Examples:
              # Against `tern simulator` (its CA and demo key are in .tern/simulator):
              DEVICE=abababababababababababababababababababababababababababababababab
              tern send --host localhost --port 2197 \\
                --ca-file .tern/simulator/ca.pem \\
                --key-file .tern/simulator/SIMKEY0001.p8 \\
                --key-id SIMKEY0001 --team-id SIMTEAM001 \\
                --topic com.example.app --token $DEVICE \\
                --title "Hello" --body "From tern send" --badge 1

              # Against Apple's sandbox, with a .p8 key from the developer portal:
              tern send --environment development \\
                --key-file AuthKey_ABC123DEFG.p8 \\
                --key-id ABC123DEFG --team-id TEAM123456 \\
                --topic com.example.app --token <device token, hex> \\
                --alert "Hello from Tern"

              # Certificate auth; a raw payload from stdin; a background push:
              echo '{"aps":{"alert":"hi"},"id":42}' | tern send \\
                --cert push.pem --cert-key push-key.pem \\
                --topic com.example.app --token $DEVICE --payload -
              # The legacy binary gateway of `tern simulator`, with a certificate it issued:
              tern send --legacy --host localhost --port 2195 \\
                --ca-file .tern/simulator/ca.pem \\
                --cert .tern/simulator/com.example.app.pem --cert-key .tern/simulator/com.example.app-key.pem \\
                --topic com.example.app --token $DEVICE --alert "Hello, 2195"
              P12_PASSWORD=... tern send --p12 push.p12 \\
                --passphrase-env P12_PASSWORD \\
                --topic com.example.app --token $DEVICE \\
                --content-available --data '{"sync":"inbox"}'
            """
    )

    // MARK: Recipient

    @Option(name: .long, help: ArgumentHelp("The device token, hex.", valueName: "hex"))
    var token: String

    @Option(name: .long, help: "apns-topic: the app's bundle id (plus the push type's suffix, e.g. .voip).")
    var topic: String

    // MARK: Target

    @Option(name: .long, help: ArgumentHelp("Apple's host to use: production or development (the default).", valueName: "env"))
    var environment: String?

    @Option(name: .long, help: "Send to this host instead of Apple's (e.g. `tern simulator`'s).")
    var host: String?

    @Option(name: .long, help: "Port for --host (default 443).")
    var port: Int?

    @Option(name: .long, help: ArgumentHelp("PEM certificates to trust for the server (e.g. .tern/simulator/ca.pem).", valueName: "pem"))
    var caFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp("An HTTP proxy to reach APNs through (a CONNECT tunnel; TLS stays end to end).", valueName: "http://[user:password@]host:port"))
    var proxy: String?

    // MARK: Authentication

    @Option(name: .long, help: ArgumentHelp("Token auth: the .p8 key file.", valueName: "file"))
    var keyFile: String?

    @Option(name: .long, help: "Token auth: the key's 10-character id.")
    var keyID: String?

    @Option(name: .long, help: "Token auth: your 10-character team id.")
    var teamID: String?

    @Option(name: .long, help: ArgumentHelp("Certificate auth: the push certificate (PEM).", valueName: "pem"))
    var cert: String?

    @Option(name: .long, help: ArgumentHelp("Certificate auth: the certificate's private key (PEM).", valueName: "pem"))
    var certKey: String?

    @Option(name: .long, help: ArgumentHelp("Certificate auth: a PKCS#12 bundle (.p12).", valueName: "file"))
    var p12: String?

    @Option(name: .long, help: "Passphrase for --p12.")
    var passphrase: String?

    @Option(name: .long, help: ArgumentHelp("Read the --p12 passphrase from this environment variable.", valueName: "var"))
    var passphraseEnv: String?

    // MARK: Content

    @Option(name: .long, help: ArgumentHelp("A plain alert (the string form of aps.alert).", valueName: "text"))
    var alert: String?

    @Option(name: .long, help: "Alert title.")
    var title: String?

    @Option(name: .long, help: "Alert subtitle.")
    var subtitle: String?

    @Option(name: .long, help: "Alert body.")
    var body: String?

    @Option(name: .long, help: "Badge number (0 clears it).")
    var badge: Int?

    @Option(name: .long, help: ArgumentHelp("Sound file name, or `default`.", valueName: "name"))
    var sound: String?

    @Option(name: .long, help: "Notification category id.")
    var category: String?

    @Option(name: .long, help: "Thread id (grouping).")
    var threadID: String?

    @Flag(name: .long, help: "content-available: 1 (a background update).")
    var contentAvailable = false

    @Flag(name: .long, help: "mutable-content: 1 (the notification service extension runs first).")
    var mutableContent = false

    @Option(name: .long, help: ArgumentHelp("Custom keys beside aps, as a JSON object.", valueName: "json"))
    var data: String?

    @Option(name: .long, help: ArgumentHelp("The whole payload as raw JSON, from a file or - for stdin (instead of the content options).", valueName: "file|-"))
    var payload: String?

    // MARK: Headers

    @Option(name: .long, help: "apns-push-type: alert, background, voip, complication, fileprovider, mdm, location, liveactivity, pushtotalk, widgets or controls.")
    var pushType: String?

    @Option(name: .long, help: ArgumentHelp("apns-priority: 10, 5 or 1 (default 10; 5 for background).", valueName: "10|5|1"))
    var priority: Int?

    @Option(name: .long, help: ArgumentHelp("apns-expiration: UNIX seconds to keep trying until, or 0 to try once.", valueName: "unix|0"))
    var expiration: String?

    @Option(name: .long, help: "apns-collapse-id (at most 64 bytes).")
    var collapseID: String?

    @Option(name: .long, help: ArgumentHelp("apns-id to send (default: a new UUID).", valueName: "uuid"))
    var apnsID: String?

    // MARK: Legacy binary protocol

    @Flag(name: .long, help: "Send over the legacy binary gateway (port 2195) instead of HTTP/2; needs a certificate.")
    var legacy = false

    @Option(name: .long, help: ArgumentHelp("With --legacy: frame (command 2), enhanced (1) or simple (0).", valueName: "format"))
    var legacyFormat = "frame"

    @Option(
        name: .long,
        help: ArgumentHelp("With --legacy: how long to wait for an error response before counting it accepted.", valueName: "ms"))
    var legacyWait = 500

    // MARK: Behaviour

    @Option(name: .long, help: ArgumentHelp("Give up after this many seconds, retries included.", valueName: "seconds"))
    var timeout: Double = 15

    @Option(name: .long, help: "Client log level (trace … critical).")
    var logLevel = Logger.Level.error

    func run() async throws {
        let plan: Plan
        do {
            plan = try prepare()
        } catch let error as InputError {
            printError("Error: \(error)")
            throw ExitCode.validationFailure
        }
        bootstrapLogging(logLevel)
        if let warning = ProviderOptions.certificateWarning(plan.configuration.authentication, option: plan.authOption) { printError(warning) }
        if legacy { return try await sendLegacy(plan) }

        var started = false
        do {
            let delivery = try await APNsClient.withClient(plan.configuration, logger: Logger(label: "tern.send")) { client in
                started = true
                return try await client.send(plan.notification)
            }
            print(Self.describe(delivery, sentID: plan.notification.metadata.apnsID))
            if !delivery.isDelivered { throw ExitCode(1) }
        } catch let error as APNsClientError {
            if !started, error.code == .invalidCredentials || error.code == .invalidConfiguration {
                // The client could not be built from these files: input, not a failed send.
                let option = error.message.contains("CA") ? "--ca-file" : plan.authOption
                printError("Error: \(option): \(error.message)")
                throw ExitCode.validationFailure
            }
            printError("error  \(error)")
            throw ExitCode(2)
        }
    }

    /// The gateway answers only failures: no error response within --legacy-wait means accepted.
    private func sendLegacy(_ plan: Plan) async throws {
        var configuration = LegacyClientConfiguration(
            authentication: plan.configuration.authentication, endpoint: plan.configuration.endpoint)
        configuration.format = plan.legacyFormat
        configuration.proxy = plan.configuration.proxy
        configuration.replayWindow = .milliseconds(legacyWait)
        configuration.maxConnectFailures = 3
        // --timeout bounds the whole send, as it does over HTTP/2: a gateway that never finishes the handshake, or
        // that answers every connection with nonsense, ends in a timeout error, not a hang.
        let limit = plan.configuration.sendTimeout
        configuration.sendTimeout = limit
        configuration.connectTimeout = max(.milliseconds(10), min(configuration.connectTimeout, limit))
        let client: LegacyGatewayClient
        do {
            client = try LegacyGatewayClient(configuration: configuration, logger: Logger(label: "tern.send"))
        } catch let error as APNsClientError {
            let option = error.message.contains("CA") ? "--ca-file" : plan.authOption
            printError("Error: \(option): \(error.message)")
            throw ExitCode.validationFailure
        }
        let outcome = await client.send([LegacyNotification(plan.notification)]).first ?? .failed("no outcome")
        await client.shutdown()
        switch outcome {
        case .accepted:
            print("accepted  legacy \(plan.legacyFormat) format (no error response within \(legacyWait) ms)")
        case .rejected(let status):
            let response = LegacyGatewayClient.response(for: status)
            print("rejected  status \(status)  (HTTP/2: \(response.status) \(response.reason.map { "\($0)" } ?? ""))")
            print("          \(Self.advice(response))")
            throw ExitCode(1)
        case .failed(let message):
            printError("error  \(message)")
            throw ExitCode(2)
        case .shutDown:
            printError("error  the client is shut down")
            throw ExitCode(2)
        }
    }

    // MARK: Building the request

    /// A bad value, named by the option it came from.
    typealias InputError = CommandInputError

    struct Plan {
        var configuration: APNsClientConfiguration
        var notification: APNsNotification
        /// The option to name when the client refuses the credentials.
        var authOption: String
        var legacyFormat = LegacyCommand.frame
    }

    func prepare() throws -> Plan {
        let endpoint = try makeEndpoint()
        let (authentication, authOption) = try makeAuthentication()
        let notification = try makeNotification()
        guard timeout > 0, timeout <= 3600 else { throw InputError("--timeout", "must be more than 0 and at most 3600 seconds") }
        var configuration = APNsClientConfiguration(authentication: authentication, endpoint: endpoint)
        configuration.proxy = try ProviderOptions.proxy(proxy)
        configuration.connections = 1
        let limit = Duration.milliseconds(Int64((timeout * 1000).rounded(.up)))
        configuration.sendTimeout = limit
        configuration.attemptTimeout = min(configuration.attemptTimeout, limit)
        var plan = Plan(configuration: configuration, notification: notification, authOption: authOption)
        if legacy {
            plan.legacyFormat = try legacyCommand()
            let limit = plan.legacyFormat.maximumPayloadSize
            guard notification.payload.count <= limit else {
                throw InputError(
                    payload != nil ? "--payload" : "--legacy-format",
                    "the payload is \(notification.payload.count) bytes; the \(legacyFormat) format takes at most \(limit)")
            }
            guard (10...60_000).contains(legacyWait) else { throw InputError("--legacy-wait", "must be 10…60000 ms") }
        } else if legacyFormat != "frame" || legacyWait != 500 {
            throw InputError(legacyFormat != "frame" ? "--legacy-format" : "--legacy-wait", "goes with --legacy")
        }
        return plan
    }

    private func legacyCommand() throws -> LegacyCommand {
        guard let format = LegacyCommand(name: legacyFormat) else {
            throw InputError("--legacy-format", "must be frame, enhanced or simple, not '\(legacyFormat)'")
        }
        return format
    }

    private func makeEndpoint() throws -> APNsClientConfiguration.Endpoint {
        try ProviderOptions.endpoint(
            host: host, port: port, environment: environment, caFile: caFile, defaultPort: legacy ? 2195 : 443,
            apple: legacy ? LegacyClientConfiguration.appleGateway : APNsClientConfiguration.Endpoint.apple)
    }

    private func makeAuthentication() throws -> (APNsClientConfiguration.Authentication, option: String) {
        let (authentication, option) = try ProviderOptions.authentication(
            keyFile: keyFile, keyID: keyID, teamID: teamID, cert: cert, certKey: certKey, p12: p12, passphrase: passphrase,
            passphraseEnv: passphraseEnv)
        if legacy, case .token = authentication {
            throw InputError("--legacy", "the legacy binary protocol takes a client certificate (--cert/--cert-key or --p12), not a token key")
        }
        return (authentication, option)
    }

    /// Whether any option that builds the payload was given (they exclude --payload).
    private var contentOptions: [String] {
        var given: [String] = []
        if alert != nil { given.append("--alert") }
        if title != nil { given.append("--title") }
        if subtitle != nil { given.append("--subtitle") }
        if body != nil { given.append("--body") }
        if badge != nil { given.append("--badge") }
        if sound != nil { given.append("--sound") }
        if category != nil { given.append("--category") }
        if threadID != nil { given.append("--thread-id") }
        if contentAvailable { given.append("--content-available") }
        if mutableContent { given.append("--mutable-content") }
        if data != nil { given.append("--data") }
        return given
    }

    private func makeNotification() throws -> APNsNotification {
        let deviceToken: DeviceToken
        do {
            deviceToken = try DeviceToken(hex: token, field: "--token")
        } catch let error as APNsValidationError {
            throw InputError("--token", error.message)
        }

        // The payload: raw, or built from the content options.
        var built: APNsPayload?
        var raw: [UInt8]?
        if let payload {
            if let other = contentOptions.first {
                throw InputError("--payload", "holds the whole payload; it does not go with \(other)")
            }
            raw = try readPayload(payload)
        } else {
            built = try buildPayload()
        }

        // Headers.
        var pushType = APNsPushType.alert
        if let value = self.pushType {
            pushType = try core("--push-type") { try APNsPushType(headerValue: value) }
        } else if let built, built.contentAvailable, !built.isUserVisible {
            pushType = .background
        } else if let raw, Self.isBackgroundOnly(raw) {
            pushType = .background
        }
        let priority = try self.priority.map { value in try core("--priority") { try APNsPriority(value) } }
        let expiration = try self.expiration.map { value in try core("--expiration") { try APNsExpiration(headerValue: value) } }
        let apnsID = try self.apnsID.map { value in try core("--apns-id") { try UUID(apnsID: value) } } ?? UUID()
        let metadata = APNsRequestMetadata(
            topic: topic, pushType: pushType, priority: priority, expiration: expiration ?? .none, collapseID: collapseID,
            apnsID: apnsID)

        do {
            if let raw {
                return try APNsNotification(deviceToken: deviceToken, metadata: metadata, rawPayload: raw)
            }
            return try APNsNotification(deviceToken: deviceToken, metadata: metadata, payload: built!)
        } catch let error as APNsValidationError {
            throw InputError(option(for: error.field, raw: raw != nil), error.message)
        }
    }

    private func buildPayload() throws -> APNsPayload {
        if alert != nil, title != nil || subtitle != nil || body != nil {
            throw InputError("--alert", "use either --alert or --title/--subtitle/--body")
        }
        var payload = APNsPayload()
        if let alert { payload.alert = .string(alert) }
        if title != nil || subtitle != nil || body != nil {
            payload.alert = APNsAlert(title: title, subtitle: subtitle, body: body)
        }
        payload.badge = badge
        payload.sound = sound.map(APNsSound.named)
        payload.category = category
        payload.threadID = threadID
        payload.contentAvailable = contentAvailable
        payload.mutableContent = mutableContent
        if let data {
            guard let value = try? JSONValue(parsing: Data(data.utf8)) else {
                throw InputError("--data", "not valid JSON")
            }
            guard case .object(let members) = value else {
                throw InputError("--data", "must be a JSON object (its keys go beside aps)")
            }
            payload.custom = members
        }
        guard contentAvailable || payload.isUserVisible || data != nil || mutableContent else {
            throw InputError(
                "--alert", "nothing to send: give --alert, --title/--body, --badge, --sound, --content-available, --data or --payload")
        }
        return payload
    }

    private func readPayload(_ source: String) throws -> [UInt8] {
        if source == "-" {
            return Array(FileHandle.standardInput.readDataToEndOfFile())
        }
        guard let data = FileManager.default.contents(atPath: source) else {
            throw InputError("--payload", "cannot read '\(source)'")
        }
        return Array(data)
    }

    /// A raw payload whose aps is content-available and nothing the user would see: a background push.
    private static func isBackgroundOnly(_ raw: [UInt8]) -> Bool {
        guard let aps = (try? JSONValue(parsing: Data(raw)))?["aps"], case .object(let keys) = aps else { return false }
        guard keys["content-available"] == 1 else { return false }
        return keys["alert"] == nil && keys["badge"] == nil && keys["sound"] == nil
    }

    /// The option a core validation error is about.
    private func option(for field: String, raw: Bool) -> String {
        switch field {
        case "apns-topic": return "--topic"
        case "apns-push-type": return "--push-type"
        case "apns-priority": return "--priority"
        case "apns-expiration": return "--expiration"
        case "apns-collapse-id": return "--collapse-id"
        case "apns-id": return "--apns-id"
        case "aps.badge": return "--badge"
        case "custom.aps": return "--data"
        case "aps": return "--push-type"
        default:
            if raw { return "--payload" }
            return data != nil ? "--data/--alert/--body" : "--alert/--title/--body"
        }
    }

    private func core<T>(_ option: String, _ parse: () throws -> T) throws -> T {
        do {
            return try parse()
        } catch let error as APNsValidationError {
            throw InputError(option, error.message)
        }
    }

    // MARK: Output

    static func describe(_ delivery: APNsDelivery, sentID: UUID) -> String {
        let response = delivery.response
        let apnsID = (response.apnsID ?? sentID).apnsString
        var lines: [String]
        if delivery.isDelivered {
            lines = ["accepted  apns-id \(apnsID)"]
        } else {
            let reason = response.reason?.rawValue ?? "(no reason)"
            lines = ["rejected  \(response.status) \(reason)  apns-id \(apnsID)"]
        }
        if let unique = response.apnsUniqueID { lines.append("  apns-unique-id \(unique)") }
        if !delivery.isDelivered {
            if let timestamp = response.timestamp { lines.append("  timestamp \(iso8601(timestamp))") }
            lines.append("  " + advice(response))
        }
        if delivery.attempts > 1 { lines.append("  attempts \(delivery.attempts)") }
        return lines.joined(separator: "\n")
    }

    static func advice(_ response: APNsResponse) -> String {
        switch response.outcomeClass {
        case .delivered: return "delivered"
        case .tokenInvalid:
            return response.status == 410
                ? "token is invalid: remove it (unless the device registered it again after the timestamp)"
                : "token is invalid: remove it"
        case .requestInvalid: return "request is invalid: fix it before sending again"
        case .credentialsInvalid: return "credentials are invalid or not allowed for this topic: fix the configuration"
        case .retryLater: return "APNs asks to retry later (the client's retries ran out)"
        }
    }

    static func iso8601(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        formatter.formatOptions =
            milliseconds % 1000 == 0 ? [.withInternetDateTime] : [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// Writes a line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
