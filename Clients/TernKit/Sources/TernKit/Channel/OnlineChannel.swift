import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where the online channel is, for the app to show or log (``Tern/events``).
public enum TernChannelState: Sendable, Equatable {
    /// Not wanted now (the app is in the background) or the device is not registered yet.
    case idle
    case connecting
    case connected
    /// The last attempt failed or the connection ended; the next attempt is this many seconds away.
    case waiting(retryIn: TimeInterval)
    /// Stopped until the app comes to the foreground again.
    case stopped(ChannelStop)
}

/// The device's own connection to Tern (README, "The online channel"): connected while the app is in the foreground
/// (or fetching after a wake push), reconnecting with jittered back-off, resuming after the last message it
/// received (`?after=SEQ`), acknowledging each message once the app took it, and handing each message id to the app
/// once, whether it came over the channel or through APNs.
///
/// The loop in ``run()`` is the only one that connects and reads; the app's calls (foreground, background, wake)
/// change flags and ring its bell.
actor OnlineChannel {
    private struct Flags {
        var foreground = false
        /// Wake pushes being fetched now.
        var wakes = 0
        /// Set when the channel stopped; the next `foreground` clears it.
        var stopped: ChannelStop?
        /// Counts the app's comings to the foreground: each one connects at once, whatever failed before.
        var starts = 0
        var wanted: Bool { (foreground || wakes > 0) && stopped == nil }
    }

    private let configuration: TernConfiguration.Channel
    private let client: TernClient
    private let transport: any ChannelTransport
    private let credentials: @Sendable () async -> DeviceCredentials?
    /// Registers the device again (forced); true if that worked.
    private let reregister: @Sendable () async -> Bool
    /// Told of each new message (the badge follows it).
    private let arrived: @Sendable (TernMessage) async -> Void
    private let report: @Sendable (TernEvent) -> Void
    private let random: @Sendable () -> Double

    let queue: MessageQueue
    private let flags = Locked(Flags())
    /// The open connection, reachable from the app's synchronous calls to close it.
    private let live = Locked<(any ChannelConnection)?>(nil)
    private let bell = Bell()
    /// Rung when an acknowledgement waits and there is no connection to send it on (see ``sendingAcks()``).
    private let ackBell = Bell()
    private var schedule: ReconnectSchedule
    private var seen: MessageDeduplicator
    private var acks: PendingAcks
    /// The highest sequence received: the next connection resumes after it.
    private(set) var lastSequence: Int64?
    /// The credentials ``lastSequence`` was counted under. Each device's messages are numbered from 1: a device made
    /// again (under a new id, or under the same one after the server deleted it) starts again, and either comes with a
    /// new secret. (A secret replaced for the same device only reads again what was not acknowledged, once.)
    private var sequenceOwner: DeviceCredentials?
    /// Messages received over the channel (new ones), since the start.
    private(set) var received = 0
    /// The app's comings to the foreground seen by the loop.
    private var starts = 0
    private var lastActivity = ContinuousClock.now
    /// Not before this may the channel connect again: the server's (or a proxy's) `Retry-After` on a refused upgrade.
    /// Unlike TernKit's own back-off, coming to the foreground again does not skip it: the server asked for it.
    private var serverRetryAt: ContinuousClock.Instant?
    private(set) var state: TernChannelState = .idle {
        didSet { if state != oldValue { report(.channel(state)) } }
    }

    init(
        configuration: TernConfiguration.Channel, client: TernClient, transport: any ChannelTransport,
        credentials: @escaping @Sendable () async -> DeviceCredentials?, reregister: @escaping @Sendable () async -> Bool,
        arrived: @escaping @Sendable (TernMessage) async -> Void, report: @escaping @Sendable (TernEvent) -> Void,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.configuration = configuration
        self.client = client
        self.transport = transport
        self.credentials = credentials
        self.reregister = reregister
        self.arrived = arrived
        self.report = report
        self.random = random
        queue = MessageQueue(capacity: configuration.messageBuffer)
        schedule = ReconnectSchedule(backoff: configuration.reconnect, stableAfter: configuration.stableAfter)
        seen = MessageDeduplicator(capacity: configuration.deduplicationWindow)
        acks = PendingAcks(limit: max(configuration.deduplicationWindow, ChannelFrame.maximumAckIDs))
    }

    // MARK: What the app says

    /// The app came to the foreground (connect) or went to the background (disconnect, unless fetching for a wake).
    nonisolated func setForeground(_ foreground: Bool) {
        let close = flags.withLock { flags -> Bool in
            flags.foreground = foreground
            if foreground {
                flags.stopped = nil
                flags.starts += 1
            }
            return !flags.wanted
        }
        if close { closeLive() }
        bell.ring()
    }

    /// Something the loop waits for changed (the device registered).
    nonisolated func poke() {
        bell.ring()
        ackBell.ring()
    }

    /// A wake push (`{"tern": {"wake": true}}`): connect, fetch until no message came for a moment, then go back to
    /// what the app's state says. - Returns: how many new messages arrived meanwhile.
    func wake() async -> Int {
        flags.withLock { $0.wakes += 1 }
        bell.ring()
        let start = ContinuousClock.now
        let before = received
        let limit = start + .seconds(configuration.wakeLimit)
        let quiet = Duration.seconds(configuration.wakeQuietPeriod)
        while ContinuousClock.now < limit, !Task.isCancelled, flags.withLock({ $0.stopped == nil }) {
            if state == .connected, ContinuousClock.now - lastActivity >= quiet { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let close = flags.withLock { flags -> Bool in
            flags.wakes -= 1
            return !flags.wanted
        }
        if close { closeLive() }
        bell.ring()
        return received - before
    }

    /// A message that came through APNs. - Returns: true if it is new (it goes to the app's stream), false if the
    /// app already has it.
    func receivedThroughAPNs(_ message: TernMessage) -> Bool {
        guard seen.firstSighting(of: message.id) else { return false }
        if !queue.offer(message) {
            // The app is not taking messages: this one comes again over the channel (nothing acknowledged it).
            seen.forget(message.id)
        }
        return true
    }

    /// The app has this message another way (the user opened its notification): acknowledge it, and do not hand it
    /// over again, neither when it comes later nor when it already waits in the buffer for the app's loop.
    func handled(_ id: String) async {
        _ = seen.firstSighting(of: id)
        queue.remove(id: id)
        await acknowledge(id)
    }

    /// The app took `id` from the stream (or opened it): tell the server, over the connection if there is one, else
    /// with a request (``sendingAcks()``).
    func acknowledge(_ id: String) async {
        acks.add(id)
        await flushAcks()
    }

    // MARK: The loop

    /// Keeps the channel while it is wanted, until cancelled (which closes the connection).
    func run() async {
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.keep() }
                group.addTask { await self.sendingAcks() }
            }
        } onCancel: {
            closeLive()
        }
    }

    private func keep() async {
        /// The end of TernKit's own back-off (after a failed attempt, or a connection that ended).
        var retryAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            let (wanted, stopped, starts) = flags.withLock { ($0.wanted, $0.stopped, $0.starts) }
            if starts != self.starts {
                // The app came to the foreground again: connect at once whatever failed before (but not before a
                // server's Retry-After: `serverRetryAt` stays).
                self.starts = starts
                schedule.started()
                retryAt = nil
            }
            guard wanted else {
                state = stopped.map { .stopped($0) } ?? .idle
                retryAt = nil
                await bell.wait()
                continue
            }
            if let until = [retryAt, serverRetryAt].compactMap({ $0 }).max(), until > .now {
                state = .waiting(retryIn: (until - .now).seconds)
                // What ends a back-off early: the app leaving (nothing to connect for) or coming to the foreground
                // again (which drops TernKit's own back-off above, and leaves the server's Retry-After). Not a ring
                // kept from before the wait began, a registration (`poke`) or a wake push: none of those makes the
                // server (or the network) ready sooner.
                await bell.wait(until: until) { [flags] in
                    flags.withLock { !$0.wanted || $0.starts != starts }
                }
                continue
            }
            retryAt = nil
            guard let device = await credentials() else {
                state = .idle
                await bell.wait()
                continue
            }
            if let delay = await connectAndRead(device) {
                retryAt = .now + .wait(seconds: delay)
            }
        }
        closeLive()
    }

    /// One connection, from connecting to its end. - Returns: how long to wait before the next, or nil to go on at
    /// once (or stop, as the flags now say).
    private func connectAndRead(_ device: DeviceCredentials) async -> TimeInterval? {
        state = .connecting
        if sequenceOwner != device {
            sequenceOwner = device
            lastSequence = nil
        }
        let request: URLRequest
        do {
            request = try client.channelRequest(device, after: lastSequence)
        } catch {
            return follow(.stop(.refused(error)))
        }
        let connection: any ChannelConnection
        do {
            connection = try await connect(request)
        } catch is ChannelTransportError {
            // The upgrade was refused; the same request without it says why.
            let refusal: TernError?
            do throws(TernError) {
                refusal = try await client.channelRefusal(device)
            } catch {
                refusal = error
            }
            if let refusal { report(.error(refusal)) }
            if let refusal, refusal.isTemporary, let after = refusal.retryAfter {
                serverRetryAt = .now + .wait(seconds: after)
            }
            return await decide(schedule.refused(refusal, unit: random()))
        } catch {
            return follow(schedule.couldNotConnect(unit: random()))
        }
        // Taken before the connection is reachable from `closeLive`, so a close from now on ends its waits.
        let epoch = queue.epoch
        live.withLock { $0 = connection }
        guard flags.withLock({ $0.wanted }) else {
            // The app went to the background while this connected.
            closeLive()
            return nil
        }
        schedule.opened()
        state = .connected
        let opened = ContinuousClock.now
        lastActivity = opened
        await flushAcks()
        // A connection can go silent without ending (a NAT or a proxy forgot it, the network froze): nothing is read
        // and nothing fails, so only a ping that is not answered shows it.
        let interval = pingInterval
        // A task of its own rather than a group's child: the reading loop below runs on this actor and awaits it, and
        // a group's body would have to leave the actor for every frame. It is bounded all the same: cancelled and
        // awaited once the loop ends, which closing the connection (or `closeLive()` on cancellation) ensures.
        let watchdog = Task { [queue] in
            await Self.keepAlive(connection, every: interval) { queue.interrupt() }
        }
        var end: (code: Int?, reason: String) = (nil, "")
        reading: while true {
            // Back-pressure: no frame is read while the app has a full buffer to take.
            guard await queue.waitForRoom(epoch: epoch) else { break reading }
            switch await connection.receive() {
            case .text(let text):
                lastActivity = .now
                await handle(text)
            case .closed(let code, let reason):
                end = (code, reason)
                break reading
            }
        }
        connection.close()
        watchdog.cancel()
        if await watchdog.value {
            end = (nil, "no pong within \(interval)")
        }
        live.withLock { if $0 === connection { $0 = nil } }
        // Acknowledgements the app makes from now on, and any this connection could not send, go by request.
        if !acks.isEmpty { ackBell.ring() }
        // Closed from here (background): no reconnecting.
        guard flags.withLock({ $0.wanted }) else { return nil }
        let lasted = (ContinuousClock.now - opened).seconds
        return follow(schedule.closed(code: end.code, reason: end.reason, lasted: lasted, unit: random()))
    }

    /// ``TernConfiguration/Channel/pingInterval``, between 1 s and 10 minutes (NaN: the default).
    private var pingInterval: Duration {
        let seconds = configuration.pingInterval
        return .wait(seconds: seconds.isNaN ? 30 : min(max(seconds, 1), 600))
    }

    /// Pings `connection` every `interval` until the task is cancelled (the connection ended), and closes it when a
    /// pong does not come within `interval`: `closing` first (it ends a wait for room in the buffer), then the
    /// connection (which ends its ``ChannelConnection/receive()`` and the unanswered ping).
    /// - Returns: true if it closed the connection for want of a pong.
    private static func keepAlive(
        _ connection: any ChannelConnection, every interval: Duration, closing: @escaping @Sendable () -> Void
    ) async -> Bool {
        enum Outcome: Sendable { case pong, ended, silent, cancelled }
        while true {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return false
            }
            let outcome = await withTaskGroup(of: Outcome.self) { group in
                group.addTask {
                    do {
                        try await connection.ping()
                        return .pong
                    } catch {
                        return .ended
                    }
                }
                group.addTask {
                    do {
                        try await Task.sleep(for: interval)
                        return .silent
                    } catch {
                        return .cancelled
                    }
                }
                let first = await group.next() ?? .cancelled
                if first == .silent {
                    closing()
                    connection.close()
                }
                group.cancelAll()
                return first
            }
            switch outcome {
            case .pong: continue
            case .silent: return true
            case .ended, .cancelled: return false
            }
        }
    }

    private func connect(_ request: URLRequest) async throws -> any ChannelConnection {
        let transport = self.transport
        let size = configuration.maximumFrameSize
        let timeout = configuration.connectTimeout
        return try await withThrowingTaskGroup(of: (any ChannelConnection)?.self) { group in
            group.addTask { try await transport.connect(request, maximumFrameSize: size) }
            group.addTask {
                try await Task.sleep(for: .wait(seconds: timeout))
                return nil
            }
            defer { group.cancelAll() }
            let first = try await group.next() ?? nil
            group.cancelAll()
            // A connection that opened just after the timer went off is closed, not left open.
            while let late = try? await group.next() { late?.close() }
            guard let connection = first else { throw URLError(.timedOut) }
            return connection
        }
    }

    private func decide(_ decision: ReconnectSchedule.Decision) async -> TimeInterval? {
        if decision == .register {
            // The server lost the device or refuses its secret: register again (under a new id if need be).
            return await reregister() ? nil : follow(schedule.couldNotConnect(unit: random()))
        }
        return follow(decision)
    }

    private func follow(_ decision: ReconnectSchedule.Decision) -> TimeInterval? {
        switch decision {
        case .reconnect(let after):
            return after
        case .register:
            return nil
        case .stop(let reason):
            flags.withLock { $0.stopped = reason }
            if case .refused(let error) = reason { report(.error(error)) }
            return nil
        }
    }

    private func handle(_ text: String) async {
        let message: TernMessage
        do throws(TernError) {
            guard case .message(let decoded) = try ChannelFrame.decode(text) else { return }
            message = decoded
        } catch {
            // Not acknowledged, so the server keeps it; said once per frame.
            report(.error(error))
            return
        }
        if let sequence = message.sequence { lastSequence = max(lastSequence ?? 0, sequence) }
        if seen.firstSighting(of: message.id) {
            received += 1
            queue.append(message)
            await arrived(message)
        } else if !queue.contains(id: message.id) {
            // Handed over before (through APNs, or before a reconnect): acknowledge again so it stops coming.
            await acknowledge(message.id)
        }
    }

    private func flushAcks() async {
        guard !acks.isEmpty else { return }
        guard let connection = live.withLock({ $0 }) else {
            // No connection (the app is in the background, or between connections): a request sends them. Kept in
            // memory until a connection opened, they would be lost with this object when iOS ends the app, and the
            // server would send the message again to the next launch.
            ackBell.ring()
            return
        }
        let ids = acks.takeAll()
        for frame in ChannelFrame.acks(ids) {
            do {
                try await connection.send(frame)
            } catch {
                // Sent again on the next connection (acknowledging twice is harmless).
                acks.add(contentsOf: ids)
                return
            }
        }
    }

    /// Sends the acknowledgements made while there is no connection with `POST …/devices/{id}/acks`, as a
    /// Notification Service Extension's receipt does (no connection is opened for them: the app may be in the
    /// background). They stay pending until the server took them; while they wait, a connection that opens sends
    /// them instead.
    private func sendingAcks() async {
        var failures = 0
        while !Task.isCancelled {
            guard live.withLock({ $0 == nil }), !acks.isEmpty, let device = await credentials() else {
                await ackBell.wait()
                continue
            }
            let ids = acks.takeAll()
            var unsent = ids[...]
            do throws(TernError) {
                while !unsent.isEmpty {
                    let chunk = Array(unsent.prefix(ChannelFrame.maximumAckIDs))
                    try await client.acknowledge(device, messageIDs: chunk)
                    unsent = unsent.dropFirst(chunk.count)
                }
                failures = 0
            } catch where error.isTemporary {
                // Kept for the next try, or for a connection that opens meanwhile (acknowledging twice is harmless).
                acks.add(contentsOf: Array(unsent))
                failures += 1
                let delay = max(error.retryAfter ?? 0, configuration.reconnect.delay(afterFailures: failures, unit: random()))
                await ackBell.wait(until: .now + .wait(seconds: delay))
            } catch {
                // Refused for good (asking again would be refused again): dropped. A message the server still holds
                // comes again on the next connection and is acknowledged then (``handle(_:)``).
                report(.error(error))
            }
        }
    }

    private nonisolated func closeLive() {
        queue.interrupt()
        live.withLock { $0 }?.close()
    }
}

/// Acknowledgements not sent yet, in order, without repeats, at most `limit` (the oldest go first: such a message
/// comes again and is acknowledged then).
struct PendingAcks {
    let limit: Int
    private var ids: [String] = []
    private var set: Set<String> = []

    init(limit: Int) {
        self.limit = limit
    }

    var isEmpty: Bool { ids.isEmpty }

    mutating func add(_ id: String) {
        guard set.insert(id).inserted else { return }
        ids.append(id)
        if ids.count > limit {
            set.remove(ids.removeFirst())
        }
    }

    mutating func add(contentsOf more: [String]) {
        for id in more { add(id) }
    }

    mutating func takeAll() -> [String] {
        defer {
            ids = []
            set = []
        }
        return ids
    }
}
