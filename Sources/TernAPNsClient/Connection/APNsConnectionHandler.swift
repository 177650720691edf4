import NIOCore
import NIOHPACK
import TernAPNs
import TernHTTP2

/// What one attempt on one stream came to.
enum StreamOutcome: Sendable {
    /// APNs answered (any status); with every header and the whole body when the request asked for them
    /// (``WireRequest/other``).
    case answered(APNsResponse, APNsFullAnswer?)
    /// The request was certainly not processed (above a GOAWAY's last stream id, or REFUSED_STREAM): send it again
    /// anywhere, at once.
    case unprocessed(String)
    /// The connection or stream failed after the request may have reached APNs.
    case failed(String)
    /// No answer within the attempt's time.
    case timedOut
}

/// A request ready for the wire: the `:path` and headers are rendered once per attempt.
struct WireRequest: Sendable {
    var path: String
    var headers: [(name: String, value: String)]
    var payload: [UInt8]
    /// When to give up waiting for the answer (``StreamOutcome/timedOut``).
    var deadline: NIODeadline
    /// Called once, on the connection's event loop, with what the attempt came to.
    var onOutcome: @Sendable (StreamOutcome) -> Void
    /// For a request other than a notification: its method, and how much of its answer to keep. Nil for a
    /// notification (POST, and an answer of a status and APNs' short JSON reason), so that its request stays as small.
    var other: OtherRequest? = nil
}

/// What a request other than a notification asks of the wire (a broadcast, a channel's management).
final class OtherRequest: Sendable {
    let method: String
    /// The most of the answer's body kept, all of whose headers are kept too.
    let largestAnswer: Int

    init(method: String, largestAnswer: Int) {
        self.method = method
        self.largestAnswer = largestAnswer
    }
}

/// What the pool needs to hear from a connection, on the connection's event loop.
protocol APNsConnectionDelegate: AnyObject, Sendable {
    /// The server's MAX_CONCURRENT_STREAMS changed (first SETTINGS, or later ones).
    func connection(_ id: Int, maxConcurrentStreamsChanged value: Int)
    /// GOAWAY arrived: take no new streams here.
    func connectionDraining(_ id: Int)
    /// The first answer on the connection arrived: it works (SETTINGS alone does not show that).
    func connectionAnswered(_ id: Int)
    /// The connection failed (TLS, HTTP/2) and is about to close.
    func connection(_ id: Int, failedWith error: any Error)
}

/// One HTTP/2 connection to APNs, on ``HTTP2ClientFraming`` directly above TLS.
///
/// Streams are dictionary entries, not NIO child channels: a push is two frames each way, and the client must stay
/// cheaper than the server it measures. The framing keeps the protocol state (stream ids, HPACK, flow control);
/// this handler ties streams to the attempts waiting for them, ends them at their deadlines, watches the
/// connection's health and reports to the pool.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Settings {
        var authority: String
        /// PING after this long without a frame from the server; close when the PING is not answered in time.
        var idlePingInterval: TimeAmount
        var pingTimeout: TimeAmount
    }

    private struct Pending {
        var onOutcome: @Sendable (StreamOutcome) -> Void
        var deadline: NIODeadline
    }

    let id: Int
    private let settings: Settings
    private weak var delegate: (any APNsConnectionDelegate)?
    private var context: ChannelHandlerContext?
    private var framing: HTTP2ClientFraming
    private var started = false
    private var streams: [UInt32: Pending] = [:]
    /// The streams whose request wants its whole answer (``OtherRequest``).
    private var answersKept: Set<UInt32> = []
    /// Set at GOAWAY (the server's) or at drain (ours): no new streams.
    private var goingAway = false
    private var pingTimer: Scheduled<Void>?
    private var awaitingPingAck = false
    private var readSinceLastPing = true
    private var closed = false
    private var sawSettings = false
    private var answered = false
    /// How this connection indexes the per-push headers (`apns-id`, `apns-expiration`, `apns-collapse-id`).
    private var perPushHeaders = PerPushHeaders()
    /// One timer for the whole connection, at the earliest deadline of a stream in flight (not one per stream).
    private var timeoutTimer: Scheduled<Void>?
    private var timeoutTimerDeadline: NIODeadline?

    init(id: Int, settings: Settings, delegate: any APNsConnectionDelegate, allocator: ByteBufferAllocator) {
        self.id = id
        self.settings = settings
        self.delegate = delegate
        self.framing = HTTP2ClientFraming(allocator: allocator)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        schedulePing(context: context)
        if context.channel.isActive { startConnection(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startConnection(context: context)
        context.fireChannelActive()
    }

    private func startConnection(context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        framing.start()
        writeOutput(context: context, flush: true)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        failAll(.failed("the connection closed"))
        pingTimer?.cancel()
        timeoutTimer?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        failAll(.failed("the connection closed with the request in flight"))
        pingTimer?.cancel()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        delegate?.connection(id, failedWith: error)
        context.close(promise: nil)
    }

    /// Opens a stream per request, writes them all and flushes once: one TLS record and one `write(2)` for a burst
    /// instead of one per push. Must run on the channel's event loop.
    func send(_ requests: [WireRequest]) {
        guard let context, !closed, !goingAway else {
            // The pool must stop lending this connection before the requests go elsewhere.
            delegate?.connectionDraining(id)
            let reason = closed || context == nil ? "the connection is closed" : "the connection is going away"
            for request in requests { request.onOutcome(.unprocessed(reason)) }
            return
        }
        for request in requests {
            let headers = perPushHeaders.requestHeaders(
                method: request.other?.method ?? "POST", path: request.path, headers: request.headers, authority: settings.authority)
            guard let streamID = framing.openStream(headers: headers, body: request.payload, largestAnswer: request.other?.largestAnswer) else {
                // The server's stream limit shrank under the pool's view of it: not sent, so it may go elsewhere.
                request.onOutcome(.unprocessed("the server's stream limit is reached"))
                continue
            }
            streams[streamID] = Pending(onOutcome: request.onOutcome, deadline: request.deadline)
            if request.other != nil { answersKept.insert(streamID) }
            armTimeout(at: request.deadline, context: context)
        }
        writeOutput(context: context, flush: true)
    }

    /// Takes no new streams and closes once nothing is in flight (graceful shutdown).
    func drainAndClose() {
        guard let context, !closed else { return }
        if !goingAway {
            goingAway = true
            framing.goAway()
            writeOutput(context: context, flush: true)
        }
        if streams.isEmpty { context.close(promise: nil) }
    }

    var inFlight: Int { streams.count }

    private func writeOutput(context: ChannelHandlerContext, flush: Bool) {
        if framing.output.readableBytes > 0 {
            context.write(wrapOutboundOut(framing.output), promise: nil)
            framing.output.clear()
        }
        if flush { context.flush() }
    }

    // MARK: Frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        readSinceLastPing = true
        // PING ACKs wait while the socket takes no more (the framing bounds how many).
        framing.setWritable(context.channel.isWritable)
        do {
            try framing.receive(&bytes)
        } catch {
            framing.goAway(code: error.code, debugData: Array(error.message.utf8.prefix(200)))
            writeOutput(context: context, flush: true)
            delegate?.connection(id, failedWith: error)
            context.close(promise: nil)
            return
        }
        while let event = framing.nextEvent() { handle(event, context: context) }
        // Frames the framing answers by itself (SETTINGS and PING acks, WINDOW_UPDATE) go out with the next flush.
        writeOutput(context: context, flush: false)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // The PING ACKs that waited for the socket go out now.
        framing.setWritable(context.channel.isWritable)
        if framing.output.readableBytes > 0 { writeOutput(context: context, flush: true) }
        context.fireChannelWritabilityChanged()
    }

    private func handle(_ event: HTTP2ClientFraming.Event, context: ChannelHandlerContext) {
        switch event {
        case .response(let streamID, let status, let headers, let body):
            guard let status else {
                finish(streamID, .failed("the stream ended without a :status"))
                return
            }
            let response = APNsResponse(
                status: status, apnsID: headers.first(name: "apns-id"), apnsUniqueID: headers.first(name: "apns-unique-id"),
                body: body)
            if !answered {
                answered = true
                delegate?.connectionAnswered(id)
            }
            // The whole answer only for a request that asked (kept aside, so a notification's costs no more).
            let full = !answersKept.isEmpty && answersKept.remove(streamID) != nil
                ? APNsFullAnswer(status: status, headers: headers.map { ($0.name, $0.value) }, body: body) : nil
            finish(streamID, .answered(response, full))
        case .reset(let streamID, let code):
            if code == HTTP2Wire.ErrorCode.refusedStream {
                finish(streamID, .unprocessed("the server refused the stream"))
            } else {
                finish(streamID, .failed("the server reset the stream (error code \(code))"))
            }
        case .goAway(let lastStreamID, let code, let debugData):
            goingAway = true
            // The pool hears first, so that the requests sent again below are not lent this connection once more, and
            // the replacement backs off if this one never answered.
            delegate?.connectionDraining(id)
            let reason = String(decoding: debugData, as: UTF8.self)
            // Streams above the last stream id were not processed: they go to another connection.
            for streamID in streams.keys where streamID > lastStreamID {
                finish(streamID, .unprocessed("GOAWAY (error code \(code)) \(reason)"))
            }
            if streams.isEmpty { context.close(promise: nil) }
        case .settings(let maxConcurrentStreams):
            if let maxConcurrentStreams {
                delegate?.connection(id, maxConcurrentStreamsChanged: maxConcurrentStreams)
            } else if !sawSettings {
                // No limit announced means no limit; 100 is what RFC 9113 suggests assuming.
                delegate?.connection(id, maxConcurrentStreamsChanged: 100)
            }
            sawSettings = true
        case .pingAcknowledged:
            awaitingPingAck = false
        }
    }

    private func finish(_ streamID: UInt32, _ outcome: StreamOutcome) {
        guard let pending = streams.removeValue(forKey: streamID) else { return }
        if !answersKept.isEmpty { answersKept.remove(streamID) }
        pending.onOutcome(outcome)
        if goingAway, streams.isEmpty, let context { context.close(promise: nil) }
    }

    private func failAll(_ outcome: StreamOutcome) {
        let all = streams
        streams = [:]
        answersKept = []
        for (_, pending) in all { pending.onOutcome(outcome) }
    }

    // MARK: Timeouts

    /// Makes sure the connection's timer fires no later than `deadline`.
    private func armTimeout(at deadline: NIODeadline, context: ChannelHandlerContext) {
        if let armed = timeoutTimerDeadline, armed <= deadline { return }
        timeoutTimer?.cancel()
        timeoutTimerDeadline = deadline
        timeoutTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.timeoutTimer = nil
            self.timeoutTimerDeadline = nil
            self.expireStreams()
        }
    }

    /// Ends every stream past its deadline and re-arms the timer for the earliest one left.
    private func expireStreams() {
        guard let context else { return }
        let now = NIODeadline.now()
        var expired: [UInt32] = []
        var next: NIODeadline?
        for (streamID, pending) in streams {
            if pending.deadline <= now {
                expired.append(streamID)
            } else if next == nil || pending.deadline < next! {
                next = pending.deadline
            }
        }
        for streamID in expired {
            // Tell APNs we no longer wait, so the stream's slot frees on both sides.
            framing.reset(streamID: streamID)
            finish(streamID, .timedOut)
        }
        writeOutput(context: context, flush: !expired.isEmpty)
        if let next { armTimeout(at: next, context: context) }
    }

    // MARK: Health

    /// Apple's advice: check a quiet connection with PING. No answer within the timeout closes it, and the pool
    /// replaces it.
    private func schedulePing(context: ChannelHandlerContext) {
        pingTimer = context.eventLoop.assumeIsolated().scheduleTask(in: settings.idlePingInterval) { [self] in
            guard !self.closed, let context = self.context else { return }
            if self.awaitingPingAck {
                context.close(promise: nil)
                return
            }
            if !self.readSinceLastPing || self.streams.isEmpty {
                self.awaitingPingAck = true
                self.framing.ping(0x7465_726e)
                self.writeOutput(context: context, flush: true)
                context.eventLoop.assumeIsolated().scheduleTask(in: self.settings.pingTimeout) {
                    if self.awaitingPingAck, !self.closed { self.context?.close(promise: nil) }
                }
            }
            self.readSinceLastPing = false
            self.schedulePing(context: context)
        }
    }
}

/// How a connection indexes the per-push headers. APNs wants each indexed the first time (its name goes into the
/// dynamic table) and without indexing after that, so that values which differ from request to request do not churn
/// its small table. An `apns-id` differs every time. A collapse id or an expiration is one value for a whole push,
/// whose notifications go one after another: when one repeats the value of the connection's previous request, it is
/// indexed, so that from its third request on a fan-out sends one byte from the table instead of the value (36 bytes
/// for Tern's default collapse id, the push id). Values that alternate are never indexed after their first.
struct PerPushHeaders {
    private var idSent = false
    private var expiration = RepeatedValue()
    private var collapseID = RepeatedValue()

    /// A header that is often the same from one request to the next: indexed the first time and whenever it repeats.
    private struct RepeatedValue {
        /// The value the connection sent last; nil before the first.
        private var last: String?

        mutating func indexing(for value: String) -> HPACKIndexing {
            defer { last = value }
            return last == nil || value == last ? .indexable : .nonIndexable
        }
    }

    /// A request's header block, with the indexing APNs asks for: the path (it holds the token) never indexed; the
    /// `apns-id` indexed the first time on the connection and not after; a collapse id or an expiration indexed the
    /// first time and whenever it repeats the previous one; everything else indexed.
    mutating func requestHeaders(
        method: String = "POST", path: String, headers requestHeaders: [(name: String, value: String)], authority: String
    ) -> HPACKHeaders {
        func id() -> HPACKIndexing {
            defer { idSent = true }
            return idSent ? .nonIndexable : .indexable
        }
        var headers = HPACKHeaders()
        headers.reserveCapacity(requestHeaders.count + 4)
        headers.add(name: ":method", value: method)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        headers.add(name: ":path", value: path, indexing: .nonIndexable)
        for (name, value) in requestHeaders {
            let indexing: HPACKIndexing =
                switch name {
                case "apns-id": id()
                case "apns-expiration": expiration.indexing(for: value)
                case "apns-collapse-id": collapseID.indexing(for: value)
                default: .indexable
                }
            headers.add(name: name, value: value, indexing: indexing)
        }
        return headers
    }
}
