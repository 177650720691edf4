import NIOCore
import NIOHPACK
import TernHTTP2

/// The client side of HTTP/2 (RFC 9113) as an APNs provider needs it, as a state machine over bytes: open streams
/// with a request each, feed it what the server sent, take the events (answers, resets, GOAWAY, SETTINGS), and send
/// what it queued in ``output``.
///
/// Why not `NIOHTTP2Handler`: its general stream machinery (a state machine and flow-control record per stream in
/// sorted buffers, per-frame promises, header validation) was about 40% of the client's CPU at 50,000 pushes a
/// second. A provider needs a small, fixed part of HTTP/2: requests of one HEADERS and one small DATA, answers of
/// one HEADERS and at most one small DATA, no server push, priorities or trailers. HPACK stays with NIOHPACK
/// (without Huffman coding on the way out: it costs more CPU than the bytes it saves on loopback or a LAN, and the
/// values that repeat, such as the provider token, go into the dynamic table once anyway).
///
/// What this type does: the preface and SETTINGS exchange, PING both ways, HEADERS/CONTINUATION (with padding and
/// priority fields) in, HEADERS and DATA out with flow control (DATA waits for window, a stream at a time in the
/// order they opened), RST_STREAM both ways, GOAWAY in, and the server's MAX_CONCURRENT_STREAMS (a request over
/// it is not sent: ``openStream(headers:body:)`` returns nil and the caller sends it elsewhere).
struct HTTP2ClientFraming {
    enum Event: Equatable {
        /// A SETTINGS frame from the server; `maxConcurrentStreams` when it carried that setting.
        case settings(maxConcurrentStreams: Int?)
        /// A stream's answer, complete (END_STREAM seen). The body is cut at `largestBody` bytes, or at what the stream's
        /// request asked for (``openStream(headers:body:largestAnswer:)``).
        case response(streamID: UInt32, status: Int?, headers: HPACKHeaders, body: [UInt8])
        /// The server reset a stream.
        case reset(streamID: UInt32, code: UInt32)
        /// The server takes no streams above `lastStreamID`.
        case goAway(lastStreamID: UInt32, code: UInt32, debugData: [UInt8])
        /// The server answered our PING.
        case pingAcknowledged
    }

    struct Configuration {
        /// The window we give the server, per stream and for the connection.
        var receiveWindow = 1 << 20
        /// Answer bodies are kept up to this many bytes (APNs' JSON errors are well under 200).
        var largestBody = 4096
        /// An answer's header block (HEADERS and its CONTINUATIONs) may not be larger: more is a connection error.
        /// The HPACK decoder takes the same limit for the list it decodes (NIOHPACK's default, 16 KiB), and an
        /// encoded block is never larger than its list, so a larger block could only fail once it had all been read
        /// (a peer that sent CONTINUATIONs without end grew it for as long as it liked). APNs' answers have a
        /// handful of short headers.
        var largestHeaderBlock = HPACKDecoder.defaultMaxHeaderListSize
        /// PINGs whose ACK may wait while the connection cannot send (and SETTINGS acknowledged meanwhile); one
        /// more is a flood, a connection error.
        var largestUnsentPingAcks = 32
    }

    private typealias FrameType = HTTP2Wire.FrameType
    private typealias Flag = HTTP2Wire.Flag
    private typealias ErrorCode = HTTP2Wire.ErrorCode

    private struct Stream {
        var sendWindow: Int
        /// Request body bytes not yet sent (waiting for window).
        var pendingBody: ArraySlice<UInt8> = []
        var status: Int?
        var headers: HPACKHeaders = [:]
        var body: [UInt8] = []
        var sentEndStream = false
    }

    let configuration: Configuration
    /// The streams whose request asked for more of the answer's body than ``Configuration/largestBody`` (a list of
    /// broadcast channels), with how much.
    private var largestAnswers: [UInt32: Int] = [:]
    /// Bytes to send; the caller writes and clears it.
    var output: ByteBuffer
    private var input: ByteBuffer
    private var scratch: ByteBuffer
    private var encoder: HPACKEncoder
    private var decoder: HPACKDecoder
    private var streams: [UInt32: Stream] = [:]
    /// Streams whose body waits for window, in the order they opened.
    private var blocked: [UInt32] = []
    private var events: [Event] = []
    private var eventIndex = 0
    private var nextStreamID: UInt32 = 1
    private var continuation: (streamID: UInt32, flags: UInt8, block: ByteBuffer)?
    /// False while the caller's connection takes no more bytes (see ``setWritable(_:)``).
    private var writable = true
    /// The payloads of PINGs that came while the connection could not send, to acknowledge when it can.
    private var unsentPingAcks: [UInt64] = []
    /// SETTINGS acknowledged since the connection last could send.
    private var settingsWhileUnwritable = 0
    private var peerInitialWindow = HTTP2Wire.defaultWindow
    private var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    private var connectionSendWindow = HTTP2Wire.defaultWindow
    private var connectionReceiveConsumed = 0
    /// The server's MAX_CONCURRENT_STREAMS; nil until it says (RFC 9113: no limit until then).
    private(set) var peerMaxConcurrentStreams: Int?
    private(set) var goAwayLastStreamID: UInt32?

    init(configuration: Configuration = Configuration(), allocator: ByteBufferAllocator) {
        self.configuration = configuration
        self.output = allocator.buffer(capacity: 16_384)
        self.input = allocator.buffer(capacity: 0)
        self.scratch = allocator.buffer(capacity: 512)
        self.encoder = HPACKEncoder(allocator: allocator, useHuffmanEncoding: false)
        self.decoder = HPACKDecoder(
            allocator: allocator, maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: configuration.largestHeaderBlock)
    }

    /// Streams opened and not yet answered or reset.
    var openStreamCount: Int { streams.count }

    /// The connection preface: the magic, our SETTINGS (no push, no streams from the server, our window) and a
    /// connection WINDOW_UPDATE up to the same window.
    mutating func start() {
        output.writeBytes(HTTP2Wire.preface)
        output.writeHTTP2FrameHeader(length: 3 * 6, type: FrameType.settings, flags: 0, streamID: 0)
        output.writeHTTP2Setting(HTTP2Wire.Setting.enablePush, 0)
        output.writeHTTP2Setting(HTTP2Wire.Setting.maxConcurrentStreams, 0)
        output.writeHTTP2Setting(HTTP2Wire.Setting.initialWindowSize, UInt32(configuration.receiveWindow))
        let extra = configuration.receiveWindow - HTTP2Wire.defaultWindow
        if extra > 0 { output.writeHTTP2WindowUpdate(streamID: 0, increment: extra) }
    }

    // MARK: Requests

    /// Opens a stream and queues its request: HEADERS (CONTINUATION if the block is larger than a frame), then the
    /// body in DATA as the windows allow. Returns nil, sending nothing, when the server takes no new stream (its
    /// MAX_CONCURRENT_STREAMS is reached, or it sent GOAWAY).
    /// - Parameter largestAnswer: the most of the answer's body kept (``Configuration/largestBody`` when nil).
    mutating func openStream(headers: HPACKHeaders, body: [UInt8], largestAnswer: Int? = nil) -> UInt32? {
        guard goAwayLastStreamID == nil, streams.count < (peerMaxConcurrentStreams ?? Int.max), nextStreamID < 0x7fff_ffff else {
            return nil
        }
        let streamID = nextStreamID
        nextStreamID += 2
        scratch.clear()
        // Only the caller's own headers go in; they are not attacker-controlled, so encoding cannot fail short of a
        // bug (NIOHPACK throws only when an encoding is already in progress).
        try! encoder.encode(headers: headers, to: &scratch)
        var first = true
        repeat {
            let chunk = scratch.readSlice(length: min(scratch.readableBytes, peerMaxFrameSize))!
            let last = scratch.readableBytes == 0
            var flags: UInt8 = last ? Flag.endHeaders : 0
            if first, body.isEmpty { flags |= Flag.endStream }
            output.writeHTTP2FrameHeader(
                length: chunk.readableBytes, type: first ? FrameType.headers : FrameType.continuation, flags: flags, streamID: streamID)
            output.writeImmutableBuffer(chunk)
            first = false
        } while scratch.readableBytes > 0
        var stream = Stream(sendWindow: peerInitialWindow)
        stream.pendingBody = body[...]
        stream.sentEndStream = body.isEmpty
        if !body.isEmpty {
            sendBody(streamID, &stream)
            if !stream.pendingBody.isEmpty { blocked.append(streamID) }
        }
        streams[streamID] = stream
        if let largestAnswer { largestAnswers[streamID] = largestAnswer }
        return streamID
    }

    /// Abandons a stream (its answer is no longer awaited): RST_STREAM with `code`.
    mutating func reset(streamID: UInt32, code: UInt32 = HTTP2Wire.ErrorCode.cancel) {
        guard streams.removeValue(forKey: streamID) != nil else { return }
        if !largestAnswers.isEmpty { largestAnswers.removeValue(forKey: streamID) }
        output.writeHTTP2RstStream(streamID: streamID, code: code)
    }

    mutating func ping(_ data: UInt64) {
        output.writeHTTP2FrameHeader(length: 8, type: FrameType.ping, flags: 0, streamID: 0)
        output.writeInteger(data)
    }

    /// Whether the caller's connection takes bytes now. While it does not, a PING's ACK waits here rather than in
    /// ``output``: a peer that sent PINGs without end and read nothing had every ACK queued behind the full socket
    /// (the client grew by 100 MB a second). A few wait; more than ``Configuration/largestUnsentPingAcks`` is a
    /// flood and a connection error. The waiting ACKs go into ``output`` when the connection takes bytes again.
    mutating func setWritable(_ writable: Bool) {
        self.writable = writable
        if writable { settingsWhileUnwritable = 0 }
        guard writable, !unsentPingAcks.isEmpty else { return }
        for data in unsentPingAcks { writePingAck(data) }
        unsentPingAcks.removeAll()
    }

    private mutating func writePingAck(_ data: UInt64) {
        output.writeHTTP2FrameHeader(length: 8, type: FrameType.ping, flags: Flag.ack, streamID: 0)
        output.writeInteger(data)
    }

    /// Tells the server we open no more streams (graceful close).
    mutating func goAway(code: UInt32 = HTTP2Wire.ErrorCode.noError, debugData: [UInt8] = []) {
        output.writeHTTP2GoAway(lastStreamID: 0, code: code, debugData: debugData)
    }

    /// Sends as much of the stream's body as both windows and the frame size allow.
    private mutating func sendBody(_ streamID: UInt32, _ stream: inout Stream) {
        while !stream.pendingBody.isEmpty {
            let size = min(stream.pendingBody.count, stream.sendWindow, connectionSendWindow, peerMaxFrameSize)
            guard size > 0 else { return }
            let chunk = stream.pendingBody.prefix(size)
            stream.pendingBody = stream.pendingBody.dropFirst(size)
            let last = stream.pendingBody.isEmpty
            output.writeHTTP2FrameHeader(length: size, type: FrameType.data, flags: last ? Flag.endStream : 0, streamID: streamID)
            output.writeBytes(chunk)
            stream.sendWindow -= size
            connectionSendWindow -= size
            stream.sentEndStream = last
        }
    }

    private mutating func sendBlockedBodies() {
        guard !blocked.isEmpty else { return }
        var stillBlocked: [UInt32] = []
        for streamID in blocked {
            guard var stream = streams[streamID] else { continue }
            sendBody(streamID, &stream)
            streams[streamID] = stream
            if !stream.pendingBody.isEmpty { stillBlocked.append(streamID) }
        }
        blocked = stillBlocked
    }

    // MARK: Input

    /// Takes bytes from the server. Call ``nextEvent()`` until it returns nil afterwards.
    mutating func receive(_ bytes: inout ByteBuffer) throws(HTTP2ConnectionError) {
        if input.readableBytes == 0 {
            swap(&input, &bytes)
        } else {
            input.writeBuffer(&bytes)
        }
        events.removeAll(keepingCapacity: true)
        eventIndex = 0
        while case (let head, var payload)? = try input.readHTTP2Frame(maxFrameSize: HTTP2Wire.defaultMaxFrameSize) {
            try handleFrame(head, &payload)
        }
        if input.readableBytes == 0 { input.clear() } else { input.discardReadBytes() }
    }

    mutating func nextEvent() -> Event? {
        guard eventIndex < events.count else { return nil }
        defer { eventIndex += 1 }
        return events[eventIndex]
    }

    private mutating func handleFrame(_ head: HTTP2FrameHead, _ payload: inout ByteBuffer) throws(HTTP2ConnectionError) {
        if let pendingStreamID = continuation?.streamID, head.type != FrameType.continuation || head.streamID != pendingStreamID {
            throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "expected CONTINUATION for stream \(pendingStreamID)")
        }
        switch head.type {
        case FrameType.headers:
            guard head.streamID != 0 else {
                throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "HEADERS on stream 0")
            }
            var block = try head.headerBlockFragment(of: &payload)
            if head.has(Flag.endHeaders) {
                try completeHeaderBlock(streamID: head.streamID, flags: head.flags, block: &block)
            } else {
                continuation = (head.streamID, head.flags, block)
            }
        case FrameType.continuation:
            // Taken out while it grows: appended to while `continuation` still held it, the block was copied whole
            // at every frame, and a peer that sent CONTINUATIONs without end kept a core busy.
            guard var pending = continuation.take() else {
                throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "CONTINUATION without HEADERS")
            }
            guard pending.block.readableBytes + payload.readableBytes <= configuration.largestHeaderBlock else {
                throw HTTP2ConnectionError(
                    code: ErrorCode.enhanceYourCalm,
                    message: "header block larger than \(configuration.largestHeaderBlock) bytes")
            }
            pending.block.writeBuffer(&payload)
            if head.has(Flag.endHeaders) {
                try completeHeaderBlock(streamID: head.streamID, flags: pending.flags, block: &pending.block)
            } else {
                continuation = pending
            }
        case FrameType.data:
            try receiveData(head, payload)
        case FrameType.settings:
            guard head.streamID == 0 else {
                throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "SETTINGS on a stream")
            }
            if head.has(Flag.ack) { return }
            guard payload.readableBytes % 6 == 0 else {
                throw HTTP2ConnectionError(code: ErrorCode.frameSizeError, message: "SETTINGS length is not a multiple of 6")
            }
            var maxStreams: Int?
            while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                if identifier == HTTP2Wire.Setting.maxConcurrentStreams { maxStreams = Int(value) }
                try applySetting(identifier, value)
            }
            // A SETTINGS' ACK cannot wait (its order is the point), so a flood of them while the connection cannot
            // send is bounded as PINGs are: the ACKs would pile up behind the full socket.
            if !writable {
                settingsWhileUnwritable += 1
                guard settingsWhileUnwritable <= configuration.largestUnsentPingAcks else {
                    throw HTTP2ConnectionError(
                        code: ErrorCode.enhanceYourCalm,
                        message: "SETTINGS flood: more than \(configuration.largestUnsentPingAcks) while the connection could not send")
                }
            }
            output.writeHTTP2FrameHeader(length: 0, type: FrameType.settings, flags: Flag.ack, streamID: 0)
            events.append(.settings(maxConcurrentStreams: maxStreams))
        case FrameType.ping:
            guard head.streamID == 0, payload.readableBytes == 8 else {
                throw HTTP2ConnectionError(code: ErrorCode.frameSizeError, message: "PING must be 8 bytes on stream 0")
            }
            let data = payload.readInteger(as: UInt64.self)!
            if head.has(Flag.ack) {
                events.append(.pingAcknowledged)
            } else if writable {
                writePingAck(data)
            } else {
                guard unsentPingAcks.count < configuration.largestUnsentPingAcks else {
                    throw HTTP2ConnectionError(
                        code: ErrorCode.enhanceYourCalm,
                        message: "PING flood: more than \(configuration.largestUnsentPingAcks) PINGs while the connection could not send")
                }
                unsentPingAcks.append(data)
            }
        case FrameType.windowUpdate:
            guard payload.readableBytes == 4, let raw = payload.readInteger(as: UInt32.self) else {
                throw HTTP2ConnectionError(code: ErrorCode.frameSizeError, message: "WINDOW_UPDATE must be 4 bytes")
            }
            let increment = Int(raw & 0x7fff_ffff)
            if head.streamID == 0 {
                guard increment > 0, connectionSendWindow + increment <= HTTP2Wire.maxWindow else {
                    throw HTTP2ConnectionError(code: ErrorCode.flowControlError, message: "bad connection WINDOW_UPDATE")
                }
                connectionSendWindow += increment
            } else if var stream = streams[head.streamID] {
                stream.sendWindow += increment
                streams[head.streamID] = stream
            }
            sendBlockedBodies()
        case FrameType.rstStream:
            guard payload.readableBytes == 4, let code = payload.readInteger(as: UInt32.self) else {
                throw HTTP2ConnectionError(code: ErrorCode.frameSizeError, message: "RST_STREAM must be 4 bytes")
            }
            if streams.removeValue(forKey: head.streamID) != nil { events.append(.reset(streamID: head.streamID, code: code)) }
            if !largestAnswers.isEmpty { largestAnswers.removeValue(forKey: head.streamID) }
        case FrameType.goAway:
            guard head.streamID == 0, let last = payload.readInteger(as: UInt32.self), let code = payload.readInteger(as: UInt32.self) else {
                throw HTTP2ConnectionError(code: ErrorCode.frameSizeError, message: "GOAWAY too short")
            }
            let lastStreamID = last & 0x7fff_ffff
            goAwayLastStreamID = min(goAwayLastStreamID ?? lastStreamID, lastStreamID)
            events.append(.goAway(lastStreamID: lastStreamID, code: code, debugData: Array(payload.readableBytesView.prefix(512))))
        case FrameType.pushPromise:
            throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "PUSH_PROMISE although push is disabled")
        default:
            // PRIORITY and unknown frame types are ignored (RFC 9113 §4.1, §5.3.2).
            break
        }
    }

    private mutating func completeHeaderBlock(streamID: UInt32, flags: UInt8, block: inout ByteBuffer) throws(HTTP2ConnectionError) {
        // Every block is decoded, even for a stream no longer awaited: HPACK state is shared by the connection.
        let headers: HPACKHeaders
        do {
            headers = try decoder.decodeHeaders(from: &block)
        } catch {
            throw HTTP2ConnectionError(code: ErrorCode.compressionError, message: "header block does not decode")
        }
        guard var stream = streams[streamID] else { return }
        if stream.status == nil {
            stream.status = headers.first(name: ":status").flatMap { Int($0) }
            stream.headers = headers
        }
        if flags & Flag.endStream != 0 {
            finish(streamID, stream)
        } else {
            streams[streamID] = stream
        }
    }

    private mutating func receiveData(_ head: HTTP2FrameHead, _ payload: ByteBuffer) throws(HTTP2ConnectionError) {
        guard head.streamID != 0 else {
            throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "DATA on stream 0")
        }
        // The window is returned as it is consumed (half at a time), for streams no longer awaited too.
        connectionReceiveConsumed += payload.readableBytes
        if connectionReceiveConsumed >= configuration.receiveWindow / 2 {
            output.writeHTTP2WindowUpdate(streamID: 0, increment: connectionReceiveConsumed)
            connectionReceiveConsumed = 0
        }
        let data = try head.dataWithoutPadding(payload)
        guard var stream = streams[head.streamID] else { return }
        // Outside the stream's own record, so that a notification's stream, which asks for no more, stays as small.
        let largest = largestAnswers.isEmpty ? configuration.largestBody : largestAnswers[head.streamID] ?? configuration.largestBody
        let room = largest - stream.body.count
        if room > 0 { stream.body.append(contentsOf: data.readableBytesView.prefix(room)) }
        if head.has(Flag.endStream) {
            finish(head.streamID, stream)
        } else {
            streams[head.streamID] = stream
        }
    }

    private mutating func finish(_ streamID: UInt32, _ stream: Stream) {
        streams.removeValue(forKey: streamID)
        if !largestAnswers.isEmpty { largestAnswers.removeValue(forKey: streamID) }
        events.append(.response(streamID: streamID, status: stream.status, headers: stream.headers, body: stream.body))
        // An answer before the whole request went out (APNs answers an oversized payload at once): stop sending.
        if !stream.sentEndStream { output.writeHTTP2RstStream(streamID: streamID, code: ErrorCode.noError) }
    }

    private mutating func applySetting(_ identifier: UInt16, _ value: UInt32) throws(HTTP2ConnectionError) {
        switch identifier {
        case HTTP2Wire.Setting.headerTableSize:
            try? encoder.setDynamicTableSize(Int(min(value, 4096)))
        case HTTP2Wire.Setting.maxConcurrentStreams:
            peerMaxConcurrentStreams = Int(value)
        case HTTP2Wire.Setting.initialWindowSize:
            guard value <= UInt32(HTTP2Wire.maxWindow) else {
                throw HTTP2ConnectionError(code: ErrorCode.flowControlError, message: "INITIAL_WINDOW_SIZE above 2^31-1")
            }
            let delta = Int(value) - peerInitialWindow
            peerInitialWindow = Int(value)
            for id in streams.keys { streams[id]!.sendWindow += delta }
            if delta > 0 { sendBlockedBodies() }
        case HTTP2Wire.Setting.maxFrameSize:
            guard (16_384...16_777_215).contains(value) else {
                throw HTTP2ConnectionError(code: ErrorCode.protocolError, message: "MAX_FRAME_SIZE out of range")
            }
            peerMaxFrameSize = Int(value)
        default:
            break
        }
    }
}
