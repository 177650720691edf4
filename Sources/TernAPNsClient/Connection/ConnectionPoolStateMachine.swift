import DequeModule

/// Every decision of ``APNsConnectionPool``, as a value with no I/O: no channels, locks, clocks or timers.
///
/// The pool feeds it what happened (a caller asks for a stream, or only for a connection to be ready, a stream comes
/// back, a connect succeeds or fails, the server's SETTINGS or GOAWAY arrive, a connection closes, a waiter's deadline
/// passes, shutdown) and gets an ``Action`` back that says what to do about it: lend connections to waiters, tell
/// waiters a connection is ready, fail waiters, time a new waiter, open a connection after a back-off, drain or close
/// connections. The pool runs those actions after it lets go of
/// its lock, so no callback ever runs under it, and the decisions can be tested without sockets or sleeping.
///
/// Connections stay here from the moment a connect is planned until they close:
/// `connecting` (the socket, TLS and the server's first SETTINGS on their way, in any order) → `ready` (lendable
/// while a stream is free under MAX_CONCURRENT_STREAMS) → `draining` (GOAWAY or retired: its streams finish, it
/// takes no new ones). `Lease` is what the pool lends for a connection; the machine only keeps and returns it.
///
/// A connection counts as working, which starts the reconnect back-off over, only once it has carried an answer;
/// one that closes or sends GOAWAY before any answer counts as a failed connect. A peer that completed the
/// handshake, sent SETTINGS and then refused every request (GOAWAY with last stream 0, or a close) made a pool of
/// one reconnect 14-20 times a second while the back-off restarted at every SETTINGS; APNs treats connecting that
/// often as an attack.
struct ConnectionPoolStateMachine<Lease> {
    /// Where a connection is in its life; only `ready` connections are lent.
    enum ConnectionState: Equatable, Sendable {
        case connecting
        case ready
        case draining
    }

    /// One connection as the pool's decisions see it.
    struct Connection {
        var state: ConnectionState = .connecting
        /// Which of the pool's event loops it runs on (an index into them).
        var loop: Int
        /// Known once the socket is connected; the connection counts as open from then, even before it is ready.
        var lease: Lease?
        var maxStreams = 1
        var inFlight = 0
        var settingsReceived = false
        /// The server answered a request on it: it works.
        var answered = false
        /// Closing or draining before any answer was counted as a failure (once per connection).
        var failureCounted = false
        /// Why the connection failed before it answered, for the error of callers that time out waiting.
        var setupFailure: String?
        /// Lent a stream since the last look for idle connections (``sweepIdle()``); a new connection counts as lent.
        var lentSinceSweep = true

        /// Ready once connected and the server's first SETTINGS said how many streams it takes, in either order.
        mutating func becomeReadyIfComplete() -> Bool {
            guard state == .connecting, lease != nil, settingsReceived else { return false }
            state = .ready
            return true
        }
    }

    /// Why a waiter ends without a stream.
    enum WaiterFailure: Equatable, Sendable {
        case shutDown
        /// Its deadline passed; carries the last connect error, because "timed out" alone hides a refused
        /// connection or a bad certificate.
        case timedOut(lastConnectError: String?)
        /// No connection has worked for longer than a caller may wait (``failFastAfter``): it is not queued to wait
        /// out its own deadline as well. Carries the last connect error.
        case unreachable(lastConnectError: String?)
        case cancelled
    }

    /// A stream on `connectionID` for the waiter `waiterID`; its `inFlight` is already counted.
    struct Lend {
        var waiterID: Int
        var connectionID: Int
        var lease: Lease
    }

    /// The waiter `waiterID` ends without a stream, for `reason`.
    struct Failure: Equatable, Sendable {
        var waiterID: Int
        var reason: WaiterFailure
    }

    /// Open connection `connectionID` on event loop `loop` (an index into the pool's) after `delay`; `afterFailures`
    /// is the count of failed connects the delay is for.
    struct ConnectPlan: Equatable, Sendable {
        var connectionID: Int
        var loop: Int
        var afterFailures: Int
        var delay: Duration
    }

    /// What the pool does about one event, once its lock is released. Several parts can be set at once (a release
    /// can serve several waiters; a retire drains one connection and plans its replacement).
    struct Action {
        /// Waiters that get a stream now, in the order they asked.
        var lend: [Lend] = []
        /// Waiters of ``awaitConnection(_:now:)`` told that a connection is ready (they take no stream).
        var connected: [Int] = []
        var fail: [Failure] = []
        /// The waiter that asked and now waits: start the timer for its deadline.
        var startDeadline: Int?
        var connect: ConnectPlan?
        /// A connection that just connected and stays: count it, watch for its close and bound its setup time.
        var opened: Lease?
        /// Take no new streams, let the open ones finish, then close.
        var drain: [Lease] = []
        var close: [Lease] = []

        static var none: Action { Action() }
    }

    let poolSize: Int
    /// Once connects have failed and no connection has worked for this long (a caller's whole send time), a caller
    /// that would have to wait fails at once instead. A brief outage is waited out; a long one does not keep every
    /// caller waiting out its deadline (holding whatever it holds meanwhile: the server's in-flight permits, shared
    /// by every app). Nil: callers always wait.
    let failFastAfter: Duration?
    /// The event loops the connections are spread over.
    let loops: Int
    let backoff: APNsClientConfiguration.Backoff
    /// `host:port`, the prefix of connect errors.
    let endpoint: String

    private(set) var connections: [Int: Connection] = [:]
    /// Waiter ids in the order they asked; the first gets the next free stream.
    private(set) var waiters: Deque<Int> = []
    /// Callers of ``awaitConnection(_:now:)`` waiting for any connection to be ready.
    private(set) var connectionWaiters: [Int] = []
    private(set) var consecutiveFailures = 0
    private(set) var lastConnectError: String?
    /// When a caller first found connects failing and no connection ready; cleared once a connection works.
    private(set) var unreachableSince: ContinuousClock.Instant?
    /// A caller waited its whole deadline while connects failed and no connection was ready: the endpoint has been
    /// unreachable for a caller's whole send time, whenever the pool first noticed. Cleared once a connection works.
    private(set) var waitedInVain = false
    /// One connect at a time: a burst of callers must not open `poolSize` connections to a host that is down.
    private(set) var connectScheduled = false
    private(set) var isShutDown = false
    private var nextConnectionID = 1

    init(poolSize: Int, loops: Int = 1, backoff: APNsClientConfiguration.Backoff, endpoint: String, failFastAfter: Duration? = nil) {
        self.poolSize = poolSize
        self.failFastAfter = failFastAfter
        self.loops = max(1, loops)
        self.backoff = backoff
        self.endpoint = endpoint
    }

    /// Connections whose socket is connected and not closed yet (including those still setting up or draining).
    var openConnections: Int { connections.values.filter { $0.lease != nil }.count }

    // MARK: Callers

    /// A caller wants a stream: lent at once if one is free, else it waits (and the pool may grow), or, when the
    /// endpoint has been unreachable for longer than ``failFastAfter`` at `now`, fails at once (a connect is still
    /// planned, after its back-off, to find the endpoint back).
    mutating func acquire(_ waiterID: Int, now: ContinuousClock.Instant? = nil) -> Action {
        if isShutDown { return Action(fail: [Failure(waiterID: waiterID, reason: .shutDown)]) }
        if let (id, lease, connect) = lendAtOnce() {
            return Action(lend: [Lend(waiterID: waiterID, connectionID: id, lease: lease)], connect: connect)
        }
        if failsFast(now: now) {
            return Action(fail: [Failure(waiterID: waiterID, reason: .unreachable(lastConnectError: lastConnectError))], connect: planConnect())
        }
        waiters.append(waiterID)
        return Action(startDeadline: waiterID, connect: planConnect())
    }

    /// A caller wants to know that the endpoint can be reached before it commits work to it, without taking a
    /// stream: told at once when a connection is ready, else when one becomes ready (a connect is planned if none is
    /// on its way), or failed like ``acquire(_:now:)`` at its deadline, at shutdown, or at once when the endpoint has
    /// been unreachable for longer than ``failFastAfter``.
    mutating func awaitConnection(_ waiterID: Int, now: ContinuousClock.Instant? = nil) -> Action {
        if isShutDown { return Action(fail: [Failure(waiterID: waiterID, reason: .shutDown)]) }
        if hasReadyConnection { return Action(connected: [waiterID]) }
        if failsFast(now: now) {
            return Action(fail: [Failure(waiterID: waiterID, reason: .unreachable(lastConnectError: lastConnectError))], connect: planConnect())
        }
        connectionWaiters.append(waiterID)
        return Action(startDeadline: waiterID, connect: planConnect())
    }

    /// Whether a caller that would have to wait fails at once instead: connects fail, no connection is ready, and
    /// that has lasted longer than ``failFastAfter`` since the pool first noticed at `now`, or a caller already
    /// waited its whole deadline for a connection in vain.
    private mutating func failsFast(now: ContinuousClock.Instant?) -> Bool {
        guard let failFastAfter, consecutiveFailures > 0, !hasReadyConnection else { return false }
        if waitedInVain { return true }
        guard let now else { return false }
        let since = unreachableSince ?? now
        unreachableSince = since
        return since.duration(to: now) > failFastAfter
    }

    private var hasReadyConnection: Bool { connections.values.contains { $0.state == .ready } }

    /// The part of ``acquire(_:)`` for a caller that can have a stream at once, which is nearly every caller of a
    /// busy client, told without the arrays of an ``Action`` or a waiter id: the least loaded ready connection, and
    /// a connect planned when that leaves every open connection busy, so load spreads over up to `poolSize`
    /// connections. Nil, deciding nothing, when the caller would have to wait or fail.
    mutating func lendAtOnce() -> (connectionID: Int, lease: Lease, connect: ConnectPlan?)? {
        guard !isShutDown, let (id, lease) = takeLeastLoaded() else { return nil }
        return (id, lease, allBusy ? planConnect() : nil)
    }

    /// A stream on `connectionID` ended; the next waiters get what is free now.
    mutating func release(_ connectionID: Int) -> Action {
        connections[connectionID]?.inFlight -= 1
        return Action(lend: serveWaiters())
    }

    /// Stops lending `connectionID` and drains it (APNs refuses it: a second provider token within 20 minutes).
    mutating func retire(_ connectionID: Int) -> Action {
        guard let connection = connections[connectionID] else { return .none }
        var action = Action()
        if let lease = connection.lease { action.drain = [lease] }
        guard connection.state == .ready else { return action }
        connections[connectionID]?.state = .draining
        if !waiters.isEmpty { action.connect = planConnect() }
        return action
    }

    mutating func waiterTimedOut(_ waiterID: Int) -> Action {
        let action = failWaiter(waiterID, .timedOut(lastConnectError: lastConnectError))
        // It waited its whole deadline, and no connection was ready in that time (it would have been served).
        if !action.fail.isEmpty, consecutiveFailures > 0, !hasReadyConnection { waitedInVain = true }
        return action
    }

    mutating func waiterCancelled(_ waiterID: Int) -> Action {
        failWaiter(waiterID, .cancelled)
    }

    // MARK: Connections

    /// The back-off of a planned connect is over. False when the pool shut down meanwhile: then nothing opens.
    mutating func startConnect(_ connectionID: Int) -> Bool {
        guard isShutDown else { return true }
        connectScheduled = false
        connections.removeValue(forKey: connectionID)
        return false
    }

    /// The socket is connected (TLS and SETTINGS may still be on their way).
    mutating func connected(_ connectionID: Int, lease: Lease) -> Action {
        connectScheduled = false
        if isShutDown { connections.removeValue(forKey: connectionID) }
        guard !isShutDown, var connection = connections[connectionID] else { return Action(close: [lease]) }
        connection.lease = lease
        let ready = connection.becomeReadyIfComplete()
        connections[connectionID] = connection
        var action = Action(opened: lease)
        if ready {
            action.lend = serveWaiters()
            action.connected = tellConnectionWaiters()
        }
        return action
    }

    mutating func connectFailed(_ connectionID: Int, description: String) -> Action {
        connectScheduled = false
        connections.removeValue(forKey: connectionID)
        recordFailure(description)
        return replaceIfWaited()
    }

    /// The server's MAX_CONCURRENT_STREAMS, first or changed; it may make the connection ready or free streams.
    mutating func settingsReceived(_ connectionID: Int, maxStreams: Int) -> Action {
        guard var connection = connections[connectionID] else { return .none }
        connection.maxStreams = maxStreams
        connection.settingsReceived = true
        let ready = connection.becomeReadyIfComplete()
        connections[connectionID] = connection
        return Action(lend: serveWaiters(), connected: ready ? tellConnectionWaiters() : [])
    }

    /// The first answer on `connectionID`: the connection works, so the back-off starts over.
    mutating func answered(_ connectionID: Int) {
        guard connections[connectionID]?.answered == false else { return }
        connections[connectionID]?.answered = true
        connectionWorks()
    }

    /// TLS or HTTP/2 failed and the connection is about to close. Nothing to do yet: for a connection that has not
    /// answered, the reason is kept for the error of callers that time out, and the close that follows decides.
    /// - Returns: whether it is the connection's first failure before an answer (the pool says so in the log, once).
    @discardableResult
    mutating func setupFailed(_ connectionID: Int, description: String) -> Bool {
        guard connections[connectionID]?.answered == false else { return false }
        let first = connections[connectionID]?.setupFailure == nil
        connections[connectionID]?.setupFailure = description
        return first
    }

    /// The connection still is not ready at the end of its setup time: close it, which gives its slot back.
    mutating func setupTimedOut(_ connectionID: Int) -> Action {
        guard let connection = connections[connectionID], connection.state == .connecting, let lease = connection.lease
        else { return .none }
        return Action(close: [lease])
    }

    /// GOAWAY arrived: no new streams there. Before any answer, it counts as a failed connect, before the
    /// replacement is planned, so that the replacement backs off.
    mutating func draining(_ connectionID: Int) -> Action {
        guard let connection = connections[connectionID], connection.state != .draining else { return .none }
        connections[connectionID]?.state = .draining
        if !connection.answered {
            connections[connectionID]?.failureCounted = true
            recordFailure(connection.setupFailure ?? "the server sent GOAWAY before answering any request")
        }
        return replaceIfWaited()
    }

    mutating func closed(_ connectionID: Int) -> Action {
        // A connection that closed before it ever answered counts as a failed connect for the back-off.
        if let connection = connections.removeValue(forKey: connectionID), !connection.answered, !connection.failureCounted {
            recordFailure(
                connection.setupFailure
                    ?? (connection.state == .connecting
                        ? "the connection closed before TLS and HTTP/2 were set up"
                        : "the connection closed before answering any request"))
        }
        return replaceIfWaited()
    }

    /// A look for idle connections, once every idle timeout: a ready connection with nothing in flight that was lent
    /// no stream since the previous look has carried nothing for at least that long, and is closed (the pool shrinks
    /// to none for an app that sends nothing; its next notification opens one again). The others are marked for the
    /// next look. An APNs connection costs the provider a file descriptor and a TLS session, and APNs' advice is to keep
    /// one open across notifications, not across hours of silence: at most one connect per idle timeout is far from
    /// the rapid reconnecting it treats as an attack.
    mutating func sweepIdle() -> Action {
        guard !isShutDown else { return .none }
        var action = Action()
        for id in connections.keys.sorted() {
            guard var connection = connections[id], connection.state == .ready else { continue }
            if connection.inFlight == 0, !connection.lentSinceSweep, let lease = connection.lease {
                connection.state = .draining
                // Closed by choice: not a failed connect, whether or not it ever answered.
                connection.failureCounted = true
                action.drain.append(lease)
            } else {
                connection.lentSinceSweep = false
            }
            connections[id] = connection
        }
        return action
    }

    // MARK: Shutdown

    /// Fails every waiter and drains every connection; from now on acquires fail and planned connects do nothing.
    mutating func shutdown() -> Action {
        isShutDown = true
        let failed = (Array(waiters) + connectionWaiters).map { Failure(waiterID: $0, reason: .shutDown) }
        waiters.removeAll()
        connectionWaiters.removeAll()
        let open = connections.keys.sorted().compactMap { connections[$0]?.lease }
        return Action(fail: failed, drain: open)
    }

    // MARK: Decisions

    private mutating func failWaiter(_ waiterID: Int, _ reason: WaiterFailure) -> Action {
        // Not waiting any more (served, failed, or never here): the timer or the cancel lost a race, nothing to do.
        if let index = waiters.firstIndex(of: waiterID) {
            waiters.remove(at: index)
        } else if let index = connectionWaiters.firstIndex(of: waiterID) {
            connectionWaiters.remove(at: index)
        } else {
            return .none
        }
        return Action(fail: [Failure(waiterID: waiterID, reason: reason)])
    }

    /// Every caller of ``awaitConnection(_:now:)`` still waiting, told now that a connection is ready.
    private mutating func tellConnectionWaiters() -> [Int] {
        defer { connectionWaiters.removeAll() }
        return connectionWaiters
    }

    /// The ready connection with the fewest streams in flight and one free (the lowest id among equals), for `waiterID`.
    private mutating func lendLeastLoaded(to waiterID: Int) -> Lend? {
        takeLeastLoaded().map { id, lease in Lend(waiterID: waiterID, connectionID: id, lease: lease) }
    }

    /// The ready connection with the fewest streams in flight and one free (the lowest id among equals), that stream
    /// counted as taken.
    ///
    /// Runs for every notification sent, so it reads each connection's counts where they are: a `for (id, connection)`
    /// loop copied every connection, lease and all (four references to retain and release each), per notification.
    private mutating func takeLeastLoaded() -> (connectionID: Int, lease: Lease)? {
        var best: (index: Dictionary<Int, Connection>.Index, id: Int, inFlight: Int)?
        var index = connections.startIndex
        while index != connections.endIndex {
            let id = connections.keys[index]
            let inFlight = connections.values[index].inFlight
            if connections.values[index].state == .ready, inFlight < connections.values[index].maxStreams,
                best.map({ (inFlight, id) < ($0.inFlight, $0.id) }) ?? true
            {
                best = (index, id, inFlight)
            }
            connections.formIndex(after: &index)
        }
        guard let best, let lease = connections.values[best.index].lease else { return nil }
        connections.values[best.index].inFlight += 1
        connections.values[best.index].lentSinceSweep = true
        return (best.id, lease)
    }

    private mutating func serveWaiters() -> [Lend] {
        var served: [Lend] = []
        while let waiterID = waiters.first, let lend = lendLeastLoaded(to: waiterID) {
            waiters.removeFirst()
            served.append(lend)
        }
        return served
    }

    /// Every connection that takes new streams is ready and has at least one in flight.
    private var allBusy: Bool {
        connections.values.allSatisfy { $0.state == .draining || ($0.state == .ready && $0.inFlight > 0) }
    }

    /// A connection gone or going: open another only for callers that wait, not for an idle pool.
    private mutating func replaceIfWaited() -> Action {
        waiters.isEmpty && connectionWaiters.isEmpty ? .none : Action(connect: planConnect())
    }

    private mutating func planConnect() -> ConnectPlan? {
        guard !isShutDown, !connectScheduled else { return nil }
        // Counted in place: a busy pool asks on every lend, and a filtered copy would allocate each time.
        var open = 0
        for connection in connections.values where connection.state != .draining { open += 1 }
        guard open < poolSize else { return nil }
        connectScheduled = true
        let id = nextConnectionID
        nextConnectionID += 1
        let loop = leastUsedLoop()
        connections[id] = Connection(loop: loop)
        return ConnectPlan(
            connectionID: id, loop: loop, afterFailures: consecutiveFailures, delay: backoff.delay(afterFailures: consecutiveFailures))
    }

    /// The event loop with the fewest connections that take new streams (the lowest among equals): a pool's
    /// connections share the loops' threads evenly, and a replacement goes where the one it replaces left room.
    private func leastUsedLoop() -> Int {
        var used = Array(repeating: 0, count: loops)
        for connection in connections.values where connection.state != .draining { used[connection.loop] += 1 }
        return used.indices.min { (used[$0], $0) < (used[$1], $1) }!
    }

    private mutating func recordFailure(_ description: String) {
        consecutiveFailures += 1
        lastConnectError = "\(endpoint): \(description)"
    }

    /// The connection works: the back-off starts over and old connect errors no longer apply.
    private mutating func connectionWorks() {
        consecutiveFailures = 0
        unreachableSince = nil
        waitedInVain = false
        lastConnectError = nil
    }
}

extension ConnectionPoolStateMachine: Sendable where Lease: Sendable {}
extension ConnectionPoolStateMachine.Connection: Sendable where Lease: Sendable {}
extension ConnectionPoolStateMachine.Lend: Sendable where Lease: Sendable {}
extension ConnectionPoolStateMachine.Lend: Equatable where Lease: Equatable {}
extension ConnectionPoolStateMachine.Action: Sendable where Lease: Sendable {}
extension ConnectionPoolStateMachine.Action: Equatable where Lease: Equatable {}
