import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TernTestSupport
import Testing

@testable import TernServer

/// What holds a node's sockets against a flood, over real sockets: a ceiling on open connections, and a deadline for
/// a new connection's first request head (one that sends nothing, or a byte at a time).
@Suite(.serialized)
struct ConnectionGuardTests {
    /// A raw TCP connection: what it was sent back, and whether the server closed it.
    final class RawConnection: Sendable {
        let channel: any Channel
        private let received: Received

        /// What the server sent, so far.
        final class Received: Sendable {
            let text = Mutex("")
        }

        private init(channel: any Channel, received: Received) {
            self.channel = channel
            self.received = received
        }

        static func open(port: Int) async throws -> RawConnection {
            let received = Received()
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(received: received)) }
                }
                .connect(host: "127.0.0.1", port: port).get()
            return RawConnection(channel: channel, received: received)
        }

        func send(_ text: String) async throws {
            try await channel.writeAndFlush(ByteBuffer(string: text)).get()
        }

        var text: String { received.text.withLock { $0 } }

        /// Waits for the server to close the connection.
        func closedByServer(within seconds: Double = 10, _ what: String) async throws {
            try await withTimeout(seconds, what) { try await self.channel.closeFuture.get() }
        }

        private final class Collector: ChannelInboundHandler, Sendable {
            typealias InboundIn = ByteBuffer
            let received: Received
            init(received: Received) { self.received = received }
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                let bytes = unwrapInboundIn(data)
                received.text.withLock { $0 += String(buffer: bytes) }
            }
        }
    }

    static func health(port: Int) -> String { "GET /health HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n" }

    @Test func connectionsPastTheCeilingAreClosedAtOnceAndThoseUnderItAreServed() async throws {
        try await ServerHarness.withServer(configure: { $0.http.maxConnections = 3 }) { server in
            let port = server.server.boundPort!
            // The three under it are served, each before the next opens: the server sets up each connection on the
            // event loop it hands it to, so connections opened together may be counted in any order, and the one
            // closed would be whichever came last there, not the fourth.
            var held: [RawConnection] = []
            for index in 0..<3 {
                let connection = try await RawConnection.open(port: port)
                try await connection.send(Self.health(port: port))
                try await waitUntil("an answer under the ceiling (\(index + 1))") { connection.text.hasPrefix("HTTP/1.1 200") }
                held.append(connection)
            }
            let past = try await RawConnection.open(port: port)
            try await past.closedByServer("the connection past the ceiling to be closed")
            #expect(past.text.isEmpty, "the connection past the ceiling was answered: \(past.text)")
            // One closes: there is room again (once the server has seen it go).
            try await held[1].channel.close()
            try await waitUntil("room for a request") { (try? await server.master.get("/health"))?.status == 200 }
            for connection in held where connection.channel.isActive { try await connection.channel.close() }
        }
    }

    @Test func aConnectionThatSendsNoWholeRequestHeadInTimeIsClosedAndOneThatDidLivesOn() async throws {
        try await ServerHarness.withServer(configure: {
            $0.http.requestHeadTimeout = .seconds(1)
            $0.http.requestBodyTimeout = .seconds(1)
        }) { server in
            let port = server.server.boundPort!
            // Opened first, so their deadlines come first: a keep-alive API connection and a device's WebSocket,
            // each past its head.
            let api = try await RawConnection.open(port: port)
            try await api.send(Self.health(port: port))
            try await waitUntil("the first answer") { api.text.hasPrefix("HTTP/1.1 200") }
            let id = UUID().uuidString.lowercased()
            try await server.register(id, token: String(repeating: "cd", count: 32))
            let device = TestDevice(
                port: port, deviceID: id, appKey: server.device.bearer, secret: server.deviceSecrets[id], after: nil)

            let silent = try await RawConnection.open(port: port)
            let trickle = try await RawConnection.open(port: port)
            try await trickle.send("GET /health HT")
            try await silent.closedByServer("a connection that sent nothing to be closed")
            try await trickle.closedByServer("a connection that sent half a request line to be closed")

            // Past their own deadlines, the two that sent a whole head are open: each answers.
            try await api.send(Self.health(port: port))
            try await waitUntil("the second answer on the same connection") { api.text.components(separatedBy: "HTTP/1.1 200").count == 3 }
            _ = try await server.push(#"{"audience": {"devices": ["\#(id)"]}, "notification": {"title": "still here"}, "delivery": "online"}"#)
            #expect(try await device.next()[path: "notification.title"]?.string == "still here")
            await device.close()
            try await api.channel.close()
        }
    }

    /// A registration's head, with the app key any copy of the app holds, and the first byte of its 100-byte body.
    static func startedRegistration(_ server: RunningServer, port: Int) -> String {
        "PUT /v1/apps/demo/devices/\(UUID().uuidString.lowercased()) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            + "Authorization: Bearer \(server.device.bearer ?? "")\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    }

    @Test func aBodySentAByteAtATimeIsClosedAtItsDeadlineAndOthersAreServed() async throws {
        try await ServerHarness.withServer(configure: { $0.http.requestBodyTimeout = .seconds(1) }) { server in
            let port = server.server.boundPort!
            let slow = try await RawConnection.open(port: port)
            try await slow.send(Self.startedRegistration(server, port: port))
            // A byte every 200 ms: never idle, and 20 s to send the whole body.
            let trickle = Task {
                for _ in 0..<99 {
                    try await Task.sleep(for: .milliseconds(200))
                    try await slow.send(" ")
                }
            }
            defer { trickle.cancel() }
            try await slow.closedByServer(within: 5, "a body sent a byte at a time to be closed at its deadline")
            #expect(!slow.text.hasPrefix("HTTP/1.1 2"), "nothing was registered: \(slow.text)")

            let other = try await RawConnection.open(port: port)
            try await other.send(Self.health(port: port))
            try await waitUntil("another connection's answer") { other.text.hasPrefix("HTTP/1.1 200") }
            try await other.channel.close()
        }
    }

    /// A body one byte short of its length, then the client's side closed (FIN, as a client gone or cut off sends):
    /// the parser refuses the request, and the route must not act on the part that came. The body here is JSON whose
    /// last byte is a space, so the part is a whole registration; a console form cut so named another user.
    @Test func aBodyCutShortByItsClientIsNotActedOn() async throws {
        try await ServerHarness.withServer { server in
            let port = server.server.boundPort!
            let deviceID = UUID().uuidString.lowercased()
            let body = Fixture.registration(token: Fixture.token(7), tags: ["cut-short"]) + "  "
            let cut = try await RawConnection.open(port: port)
            try await cut.send(
                "PUT /v1/apps/demo/devices/\(deviceID) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                    + "Authorization: Bearer \(server.device.bearer ?? "")\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n\(body.dropLast())")
            try await cut.channel.close(mode: .output)
            try await cut.closedByServer("the cut-short request's connection to close")
            #expect(cut.text.hasPrefix("HTTP/1.1 400"), "\(cut.text)")

            // Nothing was registered: the master secret finds no such device, and a whole request still registers.
            #expect(try await server.master.get("/v1/apps/demo/devices/\(deviceID)").status == 404)
            let whole = try await server.device.put("/v1/apps/demo/devices/\(deviceID)", body)
            #expect(whole.status == 200 || whole.status == 201, "\(whole.status) \(whole.text)")
        }
    }

    @Test func aLaterRequestsHeadSentAByteAtATimeIsClosedAtItsDeadline() async throws {
        try await ServerHarness.withServer(configure: { $0.http.requestHeadTimeout = .seconds(1) }) { server in
            let port = server.server.boundPort!
            // No key needed: a first request answered, then the next one's head a byte every 200 ms (never idle).
            let kept = try await RawConnection.open(port: port)
            try await kept.send(Self.health(port: port))
            try await waitUntil("the first answer") { kept.text.hasPrefix("HTTP/1.1 200") }
            let trickle = Task {
                for byte in "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: \(String(repeating: "a", count: 200))" {
                    try await Task.sleep(for: .milliseconds(200))
                    try await kept.send(String(byte))
                }
            }
            defer { trickle.cancel() }
            try await kept.closedByServer(within: 5, "a later request's head sent a byte at a time to be closed at its deadline")
        }
    }

    @Test func requestsStillArrivingWhenTheServerBeginsToStopDoNotHoldTheStop() async throws {
        // The default deadlines (30 s): a stop waited for them, while the node went on sending pushes.
        try await ServerHarness.withServer { server in
            let port = server.server.boundPort!
            let head = try await RawConnection.open(port: port)
            try await head.send("GET /health HT")
            let body = try await RawConnection.open(port: port)
            try await body.send(Self.health(port: port))
            try await waitUntil("the first answer") { body.text.hasPrefix("HTTP/1.1 200") }
            try await body.send(Self.startedRegistration(server, port: port))

            await server.server.shutdown()
            try await head.closedByServer(within: 4, "a connection still sending its first head to be closed as the server stops")
            try await body.closedByServer(within: 4, "a connection still sending a body to be closed as the server stops")
        }
    }
}
