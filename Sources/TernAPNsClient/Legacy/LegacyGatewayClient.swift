import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import TernAPNs

/// Sends notifications over the legacy binary gateway on one long-lived TLS connection with a client certificate.
///
/// The gateway answers only failures: a 6-byte error response, after which it closes the connection and discards
/// whatever followed. So the client numbers every notification, writes them in batches and keeps what it wrote in a
/// replay buffer until ``LegacyClientConfiguration/replayWindow`` has passed. An error response settles the
/// notifications before the one it names as accepted and that one as rejected, and sends the ones after it again on
/// a new connection; status 10 (Shutdown) names the last one taken, so only what follows it goes again. A
/// connection that closes without a word has everything unsettled sent again.
///
/// The replay window of a notification starts when its bytes have left for the gateway (the write completed, which
/// NIOSSL allows only after the TLS handshake), not when it was handed to the channel: a gateway that accepts TCP and
/// never finishes the handshake hears nothing, so nothing on it may count as accepted. A connection whose writes do
/// not complete within ``LegacyClientConfiguration/connectTimeout`` is closed. A connection is fruitless unless it
/// settled a notification it carried (an error response naming an identifier the client never sent settles nothing);
/// reconnects after fruitless connections back off, and after ``LegacyClientConfiguration/maxConnectFailures`` of
/// them in a row the waiting notifications fail. From then on the gateway counts as unreachable (``LegacyReachability``):
/// what is handed over fails at once, and one connection is tried every `reconnectBackoff.maximum` for a caller, until
/// one completes its TLS handshake. ``waitForConnection(onWaiting:)`` lets a sender learn that before it commits work.
///
/// ```swift
/// let client = try LegacyGatewayClient(configuration: configuration)
/// let outcomes = await client.send(notifications)   // one LegacyOutcome per notification, in order
/// await client.shutdown()
/// ```
public final class LegacyGatewayClient: Sendable {
    public let configuration: LegacyClientConfiguration
    private let eventLoop: any EventLoop
    private let core: NIOLoopBoundBox<LegacyGatewayCore>
    private let shared: LegacyGatewayCore.Shared

    public init(
        configuration: LegacyClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "tern.apns.legacy")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        let sslContext = try ClientTLS.context(
            authentication: configuration.authentication, endpoint: configuration.endpoint, applicationProtocols: [])
        let eventLoop = eventLoopGroup.next()
        self.eventLoop = eventLoop
        let shared = LegacyGatewayCore.Shared()
        self.shared = shared
        self.core = NIOLoopBoundBox.makeBoxSendingValue(
            LegacyGatewayCore(configuration: configuration, sslContext: sslContext, eventLoop: eventLoop, shared: shared, logger: logger),
            eventLoop: eventLoop)
        eventLoop.execute { [core] in core.value.start() }
    }

    /// Sends `notifications` in order and returns one outcome each, in the same order, once every one is settled
    /// (at the latest a replay window after it was written). The client sets each notification's identifier.
    public func send(_ notifications: [LegacyNotification]) async -> [LegacyOutcome] {
        guard !notifications.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            eventLoop.execute { [core] in
                core.value.enqueue(notifications) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Waits until a connection to the gateway has completed its TLS handshake, opening one if none is, and sends
    /// nothing. Returns at once while one is ready. A sender with much to send asks first, so that it commits nothing
    /// (the permits a server shares between its apps, say) to a gateway it cannot reach.
    /// - Parameter onWaiting: called before the wait when no connection is ready yet, and not at all otherwise.
    /// - Throws: ``APNsClientError`` `connectionFailed` once the client gives up on the gateway
    ///   (``LegacyClientConfiguration/maxConnectFailures`` fruitless connections), and at once while it counts as
    ///   unreachable (``send(_:)`` then fails each notification at once too); `timedOut` when no connection is ready
    ///   within ``LegacyClientConfiguration/sendTimeout``, after which the gateway counts as unreachable; `shutDown`;
    ///   `CancellationError` when the task is cancelled while it waits.
    public func waitForConnection(onWaiting: () -> Void = {}) async throws {
        if Task.isCancelled { throw CancellationError() }
        if shared.ready.load(ordering: .acquiring) { return }
        onWaiting()
        let id = shared.waiterIDs.wrappingAdd(1, ordering: .relaxed).oldValue
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                eventLoop.execute { [core] in core.value.awaitConnection(id: id) { continuation.resume(with: $0) } }
                // Cancelled before it joined the waiters: the handler below ran first and found nothing to end.
                if Task.isCancelled { eventLoop.execute { [core] in core.value.cancelWaiter(id) } }
            }
        } onCancel: { [eventLoop, core] in
            eventLoop.execute { core.value.cancelWaiter(id) }
        }
    }

    /// Lets every notification already handed over settle, then closes the connection. Later sends fail.
    public func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            eventLoop.execute { [core] in core.value.shutdown { continuation.resume() } }
        }
    }

    /// Connections opened so far (for tests and metrics).
    public var connectionsOpened: Int {
        get async {
            await withCheckedContinuation { continuation in
                eventLoop.execute { [core] in continuation.resume(returning: core.value.connectionsOpened) }
            }
        }
    }
}

/// The client's state, on its event loop only.
final class LegacyGatewayCore {
    /// What the client reads without a hop to the loop.
    final class Shared: Sendable {
        /// A connection is open and has completed its TLS handshake.
        let ready = Atomic<Bool>(false)
        let waiterIDs = Atomic<Int>(0)
    }

    /// A caller of ``LegacyGatewayClient/waitForConnection(onWaiting:)``, and when it stops waiting.
    private struct Waiter {
        var resume: (Result<Void, any Error>) -> Void
        var deadline: Scheduled<Void>?
    }

    /// The notifications of one `send` call, and where their outcomes go.
    final class Batch {
        var outcomes: [LegacyOutcome?]
        var remaining: Int
        let done: ([LegacyOutcome]) -> Void

        init(count: Int, done: @escaping ([LegacyOutcome]) -> Void) {
            self.outcomes = Array(repeating: nil, count: count)
            self.remaining = count
            self.done = done
        }

        func settle(_ index: Int, _ outcome: LegacyOutcome) {
            guard outcomes[index] == nil else { return }
            outcomes[index] = outcome
            remaining -= 1
            if remaining == 0 { done(outcomes.map { $0 ?? .accepted }) }
        }
    }

    struct Entry {
        var identifier: UInt32
        var bytes: ByteBuffer
        var batch: Batch
        var index: Int
        /// When `send` handed it over (for ``LegacyClientConfiguration/sendTimeout``).
        var enqueuedAt: NIODeadline
        /// The write it went out in, and when it was handed to the channel.
        var run: UInt64 = 0
        var handedAt = NIODeadline.uptimeNanoseconds(0)
        /// When that write completed: the replay window starts here. `nil` until then.
        var writtenAt: NIODeadline?
    }

    /// What an error response means for the notifications written on its connection (oldest first), as a value.
    struct ErrorSettlement: Equatable {
        /// How many of the written notifications, from the oldest, it settles as accepted.
        var accepted: Int
        /// The outcome of the notification it names, when that one is still held.
        var named: LegacyOutcome?

        init(_ response: LegacyErrorResponse, written identifiers: some Collection<UInt32>) {
            if let position = identifiers.firstIndex(of: response.identifier) {
                accepted = identifiers.distance(from: identifiers.startIndex, to: position)
                // Status 10 names the last notification the gateway took; any other names the one it refused.
                named = response.status == .shutdown ? .accepted : .rejected(response.status)
            } else {
                // It names a notification already settled, or one never sent: everything held goes again.
                accepted = 0
                named = nil
            }
        }

        /// Whether the connection made progress: only an answer about a notification it carried is. One naming an
        /// identifier the client never sent (a confused or hostile gateway that answers every connection so) must
        /// not reset the count of fruitless connections, or the client reconnects at once, for ever.
        var isProgress: Bool { named != nil }
    }

    private enum Connection {
        case idle
        case connecting
        /// `closing`: an error response came; nothing more is written on it.
        case open(any Channel, generation: Int, closing: Bool)
        case waiting(Scheduled<Void>)
    }

    private let configuration: LegacyClientConfiguration
    private let sslContext: NIOSSLContext
    private let eventLoop: any EventLoop
    private let logger: Logger
    private var pending = CircularBuffer<Entry>()
    private var written = CircularBuffer<Entry>()
    /// How many of `written`, from the front, have their write completed. Invariant: `writtenAt` is set on exactly
    /// those (writes complete in order, and only they are settled by age or removed but by `takeWritten`).
    private var flushedCount = 0
    private var runs: UInt64 = 0
    private var connection = Connection.idle {
        didSet { shared.ready.store(isReady, ordering: .releasing) }
    }
    /// The open connection completed its TLS handshake.
    private var handshaken = false {
        didSet { shared.ready.store(isReady, ordering: .releasing) }
    }
    private var connectStartedAt = NIODeadline.uptimeNanoseconds(0)
    private var reachability: LegacyReachability
    private var waiters: [Int: Waiter] = [:]
    private let shared: Shared
    private var generation = 0
    private var nextIdentifier: UInt32 = 1
    private var fruitlessConnections = 0
    private var progressOnConnection = false
    private var lastProblem: String?
    private var sweep: RepeatedTask?
    private var shuttingDown = false
    private var drained: [() -> Void] = []
    private(set) var connectionsOpened = 0

    init(configuration: LegacyClientConfiguration, sslContext: NIOSSLContext, eventLoop: any EventLoop, shared: Shared, logger: Logger) {
        self.configuration = configuration
        self.sslContext = sslContext
        self.eventLoop = eventLoop
        self.shared = shared
        self.logger = logger
        self.reachability = LegacyReachability(probeInterval: configuration.reconnectBackoff.maximum.timeAmount)
    }

    private var isReady: Bool {
        guard handshaken, case .open(_, _, closing: false) = connection else { return false }
        return true
    }

    func start() {
        let interval = TimeAmount.nanoseconds(max(5_000_000, configuration.replayWindow.nanoseconds / 4))
        let core = NIOLoopBound(self, eventLoop: eventLoop)
        sweep = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in core.value.settleOld() }
    }

    // MARK: Sending

    func enqueue(_ notifications: [LegacyNotification], done: @escaping ([LegacyOutcome]) -> Void) {
        let batch = Batch(count: notifications.count, done: done)
        let now = NIODeadline.now()
        guard !shuttingDown else {
            for index in notifications.indices { batch.settle(index, .shutDown) }
            return
        }
        if case .failAtOnce(let reason, _) = admit(now: now) {
            for index in notifications.indices { batch.settle(index, .failed(reason)) }
            return
        }
        for (index, var notification) in notifications.enumerated() {
            notification.identifier = nextIdentifier
            nextIdentifier = nextIdentifier == .max ? 1 : nextIdentifier + 1
            do {
                let bytes = try notification.encoded(as: configuration.format)
                pending.append(
                    Entry(identifier: notification.identifier, bytes: ByteBuffer(bytes: bytes), batch: batch, index: index, enqueuedAt: now))
            } catch {
                batch.settle(index, .failed("not sent: \(error)"))
            }
        }
        pump()
    }

    /// Whether a caller that needs the gateway at `now` goes on or fails at once (``LegacyReachability``); a probe
    /// it is due starts a connection.
    private func admit(now: NIODeadline) -> LegacyReachability.Decision {
        let canConnect = if case .idle = connection { true } else { false }
        let decision = reachability.admit(now: now, canConnect: canConnect)
        if case .failAtOnce(_, probe: true) = decision {
            logger.debug("legacy gateway unreachable; trying one connection")
            connect()
        }
        return decision
    }

    /// A caller of ``LegacyGatewayClient/waitForConnection(onWaiting:)``: answered at once when a connection is
    /// ready, when the gateway counts as unreachable, or at shutdown; otherwise once a connection completes its
    /// handshake, the client gives up, or ``LegacyClientConfiguration/sendTimeout`` passes.
    func awaitConnection(id: Int, _ resume: @escaping (Result<Void, any Error>) -> Void) {
        if shuttingDown { return resume(.failure(APNsClientError.shutDown)) }
        if isReady { return resume(.success(())) }
        if case .failAtOnce(let reason, _) = admit(now: .now()) {
            return resume(.failure(APNsClientError.connectionFailed(reason)))
        }
        var waiter = Waiter(resume: resume)
        if let sendTimeout = configuration.sendTimeout {
            let core = NIOLoopBound(self, eventLoop: eventLoop)
            waiter.deadline = eventLoop.scheduleTask(in: sendTimeout.timeAmount) { core.value.waitedInVain(id: id) }
        }
        waiters[id] = waiter
        if case .idle = connection { connect() }
    }

    /// The caller `id` stopped waiting: its task was cancelled.
    func cancelWaiter(_ id: Int) {
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        waiter.deadline?.cancel()
        waiter.resume(.failure(CancellationError()))
    }

    /// The caller `id` waited its whole send time for a connection: the gateway counts as unreachable from now.
    private func waitedInVain(id: Int) {
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        let problem = lastProblem ?? "no connection completed its TLS handshake within \(configuration.sendTimeout ?? .zero)"
        if !isReady {
            reachability.gaveUp(problem, now: .now())
            // A connection that has not completed its handshake in a whole send time will not: the next is a probe's.
            if case .open(let channel, let generation, closing: false) = connection {
                connection = .open(channel, generation: generation, closing: true)
                channel.close(promise: nil)
            }
        }
        waiter.resume(.failure(APNsClientError(code: .timedOut, message: "no connection to the gateway in time; last problem: \(problem)")))
    }

    /// Tells every waiter how the wait ended.
    private func resumeWaiters(_ result: Result<Void, any Error>) {
        let all = waiters
        waiters.removeAll()
        for waiter in all.values {
            waiter.deadline?.cancel()
            waiter.resume(result)
        }
    }

    /// Writes what waits, as far as the replay buffer and the socket allow, connecting first if need be.
    func pump() {
        guard !pending.isEmpty else {
            // Callers waiting for a connection need one, with nothing to write yet.
            if !waiters.isEmpty, case .idle = connection { connect() }
            return checkDrained()
        }
        switch connection {
        case .idle:
            connect()
        case .connecting, .waiting:
            break
        case .open(let channel, let generation, let closing):
            guard !closing else { return }
            let now = NIODeadline.now()
            let core = NIOLoopBound(self, eventLoop: eventLoop)
            var wroteAny = false
            while !pending.isEmpty, written.count < configuration.replayCapacity, channel.isWritable {
                // Coalesce a run of notifications into one buffer: one write per run, one flush per pump.
                runs += 1
                let runNumber = runs
                var run = channel.allocator.buffer(capacity: 64 * 1024)
                while run.readableBytes < 60 * 1024, !pending.isEmpty, written.count < configuration.replayCapacity {
                    var entry = pending.removeFirst()
                    run.writeImmutableBuffer(entry.bytes)
                    entry.run = runNumber
                    entry.handedAt = now
                    entry.writtenAt = nil
                    written.append(entry)
                }
                // The write completes once its bytes are on the socket: after the TLS handshake, never before.
                let promise = eventLoop.makePromise(of: Void.self)
                promise.futureResult.whenSuccess { core.value.flushed(through: runNumber, generation: generation) }
                channel.write(run, promise: promise)
                wroteAny = true
            }
            if wroteAny { channel.flush() }
        }
    }

    /// The writes up to `run` on connection `generation` completed: their notifications' replay windows start.
    func flushed(through run: UInt64, generation: Int) {
        guard case .open(_, let current, _) = connection, current == generation else { return }
        let now = NIODeadline.now()
        while flushedCount < written.count {
            let position = written.index(written.startIndex, offsetBy: flushedCount)
            guard written[position].run <= run else { break }
            written[position].writtenAt = now
            flushedCount += 1
        }
    }

    /// Settles as accepted what has been written for a whole replay window without an error response; closes a
    /// connection whose writes do not complete; fails what waited past ``LegacyClientConfiguration/sendTimeout``.
    func settleOld() {
        let now = NIODeadline.now()
        let cutoff = now - configuration.replayWindow.timeAmount
        var settled = false
        while let first = written.first, let writtenAt = first.writtenAt, writtenAt <= cutoff {
            written.removeFirst()
            flushedCount -= 1
            first.batch.settle(first.index, .accepted)
            settled = true
        }
        if settled {
            noteProgress()
            pump()
        }
        closeIfStalled(now: now)
        failOverdue(now: now)
        checkDrained()
    }

    /// Closes the connection when its oldest unfinished write is older than the connect timeout (or its
    /// notification's send timeout), or, with nothing written, when its handshake has not completed a connect timeout
    /// after it was begun: the handshake never completed, or the gateway does not read. What it held goes again, and
    /// the connection counts as fruitless.
    private func closeIfStalled(now: NIODeadline) {
        guard case .open(let channel, let generation, closing: false) = connection else { return }
        guard flushedCount < written.count else {
            // Nothing written yet, as while a caller waits for a connection: one still without a handshake a connect
            // timeout after it was begun will not do.
            if !handshaken, connectStartedAt <= now - configuration.connectTimeout.timeAmount {
                lastProblem = "no TLS handshake within \(configuration.connectTimeout)"
                connection = .open(channel, generation: generation, closing: true)
                channel.close(promise: nil)
            }
            return
        }
        let oldest = written[written.index(written.startIndex, offsetBy: flushedCount)]
        let stalled = oldest.handedAt <= now - configuration.connectTimeout.timeAmount
        let overdue = configuration.sendTimeout.map { oldest.enqueuedAt <= now - $0.timeAmount } ?? false
        guard stalled || overdue else { return }
        let limit = stalled ? configuration.connectTimeout : configuration.sendTimeout ?? .zero
        lastProblem = "nothing written to the gateway left within \(limit) (no TLS handshake, or the gateway is not reading)"
        logger.debug("legacy gateway connection stalled", metadata: ["generation": "\(generation)"])
        connection = .open(channel, generation: generation, closing: true)
        channel.close(promise: nil)
    }

    /// Fails, as timed out, the notifications not written within ``LegacyClientConfiguration/sendTimeout``. `pending`
    /// is in the order `send` handed them over (what goes again goes back to the front), so the overdue are a prefix.
    private func failOverdue(now: NIODeadline) {
        guard let sendTimeout = configuration.sendTimeout else { return }
        let deadline = now - sendTimeout.timeAmount
        while let first = pending.first, first.enqueuedAt <= deadline {
            pending.removeFirst()
            first.batch.settle(
                first.index, .failed("timed out: not sent within \(sendTimeout)" + (lastProblem.map { "; last problem: \($0)" } ?? "")))
        }
    }

    private func noteProgress() {
        progressOnConnection = true
        fruitlessConnections = 0
        lastProblem = nil
    }

    // MARK: Connection

    private func connect() {
        connection = .connecting
        handshaken = false
        connectStartedAt = .now()
        generation += 1
        let generation = self.generation
        progressOnConnection = false
        let core = NIOLoopBound(self, eventLoop: eventLoop)
        let sslContext = self.sslContext
        let hostname = ClientTLS.serverHostname(configuration.endpoint.host)
        EndpointConnector.connect(
            on: eventLoop, host: configuration.endpoint.host, port: configuration.endpoint.port, proxy: configuration.proxy,
            timeout: configuration.connectTimeout.timeAmount
        ) { channel in
            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
            try channel.pipeline.syncOperations.addHandler(LegacyGatewayClientHandler(generation: generation, core: core))
        }
            .whenComplete { result in
                let core = core.value
                switch result {
                case .success(let channel):
                    core.connected(channel, generation: generation)
                case .failure(let error):
                    core.lastProblem = "cannot connect to \(core.configuration.endpoint.host):\(core.configuration.endpoint.port): \(error)"
                    core.connectionEnded(generation: generation)
                }
            }
    }

    private func connected(_ channel: any Channel, generation: Int) {
        guard generation == self.generation, case .connecting = connection else {
            channel.close(promise: nil)
            return
        }
        connectionsOpened += 1
        connection = .open(channel, generation: generation, closing: false)
        logger.debug("legacy gateway connected", metadata: ["generation": "\(generation)"])
        pump()
    }

    /// Connection `generation` completed its TLS handshake: the gateway can be reached, and whoever waited for that
    /// goes on.
    func handshakeCompleted(generation: Int) {
        guard case .open(_, let current, _) = connection, current == generation else { return }
        handshaken = true
        if reachability.problem != nil {
            logger.notice("legacy gateway reachable again")
        }
        reachability.reached()
        resumeWaiters(.success(()))
    }

    /// An error response on connection `generation`.
    func received(_ response: LegacyErrorResponse, generation: Int) {
        guard case .open(let channel, let current, _) = connection, current == generation else { return }
        connection = .open(channel, generation: generation, closing: true)
        let settlement = ErrorSettlement(response, written: written.lazy.map(\.identifier))
        for _ in 0..<settlement.accepted {
            let entry = written.removeFirst()
            entry.batch.settle(entry.index, .accepted)
        }
        if let outcome = settlement.named {
            let named = written.removeFirst()
            named.batch.settle(named.index, outcome)
        }
        if settlement.isProgress {
            noteProgress()
        } else {
            // It names a notification already settled (or one never sent): everything still held came after it.
            lastProblem =
                "the gateway answered status \(response.status) for identifier \(response.identifier), not one this connection carried"
            if response.status != .shutdown {
                logger.warning(
                    "legacy gateway rejected a notification outside the replay window; widen replayWindow",
                    metadata: ["status": "\(response.status)", "identifier": "\(response.identifier)"])
            }
        }
        let resend = takeWritten()
        requeueFront(resend)
        logger.debug(
            "legacy gateway error response",
            metadata: ["status": "\(response.status)", "identifier": "\(response.identifier)", "resending": "\(resend.count)"])
        channel.close(promise: nil)
    }

    /// The connection (or the attempt) `generation` is over: what it held unsettled goes again.
    func connectionEnded(generation: Int) {
        guard generation == self.generation else { return }
        switch connection {
        case .connecting, .open: break
        case .idle, .waiting: return
        }
        requeueFront(takeWritten())
        if !progressOnConnection {
            fruitlessConnections += 1
            if lastProblem == nil { lastProblem = "the gateway closed the connection without settling anything" }
        }
        connection = .idle
        if reachability.problem != nil, !progressOnConnection {
            // A connection tried while the gateway counts as unreachable did not work either: the next is tried for a
            // caller a probe interval on, and nothing waits meanwhile (callers fail at once).
            reachability.stillUnreachable(lastProblem)
            giveUp(reason: lastProblem ?? "no connection to the gateway")
            return checkDrained()
        }
        if fruitlessConnections >= configuration.maxConnectFailures {
            let reason = lastProblem ?? "no connection to the gateway"
            logger.warning(
                "legacy gateway unreachable; failing the notifications waiting, and those that come at once, until a connection works",
                metadata: ["waiting": "\(pending.count + waiters.count)", "problem": "\(reason)"])
            reachability.gaveUp(reason, now: .now())
            giveUp(reason: reason)
            return checkDrained()
        }
        guard !pending.isEmpty || !waiters.isEmpty else { return checkDrained() }
        let delay: TimeAmount = configuration.reconnectBackoff.delay(afterFailures: fruitlessConnections)
        if delay == .zero {
            connect()
        } else {
            let core = NIOLoopBound(self, eventLoop: eventLoop)
            connection = .waiting(eventLoop.scheduleTask(in: delay) {
                let core = core.value
                guard case .waiting = core.connection else { return }
                core.connection = .idle
                core.pump()
            })
        }
    }

    /// Fails whatever waits for the gateway: the notifications not written and the callers waiting for a connection.
    private func giveUp(reason: String) {
        while !pending.isEmpty {
            let entry = pending.removeFirst()
            entry.batch.settle(entry.index, .failed(reason))
        }
        resumeWaiters(.failure(APNsClientError.connectionFailed(reason)))
        fruitlessConnections = 0
        lastProblem = nil
    }

    private func takeWritten() -> [Entry] {
        defer {
            written.removeAll(keepingCapacity: true)
            flushedCount = 0
        }
        return Array(written)
    }

    private func requeueFront(_ entries: [Entry]) {
        for entry in entries.reversed() { pending.prepend(entry) }
    }

    // MARK: Shutdown

    func shutdown(_ done: @escaping () -> Void) {
        shuttingDown = true
        resumeWaiters(.failure(APNsClientError.shutDown))
        drained.append(done)
        checkDrained()
    }

    private func checkDrained() {
        guard shuttingDown, pending.isEmpty, written.isEmpty, !drained.isEmpty else { return }
        sweep?.cancel()
        sweep = nil
        switch connection {
        case .open(let channel, _, _): channel.close(promise: nil)
        case .waiting(let task): task.cancel()
        case .idle, .connecting: break
        }
        connection = .idle
        generation += 1
        let waiters = drained
        drained = []
        for waiter in waiters { waiter() }
    }
}

/// Reads the gateway's error response on one connection and reports the connection's end.
final class LegacyGatewayClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let generation: Int
    private let core: NIOLoopBound<LegacyGatewayCore>
    private var received: [UInt8] = []

    init(generation: Int, core: NIOLoopBound<LegacyGatewayCore>) {
        self.generation = generation
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard received.count < LegacyErrorResponse.byteCount else { return }
        received += buffer.readableBytesView.prefix(LegacyErrorResponse.byteCount - received.count)
        guard received.count == LegacyErrorResponse.byteCount else { return }
        if let response = try? LegacyErrorResponse(decoding: received) {
            core.value.received(response, generation: generation)
        } else {
            // Not an error response: the stream is not the gateway's.
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent { core.value.handshakeCompleted(generation: generation) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { core.value.pump() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.value.connectionEnded(generation: generation)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A gateway that closes after its error response often skips close_notify, or resets the connection with our
        // later writes unread: either says less than what came before.
        let unclean = (error as? NIOSSLError) == .uncleanShutdown
        let afterAnswer = received.count == LegacyErrorResponse.byteCount
        core.value.noteProblem("\(error)", keepingEarlier: unclean || afterAnswer)
        context.close(promise: nil)
    }
}

extension LegacyGatewayCore {
    func noteProblem(_ problem: String, keepingEarlier: Bool = false) {
        if keepingEarlier, lastProblem != nil { return }
        lastProblem = problem
    }
}
