import Foundation
import Logging
import Metrics
import TernAPNs
import TernAPNsClient
import TernStore
import TernWeb

/// One long-lived APNs client per app and APNs environment, made on first use and replaced when the app changes:
/// an HTTP/2 client, or a legacy gateway client for apps on the binary protocol.
///
/// An app on Apple's APNs sends each token to the environment it was registered with (a development build's token
/// only works on the sandbox); an app on the built-in simulator or a custom endpoint sends everything there.
///
/// Its owner runs ``closeRetired()`` beside the work that uses it: clients replaced meanwhile are closed there, as
/// they are replaced (their streams in flight finish first). After ``close()``, every client is closed and none is
/// made.
actor ClientDirectory {
    private struct Key: Hashable {
        var app: String
        /// `host:port`: an app's tokens of both APNs environments share a client when they go to the same place.
        var endpoint: String
    }

    /// Where the built-in simulator listens, once it does.
    struct SimulatorPorts: Sendable {
        var endpoint: APNsClientConfiguration.Endpoint
        var legacyGatewayPort: Int?
        var feedbackPort: Int?
    }

    private var clients: [Key: (version: Date, client: any NotificationSender)] = [:]
    /// Replaced clients, for ``run()`` to close.
    private let retired = AsyncStream.makeStream(of: (any NotificationSender).self)
    private var closed = false
    private let serverKey: ServerKey
    private var simulator: SimulatorPorts?
    private let connections: Int
    /// How long an HTTP/2 connection may carry nothing before it is closed.
    private let idleTimeout: Duration
    /// How long one HTTP/2 notification may take, and an endpoint be unreachable before its sends fail at once.
    private let sendTimeout: Duration
    /// How long a legacy gateway notification waits for an error response before it counts as accepted.
    private let legacyReplayWindow: Duration
    /// Each HTTP/2 client's ``EndpointWindow``: where it starts, and the most it grows to.
    private let endpointWindow: (initial: Int, maximum: Int)
    /// The egress proxy to Apple's and custom endpoints (`apns.proxy`); the built-in simulator is reached directly.
    private let proxy: HTTPProxy?
    /// What a certificate's end of validity is compared with.
    private let clock: any WallClock
    /// Apps whose certificate's end this node shows (`tern_apns_certificate_expiry_timestamp_seconds`), each with the
    /// version (`updatedAt`) of the app whose certificate was last noted: an app with tokens of both APNs environments
    /// has two clients, and its certificate's end is logged once.
    private var certificateApps: [String: Date] = [:]
    private let logger: Logger

    init(
        serverKey: ServerKey, simulator: SimulatorPorts?, connections: Int, idleTimeout: Duration = .seconds(600),
        sendTimeout: Duration = .seconds(30), endpointWindow: (initial: Int, maximum: Int) = (500, 4000), proxy: HTTPProxy? = nil,
        legacyReplayWindow: Duration = .milliseconds(500), clock: any WallClock = SystemWallClock(), logger: Logger
    ) {
        self.clock = clock
        self.sendTimeout = sendTimeout
        self.proxy = proxy
        self.endpointWindow = endpointWindow
        self.serverKey = serverKey
        self.simulator = simulator
        self.connections = connections
        self.idleTimeout = idleTimeout
        self.legacyReplayWindow = legacyReplayWindow
        self.logger = logger
    }

    /// Where apps in the `simulator` environment deliver, once the built-in simulator listens.
    func useSimulator(_ ports: SimulatorPorts) {
        simulator = ports
    }

    /// Whether apps in the `simulator` environment have somewhere to deliver yet.
    var knowsSimulator: Bool { simulator != nil }

    /// The sender for `app`'s notifications to tokens of `tokenEnvironment` (nil: the app's own).
    func client(for app: AppRecord, tokenEnvironment: APNsEnvironment?) throws -> any NotificationSender {
        try client(for: app, tokenEnvironment: tokenEnvironment, service: app.transport == AppRecord.legacy ? .gateway : .http2)
    }

    /// The HTTP/2 client for `app`'s broadcasts to channels of `environment` (`.http2`, the notification hosts), or
    /// for managing those channels (`.channels`, Apple's management hosts; the simulator and a custom endpoint serve
    /// both on their one port, so there one client does both).
    func broadcastClient(for app: AppRecord, environment: APNsEnvironment, service: Service) throws -> APNsClient {
        guard app.transport != AppRecord.legacy else { throw EndpointUnavailable(app: app.id, reason: .legacyHasNoBroadcasts) }
        guard let sender = try client(for: app, tokenEnvironment: environment, service: service) as? HTTP2Sender else {
            throw EndpointUnavailable(app: app.id, reason: .legacyHasNoBroadcasts)
        }
        return sender.client
    }

    private func client(for app: AppRecord, tokenEnvironment: APNsEnvironment?, service: Service) throws -> any NotificationSender {
        guard !closed else { throw EndpointUnavailable(app: app.id, reason: .stopped) }
        let legacy = service == .gateway
        let endpoint = try endpoint(for: app, tokenEnvironment: tokenEnvironment, service: service)
        let key = Key(app: app.id, endpoint: "\(endpoint.host):\(endpoint.port)")
        if let cached = clients[key], cached.version == app.updatedAt { return cached.client }
        if let stale = clients.removeValue(forKey: key) { retired.continuation.yield(stale.client) }
        let credentials = try AppCredentialsVault(serverKey: serverKey).open(app.sealedCredentials)
        var clientLogger = logger
        clientLogger[metadataKey: "app"] = "\(app.id)"
        if let expiry = credentials.certificate?.notValidAfter {
            noteCertificate(expiring: expiry, app: app, logger: clientLogger)
        } else if certificateApps.removeValue(forKey: app.id) != nil {
            Self.certificateGauge(app.id).destroy()
        }
        let client: any NotificationSender
        if legacy {
            var configuration = LegacyClientConfiguration(authentication: try credentials.authentication(), endpoint: endpoint)
            configuration.proxy = proxy(for: app)
            configuration.replayWindow = legacyReplayWindow
            // As an HTTP/2 send's: the most a notification waits for a connection that carries it, and a chunk for one.
            configuration.sendTimeout = sendTimeout
            client = LegacySender(client: try LegacyGatewayClient(configuration: configuration, logger: clientLogger))
        } else {
            var configuration = APNsClientConfiguration(authentication: try credentials.authentication(), endpoint: endpoint)
            configuration.proxy = proxy(for: app)
            configuration.connections = connections
            configuration.idleTimeout = idleTimeout
            configuration.sendTimeout = sendTimeout
            client = HTTP2Sender(
                client: try APNsClient(configuration: configuration, logger: clientLogger),
                gate: EndpointGate(initial: endpointWindow.initial, maximum: endpointWindow.maximum, onChange: { [clientLogger] change in
                    let place = "\(endpoint.host):\(endpoint.port)"
                    switch change {
                    case .silent:
                        clientLogger.warning(
                            "APNs endpoint answers nothing: a notification waited its whole attempt timeout with no answer to any; its notifications fail as notAnswering, one at a time tried, until it answers",
                            metadata: ["endpoint": "\(place)"])
                    case .answering:
                        clientLogger.notice("APNs endpoint answers again", metadata: ["endpoint": "\(place)"])
                    case .refusingCredentials(let reason, let topic):
                        clientLogger.error(
                            "APNs refuses the app's credentials for this topic: its notifications fail at once, unsent, with APNs' reason, and one a minute is tried, until APNs takes them or the app's credentials or topic change",
                            metadata: ["endpoint": "\(place)", "topic": "\(topic)", "reason": "\(reason)"])
                    case .acceptingCredentials(let topic):
                        clientLogger.notice("APNs takes the app's credentials again", metadata: ["endpoint": "\(place)", "topic": "\(topic)"])
                    }
                }))
        }
        clients[key] = (app.updatedAt, client)
        return client
    }

    /// An app's certificate, as its client is made: its end in `tern_apns_certificate_expiry_timestamp_seconds` (an
    /// operator alerts on it coming near), and a log line when it is near or past (APNs then refuses every
    /// notification at the TLS handshake, which alone would read as a connect error), once for each version of the
    /// app.
    private func noteCertificate(expiring expiry: Date, app: AppRecord, logger: Logger) {
        Self.certificateGauge(app.id).record(expiry.timeIntervalSince1970)
        guard certificateApps.updateValue(app.updatedAt, forKey: app.id) != app.updatedAt else { return }
        let now = clock.now
        let metadata: Logger.Metadata = ["expiresAt": "\(expiry.formatted(.iso8601))"]
        if expiry <= now {
            logger.error(
                "the app's APNs certificate has expired: APNs refuses it, so its notifications fail until its credentials are changed (a new certificate, or a token key)",
                metadata: metadata)
        } else if expiry.timeIntervalSince(now) < TimeInterval(AppCredentials.certificateWarningDays) * 86400 {
            logger.warning(
                "the app's APNs certificate expires within \(AppCredentials.certificateWarningDays) days; after that APNs refuses it: change its credentials before",
                metadata: metadata)
        }
    }

    private static func certificateGauge(_ app: String) -> Gauge {
        Gauge(label: "tern_apns_certificate_expiry_timestamp_seconds", dimensions: [("app", app)])
    }

    /// How to read `app`'s legacy feedback service (for tokens of `tokenEnvironment` on Apple's).
    func feedbackConfiguration(for app: AppRecord, tokenEnvironment: APNsEnvironment?) throws -> LegacyClientConfiguration {
        let endpoint = try endpoint(for: app, tokenEnvironment: tokenEnvironment, service: .feedback)
        let credentials = try AppCredentialsVault(serverKey: serverKey).open(app.sealedCredentials)
        var configuration = LegacyClientConfiguration(authentication: try credentials.authentication(), endpoint: endpoint)
        configuration.proxy = proxy(for: app)
        return configuration
    }

    /// The proxy `app`'s connections go through: none to the built-in simulator, which listens in this process.
    private func proxy(for app: AppRecord) -> HTTPProxy? {
        app.environment == .simulator ? nil : proxy
    }

    enum Service {
        case http2
        case gateway
        case feedback
        /// Broadcast channels' management (iOS 18).
        case channels
    }

    private func endpoint(for app: AppRecord, tokenEnvironment: APNsEnvironment?, service: Service) throws -> APNsClientConfiguration.Endpoint {
        switch app.environment {
        case .simulator:
            guard let simulator else { throw EndpointUnavailable(app: app.id, reason: .simulatorOff) }
            var endpoint = simulator.endpoint
            switch service {
            case .http2, .channels: break
            case .gateway, .feedback:
                guard let port = service == .gateway ? simulator.legacyGatewayPort : simulator.feedbackPort else {
                    throw EndpointUnavailable(app: app.id, reason: .legacyNotServed)
                }
                endpoint.port = port
            }
            return endpoint
        case .custom:
            guard let endpoint = app.endpoint else { throw EndpointUnavailable(app: app.id, reason: .noEndpoint) }
            // A custom legacy endpoint names the gateway; its feedback service is on the port given, or the next one
            // (as Apple's 2195 and 2196).
            let port = service == .feedback ? endpoint.feedbackPort ?? endpoint.port + 1 : endpoint.port
            return APNsClientConfiguration.Endpoint(host: endpoint.host, port: port, trustRootsPEM: endpoint.caPEM)
        case .production, .development:
            let environment = tokenEnvironment ?? app.environment.apnsEnvironment ?? .production
            switch service {
            case .http2: return .apple(environment)
            case .channels: return .channelManagement(environment)
            case .gateway: return LegacyClientConfiguration.appleGateway(environment)
            case .feedback: return LegacyClientConfiguration.appleFeedback(environment)
            }
        }
    }

    /// Closes the clients of an app (deleted, or its credentials changed).
    func forget(app: String) {
        for (key, entry) in clients where key.app == app {
            clients.removeValue(forKey: key)
            retired.continuation.yield(entry.client)
        }
        // Shown again, if it still has a certificate, when its next client is made.
        if certificateApps.removeValue(forKey: app) != nil { Self.certificateGauge(app).destroy() }
    }

    /// Closes the clients of apps deleted or changed since their clients were made (``forget(app:)``), given every
    /// app there is: for a node that may have missed other nodes' announcements of such changes, its connection to
    /// them lost for a while.
    func forgetChanged(current apps: [AppRecord]) {
        let versions = Dictionary(apps.map { ($0.id, $0.updatedAt) }, uniquingKeysWith: { first, _ in first })
        let changed = Set(clients.filter { versions[$0.key.app] != $0.value.version }.map(\.key.app))
            .union(certificateApps.filter { versions[$0.key] != $0.value }.map(\.key))
        for app in changed { forget(app: app) }
    }

    // MARK: Events between nodes

    static let appChangedPrefix = "appchanged "

    /// The coordinator event that tells every other node an app was changed or deleted: each closes its clients of the
    /// app (``forget(app:)``), as the node that made the change did. Until then another node would go on showing a
    /// certificate the app no longer has, or an app that is gone, in its gauge, and keep the clients' connections
    /// open; a changed app's clients it would replace only when it next sent for the app.
    static func appChangedEvent(app: String) -> String { appChangedPrefix + app }

    /// The app of an app-changed event, or nil (not one).
    static func appChangedTarget(of event: String) -> String? { DeviceConnections.app(of: event, after: appChangedPrefix) }

    /// Closes replaced clients as they come, in parallel; returns once ``close()`` was called and every client is
    /// closed.
    nonisolated func closeRetired() async {
        await withDiscardingTaskGroup { closing in
            for await client in retired.stream {
                closing.addTask { await client.shutdown() }
            }
        }
    }

    /// Closes every client (through ``closeRetired()``) and refuses to make more.
    func close() {
        closed = true
        for entry in clients.values { retired.continuation.yield(entry.client) }
        clients = [:]
        retired.continuation.finish()
    }
}

/// Why an app has nowhere to deliver to now.
struct EndpointUnavailable: Error, CustomStringConvertible {
    enum Reason {
        /// It delivers to the embedded APNs, which is not running.
        case simulatorOff
        /// It uses the legacy protocol, which the embedded APNs does not serve.
        case legacyNotServed
        /// A `custom` app without an endpoint (the API never stores one).
        case noEndpoint
        /// The server is stopping: its clients are closed.
        case stopped
        /// It uses the legacy protocol, which has no broadcast channels.
        case legacyHasNoBroadcasts
    }

    var app: String
    var reason: Reason

    var description: String {
        switch reason {
        case .simulatorOff: "app \(app) delivers to the built-in simulator, which is not running"
        case .legacyNotServed: "app \(app) uses the legacy protocol, which the built-in simulator does not serve"
        case .noEndpoint: "app \(app) has no endpoint"
        case .stopped: "the server is stopping"
        case .legacyHasNoBroadcasts: "app \(app) uses the legacy binary protocol, which has no broadcast channels"
        }
    }
}

extension ClientDirectory {
    /// Why ``client(for:tokenEnvironment:)`` made no client, for the push's failures (``PushFailure/detail``): in
    /// words that name no key material, whatever the error says.
    static func whyUnavailable(_ error: any Error) -> String {
        switch error {
        case let error as EndpointUnavailable: error.description
        case let error as APNsClientError: error.message
        case let error as JSONAPIError: "the app's credentials cannot be used: \(error.message)"
        case let error as ServerKeyError: "the app's credentials cannot be opened: \(error.description)"
        default: "the app's credentials cannot be read"
        }
    }
}

/// Seals and opens app credentials with the server key.
struct AppCredentialsVault {
    let serverKey: ServerKey

    func seal(_ credentials: AppCredentials) -> [UInt8] {
        serverKey.seal(Array(try! JSONEncoder().encode(credentials)))
    }

    func open(_ sealed: [UInt8]) throws -> AppCredentials {
        try JSONDecoder().decode(AppCredentials.self, from: Data(try serverKey.open(sealed)))
    }
}
