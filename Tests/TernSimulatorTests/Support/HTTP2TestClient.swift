import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import TernAPNs
import TernSimulator
import TernTestSupport

/// One request as it goes on the wire: pseudo-headers (nil leaves one out), then `headers` in order, duplicates and
/// odd values included, then the body.
struct HTTP2Request: Sendable {
    var method: String? = "POST"
    var scheme: String? = "https"
    var path: String?
    var authority: String? = "localhost"
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []

    var headerBlock: HPACKHeaders {
        var block = HPACKHeaders()
        if let method { block.add(name: ":method", value: method) }
        if let scheme { block.add(name: ":scheme", value: scheme) }
        if let path { block.add(name: ":path", value: path) }
        if let authority { block.add(name: ":authority", value: authority) }
        for header in headers { block.add(name: header.name, value: header.value) }
        return block
    }
}

/// The server's answer on one stream.
struct HTTP2Response: Sendable {
    var streamID: Int
    var status: Int
    var headers: HPACKHeaders
    var body: [UInt8]

    /// The first value of a header (names are lowercase in HTTP/2).
    func header(_ name: String) -> String? { headers.first(name: name) }
    func values(_ name: String) -> [String] { headers[name] }
    var bodyText: String { String(decoding: body, as: UTF8.self) }
    /// The answer as the protocol core decodes it.
    var apns: APNsResponse {
        APNsResponse(status: status, apnsID: header("apns-id"), apnsUniqueID: header("apns-unique-id"), body: body)
    }
}

/// A GOAWAY frame as received.
struct GoAway: Sendable {
    var lastStreamID: Int
    var errorCode: HTTP2ErrorCode
    var debugData: [UInt8]
    var debugText: String { String(decoding: debugData, as: UTF8.self) }
}

/// What the connection has seen so far, outside any one stream.
struct ConnectionEvents: Sendable {
    /// Every SETTINGS frame the server sent (not the acks), in order.
    var settings: [HTTP2Settings] = []
    var pingAcks: [UInt64] = []
    var goAway: GoAway?
    var closed = false
    var errors: [String] = []
    var sawTLSError = false

    /// MAX_CONCURRENT_STREAMS of each SETTINGS frame that carried it, in order.
    var maxConcurrentStreams: [Int] { values(of: .maxConcurrentStreams) }

    func values(of parameter: HTTP2SettingsParameter) -> [Int] {
        settings.compactMap { frame in frame.last(where: { $0.parameter == parameter })?.value }
    }
}

/// The stream ended (reset, or the connection closed) before a complete answer arrived.
struct StreamEndedWithoutResponse: Error, CustomStringConvertible {
    var detail: String
    var description: String { "the stream ended without a complete response: \(detail)" }
}

/// A small HTTP/2 client for the tests: real TLS with ALPN h2 against the simulator's CA, NIO's HTTP/2 handler with
/// the inline stream multiplexer, one stream per request, and a record of the connection-level frames.
final class HTTP2TestClient: Sendable {
    let channel: any Channel
    let events: Observed<ConnectionEvents>
    private let multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>

    private init(channel: any Channel, multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>, events: Observed<ConnectionEvents>) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.events = events
    }

    /// Connects to `127.0.0.1:port`, trusting `certificateAuthorityPEM` for the server name "localhost", with an
    /// optional client certificate.
    static func connect(
        port: Int, trusting certificateAuthorityPEM: String, clientCertificate: IssuedCertificate? = nil
    ) async throws -> HTTP2TestClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(certificateAuthorityPEM.utf8), format: .pem)])
        tls.applicationProtocols = ["h2"]
        if let clientCertificate {
            tls.certificateChain = [.certificate(try NIOSSLCertificate(bytes: Array(clientCertificate.certificatePEM.utf8), format: .pem))]
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(clientCertificate.privateKeyPEM.utf8), format: .pem))
        }
        let sslContext = try NIOSSLContext(configuration: tls)

        // Requests are sent as written: the simulator must judge odd headers, not NIO.
        let configuration = {
            var configuration = NIOHTTP2Handler.Configuration()
            configuration.connection.headerBlockValidation = .disabled
            configuration.connection.contentLengthValidation = .disabled
            return configuration
        }()

        let events = Observed(ConnectionEvents())
        let (channel, multiplexer) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    channel.closeFuture.whenComplete { _ in events.update { $0.closed = true } }
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    let multiplexer = try pipeline.configureAsyncHTTP2Pipeline(mode: .client, configuration: configuration) {
                        stream in stream.eventLoop.makeSucceededVoidFuture()
                    }
                    try pipeline.addHandler(ConnectionObserver(events: events))
                    return (channel as any Channel, multiplexer)
                }
            }
        return HTTP2TestClient(channel: channel, multiplexer: multiplexer, events: events)
    }

    /// Sends `request` on a new stream and waits for the complete answer.
    func send(_ request: HTTP2Request, timeout: Double = 10) async throws -> HTTP2Response {
        try await start(request, timeout: timeout).response(timeout: timeout)
    }

    /// Sends `request` on a new stream and returns once it is written, without waiting for the answer.
    func start(_ request: HTTP2Request, timeout: Double = 10) async throws -> PendingResponse {
        let pending = try await multiplexer.openStream { stream in
            stream.eventLoop.makeCompletedFuture {
                let written = stream.eventLoop.makePromise(of: Void.self)
                let response = stream.eventLoop.makePromise(of: HTTP2Response.self)
                try stream.pipeline.syncOperations.addHandler(ResponseCollector(request: request, written: written, promise: response))
                return PendingResponse(
                    description: "\(request.method ?? "-") \(request.path ?? "-")", channel: stream,
                    written: written.futureResult, answer: response.futureResult)
            }
        }
        try await withTimeout(timeout, "\(pending.description) to be written") {
            try await withTaskCancellationHandler {
                try await pending.written.get()
            } onCancel: {
                pending.channel.close(promise: nil)
            }
        }
        return pending
    }

    /// Sends a PING and waits for its ack.
    func ping(timeout: Double = 10) async throws {
        let value = UInt64.random(in: 1...UInt64.max)
        try await channel.writeAndFlush(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: value), ack: false)))
        _ = try await events.wait("the PING ack", timeout: timeout) { $0.pingAcks.contains(value) }
    }

    /// Waits until the server has sent `count` SETTINGS frames.
    func settings(count: Int, timeout: Double = 10) async throws -> [HTTP2Settings] {
        try await events.wait("\(count) SETTINGS frame(s)", timeout: timeout) { $0.settings.count >= count }.settings
    }

    func goAway(timeout: Double = 10) async throws -> GoAway {
        try await events.wait("GOAWAY", timeout: timeout) { $0.goAway != nil }.goAway!
    }

    func waitUntilClosed(timeout: Double = 10) async throws {
        _ = try await events.wait("the connection to close", timeout: timeout) { $0.closed }
    }

    func close() async {
        try? await channel.close()
    }
}

/// A request on the wire whose answer has not been awaited yet.
struct PendingResponse: Sendable {
    let description: String
    let channel: any Channel
    let written: EventLoopFuture<Void>
    let answer: EventLoopFuture<HTTP2Response>

    /// Waits for the complete answer.
    func response(timeout: Double = 10) async throws -> HTTP2Response {
        try await withTimeout(timeout, "the response to \(description)") {
            try await withTaskCancellationHandler {
                try await answer.get()
            } onCancel: {
                channel.close(promise: nil)
            }
        }
    }
}

/// Writes one request when its stream becomes active and completes `promise` with the answer.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let request: HTTP2Request
    private let written: EventLoopPromise<Void>
    private let promise: EventLoopPromise<HTTP2Response>
    private var head: HPACKHeaders?
    private var body: [UInt8] = []
    private var done = false

    init(request: HTTP2Request, written: EventLoopPromise<Void>, promise: EventLoopPromise<HTTP2Response>) {
        self.request = request
        self.written = written
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        // Done writing counts whether or not every byte went out: the server may answer and reset a stream (an
        // oversized body) before the client has sent all of it.
        let writes = context.eventLoop.makePromise(of: Void.self)
        writes.futureResult.whenComplete { [written] _ in written.succeed(()) }
        let headers = HTTP2Frame.FramePayload.headers(.init(headers: request.headerBlock, endStream: request.body.isEmpty))
        if request.body.isEmpty {
            context.writeAndFlush(wrapOutboundOut(headers), promise: writes)
        } else {
            context.write(wrapOutboundOut(headers), promise: nil)
            let buffer = context.channel.allocator.buffer(bytes: request.body)
            context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: writes)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if head == nil { head = headers.headers }
            if headers.endStream { finish(context: context) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data { body.append(contentsOf: buffer.readableBytesView) }
            if data.endStream { finish(context: context) }
        case .rstStream(let code):
            fail(StreamEndedWithoutResponse(detail: "RST_STREAM \(code)"))
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(StreamEndedWithoutResponse(detail: "stream closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(StreamEndedWithoutResponse(detail: String(describing: error)))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Every promise is completed, however the stream ended (NIO's debug builds trap on a leaked promise); a
        // second completion is ignored.
        written.succeed(())
        fail(StreamEndedWithoutResponse(detail: "stream closed"))
    }

    private func finish(context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        guard let head, let status = head.first(name: ":status").flatMap({ Int($0) }) else {
            promise.fail(StreamEndedWithoutResponse(detail: "no :status"))
            return
        }
        let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map { Int($0) } ?? 0
        promise.succeed(HTTP2Response(streamID: streamID, status: status, headers: head, body: body))
    }

    private func fail(_ error: any Error) {
        guard !done else { return }
        done = true
        promise.fail(error)
    }
}

/// Records the frames of stream 0 (the inline multiplexer forwards them here) and connection errors.
private final class ConnectionObserver: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let events: Observed<ConnectionEvents>

    init(events: Observed<ConnectionEvents>) {
        self.events = events
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .settings(.settings(let settings)):
            events.update { $0.settings.append(settings) }
        case .ping(let data, ack: true):
            events.update { $0.pingAcks.append(data.integer) }
        case .goAway(let lastStreamID, let errorCode, let debugData):
            let goAway = GoAway(
                lastStreamID: Int(lastStreamID), errorCode: errorCode, debugData: debugData.map { Array($0.readableBytesView) } ?? [])
            events.update { $0.goAway = goAway }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let isTLS = error is NIOSSLError || error is BoringSSLError
        events.update { events in
            events.errors.append(String(describing: error))
            if isTLS { events.sawTLSError = true }
        }
        context.close(promise: nil)
    }
}
