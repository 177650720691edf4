import Foundation
import Logging
import TernAPNs
import TernAPNsClient
import TernStore
import TernWeb

/// One long-lived APNs client per app and APNs environment, made on first use and replaced when the app changes.
///
/// An app on Apple's APNs sends each token to the environment it was registered with (a development build's token
/// only works on the sandbox); an app on the built-in simulator or a custom endpoint sends everything there.
actor ClientDirectory {
    private struct Key: Hashable {
        var app: String
        var environment: String
    }

    private var clients: [Key: (version: Date, client: APNsClient)] = [:]
    private let serverKey: ServerKey
    private var simulatorEndpoint: APNsClientConfiguration.Endpoint?
    private let connections: Int
    private let logger: Logger

    init(serverKey: ServerKey, simulatorEndpoint: APNsClientConfiguration.Endpoint?, connections: Int, logger: Logger) {
        self.serverKey = serverKey
        self.simulatorEndpoint = simulatorEndpoint
        self.connections = connections
        self.logger = logger
    }

    /// Where apps in the `simulator` environment deliver, once the built-in simulator listens.
    func useSimulator(_ endpoint: APNsClientConfiguration.Endpoint) {
        simulatorEndpoint = endpoint
    }

    /// The client for `app`'s notifications to tokens of `tokenEnvironment` (`production` or `development`).
    func client(for app: AppRecord, tokenEnvironment: String?) throws -> APNsClient {
        let endpoint = try endpoint(for: app, tokenEnvironment: tokenEnvironment)
        let key = Key(app: app.id, environment: "\(endpoint.host):\(endpoint.port)")
        if let cached = clients[key], cached.version == app.updatedAt { return cached.client }
        if let stale = clients.removeValue(forKey: key) {
            Task { await stale.client.shutdown() }
        }
        let credentials = try AppCredentialsVault(serverKey: serverKey).open(app.sealedCredentials)
        var configuration = APNsClientConfiguration(authentication: try credentials.authentication(), endpoint: endpoint)
        configuration.connections = connections
        var clientLogger = logger
        clientLogger[metadataKey: "app"] = "\(app.id)"
        let client = try APNsClient(configuration: configuration, logger: clientLogger)
        clients[key] = (app.updatedAt, client)
        return client
    }

    private func endpoint(for app: AppRecord, tokenEnvironment: String?) throws -> APNsClientConfiguration.Endpoint {
        switch app.environment {
        case AppEnvironment.simulator:
            guard let simulatorEndpoint else {
                throw JSONAPIError(
                    status: .serviceUnavailable, error: "simulatorOff", message: "app \(app.id) delivers to the built-in simulator, which is not running")
            }
            return simulatorEndpoint
        case AppEnvironment.custom:
            guard let endpoint = app.endpoint else {
                throw JSONAPIError(status: .internalServerError, error: "badApp", message: "app \(app.id) has no endpoint")
            }
            return APNsClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port, trustRootsPEM: endpoint.caPEM)
        default:
            let environment = tokenEnvironment ?? app.environment
            return .apple(environment == "development" ? .development : .production)
        }
    }

    /// Closes the clients of an app (deleted, or its credentials changed).
    func forget(app: String) async {
        let gone = clients.filter { $0.key.app == app }
        for key in gone.keys { clients.removeValue(forKey: key) }
        for (_, entry) in gone { await entry.client.shutdown() }
    }

    func shutdown() async {
        let all = clients.values
        clients = [:]
        for entry in all { await entry.client.shutdown() }
    }
}

/// The environments an app can deliver to.
enum AppEnvironment {
    static let production = "production"
    static let development = "development"
    /// The APNs simulator `tern serve` runs in its own process.
    static let simulator = "simulator"
    /// A host and port of the app's choosing (a simulator elsewhere, a test rig).
    static let custom = "custom"
    static let all = [production, development, simulator, custom]
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
