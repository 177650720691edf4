import NIOCore
import NIOHPACK
import TernHTTP2
import TernTestSupport
import Testing

@testable import TernAPNsClient

/// The client's HTTP/2 framing as a value: requests and server bytes in, frames and events out.
struct HTTP2ClientFramingTests {
    // MARK: A minimal server side

    static func feed(_ framing: inout HTTP2ClientFraming, _ bytes: [UInt8]) throws {
        var buffer = ByteBuffer(bytes: bytes)
        try framing.receive(&buffer)
    }

    static func events(_ framing: inout HTTP2ClientFraming) -> [HTTP2ClientFraming.Event] {
        var events: [HTTP2ClientFraming.Event] = []
        while let event = framing.nextEvent() { events.append(event) }
        return events
    }

    static func frames(_ framing: inout HTTP2ClientFraming) -> [RawFrame] {
        defer { framing.output.clear() }
        return RawFrame.parse(framing.output)
    }

    /// A framing past the preface, with the server's SETTINGS read and acknowledged.
    static func connected(_ settings: [(UInt16, UInt32)] = [(0x3, 1000)]) throws -> HTTP2ClientFraming {
        var framing = HTTP2ClientFraming(allocator: ByteBufferAllocator())
        framing.start()
        try feed(&framing, RawFrame.settings(settings) + RawFrame.settings(ack: true))
        _ = events(&framing)
        framing.output.clear()
        return framing
    }

    static let requestHeaders: HPACKHeaders = {
        var headers = HPACKHeaders()
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: "api.push.apple.com")
        headers.add(name: ":path", value: "/3/device/" + String(repeating: "ab", count: 32), indexing: .nonIndexable)
        headers.add(name: "apns-topic", value: "com.example.app")
        return headers
    }()

    static func response(_ encoder: inout HPACKEncoder, stream: UInt32, status: String, body: [UInt8] = []) throws -> [UInt8] {
        var block = ByteBuffer()
        try encoder.encode(headers: [":status": status, "apns-id": "7e726ebe-6e0c-4000-8000-000000000001"], to: &block)
        let headers = RawFrame.bytes(0x1, flags: 0x4 | (body.isEmpty ? 0x1 : 0), stream: stream, Array(block.readableBytesView))
        return body.isEmpty ? headers : headers + RawFrame.bytes(0x0, flags: 0x1, stream: stream, body)
    }

    // MARK: Connection set-up

    @Test func startSendsThePrefaceSettingsAndAConnectionWindowUpdate() {
        var framing = HTTP2ClientFraming(allocator: ByteBufferAllocator())
        framing.start()
        var output = framing.output
        #expect(output.readBytes(length: 24) == Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        let frames = RawFrame.parse(output)
        #expect(frames.count == 2)
        #expect(frames[0].type == 0x4 && frames[0].flags == 0 && frames[0].streamID == 0)
        var payload = ByteBuffer(bytes: frames[0].payload)
        var settings: [UInt16: UInt32] = [:]
        while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) { settings[id] = value }
        #expect(settings == [0x2: 0, 0x3: 0, 0x4: 1 << 20], "no push, no server streams, a 1 MiB window")
        #expect(frames[1] == RawFrame(type: 0x8, flags: 0, streamID: 0, payload: [0, 0x0f, 0, 1]), "WINDOW_UPDATE of 2^20 - 65535")
    }

    @Test func serverSettingsAreAcknowledgedAndReported() throws {
        var framing = HTTP2ClientFraming(allocator: ByteBufferAllocator())
        framing.start()
        framing.output.clear()
        try Self.feed(&framing, RawFrame.settings([(0x3, 1), (0x4, 65_535)]) + RawFrame.settings([(0x1, 4096)]))
        #expect(Self.events(&framing) == [.settings(maxConcurrentStreams: 1), .settings(maxConcurrentStreams: nil)])
        #expect(Self.frames(&framing) == [
            RawFrame(type: 0x4, flags: 0x1, streamID: 0, payload: []), RawFrame(type: 0x4, flags: 0x1, streamID: 0, payload: []),
        ])
        #expect(framing.peerMaxConcurrentStreams == 1)
    }

    @Test func pingsAreAnsweredAndOurPingsAcknowledged() throws {
        var framing = try Self.connected()
        try Self.feed(&framing, RawFrame.bytes(0x6, [1, 2, 3, 4, 5, 6, 7, 8]) + RawFrame.bytes(0x6, flags: 0x1, [0, 0, 0, 0, 0, 0, 0, 9]))
        #expect(Self.frames(&framing) == [RawFrame(type: 0x6, flags: 0x1, streamID: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8])])
        #expect(Self.events(&framing) == [.pingAcknowledged])
    }

    @Test func pingsWaitWhileTheConnectionCannotSendAndAreAcknowledgedWhenItCan() throws {
        var framing = try Self.connected()
        framing.setWritable(false)
        let pings = (1...5).map { RawFrame.bytes(0x6, [0, 0, 0, 0, 0, 0, 0, $0]) }
        try Self.feed(&framing, pings.flatMap { $0 })
        #expect(Self.frames(&framing).isEmpty, "no ACK goes out while the socket takes nothing")

        framing.setWritable(true)
        #expect(
            Self.frames(&framing) == (1...5).map { RawFrame(type: 0x6, flags: 0x1, streamID: 0, payload: [0, 0, 0, 0, 0, 0, 0, $0]) },
            "each PING that waited is acknowledged, in order, once the socket takes bytes again")
        try Self.feed(&framing, RawFrame.bytes(0x6, [9, 9, 9, 9, 9, 9, 9, 9]))
        #expect(Self.frames(&framing) == [RawFrame(type: 0x6, flags: 0x1, streamID: 0, payload: [9, 9, 9, 9, 9, 9, 9, 9])])
    }

    @Test func aFloodOfPingsWhileTheConnectionCannotSendIsAConnectionErrorAndQueuesNoAcks() throws {
        var framing = try Self.connected()
        framing.setWritable(false)
        let flood = (0..<10_000).flatMap { _ in RawFrame.bytes(0x6, Array("tern-pin".utf8)) }
        let error = #expect(throws: HTTP2ConnectionError.self) { try Self.feed(&framing, flood) }
        #expect(error?.code == 0xb, "ENHANCE_YOUR_CALM")
        #expect(framing.output.readableBytes == 0, "not one ACK of the flood was queued")
    }

    @Test func aFloodOfSettingsWhileTheConnectionCannotSendIsAConnectionErrorAndAFewAreAcknowledged() throws {
        var framing = try Self.connected()
        framing.setWritable(false)
        try Self.feed(&framing, (0..<32).flatMap { _ in RawFrame.bytes(0x4, []) })
        #expect(Self.frames(&framing) == Array(repeating: RawFrame(type: 0x4, flags: 0x1, streamID: 0, payload: []), count: 32))
        let error = #expect(throws: HTTP2ConnectionError.self) { try Self.feed(&framing, RawFrame.bytes(0x4, [])) }
        #expect(error?.code == 0xb, "ENHANCE_YOUR_CALM")
        // While the connection sends, SETTINGS are acknowledged however many come.
        var sending = try Self.connected()
        try Self.feed(&sending, (0..<100).flatMap { _ in RawFrame.bytes(0x4, []) })
        #expect(Self.frames(&sending).count == 100)
    }

    // MARK: Requests

    @Test func aRequestIsOneHeadersAndOneDataFrameOnOddStreams() throws {
        var framing = try Self.connected()
        let body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        #expect(framing.openStream(headers: Self.requestHeaders, body: body) == 1)
        #expect(framing.openStream(headers: Self.requestHeaders, body: body) == 3)
        let frames = Self.frames(&framing)
        #expect(frames.map(\.type) == [0x1, 0x0, 0x1, 0x0])
        #expect(frames.map(\.streamID) == [1, 1, 3, 3])
        #expect(frames[0].flags == 0x4, "END_HEADERS, the body follows")
        #expect(frames[1] == RawFrame(type: 0x0, flags: 0x1, streamID: 1, payload: body))
        // The headers decode back; the path is a plain literal (no Huffman), never indexed.
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for frame in [frames[0], frames[2]] {
            var block = ByteBuffer(bytes: frame.payload)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(decoded == Self.requestHeaders)
        }
        let path = Array(Self.requestHeaders.first(name: ":path")!.utf8)
        #expect(frames[2].payload.firstRange(of: path) != nil, "the second request still carries the path literally")
        #expect(frames[2].payload.count < frames[0].payload.count, "repeated headers come from the dynamic table")
        #expect(framing.openStreamCount == 2)
    }

    @Test func perPushHeadersAreIndexedTheFirstTimeAndNewValuesGoLiterallyWithTheirNameFromTheTable() throws {
        var framing = try Self.connected()
        var headers = PerPushHeaders()
        let collapseID = "6b0d8c3e-2f41-4a8e-9c55-1e0f3a7b9d24"
        func request(_ id: String, collapseID: String) -> HPACKHeaders {
            headers.requestHeaders(
                path: "/3/device/" + String(repeating: "ab", count: 32),
                headers: [("apns-push-type", "alert"), ("apns-id", id), ("apns-topic", "com.example.app"), ("apns-collapse-id", collapseID)],
                authority: "api.push.apple.com")
        }
        let first = request("7e726ebe-6e0c-4000-8000-000000000001", collapseID: collapseID)
        let other = request("7e726ebe-6e0c-4000-8000-000000000002", collapseID: "another-push")
        #expect(first.map(\.indexable) == [.indexable, .indexable, .indexable, .nonIndexable, .indexable, .indexable, .indexable, .indexable])
        #expect(other.map(\.indexable) == [.indexable, .indexable, .indexable, .nonIndexable, .indexable, .nonIndexable, .indexable, .nonIndexable])
        _ = framing.openStream(headers: first, body: [])
        _ = framing.openStream(headers: other, body: [])
        let frames = Self.frames(&framing)
        // Both decode back as sent (the server's table follows the client's).
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for (frame, sent) in zip([frames[0], frames[1]], [first, other]) {
            var block = ByteBuffer(bytes: frame.payload)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(decoded.map { [$0.name, $0.value] } == sent.map { [$0.name, $0.value] })
        }
        // The second carries its id and its collapse id as literals, but not their names: those come from the table.
        let later = frames[1].payload
        #expect(later.firstRange(of: Array("7e726ebe-6e0c-4000-8000-000000000002".utf8)) != nil)
        #expect(later.firstRange(of: Array("another-push".utf8)) != nil)
        #expect(later.firstRange(of: Array("apns-collapse-id".utf8)) == nil)
        #expect(later.firstRange(of: Array("apns-id".utf8)) == nil)
        #expect(frames[0].payload.firstRange(of: Array("apns-collapse-id".utf8)) != nil)
    }

    @Test func aCollapseIDThatRepeatsThePreviousRequestsComesFromTheTable() throws {
        var framing = try Self.connected()
        var headers = PerPushHeaders()
        func request(_ number: Int, collapseID: String) -> HPACKHeaders {
            headers.requestHeaders(
                path: "/3/device/" + String(repeating: "ab", count: 32),
                headers: [("apns-id", "7e726ebe-6e0c-4000-8000-00000000000\(number)"), ("apns-collapse-id", collapseID)],
                authority: "api.push.apple.com")
        }
        // One push's notifications (A), then another's (B, a value the table does not hold yet), then two pushes
        // whose notifications alternate (A, B, A): a value that repeats the previous request is indexed, one that
        // does not goes literally and stays out of the table.
        let pushA = "6b0d8c3e-2f41-4a8e-9c55-1e0f3a7b9d24"
        let pushB = "0f1e2d3c-4b5a-4697-8877-665544332211"
        let sent = [(1, pushA), (2, pushA), (3, pushA), (4, pushB), (5, pushB), (6, pushB), (7, pushA), (8, pushB), (9, pushA)].map {
            request($0.0, collapseID: $0.1)
        }
        #expect(sent.map { $0.last!.indexable } == [
            .indexable, .indexable, .indexable, .nonIndexable, .indexable, .indexable, .nonIndexable, .nonIndexable, .nonIndexable,
        ])
        for block in sent { _ = framing.openStream(headers: block, body: []) }
        let frames = Self.frames(&framing)
        #expect(frames.count == sent.count)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for (frame, block) in zip(frames, sent) {
            var bytes = ByteBuffer(bytes: frame.payload)
            let decoded = try decoder.decodeHeaders(from: &bytes)
            #expect(decoded.map { [$0.name, $0.value] } == block.map { [$0.name, $0.value] })
        }
        func carriesValue(_ frame: Int, _ value: String) -> Bool { frames[frame].payload.firstRange(of: Array(value.utf8)) != nil }
        #expect(carriesValue(0, pushA), "the first time, the value goes into the table")
        #expect(!carriesValue(1, pushA) && !carriesValue(2, pushA), "a repeat is one index into the table")
        #expect(carriesValue(3, pushB) && carriesValue(4, pushB), "a new value goes literally twice: alone, then into the table")
        #expect(!carriesValue(5, pushB), "from its third request on, the push's collapse id comes from the table")
        #expect(carriesValue(6, pushA) && carriesValue(7, pushB) && carriesValue(8, pushA), "alternating values go literally")
    }

    @Test func aRequestWithoutBodyEndsTheStreamOnItsHeaders() throws {
        var framing = try Self.connected()
        _ = framing.openStream(headers: Self.requestHeaders, body: [])
        let frames = Self.frames(&framing)
        #expect(frames.count == 1)
        #expect(frames[0].flags == 0x5, "END_HEADERS | END_STREAM")
    }

    @Test func aHeaderBlockLargerThanAFrameContinues() throws {
        var framing = try Self.connected()
        var headers = Self.requestHeaders
        headers.add(name: "x-large", value: String(repeating: "v", count: 20_000), indexing: .nonIndexable)
        _ = framing.openStream(headers: headers, body: [1])
        let frames = Self.frames(&framing)
        #expect(frames.map(\.type) == [0x1, 0x9, 0x0])
        #expect(frames[0].flags == 0 && frames[0].payload.count == 16_384)
        #expect(frames[1].flags == 0x4)
        var block = ByteBuffer(bytes: frames[0].payload + frames[1].payload)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        decoder.maxHeaderListSize = 1 << 20
        #expect(try decoder.decodeHeaders(from: &block) == headers)
    }

    @Test func bodiesWaitForTheStreamAndConnectionWindows() throws {
        var framing = try Self.connected([(0x3, 1000), (0x4, 10)])
        let body = (0..<25).map { UInt8($0) }
        _ = framing.openStream(headers: Self.requestHeaders, body: body)
        var frames = Self.frames(&framing)
        #expect(frames.map(\.type) == [0x1, 0x0])
        #expect(frames[1] == RawFrame(type: 0x0, flags: 0, streamID: 1, payload: Array(body[0..<10])))

        try Self.feed(&framing, RawFrame.bytes(0x8, stream: 1, [0, 0, 0, 10]))
        frames = Self.frames(&framing)
        #expect(frames == [RawFrame(type: 0x0, flags: 0, streamID: 1, payload: Array(body[10..<20]))])

        // The stream may take more than is left: the rest goes out with END_STREAM.
        try Self.feed(&framing, RawFrame.bytes(0x8, stream: 1, [0, 0, 1, 0]))
        #expect(Self.frames(&framing) == [RawFrame(type: 0x0, flags: 0x1, streamID: 1, payload: Array(body[20...]))])
    }

    @Test func theConnectionWindowHoldsBackEveryStream() throws {
        var framing = try Self.connected()
        let body = [UInt8](repeating: 7, count: 5000)
        for _ in 0..<14 { _ = framing.openStream(headers: Self.requestHeaders, body: body) }
        let sent = Self.frames(&framing).filter { $0.type == 0x0 }.reduce(0) { $0 + $1.payload.count }
        #expect(sent == 65_535, "no more than the connection's initial window")
        try Self.feed(&framing, RawFrame.bytes(0x8, stream: 0, [0, 0, 0x27, 0x10]))  // +10,000
        let more = Self.frames(&framing).filter { $0.type == 0x0 }
        #expect(more.reduce(0) { $0 + $1.payload.count } == 70_000 - 65_535)
        #expect(more.last?.flags == 0x1, "the last stream's body is complete")
    }

    @Test func theServersStreamLimitIsKept() throws {
        var framing = try Self.connected([(0x3, 1)])
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        #expect(framing.openStream(headers: Self.requestHeaders, body: [1]) == 1)
        #expect(framing.openStream(headers: Self.requestHeaders, body: [1]) == nil)
        framing.output.clear()
        try Self.feed(&framing, Self.response(&encoder, stream: 1, status: "200"))
        _ = Self.events(&framing)
        #expect(framing.openStream(headers: Self.requestHeaders, body: [1]) == 3)
    }

    // MARK: Answers

    @Test func anAnswerIsOneEventWhateverTheChunking() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let body = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        let bytes = try Self.response(&encoder, stream: 1, status: "400", body: body)
        for chunk in [1, 5, bytes.count] {
            var framing = try Self.connected()
            _ = framing.openStream(headers: Self.requestHeaders, body: [1])
            var events: [HTTP2ClientFraming.Event] = []
            var offset = 0
            while offset < bytes.count {
                try Self.feed(&framing, Array(bytes[offset..<min(offset + chunk, bytes.count)]))
                events += Self.events(&framing)
                offset += chunk
            }
            #expect(events.count == 1)
            guard case .response(let stream, let status, let headers, let received) = events.first else {
                Issue.record("no answer with chunks of \(chunk)")
                continue
            }
            #expect(stream == 1 && status == 400 && received == body)
            #expect(headers.first(name: "apns-id") == "7e726ebe-6e0c-4000-8000-000000000001")
            #expect(framing.openStreamCount == 0)
        }
    }

    @Test func anAnswerBeforeTheWholeBodyStopsTheRequest() throws {
        var framing = try Self.connected([(0x3, 1000), (0x4, 4)])
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        _ = framing.openStream(headers: Self.requestHeaders, body: [UInt8](repeating: 1, count: 100))
        framing.output.clear()
        try Self.feed(&framing, Self.response(&encoder, stream: 1, status: "413", body: Array(#"{"reason":"PayloadTooLarge"}"#.utf8)))
        #expect(Self.events(&framing).count == 1)
        #expect(Self.frames(&framing) == [RawFrame(type: 0x3, flags: 0, streamID: 1, payload: [0, 0, 0, 0])], "RST_STREAM NO_ERROR")
        try Self.feed(&framing, RawFrame.bytes(0x8, stream: 0, [0, 0, 1, 0]))
        #expect(Self.frames(&framing).isEmpty, "nothing more of that body")
    }

    @Test func resetsAndGoAwayAreReported() throws {
        var framing = try Self.connected()
        for _ in 0..<3 { _ = framing.openStream(headers: Self.requestHeaders, body: [1]) }
        try Self.feed(
            &framing,
            RawFrame.bytes(0x3, stream: 1, [0, 0, 0, 7]) + RawFrame.bytes(0x7, [0, 0, 0, 3, 0, 0, 0, 0] + Array(#"{"reason":"Shutdown"}"#.utf8)))
        #expect(Self.events(&framing) == [
            .reset(streamID: 1, code: 7),
            .goAway(lastStreamID: 3, code: 0, debugData: Array(#"{"reason":"Shutdown"}"#.utf8)),
        ])
        #expect(framing.openStream(headers: Self.requestHeaders, body: [1]) == nil, "no new streams after GOAWAY")
    }

    @Test func aStreamWeResetIsForgottenButItsHeadersStillDecoded() throws {
        var framing = try Self.connected()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        _ = framing.openStream(headers: Self.requestHeaders, body: [1])
        _ = framing.openStream(headers: Self.requestHeaders, body: [1])
        framing.output.clear()
        framing.reset(streamID: 1)
        #expect(Self.frames(&framing) == [RawFrame(type: 0x3, flags: 0, streamID: 1, payload: [0, 0, 0, 8])], "RST_STREAM CANCEL")
        // The late answer to stream 1 adds to the server's HPACK table; the answer to 3 refers to it.
        try Self.feed(&framing, Self.response(&encoder, stream: 1, status: "200") + Self.response(&encoder, stream: 3, status: "200"))
        let events = Self.events(&framing)
        #expect(events.count == 1)
        if case .response(let stream, let status, let headers, _) = events.first {
            #expect(stream == 3 && status == 200)
            #expect(headers.first(name: "apns-id") == "7e726ebe-6e0c-4000-8000-000000000001")
        }
    }

    // MARK: Bad input

    @Test func protocolViolationsAreConnectionErrorsWithTheirCode() throws {
        let oversized = [UInt8(0), 0x40, 0x01, 0x0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 16_385)
        let cases: [(bytes: [UInt8], code: UInt32)] = [
            (oversized, 0x6),  // FRAME_SIZE_ERROR
            (RawFrame.bytes(0x9, flags: 0x4, stream: 1, [0x88]), 0x1),  // CONTINUATION without HEADERS
            (RawFrame.bytes(0x5, flags: 0x4, stream: 1, [0, 0, 0, 2, 0x88]), 0x1),  // PUSH_PROMISE
            (RawFrame.bytes(0x1, flags: 0x5, stream: 1, [0xff, 0xff, 0xff, 0xff, 0xff]), 0x9),  // COMPRESSION_ERROR
            (RawFrame.bytes(0x6, [1, 2, 3]), 0x6),  // short PING
            (RawFrame.bytes(0x4, stream: 1, []), 0x1),  // SETTINGS on a stream
            (RawFrame.settings([(0x5, 100)]), 0x1),  // MAX_FRAME_SIZE below the minimum
            (RawFrame.bytes(0x1, stream: 1, [0x88]) + RawFrame.bytes(0x0, stream: 1, [1]), 0x1),  // DATA amid a header block
        ]
        for (bytes, code) in cases {
            var framing = try Self.connected()
            _ = framing.openStream(headers: Self.requestHeaders, body: [1])
            let error = #expect(throws: HTTP2ConnectionError.self) { try Self.feed(&framing, bytes) }
            #expect(error?.code == code, "bytes \(bytes.prefix(12))")
        }
    }

    /// One response header block of `size` bytes (a `:status` and a long literal header), as HEADERS without
    /// END_HEADERS and CONTINUATIONs of up to 16 KiB, the last one with END_HEADERS.
    static func headerBlockInFrames(size: Int, stream: UInt32) throws -> [UInt8] {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: false)
        var block = ByteBuffer()
        try encoder.encode(headers: [":status": "200"], to: &block)
        let valueSize = size - block.readableBytes - 1 - 1 - 5 - 3  // the literal's prefix, name length and name, value length
        var headers = HPACKHeaders()
        headers.add(name: "x-big", value: String(repeating: "v", count: valueSize), indexing: .nonIndexable)
        try encoder.encode(headers: headers, to: &block)
        var bytes = Array(block.readableBytesView)
        #expect(bytes.count == size, "the block is \(bytes.count) bytes, meant \(size)")
        var frames = RawFrame.bytes(0x1, flags: 0x1, stream: stream, Array(bytes.prefix(100)))
        bytes.removeFirst(min(100, bytes.count))
        while !bytes.isEmpty {
            let chunk = Array(bytes.prefix(16_384))
            bytes.removeFirst(chunk.count)
            frames += RawFrame.bytes(0x9, flags: bytes.isEmpty ? 0x4 : 0, stream: stream, chunk)
        }
        return frames
    }

    @Test func aHeaderBlockUpToTheLimitDecodesAcrossContinuations() throws {
        var framing = try Self.connected()
        _ = framing.openStream(headers: Self.requestHeaders, body: [])
        try Self.feed(&framing, Self.headerBlockInFrames(size: 12_000, stream: 1))
        let events = Self.events(&framing)
        #expect(events.count == 1)
        guard case .response(1, 200, let headers, _) = events.first else {
            Issue.record("no answer: \(events)")
            return
        }
        #expect(headers.first(name: "x-big")?.count ?? 0 > 11_000)
    }

    @Test func aHeaderBlockPastTheLimitIsAConnectionErrorBeforeItsEnd() throws {
        var framing = try Self.connected()
        _ = framing.openStream(headers: Self.requestHeaders, body: [])
        // The peer of the report: a HEADERS without END_HEADERS, then full CONTINUATIONs that never end it.
        var bytes = RawFrame.bytes(0x1, flags: 0x1, stream: 1, [0x88])
        for _ in 0..<4 { bytes += RawFrame.bytes(0x9, stream: 1, [UInt8](repeating: 0, count: 16_384)) }
        var error = #expect(throws: HTTP2ConnectionError.self) { try Self.feed(&framing, bytes) }
        #expect(error?.code == 0xb, "ENHANCE_YOUR_CALM")

        // And a block that would end, just past the limit: refused as soon as it is known to be too large.
        var other = try Self.connected()
        _ = other.openStream(headers: Self.requestHeaders, body: [])
        error = #expect(throws: HTTP2ConnectionError.self) {
            try Self.feed(&other, Self.headerBlockInFrames(size: HPACKDecoder.defaultMaxHeaderListSize + 1, stream: 1))
        }
        #expect(error?.code == 0xb, "ENHANCE_YOUR_CALM")
    }

    @Test func aPartialFrameWaitsForTheRest() throws {
        var framing = try Self.connected()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        _ = framing.openStream(headers: Self.requestHeaders, body: [1])
        let bytes = try Self.response(&encoder, stream: 1, status: "200")
        try Self.feed(&framing, Array(bytes.dropLast()))
        #expect(Self.events(&framing).isEmpty)
        try Self.feed(&framing, [bytes.last!])
        #expect(Self.events(&framing).count == 1)
    }
}
