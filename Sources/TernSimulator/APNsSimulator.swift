import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import ServiceLifecycle
import Synchronization
import TernAPNs
import X509

/// A local APNs: the HTTP/2 provider API over TLS with token and certificate auth, APNs' validation and connection
/// behaviour, scenarios (dead tokens, faults, latency, GOAWAY, dropped connections), an arrival log and counters,
/// and an HTTP/1.1 JSON control API.
///
/// Run it as a `Service`, or scoped:
/// ```swift
/// try await APNsSimulator.withRunning(configuration) { simulator in
///     // send to https://127.0.0.1:\(simulator.port), trusting simulator.certificateAuthority
/// }
/// ```
public final class APNsSimulator: Service, Sendable {
    public let configuration: Configuration
    /// Scenarios, token registry, arrival log and counters, for in-process use.
    public let state: SimulatorState
    private let logger: Logger
    private let eventLoopGroup: any EventLoopGroup
    private let lifecycle: Mutex<Lifecycle>
    private let connections: Mutex<[ObjectIdentifier: any Channel]>

    private struct Lifecycle {
        var serverChannel: (any Channel)?
        var legacyChannels: [any Channel] = []
        var port: Int?
        var legacyGatewayPort: Int?
        var feedbackPort: Int?
        var controlPort: Int?
        var ready = false
        var stopRequested = false
        var readyWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter: UInt64 = 0
        var stopWaiter: CheckedContinuation<Void, Never>?
        var failure: (any Error)?
    }

    public init(
        configuration: Configuration,
        logger: Logger = Logger(label: "tern.simulator"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.state = SimulatorState(
            environment: configuration.environment, logCapacity: configuration.logCapacity, clock: configuration.clock)
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        self.lifecycle = Mutex(Lifecycle())
        self.connections = Mutex([:])
    }

    /// The CA clients must trust, and the issuer of accepted client certificates.
    public var certificateAuthority: SimulatorCertificateAuthority { configuration.certificateAuthority }

    /// The HTTP/2 port, once running.
    public var port: Int { lifecycle.withLock { $0.port ?? 0 } }

    /// The legacy binary gateway's port, once running (nil if it is off).
    public var legacyGatewayPort: Int? { lifecycle.withLock { $0.legacyGatewayPort } }

    /// The legacy feedback service's port, once running (nil if it is off).
    public var feedbackPort: Int? { lifecycle.withLock { $0.feedbackPort } }

    /// The control API port, once running (nil if it is off).
    public var controlPort: Int? { lifecycle.withLock { $0.controlPort } }

    /// Runs a simulator for the duration of `body`, then stops it (GOAWAY to every connection).
    public static func withRunning<T: Sendable>(
        _ configuration: Configuration,
        logger: Logger = Logger(label: "tern.simulator"),
        _ body: (APNsSimulator) async throws -> T
    ) async throws -> T {
        let simulator = APNsSimulator(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await simulator.run() }
            do {
                try await simulator.waitUntilReady()
                let result = try await body(simulator)
                simulator.requestStop()
                try await group.waitForAll()
                return result
            } catch {
                simulator.requestStop()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    /// Waits until both listeners are bound (or throws why starting failed, or `CancellationError` if the task is
    /// cancelled first).
    public func waitUntilReady() async throws {
        let id = lifecycle.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                lifecycle.withLock { state in
                    if let failure = state.failure {
                        continuation.resume(throwing: failure)
                    } else if state.ready {
                        continuation.resume()
                    } else if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        state.readyWaiters[id] = continuation
                    }
                }
            }
        } onCancel: {
            let waiter = lifecycle.withLock { $0.readyWaiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Reads the channels kept in ``Configuration/channelsFile`` and keeps them there from now on; `run()` does it
    /// if it was not done before. Call it first to learn of a file that cannot be kept before anything else starts.
    public func openChannelsFile() throws(ChannelJournalError) {
        guard let file = configuration.channelsFile, !state.keepsChannels else { return }
        let skipped = try state.keepChannels(in: file)
        if skipped > 0 {
            logger.warning(
                "simulator: lines of the channels file that could not be read were left out",
                metadata: ["file": "\(file.path)", "lines": "\(skipped)"])
        }
    }

    /// Asks a running simulator to stop, as a graceful shutdown of its service group would.
    public func requestStop() {
        let waiter = lifecycle.withLock { state -> CheckedContinuation<Void, Never>? in
            state.stopRequested = true
            defer { state.stopWaiter = nil }
            return state.stopWaiter
        }
        waiter?.resume()
    }

    /// Binds the listeners, serves until graceful shutdown, cancellation or ``requestStop()``, then sends GOAWAY
    /// `{"reason":"Shutdown"}` on every connection, lets in-flight streams finish and closes.
    public func run() async throws {
        // Once stopped, it lets go of its channels file (and the file's lock), for the next simulator to keep them.
        defer { state.stopKeepingChannels() }
        do {
            try configuration.validate()
            try openChannelsFile()
            try await startHTTP2Listener()
            try await startLegacyListeners()
        } catch {
            await stopListeners()
            markFailed(error)
            throw error
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The control API stops through graceful shutdown: cancelling Hummingbird makes it log an error.
            var controlServices: ServiceGroup?
            if let controlPort = configuration.controlPort {
                // Hummingbird reports each start at info; the simulator's own banner says the same.
                var controlLogger = logger
                if controlLogger.logLevel > .debug { controlLogger.logLevel = max(controlLogger.logLevel, .warning) }
                let app = Application(
                    router: ControlAPI.router(state: state),
                    configuration: .init(address: .hostname(configuration.host, port: controlPort), serverName: "tern-simulator"),
                    onServerRunning: { [self] channel in
                        lifecycle.withLock { $0.controlPort = channel.localAddress?.port }
                        markReady()
                    },
                    eventLoopGroupProvider: .shared(eventLoopGroup),
                    logger: controlLogger)
                let services = ServiceGroup(
                    configuration: .init(services: [app], gracefulShutdownSignals: [], logger: controlLogger))
                controlServices = services
                let address = "\(configuration.host):\(controlPort)"
                group.addTask {
                    do {
                        try await services.run()
                    } catch {
                        let failure = SimulatorError(description: "cannot serve the control API on \(address): \(error)")
                        self.markFailed(failure)
                        self.requestStop()
                        throw failure
                    }
                }
            } else {
                markReady()
            }
            await withTaskCancellationHandler {
                await withGracefulShutdownHandler {
                    await waitForStopRequest()
                } onGracefulShutdown: {
                    self.requestStop()
                }
            } onCancel: {
                self.requestStop()
            }
            await stopListeners()
            await controlServices?.triggerGracefulShutdown()
            try await group.waitForAll()
        }
    }

    private func waitForStopRequest() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = lifecycle.withLock { state -> Bool in
                if state.stopRequested { return true }
                state.stopWaiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    private func markReady() {
        let waiters = lifecycle.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard state.port != nil, configuration.controlPort == nil || state.controlPort != nil else { return [] }
            state.ready = true
            defer { state.readyWaiters = [:] }
            return Array(state.readyWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func markFailed(_ error: any Error) {
        let waiters = lifecycle.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.failure = error
            defer { state.readyWaiters = [:] }
            return Array(state.readyWaiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    // MARK: HTTP/2 listener

    private func makeTLSContext(legacy: Bool = false) throws -> NIOSSLContext {
        let authority = configuration.certificateAuthority
        let server = try configuration.serverCertificate
            ?? authority.issueServerCertificate(
                dnsNames: Array(Set(["localhost", configuration.host].filter { !$0.contains(":") && Int($0.prefix(1)) == nil })),
                ipAddresses: Array(Set(["127.0.0.1", "::1"] + [configuration.host].filter { $0.contains(":") || Int($0.prefix(1)) != nil })))
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(server.certificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(server.privateKeyPEM.utf8), format: .pem)))
        tls.minimumTLSVersion = .tlsv12
        if legacy {
            // The binary services take certificate connections only.
            tls.certificateVerification = .noHostnameVerification
        } else {
            tls.applicationProtocols = ["h2"]
            // Client certificates are optional (token connections have none) but must come from our CA when present.
            tls.certificateVerification = .optionalVerification
        }
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(authority.certificatePEM.utf8), format: .pem)])
        return try NIOSSLContext(configuration: tls)
    }

    private func startHTTP2Listener() async throws {
        let sslContext = try makeTLSContext()
        let validator = RequestValidator(
            verifier: ProviderTokenVerifier(keys: configuration.tokenKeys), environment: configuration.environment,
            clock: configuration.clock)
        let settings = SimulatorConnectionHandler.Settings(
            maxConcurrentStreams: configuration.maxConcurrentStreams, resetExcessStreams: configuration.resetExcessStreams,
            initialWindowSize: configuration.initialWindowSize, environment: configuration.environment)
        let state = self.state
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    track(channel)
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLServerHandler(context: sslContext))
                    try pipeline.addHandler(
                        ApplicationProtocolNegotiationHandler { _, channel in
                            // With ALPN h2 or none at all (APNs accepts HTTP/2 with prior knowledge), speak HTTP/2.
                            channel.eventLoop.makeCompletedFuture {
                                let pipeline = channel.pipeline.syncOperations
                                let peer = try pipeline.handler(type: NIOSSLServerHandler.self).peerCertificate
                                let auth = ConnectionAuthentication(mode: Self.authenticationMode(peer))
                                try pipeline.addHandler(
                                    SimulatorConnectionHandler(validator: validator, state: state, settings: settings, auth: auth))
                            }
                        })
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        } catch {
            throw SimulatorError(description: "cannot serve the APNs API on \(configuration.host):\(configuration.port): \(error)")
        }
        lifecycle.withLock { state in
            state.serverChannel = channel
            state.port = channel.localAddress?.port
        }
        logger.debug("simulator listening", metadata: ["port": "\(channel.localAddress?.port ?? 0)"])
    }

    private static func authenticationMode(_ peer: NIOSSLCertificate?) -> ConnectionAuthentication.Mode {
        guard let peer else { return .token }
        guard let der = try? peer.toDERBytes(), let certificate = try? Certificate(derEncoded: der),
            let identity = try? PushCertificateIdentity(certificate: certificate)
        else {
            return .unreadableCertificate
        }
        return .certificate(identity)
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        connections.withLock { $0[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            _ = connections.withLock { $0.removeValue(forKey: id) }
        }
    }

    // MARK: Legacy binary gateway and feedback service

    private func startLegacyListeners() async throws {
        guard configuration.legacyGatewayPort != nil || configuration.feedbackPort != nil else { return }
        let sslContext = try makeTLSContext(legacy: true)
        let state = self.state
        let environment = configuration.environment
        if let port = configuration.legacyGatewayPort {
            let channel = try await bindLegacy(port: port, name: "the legacy gateway", sslContext: sslContext) {
                try $0.addHandler(LegacyGatewayHandler(state: state, environment: environment))
            }
            lifecycle.withLock {
                $0.legacyChannels.append(channel)
                $0.legacyGatewayPort = channel.localAddress?.port
            }
        }
        if let port = configuration.feedbackPort {
            let channel = try await bindLegacy(port: port, name: "the feedback service", sslContext: sslContext) {
                try $0.addHandler(FeedbackServiceHandler(state: state, environment: environment))
            }
            lifecycle.withLock {
                $0.legacyChannels.append(channel)
                $0.feedbackPort = channel.localAddress?.port
            }
        }
    }

    private func bindLegacy(
        port: Int, name: String, sslContext: NIOSSLContext,
        addHandler: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) async throws -> any Channel {
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    track(channel)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try addHandler(channel.pipeline.syncOperations)
                }
            }
        do {
            return try await bootstrap.bind(host: configuration.host, port: port).get()
        } catch {
            throw SimulatorError(description: "cannot serve \(name) on \(configuration.host):\(port): \(error)")
        }
    }

    private func stopListeners() async {
        let serverChannels = lifecycle.withLock { [$0.serverChannel].compactMap { $0 } + $0.legacyChannels }
        for channel in serverChannels { try? await channel.close() }
        let open = connections.withLock { Array($0.values) }
        for channel in open {
            // A connection still in its TLS handshake has nothing to drain: close it now. The others answer what
            // is in flight and get GOAWAY (HTTP/2) or status 10 (the legacy gateway).
            channel.eventLoop.execute {
                let operations = channel.pipeline.syncOperations
                if (try? operations.handler(type: SimulatorConnectionHandler.self)) != nil
                    || (try? operations.handler(type: LegacyGatewayHandler.self)) != nil
                {
                    channel.pipeline.fireUserInboundEventTriggered(SimulatorShutdownEvent())
                } else {
                    channel.close(promise: nil)
                }
            }
        }
        let deadline = NIODeadline.now() + configuration.shutdownGracePeriod
        for channel in open {
            let closed = channel.closeFuture
            let timer = channel.eventLoop.scheduleTask(deadline: deadline) { channel.close(promise: nil) }
            try? await closed.get()
            timer.cancel()
        }
    }
}
