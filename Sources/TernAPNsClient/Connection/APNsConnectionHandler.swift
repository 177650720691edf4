import NIOCore
import NIOHPACK
import NIOHTTP2
import TernAPNs

/// What one attempt on one stream came to.
enum StreamOutcome: Sendable {
    /// APNs answered (any status).
    case answered(APNsResponse)
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
    var headers: [(String, String)]
    var payload: [UInt8]
    /// When to give up waiting for the answer (``StreamOutcome/timedOut``).
    var deadline: NIODeadline
    /// Called once, on the connection's event loop, with what the attempt came to.
    var onOutcome: @Sendable (StreamOutcome) -> Void
}

/// What the pool needs to hear from a connection, on the connection's event loop.
protocol APNsConnectionDelegate: AnyObject, Sendable {
    /// The server's MAX_CONCURRENT_STREAMS changed (first SETTINGS, or later ones).
    func connection(_ id: Int, maxConcurrentStreamsChanged value: Int)
    /// GOAWAY arrived: take no new streams here.
    func connectionDraining(_ id: Int)
    /// The connection failed (TLS, HTTP/2) and is about to close.
    func connection(_ id: Int, failedWith error: any Error)
}

/// One HTTP/2 connection to APNs, at the frame level.
///
/// Streams are plain dictionary entries rather than NIO child channels: a push is two or three frames each way, and
/// the client must stay cheaper than the server it measures. `NIOHTTP2Handler` below it keeps the protocol state:
/// stream ids, HPACK, the peer's MAX_CONCURRENT_STREAMS (it buffers new streams past the limit) and outbound flow
/// control (DATA waits for window and streams share it).
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Settings {
        var authority: String
        /// PING after this long without a frame from the server; close when the PING is not answered in time.
        var idlePingInterval: TimeAmount
        var pingTimeout: TimeAmount
    }

    private struct Pending {
        var onOutcome: @Sendable (StreamOutcome) -> Void
        var deadline: NIODeadline
        var status: Int?
        var apnsID: String?
        var uniqueID: String?
        var body: [UInt8] = []
    }

    let id: Int
    private let settings: Settings
    private weak var delegate: (any APNsConnectionDelegate)?
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Pending] = [:]
    private var nextStreamID = HTTP2StreamID(1)
    private var goAwayLastStreamID: HTTP2StreamID?
    private var unacknowledgedBytes = 0
    private var pingTimer: Scheduled<Void>?
    private var awaitingPingAck = false
    private var readSinceLastPing = true
    private var closed = false
    private var sawSettings = false
    /// One timer for the whole connection, at the earliest deadline of a stream in flight (not one per stream).
    private var timeoutTimer: Scheduled<Void>?
    private var timeoutTimerDeadline: NIODeadline?

    init(id: Int, settings: Settings, delegate: any APNsConnectionDelegate) {
        self.id = id
        self.settings = settings
        self.delegate = delegate
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        schedulePing(context: context)
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
        // Stream-level errors (e.g. a stream reset by NIO's checks) close nothing; connection errors close it.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            finish(streamError.streamID, .failed("stream error: \(streamError.baseError)"))
            return
        }
        delegate?.connection(id, failedWith: error)
        context.close(promise: nil)
    }

    /// Opens a stream per request, writes them all and flushes once: one TLS record and one `write(2)` for a burst
    /// instead of one per push. Must run on the channel's event loop.
    func send(_ requests: [WireRequest]) {
        guard let context, !closed, goAwayLastStreamID == nil else {
            // The pool must stop lending this connection before the requests go elsewhere.
            delegate?.connectionDraining(id)
            let reason = closed || context == nil ? "the connection is closed" : "the connection is going away"
            for request in requests { request.onOutcome(.unprocessed(reason)) }
            return
        }
        for request in requests { write(request, context: context) }
        context.flush()
    }

    private func write(_ request: WireRequest, context: ChannelHandlerContext) {
        let streamID = nextStreamID
        nextStreamID = nextStreamID.advanced(by: 2)
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.count + 4)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: settings.authority)
        // APNs asks for the path (it holds the token) and per-push ids to stay out of the HPACK table.
        headers.add(name: ":path", value: request.path, indexing: .nonIndexable)
        for (name, value) in request.headers {
            switch name {
            case "apns-id", "apns-expiration", "apns-collapse-id": headers.add(name: name, value: value, indexing: .nonIndexable)
            default: headers.add(name: name, value: value)
            }
        }
        streams[streamID] = Pending(onOutcome: request.onOutcome, deadline: request.deadline)
        armTimeout(at: request.deadline, context: context)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let body = context.channel.allocator.buffer(bytes: request.payload)
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
            promise: nil)
    }

    /// Takes no new streams and closes once nothing is in flight (graceful shutdown).
    func drainAndClose() {
        guard let context, !closed else { return }
        goAwayLastStreamID = goAwayLastStreamID ?? .rootStream
        if streams.isEmpty { context.close(promise: nil) }
    }

    var inFlight: Int { streams.count }

    // MARK: Frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        readSinceLastPing = true
        switch frame.payload {
        case .headers(let payload):
            guard var pending = streams[frame.streamID] else { return }
            for (name, value, _) in payload.headers {
                switch name {
                case ":status": pending.status = Int(value)
                case "apns-id": pending.apnsID = value
                case "apns-unique-id": pending.uniqueID = value
                default: break
                }
            }
            streams[frame.streamID] = pending
            if payload.endStream { complete(frame.streamID) }
        case .data(let payload):
            returnWindow(payload.data.readableBytes + (payload.paddingBytes ?? 0), context: context)
            guard var pending = streams[frame.streamID] else { return }
            if case .byteBuffer(let buffer) = payload.data, pending.body.count < 4096 {
                pending.body.append(contentsOf: buffer.readableBytesView)
            }
            streams[frame.streamID] = pending
            if payload.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            if code == .refusedStream {
                finish(frame.streamID, .unprocessed("the server refused the stream"))
            } else {
                finish(frame.streamID, .failed("the server reset the stream (\(code))"))
            }
        case .goAway(let lastStreamID, let code, let debugData):
            goAwayLastStreamID = lastStreamID
            let reason = debugData.map { String(buffer: $0) } ?? ""
            // Streams above the last stream id were not processed: they go to another connection.
            for streamID in streams.keys where streamID > lastStreamID {
                finish(streamID, .unprocessed("GOAWAY \(code) \(reason)"))
            }
            delegate?.connectionDraining(id)
            if streams.isEmpty { context.close(promise: nil) }
        case .settings(.settings(let values)):
            if let setting = values.last(where: { $0.parameter == .maxConcurrentStreams }) {
                delegate?.connection(id, maxConcurrentStreamsChanged: setting.value)
            } else if !sawSettings {
                // No limit announced means no limit; 100 is what RFC 9113 suggests assuming.
                delegate?.connection(id, maxConcurrentStreamsChanged: 100)
            }
            sawSettings = true
        case .ping(_, ack: true):
            awaitingPingAck = false
        default:
            break
        }
    }

    private func complete(_ streamID: HTTP2StreamID) {
        guard let pending = streams[streamID] else { return }
        let response = APNsResponse(
            status: pending.status ?? 0, apnsID: pending.apnsID, apnsUniqueID: pending.uniqueID, body: pending.body)
        finish(streamID, pending.status == nil ? .failed("the stream ended without a :status") : .answered(response))
    }

    private func finish(_ streamID: HTTP2StreamID, _ outcome: StreamOutcome) {
        guard let pending = streams.removeValue(forKey: streamID) else { return }
        pending.onOutcome(outcome)
        if goAwayLastStreamID != nil, streams.isEmpty, let context { context.close(promise: nil) }
    }

    private func failAll(_ outcome: StreamOutcome) {
        let all = streams
        streams = [:]
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
        var expired: [HTTP2StreamID] = []
        var next: NIODeadline?
        for (streamID, pending) in streams {
            if pending.deadline <= now {
                expired.append(streamID)
            } else if next == nil || pending.deadline < next! {
                next = pending.deadline
            }
        }
        for streamID in expired {
            finish(streamID, .timedOut)
            // Tell APNs we no longer wait, so the stream's slot frees on both sides.
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
        }
        if !expired.isEmpty { context.flush() }
        if let next { armTimeout(at: next, context: context) }
    }

    private func returnWindow(_ length: Int, context: ChannelHandlerContext) {
        unacknowledgedBytes += length
        if unacknowledgedBytes >= 32_768 {
            context.writeAndFlush(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))),
                promise: nil)
            unacknowledgedBytes = 0
        }
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
                context.writeAndFlush(
                    self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 0x7465_726e), ack: false))),
                    promise: nil)
                context.eventLoop.assumeIsolated().scheduleTask(in: self.settings.pingTimeout) {
                    if self.awaitingPingAck, !self.closed { self.context?.close(promise: nil) }
                }
            }
            self.readSinceLastPing = false
            self.schedulePing(context: context)
        }
    }
}
