import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A connection lent to one attempt; hand it back with ``APNsConnectionPool/release(_:)``.
struct ConnectionLease: Sendable {
    let connectionID: Int
    let channel: any Channel
    let handler: NIOLoopBound<APNsConnectionHandler>
    let outbox: ConnectionOutbox
}

/// Requests on their way to one connection's event loop. Callers on any thread add to it; the first request of a
/// burst schedules one task on the loop that writes everything queued by then, so a burst costs one hop and one
/// flush rather than one of each per push.
final class ConnectionOutbox: Sendable {
    private let queue = Mutex<[WireRequest]>([])
    private let eventLoop: any EventLoop
    private let handler: NIOLoopBound<APNsConnectionHandler>

    init(eventLoop: any EventLoop, handler: NIOLoopBound<APNsConnectionHandler>) {
        self.eventLoop = eventLoop
        self.handler = handler
    }

    func submit(_ request: WireRequest) {
        let first = queue.withLock { queue -> Bool in
            queue.append(request)
            return queue.count == 1
        }
        if first { eventLoop.execute { self.writeQueued() } }
    }

    private func writeQueued() {
        let requests = queue.withLock { queue -> [WireRequest] in
            defer { queue = [] }
            return queue
        }
        handler.value.send(requests)
    }
}

/// Long-lived HTTP/2 connections to one APNs endpoint with one credential.
///
/// It opens connections on demand, up to ``APNsClientConfiguration/connections``, when every open one is busy;
/// lends the least-loaded connection that has a free stream under the server's MAX_CONCURRENT_STREAMS; stops
/// using a connection at GOAWAY and replaces closed ones. Failed connects back off exponentially with jitter
/// (APNs treats rapid reconnects as an attack), and callers wait for a stream up to their deadline.
final class APNsConnectionPool: APNsConnectionDelegate, Sendable {
    private enum ConnectionState {
        case connecting
        case ready
        case draining
    }

    private struct Entry {
        var state: ConnectionState
        var lease: ConnectionLease?
        var maxStreams = 1
        var inFlight = 0
        var settingsReceived = false
        /// Why the connection failed before it was ready, for the error of callers that time out waiting.
        var setupFailure: String?

        /// Ready once connected and the server's first SETTINGS said how many streams it takes, in either order.
        mutating func becomeReadyIfComplete() -> Bool {
            guard state == .connecting, lease != nil, settingsReceived else { return false }
            state = .ready
            return true
        }
    }

    typealias LeaseHandler = @Sendable (Result<ConnectionLease, any Error>) -> Void

    private struct Waiter {
        var id: Int
        var onLease: LeaseHandler
        /// Fails the waiter at its deadline; cancelled when it is served, so served waiters leave no timers behind.
        var deadlineTimer: Scheduled<Void>?
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 1
        var waiters: [Waiter] = []
        var consecutiveFailures = 0
        var lastConnectError: String?
        var connectScheduled = false
        var shutDown = false
    }

    let configuration: APNsClientConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let sslContext: NIOSSLContext
    private let logger: Logger
    private let metrics: APNsClientMetrics
    private let state = Mutex(State())

    init(
        configuration: APNsClientConfiguration, sslContext: NIOSSLContext, eventLoopGroup: any EventLoopGroup,
        logger: Logger, metrics: APNsClientMetrics
    ) {
        self.configuration = configuration
        self.sslContext = sslContext
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.metrics = metrics
    }

    // MARK: Leasing

    /// Calls `onLease` with a connection that has a free stream: at once when one is free, else when one frees up
    /// (in order of asking), or with an error at `deadline`, at shutdown or after ``cancelWaiter(_:)``.
    /// - Parameter id: the caller's id, unique in this pool, for ``cancelWaiter(_:)``.
    /// - Returns: whether the caller waits (`onLease` not called yet).
    @discardableResult
    func acquire(id waiterID: Int, deadline: NIODeadline, _ onLease: @escaping LeaseHandler) -> Bool {
        enum Next {
            case lend(ConnectionLease, connect: Bool)
            case fail(any Error)
            case wait(connect: Bool)
        }
        let next = state.withLock { state -> Next in
            if state.shutDown { return .fail(APNsClientError.shutDown) }
            if let lease = Self.lendLeastLoaded(&state) {
                // Grow while every open connection is busy, so load spreads over up to `connections`.
                return .lend(lease, connect: Self.allBusy(state) && Self.shouldConnect(state, poolSize: configuration.connections))
            }
            state.waiters.append(Waiter(id: waiterID, onLease: onLease))
            return .wait(connect: Self.shouldConnect(state, poolSize: configuration.connections))
        }
        switch next {
        case .lend(let lease, let connect):
            if connect { connectNow() }
            onLease(.success(lease))
            return false
        case .fail(let error):
            onLease(.failure(error))
            return false
        case .wait(let connect):
            let timer = eventLoopGroup.any().scheduleTask(deadline: deadline) { [self] in
                self.failWaiter(waiterID) { lastError in APNsClientError.timedOut(waitingForConnection: lastError) }
            }
            let stillWaiting = state.withLock { state -> Bool in
                guard let index = state.waiters.firstIndex(where: { $0.id == waiterID }) else { return false }
                state.waiters[index].deadlineTimer = timer
                return true
            }
            if !stillWaiting { timer.cancel() }
            if connect { connectNow() }
            return true
        }
    }

    /// Ends a waiting ``acquire(id:deadline:_:)`` with `CancellationError`; nothing happens when it is not waiting.
    func cancelWaiter(_ id: Int) {
        failWaiter(id) { _ in CancellationError() }
    }

    /// Hands a stream back; the next waiter gets it.
    func release(_ lease: ConnectionLease) {
        let served = state.withLock { state -> [(LeaseHandler, ConnectionLease)] in
            if var entry = state.entries[lease.connectionID] {
                entry.inFlight -= 1
                state.entries[lease.connectionID] = entry
            }
            return Self.serveWaiters(&state)
        }
        for (onLease, lease) in served { onLease(.success(lease)) }
    }

    /// Stops lending the lease's connection and closes it once its streams finish: APNs refuses it (a second
    /// provider token within 20 minutes). The pool opens a new one in its place.
    func retire(_ lease: ConnectionLease) {
        let connect = state.withLock { state -> Bool in
            guard state.entries[lease.connectionID]?.state == .ready else { return false }
            state.entries[lease.connectionID]?.state = .draining
            return !state.waiters.isEmpty && Self.shouldConnect(state, poolSize: configuration.connections)
        }
        lease.channel.eventLoop.execute { lease.handler.value.drainAndClose() }
        if connect { connectNow() }
    }

    private static func allBusy(_ state: State) -> Bool {
        for entry in state.entries.values where entry.state != .draining {
            if entry.state != .ready || entry.inFlight == 0 { return false }
        }
        return true
    }

    private func failWaiter(_ id: Int, _ error: (String?) -> any Error) {
        let waiter = state.withLock { state -> (Waiter, String?)? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return (state.waiters.remove(at: index), state.lastConnectError)
        }
        if let (waiter, lastError) = waiter {
            waiter.deadlineTimer?.cancel()
            waiter.onLease(.failure(error(lastError)))
        }
    }

    private static func lendLeastLoaded(_ state: inout State) -> ConnectionLease? {
        var best: Int?
        for (id, entry) in state.entries where entry.state == .ready && entry.inFlight < entry.maxStreams {
            if let current = best, state.entries[current]!.inFlight <= entry.inFlight { continue }
            best = id
        }
        guard let id = best, let lease = state.entries[id]?.lease else { return nil }
        state.entries[id]!.inFlight += 1
        return lease
    }

    private static func serveWaiters(_ state: inout State) -> [(LeaseHandler, ConnectionLease)] {
        guard !state.waiters.isEmpty else { return [] }
        var served: [(LeaseHandler, ConnectionLease)] = []
        var count = 0
        while count < state.waiters.count, let lease = lendLeastLoaded(&state) {
            let waiter = state.waiters[count]
            waiter.deadlineTimer?.cancel()
            served.append((waiter.onLease, lease))
            count += 1
        }
        state.waiters.removeFirst(count)
        return served
    }

    private static func shouldConnect(_ state: State, poolSize: Int) -> Bool {
        guard !state.shutDown, !state.connectScheduled else { return false }
        var open = 0
        for entry in state.entries.values where entry.state != .draining { open += 1 }
        return open < poolSize
    }

    // MARK: Connecting

    /// Starts one connect, after the back-off the recent failures call for.
    private func connectNow() {
        let plan = state.withLock { state -> (id: Int, delay: TimeAmount)? in
            guard Self.shouldConnect(state, poolSize: configuration.connections) else { return nil }
            state.connectScheduled = true
            let id = state.nextID
            state.nextID += 1
            state.entries[id] = Entry(state: .connecting)
            return (id, configuration.reconnectBackoff.delay(afterFailures: state.consecutiveFailures))
        }
        guard let plan else { return }
        let loop = eventLoopGroup.any()
        if plan.delay == .zero {
            connect(plan.id, on: loop)
        } else {
            loop.scheduleTask(in: plan.delay) { [self] in self.connect(plan.id, on: loop) }
        }
    }

    private func connect(_ id: Int, on loop: any EventLoop) {
        // A connect scheduled (after a back-off) before shutdown must not open a connection after it.
        let shutDown = state.withLock { state -> Bool in
            guard state.shutDown else { return false }
            state.connectScheduled = false
            state.entries.removeValue(forKey: id)
            return true
        }
        if shutDown { return }
        let endpoint = configuration.endpoint
        let settings = APNsConnectionHandler.Settings(
            authority: endpoint.port == 443 ? endpoint.host : "\(endpoint.host):\(endpoint.port)",
            idlePingInterval: configuration.idlePingInterval.timeAmount,
            pingTimeout: configuration.pingTimeout.timeAmount)
        let sslContext = self.sslContext
        let serverHostname = ClientTLS.serverHostname(endpoint.host)
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                    try pipeline.addHandler(
                        APNsConnectionHandler(id: id, settings: settings, delegate: self, allocator: channel.allocator))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = NIOLoopBound(
                        try channel.pipeline.syncOperations.handler(type: APNsConnectionHandler.self), eventLoop: channel.eventLoop)
                    return ConnectionLease(
                        connectionID: id, channel: channel, handler: handler,
                        outbox: ConnectionOutbox(eventLoop: channel.eventLoop, handler: handler))
                }
            }
            .whenComplete { [self] result in
                switch result {
                case .success(let lease): self.connected(lease)
                case .failure(let error): self.connectFailed(id, error)
                }
            }
    }

    private func connected(_ lease: ConnectionLease) {
        let (closeNow, served) = state.withLock { state -> (Bool, [(LeaseHandler, ConnectionLease)]) in
            state.connectScheduled = false
            guard !state.shutDown, var entry = state.entries[lease.connectionID] else { return (true, []) }
            entry.lease = lease
            let ready = entry.becomeReadyIfComplete()
            state.entries[lease.connectionID] = entry
            if ready {
                state.consecutiveFailures = 0
                state.lastConnectError = nil
            }
            return (false, ready ? Self.serveWaiters(&state) : [])
        }
        if closeNow {
            lease.channel.close(promise: nil)
            return
        }
        for (onLease, lease) in served { onLease(.success(lease)) }
        metrics.connectionOpened()
        logger.debug("APNs connection open", metadata: ["connection": "\(lease.connectionID)"])
        lease.channel.closeFuture.whenComplete { [self] _ in self.closed(lease.connectionID) }
        // TLS and the server's first SETTINGS must follow within the connect timeout, or the slot is given back.
        lease.channel.eventLoop.scheduleTask(in: .seconds(10)) { [self] in
            let stuck = self.state.withLock { $0.entries[lease.connectionID]?.state == .connecting }
            if stuck {
                self.logger.warning("APNs connection never became ready (TLS or SETTINGS missing)")
                lease.channel.close(promise: nil)
            }
        }
    }

    private func connectFailed(_ id: Int, _ error: any Error) {
        let retry = state.withLock { state -> Bool in
            state.connectScheduled = false
            state.entries.removeValue(forKey: id)
            state.consecutiveFailures += 1
            state.lastConnectError = "\(configuration.endpoint.host):\(configuration.endpoint.port): \(error)"
            return !state.waiters.isEmpty
        }
        metrics.connectFailed()
        logger.warning("APNs connect failed", metadata: ["endpoint": "\(configuration.endpoint.host):\(configuration.endpoint.port)", "error": "\(error)"])
        if retry { connectNow() }
    }

    private func closed(_ id: Int) {
        let reconnect = state.withLock { state -> Bool in
            // A connection that closed before it was ever usable counts as a failed connect for the back-off.
            if let entry = state.entries.removeValue(forKey: id), entry.state == .connecting {
                state.consecutiveFailures += 1
                state.lastConnectError = "\(configuration.endpoint.host):\(configuration.endpoint.port): "
                    + (entry.setupFailure ?? "the connection closed before TLS and HTTP/2 were set up")
            }
            return !state.waiters.isEmpty
        }
        metrics.connectionClosed()
        logger.debug("APNs connection closed", metadata: ["connection": "\(id)"])
        if reconnect { connectNow() }
    }

    // MARK: APNsConnectionDelegate (called on the connection's event loop)

    func connection(_ id: Int, maxConcurrentStreamsChanged value: Int) {
        let served = state.withLock { state -> [(LeaseHandler, ConnectionLease)] in
            guard var entry = state.entries[id] else { return [] }
            entry.maxStreams = value
            entry.settingsReceived = true
            if entry.becomeReadyIfComplete() {
                // The connection works: the back-off starts over and old connect errors no longer apply.
                state.consecutiveFailures = 0
                state.lastConnectError = nil
            }
            state.entries[id] = entry
            return Self.serveWaiters(&state)
        }
        for (onLease, lease) in served { onLease(.success(lease)) }
    }

    func connection(_ id: Int, failedWith error: any Error) {
        state.withLock { state in
            guard state.entries[id]?.state == .connecting else { return }
            state.entries[id]?.setupFailure = "\(error)"
        }
    }

    func connectionDraining(_ id: Int) {
        let connect = state.withLock { state -> Bool in
            guard state.entries[id] != nil, state.entries[id]?.state != .draining else { return false }
            state.entries[id]?.state = .draining
            return !state.waiters.isEmpty && Self.shouldConnect(state, poolSize: configuration.connections)
        }
        if connect { connectNow() }
    }

    // MARK: Shutdown

    /// Stops lending, fails waiters, lets in-flight streams finish and closes every connection.
    func shutdown() async {
        let (waiters, leases) = state.withLock { state -> ([Waiter], [ConnectionLease]) in
            state.shutDown = true
            defer { state.waiters = [] }
            return (state.waiters, state.entries.values.compactMap(\.lease))
        }
        for waiter in waiters {
            waiter.deadlineTimer?.cancel()
            waiter.onLease(.failure(APNsClientError.shutDown))
        }
        for lease in leases {
            lease.channel.eventLoop.execute { lease.handler.value.drainAndClose() }
        }
        for lease in leases {
            let timer = lease.channel.eventLoop.scheduleTask(in: .seconds(10)) { lease.channel.close(promise: nil) }
            try? await lease.channel.closeFuture.get()
            timer.cancel()
        }
    }

    var openConnections: Int { state.withLock { $0.entries.values.filter { $0.lease != nil }.count } }
}
