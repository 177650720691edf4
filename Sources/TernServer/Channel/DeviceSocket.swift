import NIOCore
import NIOWebSocket

/// One device's WebSocket once upgraded, served by a plain NIO handler: it answers pings, pings the device every
/// `pingInterval` and closes it when the last ping went unanswered, takes the device's text frames (acks), refuses
/// binary ones, and runs the closing handshake.
///
/// No Swift task serves an open connection. A task keeps the memory of its deepest call for as long as it lives,
/// and the WebSocket library's model (a task per connection over an `NIOAsyncChannel`, another for its pings) cost
/// 36.7 KiB per idle connection before Tern's own state (docs/benchmarks.md, "At scale"). Here an idle connection is
/// its socket, its pipeline and one timer; work for it (reading the store, writing frames) runs in short tasks of
/// the node's ``ChannelTasks`` and ends with the work.
final class DeviceSocketHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// What the connection does with what the device sent; runs on the channel's event loop.
    struct Events: Sendable {
        /// A text frame: nil if it was taken, or why the connection must close.
        var text: @Sendable (String) -> ChannelCloseCode?
        /// The connection ended (closed by either side, or dropped).
        var closed: @Sendable () -> Void
    }

    /// How long the server waits for the device's close frame after sending its own before it closes the socket.
    static let closeTimeout: TimeAmount = .seconds(5)

    private let pingInterval: TimeAmount
    /// Set before the handler is added; dropped when the connection ends (the connection refers to this handler
    /// through its socket, and this to the connection through these).
    var events: Events?
    private var context: ChannelHandlerContext?
    private var pinger: RepeatedTask?
    /// A ping went out and no pong came back yet.
    private var awaitingPong = false
    /// The server sent its close frame (nothing more is written or taken) and waits for the device's.
    private var closing = false
    private var closeTimer: Scheduled<Void>?

    init(pingInterval: Duration) {
        self.pingInterval = TimeAmount(pingInterval)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        pinger = context.eventLoop.scheduleRepeatedTask(initialDelay: pingInterval, delay: pingInterval) { _ in
            loopBound.value.pingTick()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimers()
        events?.closed()
        events = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            guard !closing else { return }
            let payload = frame.unmaskedData
            guard let text = try? payload.getUTF8ValidatedString(at: payload.readerIndex, length: payload.readableBytes) else {
                close(.badFrame("a text frame must be UTF-8"))
                return
            }
            if let refusal = events?.text(text) { close(refusal) }
        case .binary:
            guard !closing else { return }
            close(.binaryFrame)
        case .ping:
            // Not while the socket takes no more: a device that sends pings and reads nothing would otherwise have
            // its pongs pile up in the server's memory (a pong is owed only "as soon as practical").
            guard !closing, context.channel.isWritable else { return }
            writeAndFlush(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
        case .pong:
            awaitingPong = false
        case .connectionClose:
            if closing {
                // The device answered our close: the handshake is done.
                context.close(promise: nil)
            } else {
                // The device closes: answer with its code, then end the connection.
                closing = true
                var data = frame.unmaskedData
                let code = data.readSlice(length: 2) ?? ByteBuffer()
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code)))
                    .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
                // A device that reads nothing more never takes the answer: the socket closes anyway.
                closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) { context.close(promise: nil) }
            }
        default:
            // Continuations come assembled by the aggregator in front; reserved opcodes are refused before it
            // (``ClientFrameRules``).
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The decoder's errors (a frame over the limit, bad framing) were answered by NIO's WebSocketProtocolErrorHandler
        // in front, which closes the connection; a fragmented message over the limit comes from the aggregator.
        if let violation = error as? ClientFrameRules.Violation {
            close(.badFrame(violation.problem))
            return
        }
        if let aggregation = error as? NIOWebSocketFrameAggregator.Error {
            close(aggregation == .accumulatedFrameSizeIsTooLarge ? .tooLarge : .badFrame("fragmented frames: \(aggregation)"))
            return
        }
        if !(error is NIOWebSocketError) { context.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            // The HTTP server is stopping and asks its connections to finish.
            close(.goingAway)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The device's side of the socket ended (its app was killed, or it closed without a close frame): the
            // server allows half-closed connections for HTTP, but a WebSocket that reads nothing more is over.
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Writes `texts` as text frames, in order, flushed together. - Returns: the last write's outcome (failed if the
    /// connection is closing or gone).
    func write(texts: [String]) -> EventLoopFuture<Void>? {
        guard let context, !closing else { return nil }
        var last: EventLoopFuture<Void>?
        for text in texts {
            let buffer = context.channel.allocator.buffer(string: text)
            last = context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: buffer)))
        }
        context.flush()
        return last
    }

    /// Starts the closing handshake with `code`: the close frame goes, and the socket closes when the device answers
    /// or after ``closeTimeout``. At once for a device that stopped answering pings: it will not answer this either.
    /// - Returns: when the close frame was written (or at once if the connection is already closing).
    @discardableResult
    func close(_ code: ChannelCloseCode) -> EventLoopFuture<Void>? {
        guard let context, !closing else { return nil }
        closing = true
        pinger?.cancel()
        var data = context.channel.allocator.buffer(capacity: 2 + code.reason.utf8.count)
        data.write(webSocketErrorCode: .init(codeNumber: Int(code.code)))
        data.writeString(code.reason)
        let written = context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
        if code == .pingTimeout {
            // Not after the frame is written: a device that stopped reading never takes it, and what the server
            // queued for it would stay in memory with the socket.
            context.close(promise: nil)
        } else {
            closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) { context.close(promise: nil) }
        }
        return written
    }

    private func pingTick() {
        guard let context, !closing else { return }
        if awaitingPong {
            close(.pingTimeout)
            return
        }
        awaitingPong = true
        writeAndFlush(WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(string: "tern")))
    }

    private func writeAndFlush(_ frame: WebSocketFrame) {
        context?.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    private func stopTimers() {
        pinger?.cancel()
        pinger = nil
        closeTimer?.cancel()
        closeTimer = nil
    }
}

/// RFC 6455's rules for what a client sends, which NIO's decoder leaves to the server: every frame masked, no reserved
/// bit set (the channel negotiates no extension), no reserved opcode. A frame that breaks one is not passed on; the
/// connection is closed with 4400 (``ClientFrameRules/Violation``, taken by ``DeviceSocketHandler``). In front of the
/// fragment aggregator, which unmasks what it puts together.
final class ClientFrameRules: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    struct Violation: Error, Equatable {
        let problem: String
    }

    private var broken = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !broken else { return }
        let frame = unwrapInboundIn(data)
        let problem: String? =
            if frame.maskKey == nil {
                "a client's frames must be masked"
            } else if frame.rsv1 || frame.rsv2 || frame.rsv3 {
                "reserved bits set, and no extension was agreed"
            } else if ![.continuation, .text, .binary, .connectionClose, .ping, .pong].contains(frame.opcode) {
                "opcode \(UInt8(webSocketOpcode: frame.opcode)) is reserved"
            } else {
                nil
            }
        if let problem {
            broken = true
            context.fireErrorCaught(Violation(problem: problem))
            return
        }
        context.fireChannelRead(data)
    }
}

/// The handle other tasks use to reach a ``DeviceSocketHandler``: each call hops to the connection's event loop once.
struct DeviceSocket: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<DeviceSocketHandler>

    /// Made on the channel's event loop, where `handler` lives.
    init(channel: any Channel, handler: DeviceSocketHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    /// Writes `texts` as text frames in order. - Returns: whether they were written to the socket (false: the
    /// connection is closing or gone). It waits for the socket to take them, so a device that stops reading holds at
    /// most one batch in the server's memory.
    func send(_ texts: [String]) async -> Bool {
        guard !texts.isEmpty else { return true }
        let handler = self.handler
        let written = channel.eventLoop.flatSubmit { [channel] () -> EventLoopFuture<Void> in
            handler.value.write(texts: texts) ?? channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
        }
        do {
            try await written.get()
            return true
        } catch {
            return false
        }
    }

    /// ``send(_:)`` from the channel's event loop, without waiting. - Returns: the last write's outcome; nil if the
    /// connection is closing or gone.
    func writeOnLoop(_ texts: [String]) -> EventLoopFuture<Void>? {
        handler.value.write(texts: texts)
    }

    /// Closes with `code` (the closing handshake; once, later calls do nothing). - Returns: once the close frame was
    /// written, or the connection was already closing.
    func close(_ code: ChannelCloseCode) async {
        let handler = self.handler
        let written = channel.eventLoop.flatSubmit { [channel] () -> EventLoopFuture<Void> in
            handler.value.close(code) ?? channel.eventLoop.makeSucceededVoidFuture()
        }
        try? await written.get()
    }
}
