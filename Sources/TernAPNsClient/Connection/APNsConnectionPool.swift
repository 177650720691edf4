import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A connection lent to one attempt; hand it back with ``APNsConnectionPool/release(_:)``.
///
/// A class, though it only names things: it is handed along several times for every notification (the pool's
/// decision, the lend, the attempt, the answer), and a copy of a struct of these four retained each of them.
final class ConnectionLease: Sendable {
    let connectionID: Int
    let channel: any Channel
    let handler: NIOLoopBound<APNsConnectionHandler>
    let outbox: ConnectionOutbox

    init(connectionID: Int, channel: any Channel, handler: NIOLoopBound<APNsConnectionHandler>, outbox: ConnectionOutbox) {
        self.connectionID = connectionID
        self.channel = channel
        self.handler = handler
        self.outbox = outbox
    }
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
///
/// The decisions are ``ConnectionPoolStateMachine``'s; this class is the shell around it. Every entry point takes
/// the lock, feeds the machine one event, looks up what the resulting action refers to (the callers' handlers and
/// timers, which the machine does not hold), lets go of the lock and then runs the action: callbacks, connects,
/// drains and closes never run under the lock.
final class APNsConnectionPool: APNsConnectionDelegate, Sendable {
    typealias StateMachine = ConnectionPoolStateMachine<ConnectionLease>
    typealias LeaseHandler = @Sendable (Result<ConnectionLease, any Error>) -> Void
    typealias ConnectionHandler = @Sendable (Result<Void, any Error>) -> Void

    /// What a waiter is told: a stream, or only that a connection is ready (``awaitConnection(id:deadline:_:)``).
    private enum Handler: Sendable {
        case lease(LeaseHandler)
        case connection(ConnectionHandler)

        func fail(_ error: any Error) {
            switch self {
            case .lease(let handler): handler(.failure(error))
            case .connection(let handler): handler(.failure(error))
            }
        }
    }

    private struct Waiter {
        var handler: Handler
        var deadline: NIODeadline
        /// Fails the waiter at its deadline; cancelled when it is served, so served waiters leave no timers behind.
        var deadlineTimer: Scheduled<Void>?
    }

    private struct State {
        var machine: StateMachine
        /// The machine knows waiters by id; what to call for each, and its timer, stay here.
        var waiters: [Int: Waiter] = [:]
    }

    /// An action with its waiters' handlers looked up, to run once the lock is released.
    private struct Work: Sendable {
        var served: [(LeaseHandler, ConnectionLease)] = []
        var connected: [ConnectionHandler] = []
        var failed: [(Handler, any Error)] = []
        var cancelTimers: [Scheduled<Void>] = []
        var connect: StateMachine.ConnectPlan?
        var opened: ConnectionLease?
        var drain: [ConnectionLease] = []
        var close: [ConnectionLease] = []
    }

    let configuration: APNsClientConfiguration
    private let eventLoopGroup: any EventLoopGroup
    /// The group's loops; the state machine says which one each connection goes on.
    private let loops: [any EventLoop]
    private let sslContext: NIOSSLContext
    private let logger: Logger
    private let metrics: APNsClientMetrics
    private let state: Mutex<State>
    /// The look for idle connections, every ``APNsClientConfiguration/idleTimeout``; cancelled at shutdown.
    private let idleSweep = Mutex<RepeatedTask?>(nil)

    init(
        configuration: APNsClientConfiguration, sslContext: NIOSSLContext, eventLoopGroup: any EventLoopGroup,
        logger: Logger, metrics: APNsClientMetrics
    ) {
        self.configuration = configuration
        self.sslContext = sslContext
        self.eventLoopGroup = eventLoopGroup
        let loops = Array(eventLoopGroup.makeIterator())
        self.loops = loops.isEmpty ? [eventLoopGroup.next()] : loops
        self.logger = logger
        self.metrics = metrics
        self.state = Mutex(State(machine: StateMachine(
            poolSize: configuration.connections, loops: self.loops.count, backoff: configuration.reconnectBackoff,
            endpoint: "\(configuration.endpoint.host):\(configuration.endpoint.port)", failFastAfter: configuration.sendTimeout)))
        let every = configuration.idleTimeout.timeAmount
        let sweep = self.loops[0].scheduleRepeatedTask(initialDelay: every, delay: every) { [weak self] _ in
            guard let self else { return }
            let work = self.decide { $0.sweepIdle() }
            if !work.drain.isEmpty {
                self.logger.debug("closing idle APNs connections", metadata: ["connections": "\(work.drain.count)"])
            }
            self.run(work)
        }
        idleSweep.withLock { $0 = sweep }
    }

    // MARK: Leasing

    /// Calls `onLease` with a connection that has a free stream: at once when one is free, else when one frees up
    /// (in order of asking), or with an error at `deadline`, at shutdown or after ``cancelWaiter(_:)``.
    /// - Parameter id: the caller's id, unique in this pool, for ``cancelWaiter(_:)``.
    /// - Returns: whether the caller waits (`onLease` not called yet).
    @discardableResult
    func acquire(id waiterID: Int, deadline: NIODeadline, _ onLease: @escaping LeaseHandler) -> Bool {
        enum Decision {
            case lent(ConnectionLease, connect: StateMachine.ConnectPlan?)
            case work(Work, waits: Bool)
        }
        let decision = state.withLock { state -> Decision in
            // A free stream, the usual case: no waiter to register, no timer, no arrays.
            if let (_, lease, connect) = state.machine.lendAtOnce() { return .lent(lease, connect: connect) }
            // Registered before the machine hears of it, so a lend or failure it decides now finds the handler.
            state.waiters[waiterID] = Waiter(handler: .lease(onLease), deadline: deadline)
            let action = state.machine.acquire(waiterID, now: .now)
            return .work(resolve(action, &state), waits: action.startDeadline == waiterID)
        }
        switch decision {
        case .lent(let lease, let connect):
            if let connect { scheduleConnect(connect) }
            onLease(.success(lease))
            return false
        case .work(let work, let waits):
            run(work)
            return waits
        }
    }

    /// Calls `onConnection` once a connection to the endpoint is ready, without taking a stream: at once when one
    /// is, else when one becomes ready (connecting if none is on its way), or with an error as ``acquire(id:deadline:_:)``
    /// fails (its deadline, shutdown, ``cancelWaiter(_:)``, or at once when the endpoint has been unreachable for a
    /// whole send time). A caller with much to send asks this first, so that it commits nothing to an endpoint it
    /// cannot reach. - Returns: whether the caller waits (`onConnection` not called yet).
    @discardableResult
    func awaitConnection(id waiterID: Int, deadline: NIODeadline, _ onConnection: @escaping ConnectionHandler) -> Bool {
        let (work, waits) = state.withLock { state -> (Work, Bool) in
            state.waiters[waiterID] = Waiter(handler: .connection(onConnection), deadline: deadline)
            let action = state.machine.awaitConnection(waiterID, now: .now)
            return (resolve(action, &state), action.startDeadline == waiterID)
        }
        run(work)
        return waits
    }

    /// Ends a waiting ``acquire(id:deadline:_:)`` with `CancellationError`; nothing happens when it is not waiting.
    func cancelWaiter(_ id: Int) {
        handle { $0.waiterCancelled(id) }
    }

    /// Hands a stream back; the next waiter gets it.
    func release(_ lease: ConnectionLease) {
        handle { $0.release(lease.connectionID) }
    }

    /// Stops lending the lease's connection and closes it once its streams finish: APNs refuses it (a second
    /// provider token within 20 minutes). The pool opens a new one in its place.
    func retire(_ lease: ConnectionLease) {
        handle { $0.retire(lease.connectionID) }
    }

    // MARK: Running actions

    private func handle(_ event: (inout StateMachine) -> StateMachine.Action) {
        run(decide(event))
    }

    private func decide(_ event: (inout StateMachine) -> StateMachine.Action) -> Work {
        state.withLock { state in resolve(event(&state.machine), &state) }
    }

    /// Under the lock: takes the handlers of the waiters the action ends out of the table, and starts the deadline
    /// timer of a new waiter (here, so that it is in the table before its waiter can be served or cancelled).
    private func resolve(_ action: StateMachine.Action, _ state: inout State) -> Work {
        var work = Work(connect: action.connect, opened: action.opened, drain: action.drain, close: action.close)
        for lend in action.lend {
            guard let waiter = state.waiters.removeValue(forKey: lend.waiterID) else { continue }
            if let timer = waiter.deadlineTimer { work.cancelTimers.append(timer) }
            guard case .lease(let onLease) = waiter.handler else { continue }
            work.served.append((onLease, lend.lease))
        }
        for waiterID in action.connected {
            guard let waiter = state.waiters.removeValue(forKey: waiterID) else { continue }
            if let timer = waiter.deadlineTimer { work.cancelTimers.append(timer) }
            guard case .connection(let onConnection) = waiter.handler else { continue }
            work.connected.append(onConnection)
        }
        for failure in action.fail {
            guard let waiter = state.waiters.removeValue(forKey: failure.waiterID) else { continue }
            if let timer = waiter.deadlineTimer { work.cancelTimers.append(timer) }
            work.failed.append((waiter.handler, Self.error(failure.reason)))
        }
        if let waiterID = action.startDeadline, let deadline = state.waiters[waiterID]?.deadline {
            state.waiters[waiterID]?.deadlineTimer = eventLoopGroup.any().scheduleTask(deadline: deadline) { [self] in
                self.handle { $0.waiterTimedOut(waiterID) }
            }
        }
        return work
    }

    private static func error(_ reason: StateMachine.WaiterFailure) -> any Error {
        switch reason {
        case .shutDown: APNsClientError.shutDown
        case .timedOut(let lastConnectError): APNsClientError.timedOut(waitingForConnection: lastConnectError)
        case .unreachable(let lastConnectError): APNsClientError.unreachable(lastConnectError: lastConnectError)
        case .cancelled: CancellationError()
        }
    }

    private func run(_ work: Work) {
        for timer in work.cancelTimers { timer.cancel() }
        if let plan = work.connect { scheduleConnect(plan) }
        if let lease = work.opened { watch(lease) }
        for lease in work.drain {
            lease.channel.eventLoop.execute { lease.handler.value.drainAndClose() }
        }
        for lease in work.close { lease.channel.close(promise: nil) }
        for (onLease, lease) in work.served { onLease(.success(lease)) }
        for onConnection in work.connected { onConnection(.success(())) }
        for (handler, error) in work.failed { handler.fail(error) }
    }

    // MARK: Connecting

    /// Starts the planned connect after the back-off the recent failures call for, on the loop the plan names.
    ///
    /// Not `any()`: called from a loop, as it is when a connection opens and the next is planned, that is the
    /// calling loop, and every connection ended up on one thread while the others idled. Not `next()` either: the
    /// group's turn is shared with everything else on it (an in-process simulator's accepted connections take every
    /// other one), so the pool's connections could still all land on one loop.
    private func scheduleConnect(_ plan: StateMachine.ConnectPlan) {
        let loop = loops[plan.loop]
        if plan.delay == .zero {
            connect(plan.connectionID, on: loop)
        } else {
            loop.scheduleTask(in: plan.delay.timeAmount) { [self] in self.connect(plan.connectionID, on: loop) }
        }
    }

    private func connect(_ id: Int, on loop: any EventLoop) {
        // A connect scheduled (after a back-off) before shutdown must not open a connection after it.
        guard state.withLock({ $0.machine.startConnect(id) }) else { return }
        let endpoint = configuration.endpoint
        let settings = APNsConnectionHandler.Settings(
            authority: endpoint.port == 443 ? endpoint.host : "\(endpoint.host):\(endpoint.port)",
            idlePingInterval: configuration.idlePingInterval.timeAmount,
            pingTimeout: configuration.pingTimeout.timeAmount)
        let sslContext = self.sslContext
        let serverHostname = ClientTLS.serverHostname(endpoint.host)
        EndpointConnector.connect(on: loop, host: endpoint.host, port: endpoint.port, proxy: configuration.proxy, timeout: .seconds(10)) {
            [self] channel in
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
            try pipeline.addHandler(APNsConnectionHandler(id: id, settings: settings, delegate: self, allocator: channel.allocator))
        }
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
                case .success(let lease): self.handle { $0.connected(lease.connectionID, lease: lease) }
                case .failure(let error): self.connectFailed(id, error)
                }
            }
    }

    /// A new connection the pool keeps: counted, its close reported, and its setup bounded in time.
    private func watch(_ lease: ConnectionLease) {
        metrics.connectionOpened()
        logger.debug("APNs connection open", metadata: ["connection": "\(lease.connectionID)"])
        lease.channel.closeFuture.whenComplete { [self] _ in self.closed(lease.connectionID) }
        // TLS and the server's first SETTINGS must follow within the connect timeout, or the slot is given back.
        lease.channel.eventLoop.scheduleTask(in: .seconds(10)) { [self] in
            let work = self.decide { $0.setupTimedOut(lease.connectionID) }
            if !work.close.isEmpty {
                self.logger.warning("APNs connection never became ready (TLS or SETTINGS missing)")
            }
            self.run(work)
        }
    }

    private func connectFailed(_ id: Int, _ error: any Error) {
        let work = decide { $0.connectFailed(id, description: "\(error)") }
        metrics.connectFailed()
        logger.warning("APNs connect failed", metadata: ["endpoint": "\(configuration.endpoint.host):\(configuration.endpoint.port)", "error": "\(error)"])
        run(work)
    }

    private func closed(_ id: Int) {
        let work = decide { $0.closed(id) }
        metrics.connectionClosed()
        logger.debug("APNs connection closed", metadata: ["connection": "\(id)"])
        run(work)
    }

    // MARK: APNsConnectionDelegate (called on the connection's event loop)

    func connection(_ id: Int, maxConcurrentStreamsChanged value: Int) {
        handle { $0.settingsReceived(id, maxStreams: value) }
    }

    func connection(_ id: Int, failedWith error: any Error) {
        // A TLS handshake refused (a CA that is not the server's, a certificate it will not take) is said as a refused
        // connect is: otherwise each of the app's notifications timed out with nothing in the log to say why.
        guard state.withLock({ $0.machine.setupFailed(id, description: "\(error)") }) else { return }
        logger.warning(
            "APNs connection failed before its first answer",
            metadata: ["endpoint": "\(configuration.endpoint.host):\(configuration.endpoint.port)", "error": "\(error)"])
    }

    func connectionDraining(_ id: Int) {
        handle { $0.draining(id) }
    }

    func connectionAnswered(_ id: Int) {
        state.withLock { $0.machine.answered(id) }
    }

    // MARK: Shutdown

    /// Stops lending, fails waiters, lets in-flight streams finish and closes every connection.
    func shutdown() async {
        idleSweep.withLock { $0?.cancel() }
        let work = decide { $0.shutdown() }
        run(work)
        for lease in work.drain {
            let timer = lease.channel.eventLoop.scheduleTask(in: .seconds(10)) { lease.channel.close(promise: nil) }
            try? await lease.channel.closeFuture.get()
            timer.cancel()
        }
    }

    var openConnections: Int { state.withLock { $0.machine.openConnections } }

    /// The event loop of each open connection, in no order (for tests).
    var openConnectionEventLoops: [any EventLoop] {
        state.withLock { $0.machine.connections.values.compactMap { $0.lease?.channel.eventLoop } }
    }
}
