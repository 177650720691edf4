import Configuration
import Foundation
import Synchronization
import TernAPNsClient
import TernWeb

/// Everything `tern serve` can be told, by component; each setting's Swift path is its key (`delivery.concurrency`).
/// The defaults here are the only ones: they run a working service on a fresh machine (127.0.0.1:8080, SQLite in
/// `./tern.db`, the server key in `./tern.key`, the built-in APNs simulator and a `demo` app on it).
public struct TernServerConfiguration: Sendable {
    public struct HTTP: Sendable {
        public var host = "127.0.0.1"
        /// 0 picks a free port (tests).
        public var port = 8080
        /// Open connections (devices' WebSockets included) this node keeps at most; past it a new one is closed as
        /// soon as it is accepted. Nil: the process's open-files limit less 512 for everything else.
        public var maxConnections: Int?
        /// How long a request's head may take to arrive before the connection is closed (a new connection's from its
        /// opening, a later request's from its first byte): one that sends nothing, or a byte at a time, holds a socket
        /// for no more than this.
        public var requestHeadTimeout: Duration = .seconds(30)
        /// How long a request's body may take to arrive after its head before the connection is closed: one sent a
        /// byte at a time holds a socket for no more than this.
        public var requestBodyTimeout: Duration = .seconds(30)
        /// How long a connection may wait between requests (keep-alive) before it is closed.
        public var idleTimeout: Duration = .seconds(75)
        /// When set, `GET /metrics` answers only `Authorization: Bearer <this>`; when nil, anyone (deny it at the
        /// public load balancer then).
        public var metricsToken: String?
        /// Load balancers and proxies (addresses, or ranges such as `10.0.0.0/8`) whose `X-Forwarded-For` names the
        /// client: wrong secrets are then counted per client, not per balancer. None: every peer is the client.
        public var trustedProxies: [String] = []
    }

    public struct Database: Sendable {
        /// The SQLite database file.
        public var path = "tern.db"
        /// A PostgreSQL database (`postgres://user:password@host:5432/tern`) instead of SQLite: several nodes may
        /// share it.
        public var url: String?
        /// PostgreSQL connections this node may open.
        public var connections = 16
        /// How long one PostgreSQL call (waiting for a connection included) may take before it fails as unavailable.
        public var callTimeout: Duration = .seconds(15)
    }

    public struct Admin: Sendable {
        /// The admin token. When nil, the first start generates one, stores its hash and prints it once.
        public var token: String?
    }

    public struct Server: Sendable {
        /// The server key (base64 of 32 bytes). When nil, it is read from (or created in) `keyFile`.
        public var key: String?
        public var keyFile = "tern.key"
        /// How long a graceful stop (SIGINT, SIGTERM) may take before the work left is cancelled.
        public var shutdownTimeout: Duration = .seconds(30)
    }

    public struct Simulator: Sendable {
        /// Run an embedded APNs (`tern serve`: the built-in simulator) for apps in the `simulator` environment.
        public var enabled = true
        /// Where the built-in simulator keeps its CA and the broadcast channels made on it.
        public var stateDirectory = ".tern/simulator"
    }

    public struct Demo: Sendable {
        /// Create the `demo` app (on the simulator) when there are no apps yet.
        public var enabled = true
    }

    public struct Delivery: Sendable {
        /// Recipients per chunk: claimed by one node, sent, and recorded together.
        public var chunkSize = 2000
        /// Notifications this node has sent and not yet recorded, across all its chunks, at most: the most a crash can
        /// send twice, and the APNs requests in flight at most. The node keeps fewer in flight while APNs answers
        /// fast enough that more would only queue (the limit follows the round trips, from `minimumConcurrency` up).
        public var concurrency = 4000
        /// Where the moving in-flight limit starts and the least it goes down to (at most `concurrency`).
        public var minimumConcurrency = 1000
        /// At most one notification per device token in flight, in order (badges never jump). Off: full concurrency
        /// per token too.
        public var ordering = true
        /// Chunks sent at the same time (many small pushes go out side by side; a large push has two chunks in
        /// flight).
        public var pushes = 32
        /// How long a node's claim on a chunk lasts without renewal (renewed every third of it). When a node dies,
        /// its chunks go to the other nodes after this long.
        public var chunkLease: Duration = .seconds(15)
        /// How long a completed push (its counts, failures and chunks) is kept after it finished; then it is deleted
        /// (by the sweeps of `inbox.sweepInterval`). Zero keeps every push until its app is deleted.
        public var pushRetention: Duration = .seconds(30 * 86_400)
    }

    public struct APNs: Sendable {
        /// HTTP/2 connections per app and APNs environment, opened as the load needs them (APNs takes up to 1,000
        /// streams on each: enough for `delivery.concurrency` 4,000).
        public var connections = 4
        /// How long a connection may carry no notification (up to twice it) before it is closed; the app's next
        /// notification opens one again. An app that sends nothing keeps no connection, so a node with many apps
        /// holds descriptors only for the busy ones.
        public var idleTimeout: Duration = .seconds(600)
        /// How long one notification may take from the moment it is handed to an APNs client to APNs' answer, waits for
        /// a connection and retries included; past it, it fails as timed out. It is also how long an endpoint may be
        /// unreachable before its notifications fail at once, and what a chunk waits, at most, for its endpoint to
        /// have a connection (holding none of the node's in-flight permits meanwhile).
        public var sendTimeout: Duration = .seconds(30)
        /// How long a notification written to a legacy binary gateway waits for an error response before it counts
        /// as accepted (the protocol answers only errors). Longer makes each legacy push settle later; shorter
        /// risks counting as accepted a token the gateway rejects late, under load.
        public var legacyReplayWindow: Duration = .milliseconds(500)
        /// An HTTP proxy, `http://[user:password@]host:port`, that APNs is reached through: Apple's endpoints,
        /// custom ones, the legacy gateway and feedback service, each connection a CONNECT tunnel with TLS end to
        /// end. The built-in simulator is reached directly. nil: no proxy. A secret (its password): never logged.
        public var proxy: String?
    }

    public struct Inbox: Sendable {
        /// How often expired inbox messages and device messages, and pushes past `delivery.pushRetention`, are deleted.
        public var sweepInterval: Duration = .seconds(60)
        /// How long reads are gathered before the silent badge update they cause: a burst of reads within it makes
        /// one update per device.
        public var badgeUpdateDelay: Duration = .milliseconds(500)
    }

    public struct Feedback: Sendable {
        /// How often the feedback poller looks for legacy apps whose interval has passed.
        public var checkInterval: Duration = .seconds(60)
    }

    public struct Channel: Sendable {
        /// How often the server pings each device's connection; one that has not answered a ping by the next is
        /// closed (1001), so a device that went silent is dropped within two intervals.
        public var pingInterval: Duration = .seconds(30)
        /// When several nodes share the database: how long a node may go without saying it runs (it says so every
        /// sixth of this) before its devices' connections are taken for gone (a crash, a stop cut short).
        public var nodeTimeout: Duration = .seconds(60)
    }

    public struct Console: Sendable {
        /// Serve the operator's console at `/console` (signed in with the admin token or an app's master secret).
        public var enabled = true
        /// Mark the console's session cookie `Secure` on every answer, for a server behind a proxy that terminates TLS
        /// and does not send `X-Forwarded-Proto: https` (with that header, the cookie is `Secure` anyway).
        public var secureCookies = false
        /// A session unused this long is over (it is renewed by every request).
        public var sessionIdleTimeout: Duration = .seconds(30 * 60)
        /// A session is over this long after its sign-in, however much it is used.
        public var sessionLifetime: Duration = .seconds(12 * 3600)
    }

    public struct Webhooks: Sendable {
        /// Let webhook URLs point at loopback and private networks (link-local and metadata addresses never).
        public var allowPrivateNetworks = false
        /// An HTTP proxy, `http://[user:password@]host:port`, that webhooks are posted through, each post a CONNECT
        /// tunnel (TLS end to end for an https receiver). The receiver's name is still resolved and checked here
        /// first; the proxy's own address is the operator's, and may be private. nil: no proxy. A secret (its
        /// password): never logged.
        public var proxy: String?
    }

    public var http = HTTP()
    public var database = Database()
    public var admin = Admin()
    public var server = Server()
    public var simulator = Simulator()
    public var demo = Demo()
    public var delivery = Delivery()
    public var apns = APNs()
    public var inbox = Inbox()
    public var feedback = Feedback()
    public var webhooks = Webhooks()
    public var channel = Channel()
    public var console = Console()

    public init() {}

    /// Checks ranges; the message names the setting.
    public func validate() throws(TernServerConfigurationError) {
        guard (0...65_535).contains(http.port) else { throw .init("http.port must be 0-65535, not \(http.port)") }
        if let limit = http.maxConnections, !(1...10_000_000).contains(limit) {
            throw .init("http.maxConnections must be 1-10000000, not \(limit)")
        }
        guard (.seconds(1) ... .seconds(600)).contains(http.requestHeadTimeout) else { throw .init("http.requestHeadTimeout must be 1-600 seconds") }
        guard (.seconds(1) ... .seconds(600)).contains(http.requestBodyTimeout) else { throw .init("http.requestBodyTimeout must be 1-600 seconds") }
        guard (.seconds(1) ... .seconds(3600)).contains(http.idleTimeout) else { throw .init("http.idleTimeout must be 1-3600 seconds") }
        guard !database.path.isEmpty else { throw .init("database.path must not be empty") }
        if let url = database.url, !(url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")) {
            throw .init("database.url must be a PostgreSQL URL: postgres://user:password@host:5432/database")
        }
        guard (1...1000).contains(database.connections) else { throw .init("database.connections must be 1-1000") }
        guard (.seconds(1) ... .seconds(600)).contains(database.callTimeout) else { throw .init("database.callTimeout must be 1-600 seconds") }
        if let token = admin.token, token.utf8.count < 16 {
            throw .init("admin.token must be at least 16 characters (it guards every app)")
        }
        if let token = http.metricsToken, token.utf8.count < 16 {
            throw .init("http.metricsToken must be at least 16 characters")
        }
        _ = try TrustedProxies(parsing: http.trustedProxies)
        guard (1...100_000).contains(delivery.chunkSize) else { throw .init("delivery.chunkSize must be 1-100000") }
        guard (1...100_000).contains(delivery.concurrency) else { throw .init("delivery.concurrency must be 1-100000") }
        guard (1...100_000).contains(delivery.minimumConcurrency) else { throw .init("delivery.minimumConcurrency must be 1-100000") }
        guard (1...64).contains(apns.connections) else { throw .init("apns.connections must be 1-64") }
        guard (.milliseconds(10) ... .seconds(60)).contains(apns.legacyReplayWindow) else {
            throw .init("apns.legacyReplayWindow must be 10-60000 ms")
        }
        guard (.seconds(10) ... .seconds(86_400)).contains(apns.idleTimeout) else {
            throw .init("apns.idleTimeout must be 10-86400 seconds")
        }
        guard (.seconds(1) ... .seconds(600)).contains(apns.sendTimeout) else { throw .init("apns.sendTimeout must be 1-600 seconds") }
        _ = try apnsProxy
        _ = try webhooksProxy
        guard (1...1024).contains(delivery.pushes) else { throw .init("delivery.pushes must be 1-1024") }
        guard (.seconds(2) ... .seconds(3600)).contains(delivery.chunkLease) else { throw .init("delivery.chunkLease must be 2-3600 seconds") }
        guard delivery.pushRetention == .zero || (.seconds(86_400) ... .seconds(3650 * 86_400)).contains(delivery.pushRetention) else {
            throw .init("delivery.pushRetention must be 1-3650 days, or 0 to keep every push")
        }
        guard (.seconds(1) ... .seconds(86_400)).contains(inbox.sweepInterval) else { throw .init("inbox.sweepInterval must be 1-86400 seconds") }
        guard (.zero ... .seconds(60)).contains(inbox.badgeUpdateDelay) else { throw .init("inbox.badgeUpdateDelay must be 0-60000 ms") }
        guard (.seconds(1) ... .seconds(86_400)).contains(feedback.checkInterval) else {
            throw .init("feedback.checkInterval must be 1-86400 seconds")
        }
        guard (.milliseconds(100) ... .seconds(3600)).contains(channel.pingInterval) else {
            throw .init("channel.pingInterval must be 100-3600000 ms")
        }
        guard (.seconds(6) ... .seconds(3600)).contains(channel.nodeTimeout) else { throw .init("channel.nodeTimeout must be 6-3600 seconds") }
        guard (.seconds(60) ... .seconds(86_400)).contains(console.sessionIdleTimeout) else {
            throw .init("console.sessionIdleTimeout must be 60-86400 seconds")
        }
        guard (console.sessionIdleTimeout ... .seconds(30 * 86_400)).contains(console.sessionLifetime) else {
            throw .init("console.sessionLifetime must be from console.sessionIdleTimeout to 2592000 seconds (30 days)")
        }
        guard (.seconds(1) ... .seconds(3600)).contains(server.shutdownTimeout) else { throw .init("server.shutdownTimeout must be 1-3600 seconds") }
    }
}

extension TernServerConfiguration {
    /// `apns.proxy`, read. - Throws: what is wrong with it, naming the setting (never its password).
    var apnsProxy: HTTPProxy? {
        get throws(TernServerConfigurationError) { try Self.proxy(apns.proxy, setting: "apns.proxy") }
    }

    /// `webhooks.proxy`, read. - Throws: what is wrong with it, naming the setting (never its password).
    var webhooksProxy: HTTPProxy? {
        get throws(TernServerConfigurationError) { try Self.proxy(webhooks.proxy, setting: "webhooks.proxy") }
    }

    private static func proxy(_ url: String?, setting: String) throws(TernServerConfigurationError) -> HTTPProxy? {
        guard let url else { return nil }
        do {
            return try HTTPProxy(url: url)
        } catch {
            throw .init("\(setting): \(error.message)")
        }
    }

    /// Where the data is, for the banner: the SQLite file, or `PostgreSQL host:port/database` (never the password).
    var databaseDescription: String {
        guard let text = database.url, let url = URLComponents(string: text), let host = url.host else { return database.path }
        return "PostgreSQL \(host):\(url.port ?? 5432)\(url.path)"
    }
}

public struct TernServerConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension TernServerConfiguration {
    /// The settings from a JSON file (optional) and the environment (`TERN_HTTP_PORT` for `http.port`, …), the
    /// environment winning; what neither sets keeps its default. Keys: `http.host`, `http.port`, `http.maxConnections`,
    /// `http.requestHeadTimeout`, `http.requestBodyTimeout` and `http.idleTimeout` (seconds), `http.metricsToken`, `http.trustedProxies` (comma-separated), `database.path`,
    /// `database.url` (PostgreSQL instead of SQLite), `database.connections`, `database.callTimeout` (seconds),
    /// `admin.token`, `server.key`, `server.keyFile`, `simulator.enabled`, `simulator.stateDirectory`,
    /// `demo.enabled`, `delivery.chunkSize` (formerly `delivery.pageSize`, still read), `delivery.concurrency`,
    /// `delivery.minimumConcurrency`, `delivery.ordering`, `delivery.pushes`, `delivery.chunkLease` (seconds), `delivery.pushRetention` (days),
    /// `apns.connections`, `apns.idleTimeout` (seconds), `apns.sendTimeout` (seconds), `apns.legacyReplayWindow` (milliseconds), `apns.proxy`, `inbox.sweepInterval` (seconds),
    /// `inbox.badgeUpdateDelay` (milliseconds), `channel.pingInterval` (milliseconds), `channel.nodeTimeout` (seconds), `feedback.checkInterval` (seconds),
    /// `webhooks.allowPrivateNetworks`, `webhooks.proxy`, `server.shutdownTimeout` (seconds), `console.enabled`, `console.secureCookies`,
    /// `console.sessionIdleTimeout` and `console.sessionLifetime` (seconds).
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> TernServerConfiguration {
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(["TERN_ADMIN_TOKEN", "TERN_SERVER_KEY", "TERN_DATABASE_URL", "TERN_APNS_PROXY", "TERN_WEBHOOKS_PROXY", "TERN_HTTP_METRICS_TOKEN"]))
                .prefixKeys(with: "tern")
        ]
        let fileSettings = try file.map(ConfigurationFile.init(path:))
        if let fileSettings { providers.append(fileSettings.provider) }
        let unreadable = UnreadableSettings()
        let reader = ConfigReader(providers: providers, accessReporter: unreadable)
        var configuration = TernServerConfiguration()
        /// Every key read, with its type, so what a file or the environment sets besides them is known to be a mistake,
        /// and a file's value of another type too.
        var known: [String: ConfigurationFile.ValueType] = [:]
        func read(_ key: String, into value: inout String) { known[key] = .string; value = reader.string(forKey: .init(key)) ?? value }
        func read(_ key: String, into value: inout Int) { known[key] = .int; value = reader.int(forKey: .init(key)) ?? value }
        func read(_ key: String, into value: inout Int?) { known[key] = .int; value = reader.int(forKey: .init(key)) ?? value }
        func read(_ key: String, into value: inout Bool) { known[key] = .bool; value = reader.bool(forKey: .init(key)) ?? value }
        func readSecret(_ key: String, into value: inout String?) { known[key] = .string; value = reader.string(forKey: .init(key), isSecret: true) }
        /// A duration given as a number of `unit`s.
        func read(_ key: String, into value: inout Duration, unit: Duration) {
            known[key] = .int
            if let count = reader.int(forKey: .init(key)) { value = unit * count }
        }
        read("http.host", into: &configuration.http.host)
        read("http.port", into: &configuration.http.port)
        read("http.maxConnections", into: &configuration.http.maxConnections)
        read("http.requestHeadTimeout", into: &configuration.http.requestHeadTimeout, unit: .seconds(1))
        read("http.requestBodyTimeout", into: &configuration.http.requestBodyTimeout, unit: .seconds(1))
        read("http.idleTimeout", into: &configuration.http.idleTimeout, unit: .seconds(1))
        readSecret("http.metricsToken", into: &configuration.http.metricsToken)
        // A list in one string, comma-separated, in the environment and the file alike.
        var trustedProxies = configuration.http.trustedProxies.joined(separator: ",")
        read("http.trustedProxies", into: &trustedProxies)
        configuration.http.trustedProxies = trustedProxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        read("database.path", into: &configuration.database.path)
        readSecret("database.url", into: &configuration.database.url)
        read("database.connections", into: &configuration.database.connections)
        read("database.callTimeout", into: &configuration.database.callTimeout, unit: .seconds(1))
        readSecret("admin.token", into: &configuration.admin.token)
        readSecret("server.key", into: &configuration.server.key)
        read("server.keyFile", into: &configuration.server.keyFile)
        read("server.shutdownTimeout", into: &configuration.server.shutdownTimeout, unit: .seconds(1))
        read("simulator.enabled", into: &configuration.simulator.enabled)
        read("simulator.stateDirectory", into: &configuration.simulator.stateDirectory)
        read("demo.enabled", into: &configuration.demo.enabled)
        // `delivery.pageSize` is the name this setting had before; the new one wins.
        read("delivery.pageSize", into: &configuration.delivery.chunkSize)
        read("delivery.chunkSize", into: &configuration.delivery.chunkSize)
        read("delivery.concurrency", into: &configuration.delivery.concurrency)
        read("delivery.minimumConcurrency", into: &configuration.delivery.minimumConcurrency)
        read("delivery.ordering", into: &configuration.delivery.ordering)
        read("delivery.pushes", into: &configuration.delivery.pushes)
        read("delivery.chunkLease", into: &configuration.delivery.chunkLease, unit: .seconds(1))
        read("delivery.pushRetention", into: &configuration.delivery.pushRetention, unit: .seconds(86_400))
        read("apns.connections", into: &configuration.apns.connections)
        read("apns.idleTimeout", into: &configuration.apns.idleTimeout, unit: .seconds(1))
        read("apns.sendTimeout", into: &configuration.apns.sendTimeout, unit: .seconds(1))
        read("apns.legacyReplayWindow", into: &configuration.apns.legacyReplayWindow, unit: .milliseconds(1))
        readSecret("apns.proxy", into: &configuration.apns.proxy)
        read("inbox.sweepInterval", into: &configuration.inbox.sweepInterval, unit: .seconds(1))
        read("inbox.badgeUpdateDelay", into: &configuration.inbox.badgeUpdateDelay, unit: .milliseconds(1))
        read("channel.pingInterval", into: &configuration.channel.pingInterval, unit: .milliseconds(1))
        read("channel.nodeTimeout", into: &configuration.channel.nodeTimeout, unit: .seconds(1))
        read("feedback.checkInterval", into: &configuration.feedback.checkInterval, unit: .seconds(1))
        read("webhooks.allowPrivateNetworks", into: &configuration.webhooks.allowPrivateNetworks)
        readSecret("webhooks.proxy", into: &configuration.webhooks.proxy)
        read("console.enabled", into: &configuration.console.enabled)
        read("console.secureCookies", into: &configuration.console.secureCookies)
        read("console.sessionIdleTimeout", into: &configuration.console.sessionIdleTimeout, unit: .seconds(1))
        read("console.sessionLifetime", into: &configuration.console.sessionLifetime, unit: .seconds(1))
        // A misspelt key (`"prot"`) would otherwise be ignored, and a value of another type (`"port": true`) read as
        // something else or as unset: the default, silently.
        if let fileSettings, let problem = fileSettings.problems(known: known).first { throw TernServerConfigurationError(problem) }
        if let problem = unreadable.problems.first { throw TernServerConfigurationError(problem) }
        if let unknown = unknownVariables(in: environment, known: Set(known.keys)).first {
            throw TernServerConfigurationError("the environment sets \(unknown), which is no setting (the settings are listed in docs/deployment.md)")
        }
        return configuration
    }

    /// The environment variables named as settings of one of Tern's sections (`TERN_HTTP_…`, `TERN_DELIVERY_…`) that
    /// are no setting. Other `TERN_` names (a script's `TERN_URL`) are not Tern's to refuse.
    static func unknownVariables(in environment: [String: String], known: Set<String>) -> [String] {
        let names = Set(known.map(UnreadableSettings.environmentName(of:)))
        let sections = Set(known.map { "TERN_" + $0.prefix { $0 != "." }.uppercased() + "_" })
        return environment.keys.sorted().filter { name in !names.contains(name) && sections.contains { name.hasPrefix($0) } }
    }
}

/// A JSON configuration file, read as strictly as request bodies are (``StrictJSON``: no trailing commas, no key
/// given twice, no byte-order mark), each value kept with its JSON type. Foundation's reader, under the configuration
/// library's file provider, took `1` and `0` for `true` and `false` (and `true` for 1), a trailing comma, the last of
/// two values for one key, and said of a number too large for its setting that the file was not JSON.
struct ConfigurationFile {
    enum ValueType: Sendable {
        case int, bool, string

        var expected: String {
            switch self {
            case .int: "a whole number"
            case .bool: "true or false"
            case .string: "a string"
            }
        }
    }

    let path: String
    /// Every value the file sets, by its key's components (`["http", "port"]`), in the file's order.
    let leaves: [(components: [String], value: StrictJSON.Node)]

    init(path: String) throws(TernServerConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileManager.default.fileExists(atPath: path)
                ? TernServerConfigurationError("cannot read the configuration file \(path)") : TernServerConfigurationError("no configuration file \(path)")
        }
        let root: StrictJSON.Node
        do {
            root = try StrictJSON.parse(data)
        } catch {
            throw TernServerConfigurationError("\(path) is not valid JSON: \(error)")
        }
        guard case .object = root else { throw TernServerConfigurationError("\(path) is not a JSON configuration: it must be one object of settings") }
        func leaves(_ node: StrictJSON.Node, _ components: [String]) -> [(components: [String], value: StrictJSON.Node)] {
            guard case .object(let members) = node else { return [(components, node)] }
            return members.flatMap { leaves($0.value, components + [$0.key]) }
        }
        self.path = path
        self.leaves = leaves(root, [])
    }

    /// The file's values for the configuration library, each of its own JSON type (what does not match its setting's
    /// type is found by ``problems(known:)``, which says which setting).
    var provider: InMemoryProvider {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (components, node) in leaves {
            let content: ConfigContent
            switch node {
            case .bool(let value): content = .bool(value)
            case .number(let text): content = Int(text).map(ConfigContent.int) ?? .double(Double(text) ?? .nan)
            case .string(let text): content = .string(text)
            case .null, .array, .object: continue
            }
            values[AbsoluteConfigKey(components)] = ConfigValue(content, isSecret: true)
        }
        return InMemoryProvider(name: path, values: values)
    }

    /// What is wrong with the file, given the settings and their types: a key that is no setting, or a value not of
    /// its setting's type. Values are never repeated: some are secrets.
    func problems(known: [String: ValueType]) -> [String] {
        leaves.compactMap { components, node in
            let key = components.joined(separator: ".")
            // A member named "http.port" is not the setting `http.port`, which is nested: {"http": {"port": …}}.
            guard !components.contains(where: { $0.contains(".") }), let type = known[key] else {
                return "\(path): no setting \(key) (the settings are listed in docs/deployment.md)"
            }
            let fits =
                switch (type, node) {
                case (.int, .number(let text)): Int(text) != nil
                case (.bool, .bool), (.string, .string): true
                default: false
                }
            return fits ? nil : "\(key) must be \(type.expected) (\(path))"
        }
    }
}

/// Hears every read of a setting and keeps the keys whose value is set but cannot be read as the setting's type
/// (`TERN_DATABASE_CALL_TIMEOUT=abc`, `"http": {"port": "80"}`). Values are never repeated: some are secrets.
final class UnreadableSettings: AccessReporter {
    private let found = Mutex<[String]>([])

    var problems: [String] { found.withLock { $0 } }

    func report(_ event: AccessEvent) {
        let failed = event.conversionError != nil || event.result.isFailure || event.providerResults.contains { $0.result.isFailure }
        guard failed else { return }
        let key = event.metadata.key.components.joined(separator: ".")
        let expected =
            switch event.metadata.valueType {
            case .int: "a whole number"
            case .bool: "true or false"
            default: "\(event.metadata.valueType)"
            }
        found.withLock { $0.append("\(key) must be \(expected) (environment \(Self.environmentName(of: key)))") }
    }

    /// `database.callTimeout` → `TERN_DATABASE_CALL_TIMEOUT`, the environment provider's spelling of a key.
    static func environmentName(of key: String) -> String {
        var name = "TERN"
        for component in key.split(separator: ".") {
            name += "_"
            for character in component {
                if character.isUppercase { name += "_" }
                name += character.uppercased()
            }
        }
        return name
    }
}

extension Result {
    fileprivate var isFailure: Bool {
        if case .failure = self { true } else { false }
    }
}
