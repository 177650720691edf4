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
    /// over again.
    func handled(_ id: String) async {
        _ = seen.firstSighting(of: id)
        await acknowledge(id)
    }

    /// The app took `id` from the stream (or opened it): tell the server, now if connected, else on connecting.
    func acknowledge(_ id: String) async {
        acks.add(id)
        await flushAcks()
    }

    // MARK: The loop

    /// Keeps the channel while it is wanted, until cancelled (which closes the connection).
    func run() async {
        await withTaskCancellationHandler {
            await keep()
        } onCancel: {
            closeLive()
        }
    }

    private func keep() async {
        var delay: TimeInterval?
        while !Task.isCancelled {
            let (wanted, stopped, starts) = flags.withLock { ($0.wanted, $0.stopped, $0.starts) }
            if starts != self.starts {
                self.starts = starts
                schedule.started()
                delay = nil
            }
            guard wanted else {
                state = stopped.map { .stopped($0) } ?? .idle
                delay = nil
                await bell.wait()
                continue
            }
            if let wait = delay {
                delay = nil
                state = .waiting(retryIn: wait)
                await bell.wait(upTo: .wait(seconds: wait))
                continue
            }
            guard let device = await credentials() else {
                state = .idle
                await bell.wait()
                continue
            }
            delay = await connectAndRead(device)
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
        live.withLock { if $0 === connection { $0 = nil } }
        // Closed from here (background): no reconnecting.
        guard flags.withLock({ $0.wanted }) else { return nil }
        let lasted = ContinuousClock.now - opened
        let seconds = Double(lasted.components.seconds) + Double(lasted.components.attoseconds) / 1e18
        return follow(schedule.closed(code: end.code, reason: end.reason, lasted: seconds, unit: random()))
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
        guard let connection = live.withLock({ $0 }), !acks.isEmpty else { return }
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
