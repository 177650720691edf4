import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import TernAPNs
import TernAPNsClient
import TernStore

/// The composition root of `tern serve`: every piece of the server made and wired in one place, from the
/// configuration, an opened store, the server key and the clocks. It prepares the store (schema, admin token, demo app)
/// and gives the API's router and the long-lived services in the order they start.
///
/// ``TernServer/run(gracefulShutdownSignals:onReady:)`` serves the router over HTTP as the last of those services;
/// the tests hand the same router and services to HummingbirdTesting's `.router` framework, so what they exercise is
/// the server as it runs, without sockets for the API.
struct ServerAssembly {
    /// The API: its middlewares and every route.
    let router: Router<ServerRequestContext>
    /// The online channel: its HTTP endpoints are on ``router``; its WebSocket upgrades are taken by the HTTP server's
    /// connections (``HTTPChannel``).
    let deviceChannel: DeviceChannelAPI
    /// The devices connected to this node.
    let connections: DeviceConnections
    /// Every long-lived piece but the HTTP server, in start order: a ServiceGroup stops them in reverse, so the
    /// coordinator goes last and this node keeps its leases until its work is done.
    let services: [any Service]
    /// The embedded APNs, when apps in the `simulator` environment have one (it is also among ``services``).
    let simulator: (any EmbeddedAPNs)?
    /// The admin token, when this start generated it (only its hash is stored).
    let newAdminToken: String?
    /// The demo app's secrets, when this start created it.
    let demo: TernServer.DemoSecrets?
    /// `METHOD /path` of every route the API serves, sorted (the console's pages are not the API's).
    let servedRoutes: [String]
    /// The APNs clients: they learn where the embedded APNs listens when the dispatcher starts.
    let clients: ClientDirectory

    private let configuration: TernServerConfiguration
    private let logger: Logger

    /// Brings the schema up to date, prepares the admin token and (on a first start with the simulator) the demo
    /// app, then makes the server's pieces. Nothing runs yet: that is the services' part.
    init(
        configuration: TernServerConfiguration, store: any TernStore, serverKey: ServerKey, clocks: ServerClocks,
        metrics registry: PrometheusCollectorRegistry?, embeddedAPNs: EmbeddedAPNsFactory?, logger: Logger
    ) async throws {
        self.configuration = configuration
        self.logger = logger
        do {
            try await store.migrate()
        } catch {
            throw TernServerConfigurationError("database: cannot bring the schema up to date: \(error)")
        }
        // On a database that several nodes share, every date is the database's time, whatever this node's clock says.
        let (clocks, clockAlignment) = await DatabaseClockAlignment.start(store: store, clocks: clocks, logger: logger)
        let clock = clocks.wall
        // What can fail for reasons of its own (the simulator's folder, its certificate authority) is made before the
        // start stores what it shows only once (the admin token, the demo app's secrets) and then fails.
        let simulator: (any EmbeddedAPNs)?
        if configuration.simulator.enabled, let embeddedAPNs {
            do {
                simulator = try embeddedAPNs(SimulatorIdentity.trustedKey(serverKey))
            } catch {
                throw TernServerConfigurationError("\(error)")
            }
        } else {
            simulator = nil
        }
        self.simulator = simulator
        // Nodes on one PostgreSQL database share it: they send pushes together, and one at a time runs each periodic job.
        let coordinator: any NodeCoordinator =
            try configuration.database.url.map { try PostgresCoordinator(url: $0, logger: logger) } ?? LocalCoordinator()
        let renderer = configuration.console.enabled ? try ConsoleRenderer() : nil

        // The first writes of a start: a database that takes no writes (a read-only file, a full disk) is the start's
        // one line, as a schema that cannot be brought up to date is.
        let adminTokenHash: [UInt8]
        do {
            newAdminToken = try await Self.prepareAdminToken(store, configured: configuration.admin.token)
            adminTokenHash = try await Self.adminTokenHash(store)
        } catch let error as TernServerConfigurationError {
            throw error
        } catch {
            throw TernServerConfigurationError("database: cannot store the admin token: \(error)")
        }

        let clients = ClientDirectory(
            serverKey: serverKey, simulator: nil, connections: configuration.apns.connections, idleTimeout: configuration.apns.idleTimeout,
            sendTimeout: configuration.apns.sendTimeout,
            endpointWindow: (initial: configuration.delivery.minimumConcurrency / 2, maximum: configuration.delivery.concurrency),
            proxy: try configuration.apnsProxy,
            legacyReplayWindow: configuration.apns.legacyReplayWindow, clock: clock, logger: logger)
        self.clients = clients
        let webhookPolicy = WebhookAddressPolicy(allowPrivateNetworks: configuration.webhooks.allowPrivateNetworks)
        let webhooks = WebhookSender(
            store: store, serverKey: serverKey, policy: webhookPolicy, proxy: try configuration.webhooksProxy, coordinator: coordinator, clocks: clocks, logger: logger)
        let connections = DeviceConnections(node: UUID.random().uuidString.lowercased())
        self.connections = connections
        let dispatcher = PushDispatcher(
            store: store, clients: clients,
            settings: .init(configuration.delivery),
            coordinator: coordinator, connections: connections, clocks: clocks, onTokensPruned: { webhooks.wake() }, logger: logger)
        let badgeUpdates = BadgeUpdates(
            store: store, clients: clients, order: dispatcher.order, delay: configuration.inbox.badgeUpdateDelay, clocks: clocks,
            logger: logger)
        let feedback = FeedbackPoller(
            store: store, clients: clients, checkInterval: configuration.feedback.checkInterval, coordinator: coordinator,
            clocks: clocks, onTokensPruned: { webhooks.wake() }, logger: logger)
        let cache = AppCache(store: store)
        // Wrong admin tokens on the API and failed sign-ins in the console, counted together per address.
        let guesses = SecretGuessLimiter(clock: clock)
        let authorization = Authorization(adminTokenHash: adminTokenHash, guesses: guesses, logger: logger)
        let apps = AppsAPI(
            store: store, authorization: authorization, serverKey: serverKey, clients: clients, cache: cache,
            simulator: simulator, feedback: feedback, webhookPolicy: webhookPolicy, clock: clock,
            appDeleted: { app in
                await connections.disconnect(app: app)
                if !coordinator.isSoleNode { coordinator.announce(DeviceConnections.dropAppEvent(app: app)) }
            },
            appChanged: { app in
                if !coordinator.isSoleNode { coordinator.announce(ClientDirectory.appChangedEvent(app: app)) }
            })
        var demo: TernServer.DemoSecrets?
        do {
            if configuration.demo.enabled, configuration.simulator.enabled, try await store.apps().isEmpty {
                let created: AppsAPI.AppView
                do {
                    created = try await apps.create(
                        .init(
                            id: TernServer.demoAppID, topic: TernServer.demoTopic, environment: AppEnvironment.simulator.rawValue,
                            endpoint: nil, credentials: nil, webhookURL: nil))
                } catch {
                    throw TernServerConfigurationError("database: cannot create the demo app: \(error)")
                }
                let identitySecret = created.identitySecret!
                demo = TernServer.DemoSecrets(
                    appKey: created.appKey!, masterSecret: created.masterSecret!, identitySecret: identitySecret,
                    aliasToken: AliasToken.mint(
                        alias: TernServer.demoAlias, app: TernServer.demoAppID, secret: Array(identitySecret.utf8),
                        expires: clock.now.addingTimeInterval(AliasToken.maximumLifetime)))
            }
            // Apps from before signed user binding keep binding users as they did: say so once, with the way out.
            for app in try await store.apps() where app.userBinding == .open {
                logger.warning(
                    "app \(app.id): any holder of its app key may bind a device to any user (userBinding open); see the README's \"Who may do what\" to switch to signed binding")
            }
        } catch {
            await Self.takeBack(newAdminToken: newAdminToken, demo: demo, from: store, logger: logger)
            throw error
        }
        self.demo = demo

        let router = Router(context: ServerRequestContext.self)
        let routes = RouteTable()
        // Outermost, the count of every answer (``HTTPMetrics``) and the time of those that ended in an error, which
        // the count does not time; inside them, the client's address (behind a trusted proxy, the one it forwards);
        // then the shape of every refusal; inside that, the log of what went wrong, which sees the error itself.
        router.middlewares.add(MetricsMiddleware())
        router.middlewares.add(ErrorTimingMiddleware())
        router.middlewares.add(ClientAddressMiddleware(proxies: try TrustedProxies(parsing: configuration.http.trustedProxies)))
        router.middlewares.add(RequestShapeMiddleware(routes: routes, console: renderer.map(ConsoleRefusals.init)))
        router.middlewares.add(ErrorLoggingMiddleware(failures: FailureLog("request failed", logger: logger)))
        SystemAPI(
            store: store, registry: registry, metricsTokenHash: configuration.http.metricsToken.map(Secrets.hash),
            authorization: authorization
        ).register(on: router)
        apps.register(on: router)
        let gate = DeviceGate(serverKey: serverKey, limiter: DeviceSecretLimiter(clock: clock), logger: logger)
        DevicesAPI(
            store: store, apps: cache, serverKey: serverKey, gate: gate, clock: clock,
            credentialsChanged: { app, deviceIDs in
                // Wherever their connections are: this node's at once, the others' through the coordinator.
                await connections.disconnect(app: app, deviceIDs: deviceIDs)
                if !coordinator.isSoleNode {
                    for event in DeviceConnections.dropEvents(app: app, deviceIDs: deviceIDs) { coordinator.announce(event) }
                }
            }
        ).register(on: router)
        let pushes = PushesAPI(store: store, apps: cache, dispatcher: dispatcher, clock: clock)
        pushes.register(on: router)
        InboxAPI(store: store, apps: cache, gate: gate, badgeUpdates: badgeUpdates, clock: clock).register(on: router)
        let broadcasts = BroadcastsAPI(store: store, apps: cache, clients: clients, clock: clock, logger: logger)
        broadcasts.register(on: router)
        let recorder = ChannelRecorder(store: store, clock: clock, logger: logger) { earlier in
            // A device's newer connection took over from one on another node: that node closes it (this node's own
            // older connection was closed as the newer one attached).
            guard !coordinator.isSoleNode else { return }
            let elsewhere = Dictionary(grouping: earlier.filter { $0.node != connections.node }) { PresenceNodeApp(node: $0.node, app: $0.app) }
            for (target, entries) in elsewhere {
                for event in DeviceConnections.replacedEvents(node: target.node, app: target.app, connections: entries.map { ($0.deviceID, $0.connection) }) {
                    coordinator.announce(event)
                }
            }
        }
        let channelTasks = ChannelTasks()
        let channel = DeviceChannelAPI(
            store: store, apps: cache, gate: gate, connections: connections, recorder: recorder, tasks: channelTasks,
            pingInterval: configuration.channel.pingInterval, clocks: clocks, onOpenEvent: { webhooks.wake() }, logger: logger)
        channel.register(on: router)
        deviceChannel = channel
        // The operator's console: pages over the same pieces (apps, pushes, the store), not part of the API's contract.
        var consoleActivity: ConsoleActivity?
        if let renderer {
            let activity = ConsoleActivity(registry: registry, clocks: clocks)
            consoleActivity = activity
            ConsoleRoutes(
                store: store, apps: apps, cache: cache, pushes: pushes, broadcasts: broadcasts, authorization: authorization,
                sessions: ConsoleSessions(
                    idleTimeout: configuration.console.sessionIdleTimeout, lifetime: configuration.console.sessionLifetime, clock: clock),
                limiter: guesses, activity: activity, connections: connections, renderer: renderer,
                secureCookies: configuration.console.secureCookies, clock: clock, logger: logger
            ).register(on: router)
        }
        routes.load(router.routes)
        self.router = router
        servedRoutes = router.routes.map { "\($0.method) \($0.path)" }.filter { !$0.contains(" \(ConsoleRoutes.root)") }.sorted()

        var services: [any Service] = [CoordinatorService(coordinator: coordinator)]
        if let clockAlignment { services.append(clockAlignment) }
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
        services.append(RetentionSweeper(
            store: store, interval: configuration.inbox.sweepInterval, pushRetention: configuration.delivery.pushRetention,
            coordinator: coordinator, clocks: clocks, logger: logger))
        services.append(ChannelService(
            store: store, connections: connections, clients: clients, recorder: recorder, tasks: channelTasks, coordinator: coordinator,
            timer: clocks.timer, clock: clock, nodeTimeout: configuration.channel.nodeTimeout, logger: logger))
        if let consoleActivity { services.append(consoleActivity) }
        services.append(HeapTrimmer(timer: clocks.timer, logger: logger))
        self.services = services
    }

    /// The HTTP server for ``router`` on the configured address: HTTP/1.1, with the parser's refusals (headers over
    /// the limit, a malformed request) answered in the API's JSON error shape, and the online channel's WebSocket
    /// upgrades (pinged every `channel.pingInterval`; one that misses its pong by the next ping is closed).
    /// - Parameter onServerRunning: called once it listens, with the listening channel.
    func httpServer(onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> some Service {
        let headerLimits = (field: ParserErrorResponder.headerLimit, list: 4 * ParserErrorResponder.headerLimit)
        let http = configuration.http
        let ceiling = ConnectionCeiling(limit: http.maxConnections ?? ConnectionCeiling.fromOpenFilesLimit())
        return Application(
            router: router,
            server: HTTPServerBuilder { [deviceChannel] responder in
                HTTPChannel(
                    responder: responder, devices: deviceChannel, headerLimits: headerLimits, ceiling: ceiling,
                    requestHeadTimeout: http.requestHeadTimeout, requestBodyTimeout: http.requestBodyTimeout, idleTimeout: http.idleTimeout)
            },
            // A node restarting has its devices connecting back all at once: 256 pending connections (the library's
            // default) overflow, and the kernel's retry of a dropped SYN comes a second or more later. The kernel caps
            // this at net.core.somaxconn (4,096 on current Linux).
            configuration: .init(
                address: .hostname(configuration.http.host, port: configuration.http.port), serverName: "tern", backlog: 4096),
            onServerRunning: onServerRunning,
            logger: logger)
    }

    private static let adminTokenSetting = "admin.tokenHash"

    /// The configured admin token's hash is stored; with none configured, the first start generates one.
    /// - Returns: the token, when generated now (to print once).
    private static func prepareAdminToken(_ store: any TernStore, configured: String?) async throws -> String? {
        if let token = configured {
            try await store.setSetting(adminTokenSetting, to: Data(Secrets.hash(token)).base64EncodedString())
            return nil
        }
        let token = Secrets.generate(prefix: "tat_")
        let hash = Data(Secrets.hash(token)).base64EncodedString()
        let stored = try await store.initializeSetting(adminTokenSetting, to: hash)
        return stored == hash ? token : nil
    }

    /// What this start made to be shown once, taken back when the start ends before its banner showed it: the admin
    /// token it generated (only its hash is stored, so unshown it would be lost for good and the next start would
    /// print none) and the demo app (whose secrets the next start would not print either). The next start makes them
    /// again.
    func takeBackWhatWasNeverShown(from store: any TernStore) async {
        await Self.takeBack(newAdminToken: newAdminToken, demo: demo, from: store, logger: logger)
    }

    private static func takeBack(newAdminToken: String?, demo: TernServer.DemoSecrets?, from store: any TernStore, logger: Logger) async {
        do {
            if demo != nil { _ = try await store.deleteApp(TernServer.demoAppID) }
            if let token = newAdminToken {
                try await store.removeSetting(adminTokenSetting, ifItIs: Data(Secrets.hash(token)).base64EncodedString())
            }
        } catch {
            logger.error(
                "the start failed before it showed the admin token and the demo app's secrets, and cannot take them back: set admin.token (TERN_ADMIN_TOKEN) to manage apps",
                metadata: ["error": "\(error)"])
        }
    }

    private static func adminTokenHash(_ store: any TernStore) async throws -> [UInt8] {
        guard let text = try await store.setting(adminTokenSetting), let bytes = Data(base64Encoded: text) else {
            throw TernServerConfigurationError("the stored admin token is unreadable")
        }
        return Array(bytes)
    }
}

/// Wakes this node's device connections when another node kept messages for them, and keeps the presence table
/// honest: the sole node clears what a previous run left, and a node leaving clears its own entries. When another
/// node changes or deletes an app, it also closes this node's APNs clients of the app.
private struct ChannelService: Service {
    let store: any TernStore
    let connections: DeviceConnections
    /// This node's APNs clients: an app changed or deleted on another node has its clients closed here too, and its
    /// certificate's end is no longer shown (an alert on it would be about a certificate the app no longer has).
    let clients: ClientDirectory
    let recorder: ChannelRecorder
    /// The connections' work: checks, opening, sending.
    let tasks: ChannelTasks
    let coordinator: any NodeCoordinator
    let timer: any Clock<Duration>
    /// The dates the nodes compare (the database's, when several share it).
    let clock: any WallClock
    /// How long a node sharing the database may go unseen before its connections' entries are removed.
    let nodeTimeout: Duration
    let logger: Logger

    func run() async throws {
        if coordinator.isSoleNode {
            do {
                try await store.clearPresence(node: nil)
            } catch {
                logger.warning("cannot clear the connections a previous run left", metadata: ["error": "\(error)"])
            }
        }
        await withDiscardingTaskGroup { reports in
            // The connections' reports, written until the connections are gone, then the last of them: ended, not
            // cancelled (a cancelled task's statements are skipped on SQLite, and the acknowledgements of the node's
            // last moments would be lost, their messages sent again).
            reports.addTask { await recorder.run() }
            await serveConnections()
            recorder.finish()
        }
        do {
            try await store.clearPresence(node: connections.node)
        } catch {
            logger.warning("cannot clear this node's connections", metadata: ["error": "\(error)"])
        }
    }

    /// The connections' work and the other nodes' wake-ups, until graceful shutdown; then the connections close.
    private func serveConnections() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await tasks.serve() }
            if !coordinator.isSoleNode {
                group.addTask { await sweep() }
                group.addTask { await keepPresenceHonest() }
            }
            await cancelWhenGracefulShutdown {
                for await event in coordinator.events() {
                    if event == CoordinationEvent.resumed {
                        connections.ringAll()
                        // Apps changed or deleted while this node heard nothing: their clients close.
                        do {
                            await clients.forgetChanged(current: try await store.apps())
                        } catch {
                            logger.warning(
                                "cannot look for apps changed or deleted while this node was cut off: their APNs clients stay until it next sends for them, or restarts",
                                metadata: ["error": "\(error)"])
                        }
                    } else if let (app, deviceIDs) = connections.wakeTarget(of: event) {
                        connections.ring(app: app, deviceIDs: deviceIDs)
                    } else if let (app, deviceIDs) = DeviceConnections.dropTarget(of: event) {
                        await connections.disconnect(app: app, deviceIDs: deviceIDs)
                    } else if let app = DeviceConnections.dropAppTarget(of: event) {
                        await connections.disconnect(app: app)
                    } else if let app = ClientDirectory.appChangedTarget(of: event) {
                        await clients.forget(app: app)
                    } else if let (app, replaced) = connections.replacedTarget(of: event) {
                        await connections.closeReplaced(app: app, connections: replaced)
                    }
                }
            }
            // A sole node has no events: its stream ends at once, and the service runs on until the shutdown.
            try? await gracefulShutdown()
            await connections.closeAll()
            tasks.finish()
            group.cancelAll()
        }
    }

    /// Says every sixth of `nodeTimeout` that this node runs, and puts its connections' entries back if they were
    /// removed while it was unseen (its database calls failed for a while, say); and, holding the job's lease, removes
    /// the entries of nodes unseen for `nodeTimeout`. Without it a node that crashed, or whose stop was cut short, left
    /// its entries for ever: its devices counted as connected to it, so an `online` push with `wake` never woke them
    /// and each `auto` push to them waited out its `ackTimeout`.
    private func keepPresenceHonest() async {
        let lease = coordinator.lease("presence-sweeper")
        let failures = FailureLog("cannot record that this node runs, or sweep the nodes no longer running", logger: logger)
        while !Task.isCancelled {
            do {
                let now = clock.now
                if try await !store.nodeSeen(connections.node, at: now) {
                    try await store.restorePresence(connections.entries(), at: now)
                }
                if lease.isHeld {
                    let removed = try await store.clearPresenceOfUnseenNodes(since: now.addingTimeInterval(-nodeTimeout.seconds))
                    if removed > 0 {
                        logger.info("removed the connections of nodes no longer running", metadata: ["connections": "\(removed)"])
                    }
                }
                failures.succeeded()
            } catch {
                failures.failed(["error": "\(error)"])
            }
            do { try await timer.sleep(for: nodeTimeout / 6) } catch { return }
        }
    }

    /// How long a connection may go without reading the store when several nodes share it. A wake-up from another
    /// node is lost when its announcement fails (the coordinator re-subscribing is reported, and rings every
    /// connection); this bounds how long such a message waits. A sole node rings its connections itself and loses none.
    static let rereadRound: Duration = .seconds(300)

    /// Rings one slice of the connections every second, so that each reads the store once per ``rereadRound``
    /// (15,000 connections: 50 reads a second) instead of all at once.
    private func sweep() async {
        let parts = Int(Self.rereadRound.components.seconds)
        var part = 0
        while !Task.isCancelled {
            do { try await timer.sleep(for: .seconds(1)) } catch { return }
            connections.ringSlice(part, of: parts)
            part = (part + 1) % parts
        }
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

/// Logs server errors (5xx, unexpected throws) without request bodies or secrets: the first of a run, a reminder a
/// minute while they go on, and the first success after them (``FailureLog``), so a database outage under load is a
/// few lines rather than one per request.
private struct ErrorLoggingMiddleware<Context: RequestContext>: RouterMiddleware {
    let failures: FailureLog

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            if response.status.code < 500 { failures.succeeded() }
            return response
        } catch let error as any HTTPResponseError {
            if error.status.code >= 500 {
                failures.failed(["path": "\(request.uri.path)", "error": "\(error)"])
            } else {
                failures.succeeded()
            }
            throw error
        } catch let error as StoreError {
            // The store's words name records and the database's state, never a secret or a query's binds.
            failures.failed(["path": "\(request.uri.path)", "error": "\(error)"])
            throw error
        } catch {
            failures.failed(["path": "\(request.uri.path)", "error": "\(String(describing: type(of: error)))"])
            throw error
        }
    }
}

/// A node and an app: the events that close a node's replaced connections are per app.
private struct PresenceNodeApp: Hashable {
    var node: String
    var app: String
}
