import Foundation
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP proxy that carries the client's connections to APNs through a tunnel (`CONNECT host:port`), as a
/// network whose only way out is an egress proxy needs. TLS runs end to end through the tunnel: the proxy sees the
/// endpoint's name and port, never a notification, a provider token or the client certificate.
public struct HTTPProxy: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Basic authentication to the proxy (`Proxy-Authorization`), if it asks for it. Never logged or shown.
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Reads `http://[user:password@]host:port` (the port is required; user and password percent-encoded).
    /// - Throws: ``APNsClientError`` (`invalidConfiguration`) saying what is wrong, without the password.
    public init(url: String) throws(APNsClientError) {
        func invalid(_ problem: String) -> APNsClientError {
            APNsClientError.invalidConfiguration("the proxy must be http://[user:password@]host:port: \(problem)")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            throw invalid("not a URL")
        }
        guard scheme == "http" else { throw invalid("the scheme is \(scheme), not http (TLS runs through the tunnel, end to end)") }
        guard let host = components.host, !host.isEmpty else { throw invalid("no host") }
        guard let port = components.port, (1...65_535).contains(port) else { throw invalid("no port 1-65535") }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil else {
            throw invalid("a path, query or fragment")
        }
        if components.password != nil, components.user?.isEmpty ?? true { throw invalid("a password without a user") }
        self.init(
            host: host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host, port: port,
            username: components.user.map { $0.removingPercentEncoding ?? $0 },
            password: components.password.map { $0.removingPercentEncoding ?? $0 })
    }

    /// `http://host:port`, without the credentials: what logs and errors show.
    public var description: String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// The CONNECT request's headers: the target, and the credentials if there are any.
    func connectHeaders(target: String) -> HTTPHeaders {
        var headers = HTTPHeaders([("Host", target)])
        if let username {
            let credentials = Data("\(username):\(password ?? "")".utf8).base64EncodedString()
            headers.add(name: "Proxy-Authorization", value: "Basic \(credentials)")
        }
        return headers
    }
}

/// Why a tunnel through the proxy did not open: what the client's connect error says.
struct ProxyTunnelError: Error, CustomStringConvertible {
    var description: String
}

/// Opens a client's TCP connection to an endpoint, directly or through an ``HTTPProxy``'s tunnel, and adds the
/// connection's own handlers (TLS first) once the bytes reach the endpoint.
enum EndpointConnector {
    /// - Parameters:
    ///   - timeout: for the TCP connect, and then for the proxy's answer to the CONNECT.
    ///   - handlers: adds the connection's handlers; through a proxy, on a channel already active.
    static func connect(
        on loop: any EventLoop, host: String, port: Int, proxy: HTTPProxy?, timeout: TimeAmount,
        handlers: @escaping @Sendable (any Channel) throws -> Void
    ) -> EventLoopFuture<any Channel> {
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(timeout)
        guard let proxy else {
            return bootstrap.channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try handlers(channel) }
            }
            .connect(host: host, port: port)
        }
        let target = "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        let tunnel = loop.makePromise(of: Void.self)
        let answer = ProxyAnswer()
        let connected = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let pipeline = channel.pipeline.syncOperations
                try pipeline.addHandler(HTTPRequestEncoder())
                try pipeline.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)))
                try pipeline.addHandler(answer)
                try pipeline.addHandler(
                    NIOHTTP1ProxyConnectHandler(
                        targetHost: host, targetPort: port, headers: proxy.connectHeaders(target: target),
                        deadline: .now() + timeout, promise: tunnel))
            }
        }
        .connect(host: proxy.host, port: proxy.port)
        .flatMapErrorThrowing { error -> any Channel in
            // The tunnel's promise too, in case the CONNECT handler never ran (completing it again is ignored).
            let failure = ProxyTunnelError(description: "cannot connect to the proxy \(proxy): \(error)")
            tunnel.fail(failure)
            throw failure
        }
        return connected.flatMap { channel in
            tunnel.futureResult
                .flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    if error is ProxyTunnelError { throw error }
                    let status = answer.status.map { " (it answered \($0.code) \($0.reasonPhrase))" } ?? ""
                    let reason: String
                    let failure = error as? NIOHTTP1ProxyConnectHandler.Error
                    if failure == .proxyAuthenticationRequired() {
                        reason = "it asks for credentials (407): check the proxy's user and password"
                    } else if failure == .httpProxyHandshakeTimeout() {
                        reason = "no answer to CONNECT within \(timeout.nanoseconds / 1_000_000) ms"
                    } else if failure == .invalidProxyResponseHead(HTTPResponseHead(version: .http1_1, status: .ok)) {
                        reason = "it refused the tunnel\(status)"
                    } else if failure == .remoteConnectionClosed() || failure == .channelUnexpectedlyInactive() {
                        reason = "it closed the connection\(status)"
                    } else {
                        reason = "\(error)"
                    }
                    throw ProxyTunnelError(description: "the proxy \(proxy) opened no tunnel to \(target): \(reason)")
                }
                .flatMap {
                    // The tunnel carries bytes to the endpoint now: HTTP/1.1 to the proxy is over (the CONNECT handler
                    // has removed itself).
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        return [
                            pipeline.removeHandler(answer),
                            pipeline.removeHandler(try pipeline.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self)),
                            pipeline.removeHandler(try pipeline.handler(type: HTTPRequestEncoder.self)),
                        ]
                    }
                    .flatMap { EventLoopFuture.andAllSucceed($0, on: channel.eventLoop) }
                }
                .flatMapThrowing {
                    try handlers(channel)
                    return channel
                }
                .flatMapErrorThrowing { error in
                    // Whatever failed after the connect, the socket goes with it (closing it twice is harmless).
                    channel.close(promise: nil)
                    throw error
                }
        }
    }
}

/// Keeps the status of the proxy's answer to CONNECT, for the error when it is not 2xx.
private final class ProxyAnswer: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let head = Mutex<HTTPResponseStatus?>(nil)

    var status: HTTPResponseStatus? { head.withLock { $0 } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let response) = unwrapInboundIn(data) { head.withLock { $0 = response.status } }
        context.fireChannelRead(data)
    }
}
