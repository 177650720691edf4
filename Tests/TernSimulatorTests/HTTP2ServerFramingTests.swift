import NIOCore
import NIOEmbedded
import NIOHPACK
import TernAPNs
import TernTestSupport
import Testing

@testable import TernSimulator

/// The simulator's HTTP/2 framing as a value: bytes in, events and frames out.
struct HTTP2ServerFramingTests {
    // MARK: A minimal client side

    typealias Frame = RawFrame

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        RawFrame.bytes(type, flags: flags, stream: stream, payload)
    }

    static func settings(_ values: [(UInt16, UInt32)] = [], ack: Bool = false) -> [UInt8] {
        RawFrame.settings(values, ack: ack)
    }

    static func headerBlock(_ encoder: inout HPACKEncoder, path: String = "/3/device/abcd") throws -> [UInt8] {
        var buffer = ByteBuffer()
        try encoder.encode(
            headers: [":method": "POST", ":path": path, ":scheme": "https", ":authority": "localhost", "apns-topic": "com.example.app"],
            to: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// A framing that has had the preface and an (acknowledged) client SETTINGS exchange.
    static func connected(
        maxStreams: Int = 10, window: Int = 65_535, largestBody: Int = 5120, acknowledge: Bool = true, resetExcessStreams: Bool = false
    ) throws -> HTTP2ServerFraming {
        var framing = HTTP2ServerFraming(
            configuration: .init(
                maxConcurrentStreams: maxStreams, initialWindowSize: window, largestBody: largestBody, resetExcessStreams: resetExcessStreams),
            allocator: ByteBufferAllocator())
        framing.start()
        framing.output.clear()
        try feed(&framing, preface + settings() + (acknowledge ? settings(ack: true) : []))
        framing.output.clear()
        return framing
    }

    static func feed(_ framing: inout HTTP2ServerFraming, _ bytes: [UInt8]) throws {
        var buffer = ByteBuffer(bytes: bytes)
        try framing.receive(&buffer)
    }

    static func events(_ framing: inout HTTP2ServerFraming) -> [HTTP2ServerFraming.Event] {
        var events: [HTTP2ServerFraming.Event] = []
        while let event = framing.nextEvent() { events.append(event) }
        return events
    }

    static func frames(_ framing: inout HTTP2ServerFraming) -> [Frame] {
        defer { framing.output.clear() }
        return RawFrame.parse(framing.output)
    }

    static func requests(_ events: [HTTP2ServerFraming.Event]) -> [(stream: UInt32, headers: HPACKHeaders, body: [UInt8], tooLarge: Bool)] {
        events.compactMap {
            if case .request(let stream, let headers, let body, let tooLarge) = $0 { return (stream, headers, body, tooLarge) }
            return nil
        }
    }

    // MARK: Connection set-up

    @Test func startSendsApnsFiveSettingsAndRaisesTheConnectionWindow() throws {
        var framing = HTTP2ServerFraming(
            configuration: .init(maxConcurrentStreams: 1, initialWindowSize: 1 << 20, largestBody: 5120),
            allocator: ByteBufferAllocator())
        framing.start()
        let frames = Self.frames(&framing)
        #expect(frames.count == 2)
        #expect(frames[0].type == 0x4 && frames[0].streamID == 0)
        #expect(frames[0].payload.count == 30, "five settings of six bytes")
        var settings: [UInt16: UInt32] = [:]
        var payload = ByteBuffer(bytes: frames[0].payload)
        while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) { settings[id] = value }
        #expect(settings == [0x1: 4096, 0x3: 1, 0x4: 1 << 20, 0x5: 16384, 0x6: 8000])
        #expect(frames[1] == Frame(type: 0x8, flags: 0, streamID: 0, payload: [0, 0x0f, 0, 1]), "WINDOW_UPDATE of 2^20 - 65535")
    }

    @Test func aConnectionWithoutThePrefaceIsAProtocolError() {
        var framing = HTTP2ServerFraming(
            configuration: .init(maxConcurrentStreams: 1, initialWindowSize: 65_535, largestBody: 5120),
            allocator: ByteBufferAllocator())
        #expect(throws: HTTP2ServerFraming.ConnectionError.self) {
            try Self.feed(&framing, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        }
    }

    @Test func clientSettingsAreAcknowledgedAndPingsAnswered() throws {
        var framing = try Self.connected()
        try Self.feed(&framing, Self.settings([(0x4, 1000)]) + Self.frame(0x6, [1, 2, 3, 4, 5, 6, 7, 8]) + Self.frame(0x6, flags: 0x1, [9, 9, 9, 9, 9, 9, 9, 9]))
        #expect(Self.frames(&framing) == [
            Frame(type: 0x4, flags: 0x1, streamID: 0, payload: []),
            Frame(type: 0x6, flags: 0x1, streamID: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8]),
        ])
    }

    // MARK: Requests

    @Test func headersAndDataMakeOneRequestWhateverTheChunking() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let block = try Self.headerBlock(&encoder)
        let body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        let bytes = Self.frame(0x1, flags: 0x4, stream: 1, block) + Self.frame(0x0, stream: 1, Array(body[..<5]))
            + Self.frame(0x0, flags: 0x1, stream: 1, Array(body[5...]))
        for chunk in [1, 7, bytes.count] {
            var framing = try Self.connected()
            var events: [HTTP2ServerFraming.Event] = []
            var offset = 0
            while offset < bytes.count {
                try Self.feed(&framing, Array(bytes[offset..<min(offset + chunk, bytes.count)]))
                events += Self.events(&framing)
                offset += chunk
            }
            let requests = Self.requests(events)
            #expect(requests.count == 1, "chunks of \(chunk)")
            #expect(requests.first?.stream == 1)
            #expect(requests.first?.body == body)
            #expect(requests.first?.headers.first(name: ":path") == "/3/device/abcd")
        }
    }

    @Test func paddedPrioritisedHeadersWithContinuationDecode() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let block = try Self.headerBlock(&encoder)
        let split = block.count / 2
        // PADDED | PRIORITY, no END_HEADERS: pad length 3, 5 priority bytes, first half, padding.
        let headers = Self.frame(0x1, flags: 0x8 | 0x20 | 0x1, stream: 3, [3] + [0, 0, 0, 0, 16] + Array(block[..<split]) + [0, 0, 0])
        let continuation = Self.frame(0x9, flags: 0x4, stream: 3, Array(block[split...]))
        var framing = try Self.connected()
        try Self.feed(&framing, headers + continuation)
        let requests = Self.requests(Self.events(&framing))
        #expect(requests.count == 1)
        #expect(requests.first?.body == [])
        #expect(requests.first?.headers.first(name: "apns-topic") == "com.example.app")
    }

    @Test func aFrameOtherThanContinuationInsideAHeaderBlockIsAProtocolError() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let block = try Self.headerBlock(&encoder)
        var framing = try Self.connected()
        #expect(throws: HTTP2ServerFraming.ConnectionError.self) {
            try Self.feed(&framing, Self.frame(0x1, stream: 1, block) + Self.frame(0x6, Array(repeating: 0, count: 8)))
        }
    }

    @Test func streamIDRulesAreEnforced() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var even = try Self.connected()
        #expect(throws: HTTP2ServerFraming.ConnectionError.self) {
            try Self.feed(&even, Self.frame(0x1, flags: 0x5, stream: 2, try Self.headerBlock(&encoder)))
        }
        // A new connection needs a new encoder: HPACK state belongs to one connection.
        encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 5, try Self.headerBlock(&encoder)))
        #expect(throws: HTTP2ServerFraming.ConnectionError.self) {
            try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 3, try Self.headerBlock(&encoder)))
        }
    }

    @Test func framesAboveMaxFrameSizeAreRefused() throws {
        var framing = try Self.connected()
        let oversized = Self.frame(0x0, stream: 1, Array(repeating: 0, count: 16_385))
        do {
            try Self.feed(&framing, oversized)
            Issue.record("a 16385-byte frame was accepted")
        } catch let error as HTTP2ServerFraming.ConnectionError {
            #expect(error.code == HTTP2ServerFraming.ErrorCode.frameSizeError)
        }
    }

    // MARK: Answers

    @Test func aSuccessIsOneHeadersFrameWithEndStreamDecodableByHPACK() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        _ = Self.events(&framing)
        framing.respond(streamID: 1, status: 200, headers: [("apns-id", "11111111-2222-4333-8444-555555555555")], body: [])
        let frames = Self.frames(&framing)
        #expect(frames.count == 1)
        #expect(frames[0].type == 0x1 && frames[0].flags == 0x5 && frames[0].streamID == 1)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var block = ByteBuffer(bytes: frames[0].payload)
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: ":status") == "200")
        #expect(headers.first(name: "apns-id") == "11111111-2222-4333-8444-555555555555")
        #expect(framing.openStreamCount == 0)
    }

    @Test(arguments: [400, 403, 410, 413, 429, 503])
    func anErrorIsHeadersThenDataWithTheJSONBody(status: Int) throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        _ = Self.events(&framing)
        let body = Array(#"{"reason":"X"}"#.utf8)
        framing.respond(streamID: 1, status: status, headers: [("content-type", "application/json"), ("apns-id", "x")], body: body)
        let frames = Self.frames(&framing)
        #expect(frames.map(\.type) == [0x1, 0x0])
        #expect(frames[0].flags == 0x4, "END_HEADERS without END_STREAM")
        #expect(frames[1] == Frame(type: 0x0, flags: 0x1, streamID: 1, payload: body))
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var block = ByteBuffer(bytes: frames[0].payload)
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: ":status") == String(status))
        #expect(headers.first(name: "content-type") == "application/json")
    }

    @Test func anOversizedBodyCompletesEarlyOnceAndTheStreamIsResetAfterItsAnswer() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(largestBody: 10)
        try Self.feed(&framing, Self.frame(0x1, flags: 0x4, stream: 1, try Self.headerBlock(&encoder)) + Self.frame(0x0, stream: 1, Array(repeating: 1, count: 11)))
        let first = Self.requests(Self.events(&framing))
        #expect(first.count == 1 && first[0].tooLarge && first[0].body.isEmpty)
        try Self.feed(&framing, Self.frame(0x0, stream: 1, Array(repeating: 1, count: 11)))
        #expect(Self.requests(Self.events(&framing)).isEmpty, "more DATA must not make a second request")
        framing.output.clear()
        framing.respond(streamID: 1, status: 413, headers: [], body: Array(#"{"reason":"PayloadTooLarge"}"#.utf8))
        let frames = Self.frames(&framing)
        #expect(frames.last == Frame(type: 0x3, flags: 0, streamID: 1, payload: [0, 0, 0, 0]), "RST_STREAM NO_ERROR")
    }

    // MARK: Limits and flow control

    @Test func aStreamOverTheAcknowledgedLimitEndsTheConnectionAsAPNsDoes() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(maxStreams: 1)
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        #expect(Self.requests(Self.events(&framing)).map(\.stream) == [1])
        do {
            try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 3, try Self.headerBlock(&encoder)))
            Issue.record("stream 3 over the limit was taken")
        } catch let error as HTTP2ServerFraming.ConnectionError {
            // The handler answers this error with GOAWAY carrying the code and message, then closes.
            #expect(error.code == 7, "REFUSED_STREAM")
            #expect(error.message == "Maximum active streams violated for this endpoint.")
        }
    }

    @Test func withResetExcessStreamsOnlyTheStreamOverTheLimitIsRefused() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(maxStreams: 1, resetExcessStreams: true)
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 3, try Self.headerBlock(&encoder)))
        #expect(Self.requests(Self.events(&framing)).map(\.stream) == [], "stream 3 arrives while stream 1 is open")
        #expect(Self.frames(&framing) == [Frame(type: 0x3, flags: 0, streamID: 3, payload: [0, 0, 0, 7])], "RST_STREAM REFUSED_STREAM")
        #expect(framing.refusedStreams == 1)
        framing.advertiseMaxConcurrentStreams(1000)
        #expect(Self.frames(&framing) == [Frame(type: 0x4, flags: 0, streamID: 0, payload: [0, 3, 0, 0, 0x03, 0xe8])])
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 5, try Self.headerBlock(&encoder)))
        #expect(Self.requests(Self.events(&framing)).map(\.stream) == [5])
    }

    @Test func beforeTheSettingsAckAClientMayUseTheDefaultLimit() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(maxStreams: 1, acknowledge: false)
        var bytes: [UInt8] = []
        for stream in stride(from: UInt32(1), through: 19, by: 2) {
            bytes += Self.frame(0x1, flags: 0x5, stream: stream, try Self.headerBlock(&encoder))
        }
        try Self.feed(&framing, bytes)
        #expect(Self.requests(Self.events(&framing)).count == 10)
    }

    @Test func consumedDataIsReturnedToTheConnectionWindow() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(window: 65_535)
        var bytes: [UInt8] = []
        for stream in stride(from: UInt32(1), through: 19, by: 2) {
            bytes += Self.frame(0x1, flags: 0x4, stream: stream, try Self.headerBlock(&encoder))
            bytes += Self.frame(0x0, flags: 0x1, stream: stream, Array(repeating: 0x20, count: 5000))
        }
        try Self.feed(&framing, bytes)
        _ = Self.events(&framing)
        let updates = Self.frames(&framing).filter { $0.type == 0x8 }
        #expect(updates == [Frame(type: 0x8, flags: 0, streamID: 0, payload: [0, 0, 0x88, 0xb8])], "35000 bytes after 7 of 10 frames")
    }

    @Test func aStreamSendingPastItsWindowIsAFlowControlError() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected(window: 65_535, largestBody: 1 << 20)
        var bytes = Self.frame(0x1, flags: 0x4, stream: 1, try Self.headerBlock(&encoder))
        for _ in 0..<5 { bytes += Self.frame(0x0, stream: 1, Array(repeating: 0x20, count: 16_000)) }
        do {
            try Self.feed(&framing, bytes)
            Issue.record("80,000 bytes on one stream with a 65,535-byte window were accepted")
        } catch let error as HTTP2ServerFraming.ConnectionError {
            #expect(error.code == HTTP2ServerFraming.ErrorCode.flowControlError)
        }
    }

    @Test func anAnswerBodyWaitsForTheClientsWindow() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.settings([(0x4, 10)]))
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        _ = Self.events(&framing)
        framing.output.clear()
        let body = Array(#"{"reason":"BadTopic"}"#.utf8)
        framing.respond(streamID: 1, status: 400, headers: [], body: body)
        let first = Self.frames(&framing)
        #expect(first.map(\.type) == [0x1, 0x0], "HEADERS, and DATA as far as the window goes")
        #expect(first.last == Frame(type: 0x0, flags: 0x0, streamID: 1, payload: Array(body.prefix(10))), "10 bytes, no END_STREAM")
        try Self.feed(&framing, Self.frame(0x8, stream: 1, [0, 0, 0, 100]))
        #expect(Self.frames(&framing) == [Frame(type: 0x0, flags: 0x1, streamID: 1, payload: Array(body.dropFirst(10)))])
    }

    /// A body longer than the client's largest frame (a list of broadcast channels) goes in frames of that size.
    @Test func aLongAnswerBodyGoesInFramesNoLargerThanTheClientTakes() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.settings([(0x4, 1 << 20)]))
        try Self.feed(&framing, Self.frame(0x8, stream: 0, [0, 0x10, 0, 0]))
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 1, try Self.headerBlock(&encoder)))
        _ = Self.events(&framing)
        framing.output.clear()
        let body = (0..<40_000).map { UInt8(truncatingIfNeeded: $0) }
        framing.respond(streamID: 1, status: 200, headers: [], body: body)
        let frames = Self.frames(&framing).filter { $0.type == 0x0 }
        #expect(frames.map(\.payload.count) == [16_384, 16_384, 7_232])
        #expect(frames.map(\.flags) == [0, 0, 0x1], "END_STREAM on the last")
        #expect(frames.flatMap(\.payload) == body)
    }

    // MARK: Resets and GOAWAY

    @Test func aResetStreamIsReportedAndNotAnswered() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.frame(0x1, flags: 0x4, stream: 1, try Self.headerBlock(&encoder)) + Self.frame(0x3, stream: 1, [0, 0, 0, 8]))
        let events = Self.events(&framing)
        #expect(events.count == 1)
        if case .reset(let stream)? = events.first { #expect(stream == 1) } else { Issue.record("expected a reset, got \(events)") }
        framing.respond(streamID: 1, status: 200, headers: [], body: [])
        #expect(Self.frames(&framing).isEmpty)
    }

    @Test func afterGoAwayNewStreamsAreIgnoredButStillDecoded() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var framing = try Self.connected()
        try Self.feed(&framing, Self.frame(0x1, flags: 0x4, stream: 1, try Self.headerBlock(&encoder)))
        framing.goAway(debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
        let goAway = Self.frames(&framing)
        #expect(goAway == [Frame(type: 0x7, flags: 0, streamID: 0, payload: [0, 0, 0, 1, 0, 0, 0, 0] + Array(#"{"reason":"Shutdown"}"#.utf8))])
        #expect(framing.hasUnansweredStreams, "stream 1 is below the last stream id and still open")
        // Stream 3 uses the encoder's dynamic table state; stream 1's END_STREAM must still be understood after it.
        try Self.feed(&framing, Self.frame(0x1, flags: 0x5, stream: 3, try Self.headerBlock(&encoder, path: "/3/device/ef01")))
        try Self.feed(&framing, Self.frame(0x0, flags: 0x1, stream: 1, [1, 2, 3]))
        #expect(Self.requests(Self.events(&framing)).map(\.stream) == [1])
    }
}

/// What a client that sends and never reads can make the simulator hold.
struct SimulatorFloodTests {
    @Test func aHeaderBlockPastTheLimitIsAConnectionErrorBeforeItsEnd() throws {
        var framing = try HTTP2ServerFramingTests.connected()
        let chunk = [UInt8](repeating: 0x41, count: 4000)
        try HTTP2ServerFramingTests.feed(&framing, HTTP2ServerFramingTests.frame(0x1, stream: 1, chunk))
        try HTTP2ServerFramingTests.feed(&framing, HTTP2ServerFramingTests.frame(0x9, stream: 1, chunk))
        do {
            // Without END_HEADERS, as a flood would go on: refused as soon as the block is too large.
            try HTTP2ServerFramingTests.feed(&framing, HTTP2ServerFramingTests.frame(0x9, stream: 1, chunk))
            Issue.record("a header block of 12,000 bytes was taken")
        } catch let error as HTTP2ServerFraming.ConnectionError {
            #expect(error.code == 0xb, "ENHANCE_YOUR_CALM")
        }
    }

    /// Counts the reads the handler above it asks for.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        var reads = 0

        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    @Test func aConnectionThatCannotSendReadsNothingMoreUntilItCan() throws {
        let counter = ReadCounter()
        let handler = SimulatorConnectionHandler(
            validator: RequestValidator(verifier: ProviderTokenVerifier(keys: []), environment: .development, clock: SystemWallClock()),
            state: SimulatorState(environment: .development, logCapacity: 10, clock: SystemWallClock()),
            settings: .init(maxConcurrentStreams: 100, initialWindowSize: 65_535, environment: .development),
            auth: ConnectionAuthentication(mode: .token))
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([counter, handler])
        defer { _ = try? channel.finish() }
        channel.read()
        #expect(counter.reads == 1)
        // The client's answers wait in a full socket: what it sends (PINGs, each owed an ACK) waits in its own.
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.read()
        channel.read()
        #expect(counter.reads == 1)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(counter.reads == 2, "the read asked for meanwhile is done once the socket drains")
        channel.read()
        #expect(counter.reads == 3)
    }
}
