import NIOCore
import NIOEmbedded
import NIOHPACK
import Synchronization
import TernTestSupport
import Testing

@testable import TernAPNsClient

/// The connection handler in an `EmbeddedChannel`: what it writes and reports for what the server sends, with the
/// socket's writability in the test's hands.
@Suite struct ConnectionHandlerTests {
    /// Records what the handler tells the pool, and the outcomes of requests, in order.
    final class Recorder: APNsConnectionDelegate {
        private let log = Mutex<[String]>([])

        var events: [String] { log.withLock { $0 } }

        func record(_ event: String) { log.withLock { $0.append(event) } }

        func connection(_ id: Int, maxConcurrentStreamsChanged value: Int) { record("max streams \(value)") }
        func connectionDraining(_ id: Int) { record("draining") }
        func connectionAnswered(_ id: Int) { record("answered") }
        func connection(_ id: Int, failedWith error: any Error) { record("failed") }
    }

    /// A handler past the preface and the server's SETTINGS, with what it wrote so far read and dropped.
    static func connected(_ recorder: Recorder) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let settings = APNsConnectionHandler.Settings(authority: "apns.test", idlePingInterval: .seconds(60), pingTimeout: .seconds(10))
        try channel.pipeline.syncOperations.addHandler(
            APNsConnectionHandler(id: 1, settings: settings, delegate: recorder, allocator: channel.allocator))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(ByteBuffer(bytes: RawFrame.settings([(0x3, 100)])))
        _ = try written(channel)
        return channel
    }

    /// Every frame the handler wrote since the last call.
    static func written(_ channel: EmbeddedChannel) throws -> [RawFrame] {
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        if bytes.readableBytesView.starts(with: "PRI * HTTP/2.0".utf8) { bytes.moveReaderIndex(forwardBy: 24) }
        return RawFrame.parse(bytes)
    }

    static func setWritable(_ channel: EmbeddedChannel, _ writable: Bool) {
        channel.isWritable = writable
        channel.pipeline.fireChannelWritabilityChanged()
    }

    static func ping(_ last: UInt8) -> [UInt8] { RawFrame.bytes(0x6, [0, 0, 0, 0, 0, 0, 0, last]) }
    static func ack(_ last: UInt8) -> RawFrame { RawFrame(type: 0x6, flags: 0x1, streamID: 0, payload: [0, 0, 0, 0, 0, 0, 0, last]) }

    @Test func aPingIsAcknowledgedAtOnceWhileTheSocketTakesBytes() throws {
        let channel = try Self.connected(Recorder())
        defer { _ = try? channel.finish() }
        try channel.writeInbound(ByteBuffer(bytes: Self.ping(1)))
        #expect(try Self.written(channel) == [Self.ack(1)])
    }

    @Test func pingAcksWaitForTheSocketAndAFloodWhileItIsFullClosesTheConnection() throws {
        let recorder = Recorder()
        let channel = try Self.connected(recorder)
        defer { _ = try? channel.finish() }

        Self.setWritable(channel, false)
        try channel.writeInbound(ByteBuffer(bytes: (1...10).flatMap { Self.ping($0) }))
        #expect(try Self.written(channel).isEmpty, "no ACK is queued behind a full socket")
        Self.setWritable(channel, true)
        #expect(try Self.written(channel) == (1...10).map { Self.ack($0) }, "the ACKs that waited go out when it drains")

        // The peer of the report: PINGs without end, reading nothing.
        Self.setWritable(channel, false)
        try channel.writeInbound(ByteBuffer(bytes: (0..<5_000).flatMap { _ in Self.ping(7) }))
        let frames = try Self.written(channel)
        #expect(frames.filter { $0.type == 0x6 }.count == 0, "not one ACK of the flood")
        #expect(frames.map(\.type) == [0x7], "GOAWAY")
        #expect(frames.first?.payload[4..<8].elementsEqual([0, 0, 0, 0xb]) == true, "ENHANCE_YOUR_CALM")
        #expect(!channel.isActive, "the connection is closed, and the pool replaces it")
        #expect(recorder.events.last == "failed")
    }

    static func request(_ recorder: Recorder, _ name: String) -> WireRequest {
        WireRequest(path: "/3/device/ab", headers: [("apns-topic", "com.example.app")], payload: [1], deadline: .now() + .seconds(60)) {
            outcome in
            switch outcome {
            case .answered(let response, _): recorder.record("\(name) answered \(response.status)")
            case .unprocessed: recorder.record("\(name) unprocessed")
            case .failed: recorder.record("\(name) failed")
            case .timedOut: recorder.record("\(name) timed out")
            }
        }
    }

    @Test func thePoolHearsOfTheFirstAnswerOnly() throws {
        let recorder = Recorder()
        let channel = try Self.connected(recorder)
        defer { _ = try? channel.finish() }
        let handler = try channel.pipeline.syncOperations.handler(type: APNsConnectionHandler.self)
        handler.send([Self.request(recorder, "first"), Self.request(recorder, "second")])
        var encoder = HPACKEncoder(allocator: channel.allocator)
        var block = ByteBuffer()
        try encoder.encode(headers: [":status": "200"], to: &block)
        let answer = Array(block.readableBytesView)
        try channel.writeInbound(ByteBuffer(bytes: RawFrame.bytes(0x1, flags: 0x5, stream: 1, answer)))
        try channel.writeInbound(ByteBuffer(bytes: RawFrame.bytes(0x1, flags: 0x5, stream: 3, [0x88])))
        #expect(recorder.events == ["max streams 100", "answered", "first answered 200", "second answered 200"])
    }

    @Test func goAwayReachesThePoolBeforeTheRequestsItSendsBack() throws {
        let recorder = Recorder()
        let channel = try Self.connected(recorder)
        defer { _ = try? channel.finish() }
        let handler = try channel.pipeline.syncOperations.handler(type: APNsConnectionHandler.self)
        handler.send([Self.request(recorder, "first")])
        // GOAWAY with last stream 0: the request was not processed. Its caller sends it again at once, and the pool
        // must already know not to lend this connection, and to back off before the next.
        try channel.writeInbound(ByteBuffer(bytes: RawFrame.bytes(0x7, [0, 0, 0, 0, 0, 0, 0, 0])))
        #expect(recorder.events == ["max streams 100", "draining", "first unprocessed"])
        #expect(!channel.isActive)
    }
}
