import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import TernWeb

/// `tern serve`'s HTTP/1.1 connections: the API, through Hummingbird's responder, and the online channel's WebSocket
/// upgrades (``DeviceChannelAPI``).
///
/// An upgraded connection leaves Hummingbird's per-connection task at once and is served by NIO handlers
/// (``DeviceSocketHandler``), so an idle device costs its socket and a few small objects rather than tasks. A refused
/// upgrade is answered with the API's JSON error (401, 403, 404, 429, 400 naming `after`), which the WebSocket library
/// this replaced could not say (it answered a bare 400).
struct HTTPChannel: ServerChildChannel, HTTPChannelHandler {
    enum Outcome: Sendable {
        /// A plain HTTP connection.
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// A WebSocket upgrade refused with this error (also one to a path other than the device channel's): answered,
        /// then closed. Its request cannot go on to the API, as NIO's upgrade handler consumed its head.
        case refused(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, JSONAPIError)
        /// Upgraded: NIO handlers serve it from now on.
        case webSocket
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let devices: DeviceChannelAPI
    /// The parser's limits for header fields and the whole header list (bytes).
    let headerLimits: (field: Int, list: Int)
    /// Open connections at most; past it, a new one is closed at once.
    let ceiling: ConnectionCeiling
    /// How long a request's head may take to arrive (a new connection's first from its opening).
    let requestHeadTimeout: Duration
    /// How long a request's body may take to arrive after its head.
    let requestBodyTimeout: Duration
    /// How long a connection may wait between requests.
    let idleTimeout: Duration

    /// Why a connection was closed as soon as it was accepted.
    struct OverCeiling: Error {}

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        guard ceiling.admit() else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(OverCeiling())
        }
        channel.closeFuture.whenComplete { [ceiling] _ in ceiling.release() }
        return channel.eventLoop.makeCompletedFuture {
            // Bound to the channel's event loop, where the upgrade's closures below run.
            let headDeadline = NIOLoopBound(RequestHeadDeadline(timeout: requestHeadTimeout), eventLoop: channel.eventLoop)
            try channel.pipeline.syncOperations.addHandler(headDeadline.value)
            let check = NIOLoopBoundBox<DeviceChannelAPI.UpgradeCheck?>(nil, eventLoop: channel.eventLoop)
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: DeviceChannelAPI.maximumInboundFrame,
                shouldUpgrade: { [devices] channel, head in
                    let answer = channel.eventLoop.makePromise(of: DeviceChannelAPI.UpgradeCheck.self)
                    if !devices.tasks.run({ answer.succeed(await devices.checkUpgrade(head)) }) {
                        answer.succeed(.refused(JSONAPIError(status: .serviceUnavailable, error: "stopping", message: "the server is stopping")))
                    }
                    return answer.futureResult.map { answer in
                        check.value = answer
                        guard case .accepted = answer else { return nil }
                        return HTTPHeaders()
                    }
                },
                upgradePipelineHandler: { [devices] channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        channel.pipeline.syncOperations.removeHandler(headDeadline.value, promise: nil)
                        guard case .accepted(let target) = check.value else { throw NIOWebSocketUpgradeError.unsupportedWebSocketTarget }
                        try devices.accept(channel, target: target)
                        return .webSocket
                    }
                })
            let notUpgraded = NIOTypedHTTPServerUpgradeConfiguration<Outcome>(upgraders: [upgrader]) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    pipeline.removeHandler(headDeadline.value, promise: nil)
                    let deadlines = RequestDeadlines(headTimeout: requestHeadTimeout, bodyTimeout: requestBodyTimeout)
                    try pipeline.addHandler(RequestDeadlines.Bytes(deadlines), position: .first)
                    try pipeline.addHandler(RequestDeadlines.Parts(deadlines))
                    try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    // Between requests only: a request being answered (a push waiting for its outcome) is not idle.
                    try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
                    let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                        wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                    if case .refused(let error) = check.value { return .refused(http, error) }
                    return .http(http)
                }
            }
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration(upgradeConfiguration: notUpgraded)
            // As Hummingbird's own HTTP/1 channel: requests are taken one at a time by its handler, errors and
            // header validation are its own.
            configuration.enablePipelining = false
            configuration.enableErrorHandling = false
            configuration.enableResponseHeaderValidation = false
            configuration.decoderConfiguration.maxHeaderFieldSize = headerLimits.field
            configuration.decoderConfiguration.maxHeaderListSize = headerLimits.list
            let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            try channel.pipeline.syncOperations.addHandler(ParserErrorResponder())
            return Value(outcome: outcome, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.outcome.get() {
            case .http(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .refused(let http, let error):
                await Self.answer(error, on: http)
            case .webSocket:
                // The connection is served by its handlers; this task ends here.
                return
            }
        } catch let error as ChannelError where error == .inputClosed {
            logger.trace("the connection closed before its first request")
        } catch {
            logger.debug("cannot set up a connection", metadata: ["error": "\(error)"])
        }
    }

    /// Answers a refused upgrade's request with `error`, then closes the connection.
    private static func answer(_ error: JSONAPIError, on http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        // Nothing is read: NIO's upgrade handler took the request's head, and what follows it is left unread as the
        // connection closes.
        try? await http.executeThenClose { _, outbound in
            let (rendered, body) = error.rendered()
            var headers = rendered
            headers[.connection] = "close"
            headers[.contentLength] = String(body.count)
            try await outbound.write(contentsOf: [
                .head(HTTPResponse(status: error.status, headerFields: headers)), .body(ByteBuffer(bytes: body)), .end(nil),
            ])
        }
    }
}
