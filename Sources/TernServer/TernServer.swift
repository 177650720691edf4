import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernStore
import UnixSignals

/// `tern serve`: the HTTP API, the push dispatcher, and (for apps in the `simulator` environment) an embedded APNs
/// of the caller's choosing, in one process on one store.
public final class TernServer: Sendable {
    /// What a start has to tell its operator, once.
    public struct Banner: Sendable {
        /// The address the API listens on.
        public var url: String
        /// The operator's console, when it is served.
        public var consoleURL: String?
        /// The admin token, when this start generated it (it is stored only as a hash).
        public var newAdminToken: String?
        /// The demo app's secrets, when this start created it.
        public var demo: DemoSecrets?
        /// The built-in simulator's HTTP/2 and control ports, when it runs.
        public var simulator: (port: Int, controlPort: Int?)?
        /// Where the data is: the SQLite file, or the PostgreSQL server and database.
        public var databasePath: String
        /// Where the server key is, when it was created now.
        public var newServerKeyFile: String?
    }

    /// What the first start tells about the demo app, once.
    public struct DemoSecrets: Sendable {
        /// For devices (ships in the app).
        public var appKey: String
        /// For the app's backend.
        public var masterSecret: String
        /// For the app's backend: signs alias tokens.
        public var identitySecret: String
        /// An alias token for ``demoAlias``, valid for an hour, as the app's backend would mint it.
        public var aliasToken: String
    }

    public static let demoAppID = "demo"
    /// The user the first start's example binds a device to.
    public static let demoAlias = "user-42"
    public static let demoTopic = "com.example.tern.demo"

    private let configuration: TernServerConfiguration
    private let logger: Logger
    /// The time the server's rules and background work go by (system time, unless a test drives it).
    private let clocks: ServerClocks
    private let registry: PrometheusCollectorRegistry?
    private let port = Mutex<Int?>(nil)
    /// `METHOD /path` of every route the API serves, once it is built (the contract test compares them).
    let servedRoutes = Mutex<[String]>([])
    private let services = Mutex<ServiceGroup?>(nil)
    private let embeddedAPNs: EmbeddedAPNsFactory?

    /// - Parameters:
    ///   - metrics: the registry `/metrics` shows; the caller bootstraps swift-metrics with it (once per process).
    ///   - embeddedAPNs: makes the APNs for apps in the `simulator` environment, when `configuration.simulator.enabled`
    ///     is on (`tern serve` gives the built-in simulator). Without one, such apps cannot deliver.
    ///   - clocks: the system's; a test passes a manual pair to move time itself.
    public init(
        configuration: TernServerConfiguration, metrics: PrometheusCollectorRegistry?, logger: Logger, clocks: ServerClocks = .system,
        embeddedAPNs: EmbeddedAPNsFactory? = nil
    ) {
        self.configuration = configuration
        self.registry = metrics
        self.logger = logger
        self.clocks = clocks
        self.embeddedAPNs = embeddedAPNs
    }

    /// The API's port, once it listens.
    public var boundPort: Int? { port.withLock { $0 } }

    /// Stops a running server as SIGTERM would: gracefully.
    public func shutdown() async {
        await services.withLock { $0 }?.triggerGracefulShutdown()
    }

    /// Opens the store, prepares keys and the demo app, serves until SIGINT/SIGTERM (or `shutdown` is triggered
    /// on the returned group), then drains: the API stops taking requests, the dispatcher records the page in
    /// flight, the APNs clients finish their streams.
    /// - Parameter onReady: called once everything listens.
    public func run(
        gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint], onReady: @escaping @Sendable (Banner) -> Void
    ) async throws {
        try configuration.validate()
        // What can fail at start is tried first, each saying what it is in one line, before anything else starts.
        try await Self.checkCanListen(host: configuration.http.host, port: configuration.http.port)
        let serverKey = try Self.loadServerKey(configuration)
        if configuration.server.key == nil, let mode = ServerKey.exposedMode(of: URL(fileURLWithPath: configuration.server.keyFile)) {
            // Said, not refused: a mounted secret (Kubernetes' default mode is 0644) is readable by others in its
            // container only, and refusing it would stop nodes that ran until now.
            logger.warning(
                "server key \(configuration.server.keyFile): other users may read it (mode \(mode)); with it, a copy of the database opens every app's credentials; make it owner-only (chmod 600)")
        }
        let store = try await Self.openStore(configuration, logger: logger)
        // The store's pool runs around the service group, not in it: the schema is migrated and the demo app made
        // before the services start, and the dispatcher records its last chunk while they shut down.
        try await withThrowingTaskGroup(of: Void.self) { pool in
            pool.addTask { await store.run() }
            do {
                try await serve(store: store, serverKey: serverKey, gracefulShutdownSignals: gracefulShutdownSignals, onReady: onReady)
                try await store.close()
            } catch {
                try? await store.close()
                pool.cancelAll()
                throw error
            }
            pool.cancelAll()
        }
    }

    /// PostgreSQL when a URL is configured, else the SQLite file. A wrong URL or an unreachable server is a
    /// configuration error with the reason (never the password). (Internal, not private: the router tests open
    /// theirs this way too.)
    static func openStore(_ configuration: TernServerConfiguration, logger: Logger) async throws -> SQLStore {
        do {
            if let url = configuration.database.url {
                return try await SQLStore.openPostgres(
                    url: url, maximumConnections: configuration.database.connections, callTimeout: configuration.database.callTimeout, logger: logger)
            }
            return try await SQLStore.openSQLite(path: configuration.database.path, claimingFile: true, logger: logger)
        } catch let error as StoreError {
            throw TernServerConfigurationError("database: \(error)")
        } catch {
            // SQLite's own errors (a folder where the file should be, a file that is not a database); a PostgreSQL
            // failure arrives as a StoreError above, without the password.
            throw TernServerConfigurationError("database \(configuration.database.path): cannot open: \(error)")
        }
    }

    /// Fails when the API's address cannot be bound: a port in use would otherwise show only once the store, the
    /// simulator and the dispatcher run. (Another process could still take the port before the API binds it; then
    /// the start fails all the same, a moment later.)
    ///
    /// It binds a socket and closes it, without listening: a listener would accept the connections that clients
    /// (devices reconnecting after a restart) make in that moment, and nobody would ever answer them. With
    /// SO_REUSEADDR, as the API's listener binds: connections of the last server on the port may wait in TIME_WAIT for
    /// a minute, and they do not stop a restart, while a socket listening on the port does.
    static func checkCanListen(host: String, port: Int) async throws(TernServerConfigurationError) {
        // Port 0 too: any free port will do, but the host must be one of this machine's addresses.
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw .init("http: cannot listen on \(host):\(port): \(error)")
        }
        let descriptor = socket(Int32(address.protocol.rawValue), Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw .init("http: cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var reuse: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        let bound = address.withSockAddr { pointer, size in bind(descriptor, pointer, socklen_t(size)) }
        guard bound == 0 else {
            let failure = errno
            if failure == EADDRINUSE {
                throw .init("http: cannot listen on \(host):\(port): the address is in use (is another server on that port?)")
            }
            throw .init("http: cannot listen on \(host):\(port): \(String(cString: strerror(failure)))")
        }
    }

    private func serve(
        store: any TernStore, serverKey: (key: ServerKey, newFile: String?), gracefulShutdownSignals: [UnixSignal],
        onReady: @escaping @Sendable (Banner) -> Void
    ) async throws {
        let (serverKey, newKeyFile) = serverKey
        let assembly = try await ServerAssembly(
            configuration: configuration, store: store, serverKey: serverKey, clocks: clocks, metrics: registry, embeddedAPNs: embeddedAPNs,
            logger: logger)
        servedRoutes.withLock { $0 = assembly.servedRoutes }
        let simulator = assembly.simulator

        let listening = OneTimeSignal()
        let application = assembly.httpServer(onServerRunning: { [self] channel in
            self.port.withLock { $0 = channel.localAddress?.port }
            listening.fire()
        })

        // The API last: it starts once everything it hands work to runs, and is the first to stop.
        let group = ServiceGroup(
            configuration: {
                var group = ServiceGroupConfiguration(
                    services: assembly.services + [application, StopNotice(logger: logger, timeout: configuration.server.shutdownTimeout)],
                    gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
                // What has not finished gracefully by then is cancelled.
                group.maximumGracefulShutdownDuration = configuration.server.shutdownTimeout
                return group
            }())
        self.services.withLock { $0 = group }

        let newAdminToken = assembly.newAdminToken
        let demoSecrets = assembly.demo
        // Set as the banner is shown: a start that ends before it takes back what it made to be shown once.
        let shown = OneTimeSignal()
        // The same signals trapped apart from the group's: each is seen by both, so this sees the group's first too.
        let signals = gracefulShutdownSignals.isEmpty ? nil : await UnixSignalsSequence(trapping: gracefulShutdownSignals)
        do {
            try await withThrowingTaskGroup(of: Ended.self) { tasks in
                tasks.addTask { [configuration] in
                    let simulatorAddress = try await simulator?.waitUntilReady()
                    await listening.wait()
                    // The server ended before it was ready (stopped while starting, or a service failed): no banner.
                    guard !Task.isCancelled else { return .noStop }
                    let bound = self.boundPort ?? configuration.http.port
                    // An IPv6 address goes in brackets in a URL (`http://[::1]:8080`).
                    let host = configuration.http.host.contains(":") ? "[\(configuration.http.host)]" : configuration.http.host
                    let url = "http://\(host):\(bound)"
                    shown.fire()
                    onReady(Banner(
                        url: url, consoleURL: configuration.console.enabled ? url + ConsoleRoutes.root : nil, newAdminToken: newAdminToken,
                        demo: demoSecrets, simulator: simulatorAddress.map { ($0.endpoint.port, $0.controlPort) },
                        databasePath: configuration.databaseDescription, newServerKeyFile: newKeyFile))
                    return .noStop
                }
                tasks.addTask {
                    try await group.run()
                    return .services
                }
                if let signals {
                    // A second signal while the first one's graceful stop goes on (Ctrl-C twice): what is left is cancelled
                    // now, as at the end of `server.shutdownTimeout`, instead of being waited for.
                    tasks.addTask {
                        var seen = 0
                        for await _ in signals {
                            seen += 1
                            if seen == 2 { return .secondSignal }
                        }
                        return .noStop
                    }
                }
                // However the services end, the wait for readiness and for signals ends with them.
                defer { tasks.cancelAll() }
                while let ended = try await tasks.next() {
                    switch ended {
                    case .noStop:
                        continue
                    case .secondSignal:
                        logger.warning("a second signal: stopping now; the chunks still in flight are left for the next start or another node")
                        // The group's task among them: the group cancels its services.
                        tasks.cancelAll()
                    case .services:
                        logger.info("stopped")
                        return
                    }
                }
            }
        } catch {
            if !shown.hasFired { await assembly.takeBackWhatWasNeverShown(from: store) }
            throw error
        }
        if !shown.hasFired { await assembly.takeBackWhatWasNeverShown(from: store) }
    }

    /// The configured key, or the key file's (made on a first start). (Internal, not private: the router tests load
    /// theirs this way too.)
    static func loadServerKey(_ configuration: TernServerConfiguration) throws(TernServerConfigurationError) -> (key: ServerKey, newFile: String?) {
        do {
            if let text = configuration.server.key { return (try ServerKey(base64: text), nil) }
            let (key, created) = try ServerKey.loadOrCreate(file: URL(fileURLWithPath: configuration.server.keyFile))
            return (key, created ? configuration.server.keyFile : nil)
        } catch {
            throw .init(configuration.server.key == nil ? "server key \(configuration.server.keyFile): \(error)" : "server.key: \(error)")
        }
    }
}

/// What ended, among the tasks that run beside the service group.
private enum Ended: Sendable {
    /// A task that ends without stopping the server: the banner shown (or its wait given up), or the watch for
    /// signals over.
    case noStop
    /// The service group returned: the server has stopped.
    case services
    /// A second stop signal came while the first one's graceful stop went on.
    case secondSignal
}

/// Says when a stop begins. Last among the services, it is the first told (a ServiceGroup tells them in reverse).
private struct StopNotice: Service {
    let logger: Logger
    let timeout: Duration

    func run() async throws {
        try? await gracefulShutdown()
        logger.info(
            "stopping: no new requests; the chunks in flight are sent and recorded, for at most \(timeout.components.seconds) s (a second signal stops at once)")
    }
}
