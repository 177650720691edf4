import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A loopback TCP relay to `target` that can cut the connections through it the way a network does: `freeze()`
/// stops carrying their bytes either way without closing anything, so neither end hears of it (no FIN, no RST).
/// Connections made after a freeze are carried as usual. `refuse()` is the server going away: every connection closes
/// and new ones are closed as they come, until `carry()`. `blackHole()` is the network going silent: the connections
/// through the relay and those made after carry nothing, until `carry()` (for the new ones).
public final class TCPRelay: Sendable {
    /// The port the relay listens on (127.0.0.1).
    public let port: Int
    private let server: any Channel
    private let links = Links()

    final class Links: Sendable {
        let all = Mutex<[Link]>([])
        let refusing = Atomic<Bool>(false)
        let swallowing = Atomic<Bool>(false)
    }

    /// One connection through the relay: both of its sockets share whether it still carries bytes.
    final class Link: Sendable {
        let frozen = Atomic<Bool>(false)
        let sockets = Mutex<[any Channel]>([])
    }

    public init(to targetHost: String, port targetPort: Int) async throws {
        let links = self.links
        let group = MultiThreadedEventLoopGroup.singleton
        server = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                if links.refusing.load(ordering: .sequentiallyConsistent) { return inbound.close() }
                let link = Link()
                if links.swallowing.load(ordering: .sequentiallyConsistent) { link.frozen.store(true, ordering: .sequentiallyConsistent) }
                links.all.withLock { $0.append(link) }
                let outbound = ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.pipeline.addHandler(Carry(to: inbound.eventLoop.makeSucceededFuture(inbound), link: link))
                    }
                    .connect(host: targetHost, port: targetPort)
                outbound.whenSuccess { outbound in link.sockets.withLock { $0 = [inbound, outbound] } }
                outbound.whenFailure { _ in inbound.close(promise: nil) }
                // What the client sends before the relay's own connection is up waits for it, in order.
                return inbound.pipeline.addHandler(Carry(to: outbound, link: link))
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = server.localAddress?.port ?? 0
    }

    /// A relay to the server of `url` (`scheme://user@host:port/…`), and the same URL through the relay.
    public static func relaying(_ url: String) async throws -> (relay: TCPRelay, url: String) {
        guard var components = URLComponents(string: url), let host = components.host else {
            throw RelayError(description: "not a URL with a host: \(url)")
        }
        let relay = try await TCPRelay(to: host, port: components.port ?? 5432)
        components.host = "127.0.0.1"
        components.port = relay.port
        guard let relayed = components.string else { throw RelayError(description: "cannot rewrite \(url)") }
        return (relay, relayed)
    }

    public struct RelayError: Error, CustomStringConvertible {
        public var description: String
    }

    /// From now on, the connections open through the relay carry nothing, and their closes are not passed on.
    public func freeze() {
        for link in links.all.withLock({ $0 }) { link.frozen.store(true, ordering: .sequentiallyConsistent) }
    }

    /// Closes every connection through the relay, and each new one as it comes, until ``carry()``.
    public func refuse() async {
        links.refusing.store(true, ordering: .sequentiallyConsistent)
        let all = links.all.withLock { all in
            defer { all.removeAll() }
            return all
        }
        for link in all {
            for socket in link.sockets.withLock({ $0 }) { try? await socket.close() }
        }
    }

    /// Carries nothing from now on, on the connections through the relay and on those made after, without closing
    /// any, until ``carry()``.
    public func blackHole() {
        links.swallowing.store(true, ordering: .sequentiallyConsistent)
        freeze()
    }

    /// Carries new connections again after ``refuse()`` or ``blackHole()`` (those it froze stay frozen).
    public func carry() {
        links.refusing.store(false, ordering: .sequentiallyConsistent)
        links.swallowing.store(false, ordering: .sequentiallyConsistent)
    }

    /// Stops listening and closes every connection through the relay.
    public func close() async {
        try? await server.close()
        for link in links.all.withLock({ $0 }) {
            for socket in link.sockets.withLock({ $0 }) { try? await socket.close() }
        }
    }

    /// Carries what one socket reads to the other, unless the link is frozen.
    private final class Carry: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let other: EventLoopFuture<any Channel>
        let link: Link

        init(to other: EventLoopFuture<any Channel>, link: Link) {
            self.other = other
            self.link = link
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !link.frozen.load(ordering: .sequentiallyConsistent) else { return }
            let bytes = unwrapInboundIn(data)
            other.whenSuccess { $0.writeAndFlush(bytes, promise: nil) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !link.frozen.load(ordering: .sequentiallyConsistent) { other.whenSuccess { $0.close(promise: nil) } }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
