import NIOCore
import NIOHPACK
import TernHTTP2

/// The server side of HTTP/2 (RFC 9113) as APNs needs it, as a state machine over bytes: feed it what the client
/// sent, take the events (complete requests, resets), write answers, and send what it queued.
///
/// Why not `NIOHTTP2Handler`: its general stream machinery was about 60% of the simulator's CPU, and the simulator
/// must cost less than any client it measures (they share the machine in Tern's benchmarks). An APNs endpoint
/// needs a small, fixed part of HTTP/2: requests with small bodies, answers of one HEADERS and at most one small
/// DATA, no server push, priorities or trailers. HPACK, the intricate part, stays with NIOHPACK. What this type does:
/// the preface and SETTINGS exchange, PING answers, HEADERS/CONTINUATION (with padding and priority fields),
/// DATA with flow control both ways, RST_STREAM, GOAWAY both ways, stream-id rules and MAX_CONCURRENT_STREAMS
/// enforcement (APNs answers a violation with GOAWAY `REFUSED_STREAM`).
struct HTTP2ServerFraming {
    struct Configuration {
        /// MAX_CONCURRENT_STREAMS advertised at start.
        var maxConcurrentStreams: Int
        /// SETTINGS_INITIAL_WINDOW_SIZE, and the connection receive window kept open.
        var initialWindowSize: Int
        /// Bodies longer than this are not kept; the request completes at once with `bodyTooLarge`.
        var largestBody: Int
        /// A stream over MAX_CONCURRENT_STREAMS (once the client acknowledged it): false answers as APNs does, with
        /// GOAWAY `REFUSED_STREAM` "Maximum active streams violated for this endpoint." and the connection closed;
        /// true resets only that stream with RST_STREAM `REFUSED_STREAM`, which a client may retry.
        var resetExcessStreams = false
    }

    enum Event {
        /// A request whose END_STREAM arrived (or whose body passed `largestBody`: then `bodyTooLarge` is set, the
        /// body is empty, and the stream is reset once answered).
        case request(streamID: UInt32, headers: HPACKHeaders, body: [UInt8], bodyTooLarge: Bool)
        /// The client reset a stream before its answer.
        case reset(streamID: UInt32)
    }

    /// A connection error: the caller sends the GOAWAY queued by ``fail(_:)`` and closes.
    typealias ConnectionError = HTTP2ConnectionError
    typealias ErrorCode = HTTP2Wire.ErrorCode

    /// The largest request header block (and header list) taken: an APNs request's headers, a provider token
    /// included, are well under it.
    static let largestHeaderBlock = 8000
    private typealias FrameType = HTTP2Wire.FrameType
    private typealias Flag = HTTP2Wire.Flag

    private static let maxFrameSize = HTTP2Wire.defaultMaxFrameSize
    private static let maxWindow = HTTP2Wire.maxWindow
    /// Streams a client may open before it has read our SETTINGS (the RFC's suggested minimum default).
    private static let limitBeforeSettingsAck = 100

    private struct Stream {
        var headers: HPACKHeaders?
        var body: [UInt8] = []
        var tooLarge = false
        /// END_STREAM received.
        var remoteClosed = false
        /// The request went out as an event (at END_STREAM, or early when its body was too large).
        var delivered = false
        var receiveWindow: Int
        var sendWindow: Int
        /// DATA waiting for send window, with its END_STREAM flag.
        var pendingData: [UInt8]?
        /// How much of `pendingData` has gone out.
        var pendingSent = 0
    }

    let configuration: Configuration
    /// Bytes to send; the caller writes and clears it.
    var output: ByteBuffer
    private var input: ByteBuffer
    private var prefaceReceived = false
    private var settingsAcknowledged = false
    private var decoder: HPACKDecoder
    private var streams: [UInt32: Stream] = [:]
    private var events: [Event] = []
    private var eventIndex = 0
    private var advertisedMaxStreams: Int
    private var lastClientStreamID: UInt32 = 0
    /// The stream whose header block continues in CONTINUATION frames.
    private var continuation: (streamID: UInt32, flags: UInt8, block: ByteBuffer)?
    private var peerInitialWindow = 65_535
    private var connectionSendWindow = 65_535
    /// The largest DATA frame the peer takes (its SETTINGS_MAX_FRAME_SIZE).
    private var peerMaxFrameSize = 16_384
    private var connectionReceiveConsumed = 0
    private var blockedStreams: [UInt32] = []
    private(set) var goAwayLastStreamID: UInt32?
    /// Streams refused for exceeding MAX_CONCURRENT_STREAMS.
    private(set) var refusedStreams = 0

    init(configuration: Configuration, allocator: ByteBufferAllocator) {
        self.configuration = configuration
        self.output = allocator.buffer(capacity: 4096)
        self.input = allocator.buffer(capacity: 0)
        self.decoder = HPACKDecoder(allocator: allocator, maxDynamicTableSize: 4096)
        self.decoder.maxHeaderListSize = Self.largestHeaderBlock
        self.advertisedMaxStreams = configuration.maxConcurrentStreams
    }

    /// Streams opened and not yet answered: what MAX_CONCURRENT_STREAMS counts.
    var openStreamCount: Int { streams.count }

    /// The server's connection preface: SETTINGS like APNs', and a connection WINDOW_UPDATE up to the configured
    /// window (the connection window starts at 65,535 whatever SETTINGS say).
    mutating func start() {
        // The five settings APNs has been seen to send.
        writeFrameHeader(length: 5 * 6, type: FrameType.settings, flags: 0, streamID: 0)
        writeSetting(0x1, 4096)  // HEADER_TABLE_SIZE
        writeSetting(0x3, UInt32(configuration.maxConcurrentStreams))
        writeSetting(0x4, UInt32(configuration.initialWindowSize))
        writeSetting(0x5, UInt32(Self.maxFrameSize))
        writeSetting(0x6, 8000)  // MAX_HEADER_LIST_SIZE
        let extra = configuration.initialWindowSize - 65_535
        if extra > 0 { writeWindowUpdate(streamID: 0, increment: extra) }
    }

    /// Advertises a new MAX_CONCURRENT_STREAMS (APNs raises it after a token connection's first valid token).
    mutating func advertiseMaxConcurrentStreams(_ value: Int) {
        advertisedMaxStreams = value
        writeFrameHeader(length: 6, type: FrameType.settings, flags: 0, streamID: 0)
        writeSetting(0x3, UInt32(value))
    }

    // MARK: Input

    /// Takes bytes from the client. Call ``nextEvent()`` until it returns nil afterwards.
    mutating func receive(_ bytes: inout ByteBuffer) throws(ConnectionError) {
        if input.readableBytes == 0 {
            swap(&input, &bytes)
        } else {
            input.writeBuffer(&bytes)
        }
        events.removeAll(keepingCapacity: true)
        eventIndex = 0
        if !prefaceReceived {
            guard input.readableBytes >= HTTP2Wire.preface.count else { return }
            guard input.readBytes(length: HTTP2Wire.preface.count) == HTTP2Wire.preface else {
                throw ConnectionError(code: ErrorCode.protocolError, message: "not an HTTP/2 connection preface")
            }
            prefaceReceived = true
        }
        while case (let head, var payload)? = try input.readHTTP2Frame(maxFrameSize: Self.maxFrameSize) {
            try handleFrame(type: head.type, flags: head.flags, streamID: head.streamID, payload: &payload)
        }
        if input.readableBytes == 0 { input.clear() } else { input.discardReadBytes() }
    }

    mutating func nextEvent() -> Event? {
        guard eventIndex < events.count else { return nil }
        defer { eventIndex += 1 }
        return events[eventIndex]
    }

    private mutating func handleFrame(type: UInt8, flags: UInt8, streamID: UInt32, payload: inout ByteBuffer) throws(ConnectionError) {
        if let pendingStreamID = continuation?.streamID, type != FrameType.continuation || streamID != pendingStreamID {
            throw ConnectionError(code: ErrorCode.protocolError, message: "expected CONTINUATION for stream \(pendingStreamID)")
        }
        switch type {
        case FrameType.headers:
            try receiveHeaders(flags: flags, streamID: streamID, payload: &payload)
        case FrameType.continuation:
            // Taken out while it grows (appended to in place, not copied whole at every frame), and no larger than
            // the header list the decoder takes: a client that sent CONTINUATIONs without end grew it without bound.
            guard var pending = continuation.take() else {
                throw ConnectionError(code: ErrorCode.protocolError, message: "CONTINUATION without HEADERS")
            }
            guard pending.block.readableBytes + payload.readableBytes <= Self.largestHeaderBlock else {
                throw ConnectionError(code: ErrorCode.enhanceYourCalm, message: "header block larger than \(Self.largestHeaderBlock) bytes")
            }
            pending.block.writeBuffer(&payload)
            if flags & Flag.endHeaders != 0 {
                try completeHeaderBlock(streamID: streamID, flags: pending.flags, block: &pending.block)
            } else {
                continuation = pending
            }
        case FrameType.data:
            try receiveData(flags: flags, streamID: streamID, payload: &payload)
        case FrameType.settings:
            guard streamID == 0 else { throw ConnectionError(code: ErrorCode.protocolError, message: "SETTINGS on a stream") }
            if flags & Flag.ack != 0 {
                settingsAcknowledged = true
                return
            }
            guard payload.readableBytes % 6 == 0 else {
                throw ConnectionError(code: ErrorCode.frameSizeError, message: "SETTINGS length is not a multiple of 6")
            }
            while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                try applyPeerSetting(identifier, value)
            }
            writeFrameHeader(length: 0, type: FrameType.settings, flags: Flag.ack, streamID: 0)
        case FrameType.ping:
            guard streamID == 0, payload.readableBytes == 8 else {
                throw ConnectionError(code: ErrorCode.frameSizeError, message: "PING must be 8 bytes on stream 0")
            }
            if flags & Flag.ack == 0 {
                writeFrameHeader(length: 8, type: FrameType.ping, flags: Flag.ack, streamID: 0)
                output.writeBuffer(&payload)
            }
        case FrameType.windowUpdate:
            guard payload.readableBytes == 4, let raw = payload.readInteger(as: UInt32.self) else {
                throw ConnectionError(code: ErrorCode.frameSizeError, message: "WINDOW_UPDATE must be 4 bytes")
            }
            let increment = Int(raw & 0x7fff_ffff)
            if streamID == 0 {
                guard increment > 0, connectionSendWindow + increment <= Self.maxWindow else {
                    throw ConnectionError(code: ErrorCode.flowControlError, message: "bad connection WINDOW_UPDATE")
                }
                connectionSendWindow += increment
            } else if var stream = streams[streamID] {
                stream.sendWindow += increment
                streams[streamID] = stream
            }
            flushBlockedData()
        case FrameType.rstStream:
            if streams.removeValue(forKey: streamID) != nil { events.append(.reset(streamID: streamID)) }
        case FrameType.goAway, FrameType.priority:
            // A client GOAWAY only says it opens no more streams; the ones it has still get answers.
            break
        default:
            // Unknown frame types are ignored (RFC 9113 §4.1).
            break
        }
    }

    private mutating func receiveHeaders(flags: UInt8, streamID: UInt32, payload: inout ByteBuffer) throws(ConnectionError) {
        guard streamID != 0, streamID % 2 == 1 else {
            throw ConnectionError(code: ErrorCode.protocolError, message: "HEADERS on stream \(streamID)")
        }
        var block = try HTTP2FrameHead(type: FrameType.headers, flags: flags, streamID: streamID).headerBlockFragment(of: &payload)
        if flags & Flag.endHeaders == 0 {
            continuation = (streamID, flags, block)
            return
        }
        try completeHeaderBlock(streamID: streamID, flags: flags, block: &block)
    }

    private mutating func completeHeaderBlock(streamID: UInt32, flags: UInt8, block: inout ByteBuffer) throws(ConnectionError) {
        // Every block is decoded, even for a stream that is ignored: HPACK state is shared by the connection.
        let headers: HPACKHeaders
        do {
            headers = try decoder.decodeHeaders(from: &block)
        } catch {
            throw ConnectionError(code: ErrorCode.compressionError, message: "header block does not decode")
        }
        let endStream = flags & Flag.endStream != 0
        if var stream = streams[streamID] {
            // Trailers: only END_STREAM matters.
            guard endStream else {
                throw ConnectionError(code: ErrorCode.protocolError, message: "second HEADERS without END_STREAM")
            }
            stream.remoteClosed = true
            if !stream.delivered { complete(streamID, &stream) }
            streams[streamID] = stream
            return
        }
        guard streamID > lastClientStreamID else {
            throw ConnectionError(code: ErrorCode.streamClosed, message: "HEADERS on closed stream \(streamID)")
        }
        lastClientStreamID = streamID
        if let last = goAwayLastStreamID, streamID > last { return }
        // Until the client acknowledges our first SETTINGS it may open streams under the protocol's default
        // (RFC 9113 §6.5.3): the advertised limit binds from the acknowledgement on.
        let limit = settingsAcknowledged ? advertisedMaxStreams : max(advertisedMaxStreams, Self.limitBeforeSettingsAck)
        guard streams.count < limit else {
            // Over MAX_CONCURRENT_STREAMS once the client has acknowledged it: APNs ends the connection (GOAWAY,
            // REFUSED_STREAM), so a client must meet that before production. Before the acknowledgement a client
            // may legally not know the limit yet, so that stream alone is refused, unprocessed (RFC 9113 §5.1.2), as
            // every excess stream is with `resetExcessStreams`.
            if settingsAcknowledged, !configuration.resetExcessStreams {
                throw ConnectionError(code: ErrorCode.refusedStream, message: "Maximum active streams violated for this endpoint.")
            }
            refusedStreams += 1
            output.writeHTTP2RstStream(streamID: streamID, code: ErrorCode.refusedStream)
            return
        }
        var stream = Stream(headers: headers, receiveWindow: configuration.initialWindowSize, sendWindow: peerInitialWindow)
        stream.remoteClosed = endStream
        if endStream { complete(streamID, &stream) }
        streams[streamID] = stream
    }

    private mutating func receiveData(flags: UInt8, streamID: UInt32, payload: inout ByteBuffer) throws(ConnectionError) {
        guard streamID != 0 else { throw ConnectionError(code: ErrorCode.protocolError, message: "DATA on stream 0") }
        let flowControlled = payload.readableBytes
        // Window is returned as it is consumed (half at a time), so the connection window cannot run out; each
        // stream's window is checked below.
        connectionReceiveConsumed += flowControlled
        if connectionReceiveConsumed >= configuration.initialWindowSize / 2 {
            writeWindowUpdate(streamID: 0, increment: connectionReceiveConsumed)
            connectionReceiveConsumed = 0
        }
        payload = try HTTP2FrameHead(type: FrameType.data, flags: flags, streamID: streamID).dataWithoutPadding(payload)
        guard var stream = streams[streamID], !stream.remoteClosed else {
            if streamID > lastClientStreamID {
                throw ConnectionError(code: ErrorCode.protocolError, message: "DATA on idle stream \(streamID)")
            }
            return  // a stream already answered, refused or reset: its window was counted above
        }
        stream.receiveWindow -= flowControlled
        guard stream.receiveWindow >= 0 else {
            throw ConnectionError(code: ErrorCode.flowControlError, message: "DATA beyond stream \(streamID)'s window")
        }
        if flags & Flag.endStream != 0 { stream.remoteClosed = true }
        if !stream.delivered {
            if stream.body.count + payload.readableBytes > configuration.largestBody {
                stream.tooLarge = true
                stream.body = []
            } else {
                stream.body.append(contentsOf: payload.readableBytesView)
            }
            if stream.remoteClosed || stream.tooLarge { complete(streamID, &stream) }
        }
        streams[streamID] = stream
    }

    private mutating func complete(_ streamID: UInt32, _ stream: inout Stream) {
        stream.delivered = true
        events.append(.request(streamID: streamID, headers: stream.headers ?? [:], body: stream.body, bodyTooLarge: stream.tooLarge))
    }

    private mutating func applyPeerSetting(_ identifier: UInt16, _ value: UInt32) throws(ConnectionError) {
        switch identifier {
        case 0x2:
            guard value <= 1 else { throw ConnectionError(code: ErrorCode.protocolError, message: "ENABLE_PUSH must be 0 or 1") }
        case 0x4:
            guard value <= UInt32(Self.maxWindow) else {
                throw ConnectionError(code: ErrorCode.flowControlError, message: "INITIAL_WINDOW_SIZE above 2^31-1")
            }
            let delta = Int(value) - peerInitialWindow
            peerInitialWindow = Int(value)
            for id in streams.keys { streams[id]!.sendWindow += delta }
            if delta > 0 { flushBlockedData() }
        case 0x5:
            guard (16_384...16_777_215).contains(value) else {
                throw ConnectionError(code: ErrorCode.protocolError, message: "MAX_FRAME_SIZE out of range")
            }
            peerMaxFrameSize = Int(value)
        default:
            break  // answers are small: the peer's other limits do not bind them
        }
    }

    // MARK: Output

    /// Answers a stream: HEADERS (with END_STREAM when there is no body), then DATA with the body.
    /// A stream whose body was cut short is reset with NO_ERROR after its answer, so the client stops sending.
    mutating func respond(streamID: UInt32, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        guard var stream = streams[streamID] else { return }
        let blockStart = output.writerIndex
        writeFrameHeader(length: 0, type: FrameType.headers, flags: Flag.endHeaders | (body.isEmpty ? Flag.endStream : 0), streamID: streamID)
        let payloadStart = output.writerIndex
        writeStatus(status)
        for header in headers { writeLiteral(name: header.name, value: header.value) }
        output.setInteger(UInt32(output.writerIndex - payloadStart) << 8 | UInt32(FrameType.headers), at: blockStart)
        if !body.isEmpty {
            stream.pendingData = body
            guard sendPendingData(streamID, &stream) else {
                streams[streamID] = stream
                blockedStreams.append(streamID)
                return
            }
        }
        finish(streamID, stream)
    }

    private mutating func finish(_ streamID: UInt32, _ stream: Stream) {
        streams.removeValue(forKey: streamID)
        if !stream.remoteClosed {
            output.writeHTTP2RstStream(streamID: streamID, code: ErrorCode.noError)
        }
    }

    private mutating func flushBlockedData() {
        guard !blockedStreams.isEmpty else { return }
        var stillBlocked: [UInt32] = []
        for streamID in blockedStreams {
            guard var stream = streams[streamID], stream.pendingData != nil else { continue }
            if sendPendingData(streamID, &stream) {
                finish(streamID, stream)
            } else {
                streams[streamID] = stream
                stillBlocked.append(streamID)
            }
        }
        blockedStreams = stillBlocked
    }

    /// Sends as much of the stream's answer body as the windows allow, in DATA frames no larger than the peer takes
    /// (a notification's answer is one small frame; a list of broadcast channels is many). - Returns: whether all of
    /// it is sent (the last frame with END_STREAM).
    private mutating func sendPendingData(_ streamID: UInt32, _ stream: inout Stream) -> Bool {
        guard let pending = stream.pendingData else { return true }
        while stream.pendingSent < pending.count {
            let room = min(stream.sendWindow, connectionSendWindow, peerMaxFrameSize)
            guard room > 0 else { return false }
            let piece = pending[stream.pendingSent..<min(pending.count, stream.pendingSent + room)]
            stream.pendingSent += piece.count
            let last = stream.pendingSent == pending.count
            writeFrameHeader(length: piece.count, type: FrameType.data, flags: last ? Flag.endStream : 0, streamID: streamID)
            output.writeBytes(piece)
            stream.sendWindow -= piece.count
            connectionSendWindow -= piece.count
        }
        stream.pendingData = nil
        return true
    }

    /// Sends GOAWAY: streams above `lastStreamID` are ignored from now on.
    mutating func goAway(lastStreamID: UInt32? = nil, code: UInt32 = ErrorCode.noError, debugData: [UInt8]) {
        let last = lastStreamID ?? lastClientStreamID
        goAwayLastStreamID = last
        output.writeHTTP2GoAway(lastStreamID: last, code: code, debugData: debugData)
    }

    /// Streams at or below the GOAWAY's last stream id that still await an answer.
    var hasUnansweredStreams: Bool { !streams.isEmpty || continuation != nil }

    // HPACK for answers without touching the dynamic table: `:status` from the static table (indexed for the
    // values it has, else literal with its indexed name), everything else "literal without indexing", plain
    // (no Huffman). Answer ids differ every time, so indexing would only churn the table; APNs does the same.
    private mutating func writeStatus(_ status: Int) {
        switch status {
        case 200: output.writeInteger(UInt8(0x88))
        case 204: output.writeInteger(UInt8(0x89))
        case 400: output.writeInteger(UInt8(0x8c))
        case 404: output.writeInteger(UInt8(0x8d))
        case 500: output.writeInteger(UInt8(0x8e))
        default:
            output.writeInteger(UInt8(0x08))  // literal without indexing, name = static index 8 (:status)
            let text = String(status)
            output.writeInteger(UInt8(text.utf8.count))
            output.writeString(text)
        }
    }

    private mutating func writeLiteral(name: String, value: String) {
        if name == "content-type" {
            output.writeInteger(UInt8(0x0f))  // literal without indexing, name = static index 31 (15 + 16)
            output.writeInteger(UInt8(0x10))
        } else {
            output.writeInteger(UInt8(0x00))
            writeStringLiteral(name)
        }
        writeStringLiteral(value)
    }

    private mutating func writeStringLiteral(_ string: String) {
        output.writeHPACKStringLiteral(string)
    }

    private mutating func writeWindowUpdate(streamID: UInt32, increment: Int) {
        output.writeHTTP2WindowUpdate(streamID: streamID, increment: increment)
    }

    private mutating func writeSetting(_ identifier: UInt16, _ value: UInt32) {
        output.writeHTTP2Setting(identifier, value)
    }

    private mutating func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: UInt32) {
        output.writeHTTP2FrameHeader(length: length, type: type, flags: flags, streamID: streamID)
    }
}
