import Foundation
import Hummingbird
import HummingbirdCore
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
    /// Wall-clock time for the rules that depend on it (alias tokens' expiry, the device-secret limit).
    private let clock: any WallClock
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
    public init(
        configuration: TernServerConfiguration, metrics: PrometheusCollectorRegistry?, logger: Logger, clock: any WallClock = SystemWallClock(),
        embeddedAPNs: EmbeddedAPNsFactory? = nil
    ) {
        self.configuration = configuration
        self.registry = metrics
        self.logger = logger
        self.clock = clock
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
        let serverKey = try loadServerKey()
        let store = try await openStore()
        do {
            try await serve(store: store, serverKey: serverKey, gracefulShutdownSignals: gracefulShutdownSignals, onReady: onReady)
            try await store.close()
        } catch {
            try? await store.close()
            throw error
        }
    }

    /// PostgreSQL when a URL is configured, else the SQLite file. A wrong URL or an unreachable server is a
    /// configuration error with the reason (never the password).
    private func openStore() async throws -> SQLStore {
        do {
            if let url = configuration.database.url {
                return try await SQLStore.openPostgres(url: url, maximumConnections: configuration.database.connections, logger: logger)
            }
            return try await SQLStore.openSQLite(path: configuration.database.path, logger: logger)
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
    static func checkCanListen(host: String, port: Int) async throws(TernServerConfigurationError) {
        guard port != 0 else { return }
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: host, port: port).get()
            try await channel.close()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw .init("http: cannot listen on \(host):\(port): the address is in use (is another server on that port?)")
        } catch {
            throw .init("http: cannot listen on \(host):\(port): \(error)")
        }
    }

    private func serve(
        store: any TernStore, serverKey: (key: ServerKey, newFile: String?), gracefulShutdownSignals: [UnixSignal],
        onReady: @escaping @Sendable (Banner) -> Void
    ) async throws {
        do {
            try await store.migrate()
        } catch {
            throw TernServerConfigurationError("database: cannot bring the schema up to date: \(error)")
        }
        let (serverKey, newKeyFile) = serverKey
        let newAdminToken = try await prepareAdminToken(store)
        let adminTokenHash = try await adminTokenHash(store)

        let simulator: (any EmbeddedAPNs)? =
            if configuration.simulator.enabled, let embeddedAPNs { try embeddedAPNs(SimulatorIdentity.trustedKey(serverKey)) } else { nil }

        let clients = ClientDirectory(
            serverKey: serverKey, simulator: nil, connections: configuration.apns.connections, logger: logger)
        // Nodes on one PostgreSQL database share it: they send pushes together, and one at a time runs each periodic job.
        let coordinator: any NodeCoordinator =
            try configuration.database.url.map { try PostgresCoordinator(url: $0, logger: logger) } ?? LocalCoordinator()
        let webhookPolicy = WebhookAddressPolicy(allowPrivateNetworks: configuration.webhooks.allowPrivateNetworks)
        let webhooks = WebhookSender(store: store, serverKey: serverKey, policy: webhookPolicy, coordinator: coordinator, logger: logger)
        let dispatcher = PushDispatcher(
            store: store, clients: clients,
            settings: .init(configuration.delivery),
            coordinator: coordinator, onTokensPruned: { webhooks.wake() }, logger: logger)
        let badgeUpdates = BadgeUpdates(
            store: store, clients: clients, order: dispatcher.order, delay: configuration.inbox.badgeUpdateDelay,
            logger: logger)
        let feedback = FeedbackPoller(
            store: store, clients: clients, checkInterval: configuration.feedback.checkInterval, coordinator: coordinator,
            onTokensPruned: { webhooks.wake() }, logger: logger)
        let cache = AppCache(store: store)
        let apps = AppsAPI(
            store: store, authorization: Authorization(adminTokenHash: adminTokenHash), serverKey: serverKey, clients: clients, cache: cache,
            simulator: simulator, feedback: feedback, webhookPolicy: webhookPolicy)
        var demo: DemoSecrets?
        if configuration.demo.enabled, configuration.simulator.enabled, try await store.apps().isEmpty {
            let created = try await apps.create(
                .init(id: Self.demoAppID, topic: Self.demoTopic, environment: AppEnvironment.simulator, endpoint: nil, credentials: nil, webhookURL: nil))
            let identitySecret = created.identitySecret!
            demo = DemoSecrets(
                appKey: created.appKey!, masterSecret: created.masterSecret!, identitySecret: identitySecret,
                aliasToken: AliasToken.mint(
                    alias: Self.demoAlias, app: Self.demoAppID, secret: Array(identitySecret.utf8),
                    expires: clock.now.addingTimeInterval(AliasToken.maximumLifetime)))
        }
        // Apps from before signed user binding keep binding users as they did: say so once, with the way out.
        for app in try await store.apps() where app.userBinding == .open {
            logger.warning(
                "app \(app.id): any holder of its app key may bind a device to any user (userBinding open); see the README's \"Who may do what\" to switch to signed binding")
        }

        let router = Router(context: ServerRequestContext.self)
        let routes = RouteTable()
        // Outermost, the shape of every refusal; inside it, the log of what went wrong, which sees the error itself.
        router.middlewares.add(RequestShapeMiddleware(routes: routes))
        router.middlewares.add(ErrorLoggingMiddleware(logger: logger))
        SystemAPI(store: store, registry: registry).register(on: router)
        apps.register(on: router)
        let gate = DeviceGate(serverKey: serverKey, limiter: DeviceSecretLimiter(clock: clock), logger: logger)
        DevicesAPI(store: store, apps: cache, serverKey: serverKey, gate: gate, clock: clock).register(on: router)
        PushesAPI(store: store, apps: cache, dispatcher: dispatcher).register(on: router)
        InboxAPI(store: store, apps: cache, gate: gate, badgeUpdates: badgeUpdates).register(on: router)

        routes.load(router.routes)
        servedRoutes.withLock { $0 = router.routes.map { "\($0.method) \($0.path)" }.sorted() }

        let listening = ReadySignal()
        var http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [ParserErrorResponder()])
        http1.httpDecoder = .init(maxHeaderFieldSize: ParserErrorResponder.headerLimit, maxHeaderListSize: 4 * ParserErrorResponder.headerLimit)
        let application = Application(
            router: router,
            server: .http1(configuration: http1),
            configuration: .init(address: .hostname(configuration.http.host, port: configuration.http.port), serverName: "tern"),
            onServerRunning: { [self] channel in
                self.port.withLock { $0 = channel.localAddress?.port }
                listening.signal()
            },
            logger: logger)

        // Shut down in reverse order: the coordinator last, so this node keeps its leases until its work is done.
        var services: [any Service] = [CoordinatorService(coordinator: coordinator)]
        if let simulator { services.append(simulator) }
        // Pushes left from an earlier run wait for the simulator their apps may deliver to.
        services.append(DispatcherService(dispatcher: dispatcher, clients: clients) {
            if let simulator {
                let address = try await simulator.waitUntilReady()
                await clients.useSimulator(
                    .init(endpoint: address.endpoint, legacyGatewayPort: address.legacyGatewayPort, feedbackPort: address.feedbackPort))
            }
        })
        services.append(badgeUpdates)
        services.append(webhooks)
        services.append(feedback)
        services.append(InboxSweeper(
            store: store, interval: configuration.inbox.sweepInterval, coordinator: coordinator, logger: logger))
        services.append(application)
        let group = ServiceGroup(
            configuration: {
                var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
                // What has not finished gracefully by then is cancelled.
                group.maximumGracefulShutdownDuration = configuration.server.shutdownTimeout
                return group
            }())
        self.services.withLock { $0 = group }

        let demoSecrets = demo
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { [configuration] in
                let simulatorAddress = try await simulator?.waitUntilReady()
                await listening.wait()
                // The server ended before it was ready (stopped while starting, or a service failed): no banner.
                guard !Task.isCancelled else { return }
                let bound = self.boundPort ?? configuration.http.port
                onReady(Banner(
                    url: "http://\(configuration.http.host):\(bound)", newAdminToken: newAdminToken, demo: demoSecrets,
                    simulator: simulatorAddress.map { ($0.endpoint.port, $0.controlPort) }, databasePath: configuration.databaseDescription,
                    newServerKeyFile: newKeyFile))
            }
            // However the services end, the wait for readiness ends with them.
            defer { tasks.cancelAll() }
            try await group.run()
        }
    }

    private func loadServerKey() throws(TernServerConfigurationError) -> (key: ServerKey, newFile: String?) {
        do {
            if let text = configuration.server.key { return (try ServerKey(base64: text), nil) }
            let (key, created) = try ServerKey.loadOrCreate(file: URL(fileURLWithPath: configuration.server.keyFile))
            return (key, created ? configuration.server.keyFile : nil)
        } catch {
            throw .init(configuration.server.key == nil ? "server key \(configuration.server.keyFile): \(error)" : "server.key: \(error)")
        }
    }

    private static let adminTokenSetting = "admin.tokenHash"

    /// The configured admin token's hash is stored; with none configured, the first start generates one.
    /// - Returns: the token, when generated now (to print once).
    private func prepareAdminToken(_ store: any TernStore) async throws -> String? {
        if let token = configuration.admin.token {
            try await store.setSetting(Self.adminTokenSetting, to: Data(Secrets.hash(token)).base64EncodedString())
            return nil
        }
        let token = Secrets.generate(prefix: "tat_")
        let hash = Data(Secrets.hash(token)).base64EncodedString()
        let stored = try await store.initializeSetting(Self.adminTokenSetting, to: hash)
        return stored == hash ? token : nil
    }

    private func adminTokenHash(_ store: any TernStore) async throws -> [UInt8] {
        guard let text = try await store.setting(Self.adminTokenSetting), let bytes = Data(base64Encoded: text) else {
            throw TernServerConfigurationError("the stored admin token is unreadable")
        }
        return Array(bytes)
    }
}

/// Runs the node coordinator until shutdown; leaving releases this node's leases for the others.
private struct CoordinatorService: Service {
    let coordinator: any NodeCoordinator

    func run() async throws {
        await cancelWhenGracefulShutdown { await coordinator.run() }
    }
}

/// Runs the dispatcher, and the APNs clients for as long as it runs: once it stopped, they are closed (their streams
/// in flight finish first).
private struct DispatcherService: Service {
    let dispatcher: PushDispatcher
    let clients: ClientDirectory
    let prepare: @Sendable () async throws -> Void

    func run() async throws {
        // The clients live as long as the dispatcher (and the badge updates, which stop before it).
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await clients.closeRetired() }
            do {
                try await prepare()
                try await dispatcher.run()
            } catch {
                await clients.close()
                throw error
            }
            await clients.close()
        }
    }
}

/// Fires once: the API listens.
private final class ReadySignal: Sendable {
    private let state = Mutex<(ready: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.ready = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once signalled, or when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.ready || Task.isCancelled { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            // Only the banner waits: let every waiter go.
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}

/// Logs server errors (5xx, unexpected throws) once, without request bodies or secrets.
private struct ErrorLoggingMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            if error.status.code >= 500 {
                logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            }
            throw error
        } catch {
            logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(String(describing: type(of: error)))"])
            throw error
        }
    }
}
