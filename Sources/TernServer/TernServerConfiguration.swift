import Configuration
import Foundation
import Logging
import SystemPackage

/// Everything `tern serve` can be told. The defaults run a working service on a fresh machine: 127.0.0.1:8080,
/// SQLite in `./tern.db`, the server key in `./tern.key`, the built-in APNs simulator and a `demo` app on it.
public struct TernServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (tests).
    public var port = 8080
    /// The SQLite database file.
    public var databasePath = "tern.db"
    /// A PostgreSQL database (`postgres://user:password@host:5432/tern`) instead of SQLite: several nodes may
    /// share it.
    public var databaseURL: String?
    /// PostgreSQL connections this node may open.
    public var databaseConnections = 16
    /// The admin token. When nil, the first start generates one, stores its hash and prints it once.
    public var adminToken: String?
    /// The server key (base64 of 32 bytes). When nil, it is read from (or created in) `serverKeyFile`.
    public var serverKey: String?
    public var serverKeyFile = "tern.key"
    /// Run the APNs simulator in-process for apps in the `simulator` environment.
    public var simulator = true
    /// Where the built-in simulator keeps its CA.
    public var simulatorStateDirectory = ".tern/simulator"
    /// Create the `demo` app (on the simulator) when there are no apps yet.
    public var demoApp = true
    /// Recipients per chunk: claimed by one node, sent, and recorded together.
    public var deliveryPageSize = 2000
    /// Notifications this node has sent and not yet recorded, across all its chunks: the most a crash can send
    /// twice, and the APNs requests in flight at most.
    public var deliveryConcurrency = 1000
    /// HTTP/2 connections per app and APNs environment.
    public var apnsConnections = 2
    /// At most one notification per device token in flight, in order (badges never jump). Off: full concurrency
    /// per token too.
    public var deliveryOrdering = true
    /// Chunks sent at the same time (many small pushes go out side by side; a large push has two pages in flight).
    public var deliveryPushes = 32
    /// How long a node's claim on a chunk lasts without renewal, in seconds (renewed every third of it). When a
    /// node dies, its chunks go to the other nodes after this long.
    public var deliveryChunkLease = 15
    /// How often expired inbox messages are deleted, in seconds.
    public var inboxSweepInterval = 60
    /// How long reads are gathered before the silent badge update they cause, in milliseconds: a burst of reads
    /// within it makes one update per device.
    public var inboxBadgeUpdateDelay = 500
    /// How often the feedback poller looks for legacy apps whose interval has passed, in seconds.
    public var feedbackCheckInterval = 60
    /// Let webhook URLs point at loopback and private networks (link-local and metadata addresses never).
    public var webhooksAllowPrivateNetworks = false
    /// How long a graceful stop (SIGINT, SIGTERM) may take, in seconds, before the work left is cancelled.
    public var shutdownTimeout = 30

    public init() {}

    /// Checks ranges; the message names the setting.
    public func validate() throws(TernServerConfigurationError) {
        guard (0...65_535).contains(port) else { throw .init("http.port must be 0-65535, not \(port)") }
        guard !databasePath.isEmpty else { throw .init("database.path must not be empty") }
        if let databaseURL, !(databaseURL.hasPrefix("postgres://") || databaseURL.hasPrefix("postgresql://")) {
            throw .init("database.url must be a PostgreSQL URL: postgres://user:password@host:5432/database")
        }
        guard (1...1000).contains(databaseConnections) else { throw .init("database.connections must be 1-1000") }
        if let adminToken, adminToken.utf8.count < 16 {
            throw .init("admin.token must be at least 16 characters (it guards every app)")
        }
        guard (1...100_000).contains(deliveryPageSize) else { throw .init("delivery.pageSize must be 1-100000") }
        guard (1...100_000).contains(deliveryConcurrency) else { throw .init("delivery.concurrency must be 1-100000") }
        guard (1...64).contains(apnsConnections) else { throw .init("apns.connections must be 1-64") }
        guard (1...1024).contains(deliveryPushes) else { throw .init("delivery.pushes must be 1-1024") }
        guard (2...3600).contains(deliveryChunkLease) else { throw .init("delivery.chunkLease must be 2-3600 seconds") }
        guard (1...86_400).contains(inboxSweepInterval) else { throw .init("inbox.sweepInterval must be 1-86400 seconds") }
        guard (0...60_000).contains(inboxBadgeUpdateDelay) else { throw .init("inbox.badgeUpdateDelay must be 0-60000 ms") }
        guard (1...86_400).contains(feedbackCheckInterval) else { throw .init("feedback.checkInterval must be 1-86400 seconds") }
        guard (1...3600).contains(shutdownTimeout) else { throw .init("server.shutdownTimeout must be 1-3600 seconds") }
    }
}

extension TernServerConfiguration {
    /// Where the data is, for the banner: the SQLite file, or `PostgreSQL host:port/database` (never the password).
    var databaseDescription: String {
        guard let databaseURL, let url = URLComponents(string: databaseURL), let host = url.host else { return databasePath }
        return "PostgreSQL \(host):\(url.port ?? 5432)\(url.path)"
    }
}

public struct TernServerConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension TernServerConfiguration {
    /// The settings from a JSON file (optional) and the environment (`TERN_HTTP_PORT` for `http.port`, …), the
    /// environment winning; what neither sets keeps its default. Keys: `http.host`, `http.port`, `database.path`,
    /// `database.url` (PostgreSQL instead of SQLite), `database.connections`,
    /// `admin.token`, `server.key`, `server.keyFile`, `simulator.enabled`, `simulator.stateDirectory`,
    /// `demo.enabled`, `delivery.pageSize`, `delivery.concurrency`, `delivery.ordering`, `delivery.pushes`,
    /// `delivery.chunkLease`, `apns.connections`, `inbox.sweepInterval`, `inbox.badgeUpdateDelay`,
    /// `feedback.checkInterval`, `webhooks.allowPrivateNetworks`, `server.shutdownTimeout`.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> TernServerConfiguration {
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(["TERN_ADMIN_TOKEN", "TERN_SERVER_KEY", "TERN_DATABASE_URL"]))
                .prefixKeys(with: "tern")
        ]
        if let file {
            guard FileManager.default.fileExists(atPath: file) else { throw TernServerConfigurationError("no configuration file \(file)") }
            do {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(file)))
            } catch {
                throw TernServerConfigurationError("\(file) is not a JSON configuration: \(error)")
            }
        }
        let reader = ConfigReader(providers: providers)
        var configuration = TernServerConfiguration()
        configuration.host = reader.string(forKey: "http.host") ?? configuration.host
        configuration.port = reader.int(forKey: "http.port") ?? configuration.port
        configuration.databasePath = reader.string(forKey: "database.path") ?? configuration.databasePath
        configuration.databaseURL = reader.string(forKey: "database.url", isSecret: true)
        configuration.databaseConnections = reader.int(forKey: "database.connections") ?? configuration.databaseConnections
        configuration.adminToken = reader.string(forKey: "admin.token", isSecret: true)
        configuration.serverKey = reader.string(forKey: "server.key", isSecret: true)
        configuration.serverKeyFile = reader.string(forKey: "server.keyFile") ?? configuration.serverKeyFile
        configuration.simulator = reader.bool(forKey: "simulator.enabled") ?? configuration.simulator
        configuration.simulatorStateDirectory = reader.string(forKey: "simulator.stateDirectory") ?? configuration.simulatorStateDirectory
        configuration.demoApp = reader.bool(forKey: "demo.enabled") ?? configuration.demoApp
        configuration.deliveryPageSize = reader.int(forKey: "delivery.pageSize") ?? configuration.deliveryPageSize
        configuration.deliveryConcurrency = reader.int(forKey: "delivery.concurrency") ?? configuration.deliveryConcurrency
        configuration.apnsConnections = reader.int(forKey: "apns.connections") ?? configuration.apnsConnections
        configuration.deliveryOrdering = reader.bool(forKey: "delivery.ordering") ?? configuration.deliveryOrdering
        configuration.deliveryPushes = reader.int(forKey: "delivery.pushes") ?? configuration.deliveryPushes
        configuration.deliveryChunkLease = reader.int(forKey: "delivery.chunkLease") ?? configuration.deliveryChunkLease
        configuration.inboxSweepInterval = reader.int(forKey: "inbox.sweepInterval") ?? configuration.inboxSweepInterval
        configuration.inboxBadgeUpdateDelay = reader.int(forKey: "inbox.badgeUpdateDelay") ?? configuration.inboxBadgeUpdateDelay
        configuration.feedbackCheckInterval = reader.int(forKey: "feedback.checkInterval") ?? configuration.feedbackCheckInterval
        configuration.webhooksAllowPrivateNetworks =
            reader.bool(forKey: "webhooks.allowPrivateNetworks") ?? configuration.webhooksAllowPrivateNetworks
        configuration.shutdownTimeout = reader.int(forKey: "server.shutdownTimeout") ?? configuration.shutdownTimeout
        return configuration
    }
}
