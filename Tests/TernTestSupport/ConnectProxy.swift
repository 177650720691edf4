import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A loopback HTTP proxy that opens tunnels, as a network's egress proxy does: it reads `CONNECT host:port`, asks for
/// `Proxy-Authorization` when it has credentials (407 without the right ones), connects to the target, answers 200
/// and then carries bytes both ways. `refuseWith(_:)` makes it answer every CONNECT with that status instead.
public final class ConnectProxy: Sendable {
    public let port: Int
    private let server: any Channel
    private let record: Record

    final class Record: Sendable {
        let tunnels = Mutex<[String]>([])
        let requests = Mutex<[String]>([])
        let refusal = Mutex<String?>(nil)
        let sockets = Mutex<[any Channel]>([])
    }

    /// - Parameter credentials: `user:password` the proxy requires, or nil for none.
    public init(credentials: String? = nil) async throws {
        let record = Record()
        self.record = record
        let expected = credentials.map { "Basic " + Data($0.utf8).base64EncodedString() }
        server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                record.sockets.withLock { $0.append(inbound) }
                return inbound.pipeline.addHandler(Handshake(expected: expected, record: record))
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = server.localAddress?.port ?? 0
    }

    /// The targets of the tunnels opened, in order (`host:port`).
    public var tunnels: [String] { record.tunnels.withLock { $0 } }

    /// Every request line the proxy read, in order (`CONNECT host:port HTTP/1.1`).
    public var requests: [String] { record.requests.withLock { $0 } }

    /// Answers every CONNECT from now on with `status` (`403 Forbidden`, say), opening nothing.
    public func refuseWith(_ status: String) {
        record.refusal.withLock { $0 = status }
    }

    public func close() async {
        try? await server.close()
        for socket in record.sockets.withLock({ $0 }) { try? await socket.close() }
    }

    /// Reads the CONNECT request, then opens the tunnel and hands the socket over to ``Carry``.
    private final class Handshake: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let expected: String?
        let record: Record
        var buffered = ByteBuffer()
        var done = false

        init(expected: String?, record: Record) {
            self.expected = expected
            self.record = record
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !done else { return }
            var bytes = unwrapInboundIn(data)
            buffered.writeBuffer(&bytes)
            let text = String(buffer: buffered)
            guard let end = text.range(of: "\r\n\r\n") else { return }
            done = true
            let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
            let requestLine = lines.first ?? ""
            record.requests.withLock { $0.append(requestLine) }
            let parts = requestLine.split(separator: " ")
            let headers = Dictionary(
                lines.dropFirst().compactMap { line -> (String, String)? in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }, uniquingKeysWith: { first, _ in first })
            let channel = context.channel
            @Sendable func answer(_ status: String, close: Bool) {
                var out = channel.allocator.buffer(string: "HTTP/1.1 \(status)\r\n")
                if status.hasPrefix("407") { out.writeString("Proxy-Authenticate: Basic realm=\"test\"\r\n") }
                out.writeString("Content-Length: 0\r\n\r\n")
                let written = channel.writeAndFlush(out)
                if close { written.whenComplete { _ in channel.close(promise: nil) } }
            }
            guard parts.count == 3, parts[0] == "CONNECT" else { return answer("405 Method Not Allowed", close: true) }
            if let refusal = record.refusal.withLock({ $0 }) { return answer(refusal, close: true) }
            if let expected, headers["proxy-authorization"] != expected { return answer("407 Proxy Authentication Required", close: true) }
            let target = String(parts[1])
            guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]) else {
                return answer("400 Bad Request", close: true)
            }
            let host = String(target[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            let inbound = context.channel
            let handshake = NIOLoopBound(self, eventLoop: inbound.eventLoop)
            let record = self.record
            ClientBootstrap(group: inbound.eventLoop)
                .channelInitializer { outbound in outbound.pipeline.addHandler(Carry(to: inbound)) }
                .connect(host: host, port: port)
                .whenComplete { result in
                    switch result {
                    case .success(let outbound):
                        record.sockets.withLock { $0.append(outbound) }
                        record.tunnels.withLock { $0.append(target) }
                        do {
                            try inbound.pipeline.syncOperations.addHandler(Carry(to: outbound))
                        } catch {
                            inbound.close(promise: nil)
                            return
                        }
                        inbound.pipeline.syncOperations.removeHandler(handshake.value, promise: nil)
                        inbound.writeAndFlush(inbound.allocator.buffer(string: "HTTP/1.1 200 Connection established\r\n\r\n"), promise: nil)
                    case .failure:
                        answer("502 Bad Gateway", close: true)
                    }
                }
        }
    }

    /// Carries what one socket reads to the other.
    private final class Carry: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let other: any Channel

        init(to other: any Channel) {
            self.other = other
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            other.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            other.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
