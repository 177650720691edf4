import NIOCore
import NIOEmbedded
import NIOWebSocket
import Synchronization
import Testing

@testable import TernServer

/// The online channel's connection handler on an `EmbeddedChannel`, its time advanced by hand: pings and pongs, the
/// closing handshake from either side, and what it does with the device's frames.
struct DeviceSocketHandlerTests {
    /// A connected channel with the handler, and what the handler reported.
    private final class Harness {
        let channel = EmbeddedChannel()
        let handler = DeviceSocketHandler(pingInterval: .seconds(30))
        let reports = Reports()

        /// What the handler reported.
        final class Reports: Sendable {
            let texts = Mutex<[String]>([])
            let closes = Mutex(0)
        }

        var texts: [String] { reports.texts.withLock { $0 } }
        var closes: Int { reports.closes.withLock { $0 } }

        init(refuse: String? = nil) throws {
            handler.events = .init(
                text: { [reports] text in
                    reports.texts.withLock { $0.append(text) }
                    return text == refuse ? .badFrame("refused") : nil
                },
                closed: { [reports] in reports.closes.withLock { $0 += 1 } })
            try channel.pipeline.syncOperations.addHandler(handler)
            channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1), promise: nil)
        }

        func advance(seconds: Int64) { channel.embeddedEventLoop.advanceTime(by: .seconds(seconds)) }

        func receive(_ opcode: WebSocketOpcode, _ text: String = "") throws {
            try channel.writeInbound(WebSocketFrame(fin: true, opcode: opcode, data: ByteBuffer(string: text)))
        }

        func receiveClose(code: Int) throws {
            var data = ByteBuffer()
            data.write(webSocketErrorCode: .init(codeNumber: code))
            try channel.writeInbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
        }

        /// The frames written since the last call.
        func written() throws -> [WebSocketFrame] {
            var frames: [WebSocketFrame] = []
            while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
            return frames
        }

        /// The close frame's code and reason.
        static func close(_ frame: WebSocketFrame?) -> (code: UInt16, reason: String)? {
            guard var data = frame?.data, frame?.opcode == .connectionClose, let code = data.readInteger(as: UInt16.self) else { return nil }
            return (code, data.readString(length: data.readableBytes) ?? "")
        }
    }

    @Test func itPingsEveryIntervalAndClosesAConnectionThatMissedItsPong() throws {
        let harness = try Harness()
        harness.advance(seconds: 29)
        #expect(try harness.written().isEmpty)
        harness.advance(seconds: 1)
        #expect(try harness.written().map(\.opcode) == [.ping])
        // Answered: the next ping goes, the connection stays.
        try harness.receive(.pong, "tern")
        harness.advance(seconds: 30)
        #expect(try harness.written().map(\.opcode) == [.ping])
        #expect(harness.channel.isActive)
        // Not answered by the next: closed with 1001, at once (a device that answers no ping answers no close).
        harness.advance(seconds: 30)
        let close = Harness.close(try harness.written().first)
        #expect(close?.code == 1001)
        #expect(close?.reason == "Ping timeout")
        #expect(!harness.channel.isActive)
        #expect(harness.closes == 1)
    }

    @Test func itAnswersThePeersPingsWithTheirData() throws {
        let harness = try Harness()
        try harness.receive(.ping, "are you there")
        let frames = try harness.written()
        #expect(frames.map(\.opcode) == [.pong])
        #expect(frames.first.map { String(buffer: $0.data) } == "are you there")
    }

    @Test func aPingIsNotAnsweredWhileTheSocketTakesNoMore() throws {
        // A device that sends pings and reads nothing: its pongs would pile up in the server's memory.
        let harness = try Harness()
        harness.channel.isWritable = false
        for _ in 0..<1000 { try harness.receive(.ping, "flood") }
        #expect(try harness.written().isEmpty)
        harness.channel.isWritable = true
        try harness.receive(.ping, "again")
        #expect(try harness.written().map(\.opcode) == [.pong])
    }

    @Test func aPingTimeoutAndTheDevicesCloseEndTheConnectionEvenIfNothingWrittenLeaves() throws {
        // Writes that never complete: the socket of a device that stopped reading.
        for devicesClose in [false, true] {
            let harness = try Harness()
            let stuck = StuckWrites()
            defer { stuck.release() }
            try harness.channel.pipeline.syncOperations.addHandler(stuck, position: .first)
            if devicesClose {
                try harness.receiveClose(code: 1000)
                #expect(harness.channel.isActive, "its answer is stuck; it waits the close timeout for it")
                harness.advance(seconds: Int64(5))
            } else {
                harness.advance(seconds: 60)
            }
            #expect(!harness.channel.isActive, devicesClose ? "after the device's close" : "after the ping timeout")
            #expect(harness.closes == 1)
        }
    }

    /// Holds every write's promise unfulfilled, as a socket whose peer stopped reading does, until ``release()``.
    private final class StuckWrites: ChannelOutboundHandler {
        typealias OutboundIn = Any
        private var held: [EventLoopPromise<Void>] = []
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if let promise { held.append(promise) }
        }
        func flush(context: ChannelHandlerContext) {}
        func release() {
            for promise in held { promise.fail(ChannelError.ioOnClosedChannel) }
            held = []
        }
    }

    @Test(arguments: [
        ("unmasked", "a client's frames must be masked"),
        ("rsv1", "reserved bits set, and no extension was agreed"),
        ("opcode 3", "opcode 3 is reserved"),
    ])
    func aFrameBreakingTheClientRulesClosesWith4400(broken: String, reason: String) throws {
        let harness = try Harness()
        try harness.channel.pipeline.syncOperations.addHandler(ClientFrameRules(), position: .first)
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        func masked(_ text: String) -> ByteBuffer {
            var data = ByteBuffer(string: text)
            data.webSocketMask(key)
            return data
        }
        // A well-formed frame passes, unmasked for the handler.
        try harness.channel.writeInbound(WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: masked("fine")))
        #expect(harness.texts == ["fine"])
        let frame =
            switch broken {
            case "unmasked": WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "x"))
            case "rsv1": WebSocketFrame(fin: true, rsv1: true, opcode: .text, maskKey: key, data: masked("x"))
            default: WebSocketFrame(fin: true, opcode: WebSocketOpcode(encodedWebSocketOpcode: 3)!, maskKey: key, data: masked("x"))
            }
        try harness.channel.writeInbound(frame)
        let close = Harness.close(try harness.written().first)
        #expect(close?.code == 4400)
        #expect(close?.reason == "bad frame: \(reason)")
        #expect(harness.texts == ["fine"], "the broken frame is not taken")
    }

    @Test func textFramesGoToTheConnectionAndARefusalClosesWithItsCode() throws {
        let harness = try Harness(refuse: "bad")
        try harness.receive(.text, "good")
        #expect(try harness.written().isEmpty)
        try harness.receive(.text, "bad")
        let close = Harness.close(try harness.written().first)
        #expect(close?.code == 4400)
        #expect(close?.reason == "bad frame: refused")
        // Nothing more is taken while closing; the device's close ends the handshake.
        try harness.receive(.text, "late")
        #expect(harness.texts == ["good", "bad"])
        #expect(harness.channel.isActive)
        try harness.receiveClose(code: 4400)
        #expect(!harness.channel.isActive)
    }

    @Test func aBinaryFrameClosesWith1003AndADeviceThatNeverAnswersIsCutAfterTheCloseTimeout() throws {
        let harness = try Harness()
        try harness.receive(.binary, "\u{1}\u{2}")
        #expect(Harness.close(try harness.written().first)?.code == 1003)
        harness.advance(seconds: 4)
        #expect(harness.channel.isActive)
        harness.advance(seconds: 1)
        #expect(!harness.channel.isActive)
    }

    @Test func theDevicesCloseIsAnsweredWithItsCodeAndEndsTheConnection() throws {
        let harness = try Harness()
        try harness.receiveClose(code: 1000)
        let close = Harness.close(try harness.written().first)
        #expect(close?.code == 1000)
        #expect(!harness.channel.isActive)
        #expect(harness.closes == 1)
    }

    @Test func aDeviceWhoseSideOfTheSocketEndedIsClosed() throws {
        // The HTTP server allows half-closed connections: an app killed without a close frame shows as input closed.
        let harness = try Harness()
        harness.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!harness.channel.isActive)
        #expect(harness.closes == 1)
    }

    @Test func textFramesThatAreNotUTF8AreRefused() throws {
        let harness = try Harness()
        try harness.channel.writeInbound(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0xFF, 0xFE])))
        let close = Harness.close(try harness.written().first)
        #expect(close?.code == 4400)
        #expect(harness.texts.isEmpty)
    }

    @Test func writesGoOutInOrderAndNotOnceClosing() throws {
        let harness = try Harness()
        #expect(harness.handler.write(texts: ["one", "two"]) != nil)
        #expect(try harness.written().map { String(buffer: $0.data) } == ["one", "two"])
        // The server stops: its close goes once, and nothing is written after it.
        harness.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(Harness.close(try harness.written().first)?.code == 1001)
        #expect(harness.handler.write(texts: ["three"]) == nil)
        #expect(harness.handler.close(.replaced) == nil)
        #expect(try harness.written().isEmpty)
    }
}
