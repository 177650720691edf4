import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import TernAPNs

/// Sent down a connection's pipeline when the simulator stops: answer what is in flight, send GOAWAY
/// `{"reason":"Shutdown"}` and close.
struct SimulatorShutdownEvent {}

/// Serves APNs requests on one HTTP/2 connection, at the frame level.
///
/// Working on frames rather than per-stream child channels keeps a request to a dictionary entry and two writes,
/// which is what lets the simulator outrun the clients it measures. The handler does its own flow control: it
/// returns connection-level window as it consumes DATA (streams are short and below the stream window).
final class SimulatorConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Settings {
        var maxConcurrentStreams: Int
        var initialWindowSize: Int
        var environment: APNsEnvironment
    }

    private struct PendingStream {
        var headers: HPACKHeaders
        var body: [UInt8] = []
        var tooLarge = false
    }

    /// Bodies above this are not kept: no push type allows more, and the answer is `PayloadTooLarge` either way.
    private static let largestPayload = APNsPushType.voip.maximumPayloadSize

    private let validator: RequestValidator
    private let state: SimulatorState
    private let settings: Settings
    private var auth: ConnectionAuthentication
    private var connectionID = 0
    private var streams: [HTTP2StreamID: PendingStream] = [:]
    private var highestStreamID = HTTP2StreamID.rootStream
    private var streamLimitRaised = false
    private var unacknowledgedBytes = 0
    private var pendingResponses = 0
    private var goingAway = false
    private var needsFlush = false
    private var ids = FastUUIDGenerator()

    init(validator: RequestValidator, state: SimulatorState, settings: Settings, auth: ConnectionAuthentication) {
        self.validator = validator
        self.state = state
        self.settings = settings
        self.auth = auth
    }

    /// SETTINGS to advertise at connection start: APNs allows one stream on a token connection until the first
    /// valid provider token, and its configured limit on certificate connections.
    static func initialSettings(_ settings: Settings, tokenConnection: Bool) -> HTTP2Settings {
        [
            HTTP2Setting(parameter: .headerTableSize, value: 4096),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: tokenConnection ? 1 : settings.maxConcurrentStreams),
            HTTP2Setting(parameter: .initialWindowSize, value: settings.initialWindowSize),
            HTTP2Setting(parameter: .maxFrameSize, value: 16384),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
        ]
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = state.connectionOpened()
        if !auth.isTokenConnection { streamLimitRaised = true }
        // The connection window starts at 65,535 bytes whatever SETTINGS say; raise it to the configured size.
        let extra = settings.initialWindowSize - 65_535
        if extra > 0 {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: extra))), promise: nil)
            context.flush()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        state.connectionClosed(connectionID)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if goingAway, frame.streamID > highestStreamID {
                // Opened after our GOAWAY: not processed, the client retries it elsewhere.
                return
            }
            if streams[frame.streamID] == nil {
                streams[frame.streamID] = PendingStream(headers: headers.headers)
                if frame.streamID > highestStreamID { highestStreamID = frame.streamID }
            }
            if headers.endStream { complete(frame.streamID, context: context) }
        case .data(let payload):
            let length = payload.data.readableBytes + (payload.paddingBytes ?? 0)
            returnWindow(length, context: context)
            guard var stream = streams[frame.streamID] else { return }
            if case .byteBuffer(let buffer) = payload.data, !stream.tooLarge {
                if stream.body.count + buffer.readableBytes > Self.largestPayload {
                    stream.tooLarge = true
                    stream.body = []
                } else {
                    stream.body.append(contentsOf: buffer.readableBytesView)
                }
            }
            if stream.tooLarge, !payload.endStream {
                // No need to read the rest of an oversized body: answer now and reset the stream.
                streams[frame.streamID] = stream
                complete(frame.streamID, context: context)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.noError))), promise: nil)
                return
            }
            streams[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID, context: context) }
        case .rstStream:
            streams.removeValue(forKey: frame.streamID)
        default:
            // SETTINGS, PING, WINDOW_UPDATE and GOAWAY are handled by NIOHTTP2Handler (PINGs are answered there).
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is SimulatorShutdownEvent {
            sendGoAway(reason: "Shutdown", context: context)
            context.flush()
            closeIfDrained(context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    // MARK: Requests

    private func complete(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        let hadValidToken = auth.verified != nil
        let verdict = validator.validate(headers: stream.headers, body: stream.body, bodyTooLarge: stream.tooLarge, auth: &auth, ids: &ids)
        if !streamLimitRaised, !hadValidToken, auth.verified != nil {
            // The first valid provider token on this connection: lift the one-stream limit.
            streamLimitRaised = true
            let raise = HTTP2Settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: settings.maxConcurrentStreams)])
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings(raise)))), promise: nil)
        }
        switch verdict {
        case .failure(let rejection):
            state.recordRejection(rejection.reason)
            send(streamID, apnsID: rejection.apnsID ?? ids.next(), rejection: (rejection.reason, nil), delay: 0, context: context)
        case .success(let request):
            let decision = state.decide(request, connection: connectionID, stream: Int(streamID))
            switch decision.connectionAction {
            case .drop:
                context.close(promise: nil)
                return
            case .goAway(let reason):
                send(streamID, apnsID: request.apnsID, rejection: decision.rejection, delay: decision.delayMilliseconds, context: context)
                sendGoAway(reason: reason, context: context)
                needsFlush = true
                closeIfDrained(context: context)
            case .none:
                send(streamID, apnsID: request.apnsID, rejection: decision.rejection, delay: decision.delayMilliseconds, context: context)
            }
        }
    }

    private func send(
        _ streamID: HTTP2StreamID, apnsID: String, rejection: (reason: APNsReason, timestamp: Date?)?, delay: Int,
        context: ChannelHandlerContext
    ) {
        guard delay > 0 else {
            writeResponse(streamID, apnsID: apnsID, rejection: rejection, context: context)
            needsFlush = true
            return
        }
        pendingResponses += 1
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay))) {
            self.pendingResponses -= 1
            guard context.channel.isActive else { return }
            self.writeResponse(streamID, apnsID: apnsID, rejection: rejection, context: context)
            context.flush()
            self.closeIfDrained(context: context)
        }
    }

    private func writeResponse(
        _ streamID: HTTP2StreamID, apnsID: String, rejection: (reason: APNsReason, timestamp: Date?)?, context: ChannelHandlerContext
    ) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4)
        guard let rejection else {
            headers.add(name: ":status", value: "200")
            // Ids differ on every response: indexing them would only churn the HPACK table (APNs doesn't either).
            headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable)
            if settings.environment == .development {
                headers.add(name: "apns-unique-id", value: ids.next(), indexing: .nonIndexable)
            }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
            return
        }
        let response = APNsResponse(status: rejection.reason.status ?? 400, reason: rejection.reason, timestamp: rejection.timestamp)
        headers.add(name: ":status", value: String(response.status))
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable)
        if settings.environment == .development {
            headers.add(name: "apns-unique-id", value: ids.next(), indexing: .nonIndexable)
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let body = context.channel.allocator.buffer(bytes: response.body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
    }

    // MARK: Connection

    private func returnWindow(_ length: Int, context: ChannelHandlerContext) {
        unacknowledgedBytes += length
        if unacknowledgedBytes >= settings.initialWindowSize / 2 {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))),
                promise: nil)
            unacknowledgedBytes = 0
            needsFlush = true
        }
    }

    private func sendGoAway(reason: String, context: ChannelHandlerContext) {
        guard !goingAway else { return }
        goingAway = true
        state.recordGoAway()
        let debugData = context.channel.allocator.buffer(bytes: (try? JSONValue.object(["reason": .string(reason)]).serialized()) ?? [])
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: highestStreamID, errorCode: .noError, opaqueData: debugData))),
            promise: nil)
    }

    /// After GOAWAY, close once every stream at or below the last stream id has its answer.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard goingAway, pendingResponses == 0, streams.isEmpty else { return }
        context.flush()
        context.close(promise: nil)
    }
}
