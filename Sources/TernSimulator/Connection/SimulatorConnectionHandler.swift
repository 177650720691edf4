import Foundation
import HeapModule
import NIOCore
import NIOHPACK
import TernAPNs

/// Sent down a connection's pipeline when the simulator stops: answer what is in flight, send GOAWAY
/// `{"reason":"Shutdown"}` and close.
struct SimulatorShutdownEvent {}

/// Serves APNs requests on one TLS connection: ``HTTP2ServerFraming`` turns bytes into requests, ``RequestValidator``
/// and ``SimulatorState`` decide the answers, and this handler applies delays and connection-level scenarios
/// (GOAWAY, drop) and writes the bytes.
///
/// It reads only while the connection can send: a client that sends without reading (a flood of PINGs, each owed an
/// ACK) waits in its own socket buffers, not in this process's memory.
final class SimulatorConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Settings {
        var maxConcurrentStreams: Int
        var resetExcessStreams = false
        var initialWindowSize: Int
        var environment: APNsEnvironment
        /// How long a connection that got GOAWAY may keep unfinished streams before it is closed anyway.
        var goAwayGracePeriod: TimeAmount = .seconds(10)
    }

    private let validator: RequestValidator
    private let state: SimulatorState
    private let settings: Settings
    private var auth: ConnectionAuthentication
    private var framing: HTTP2ServerFraming
    private var connectionID = 0
    private var streamLimitRaised = false
    /// Answers held back by a latency scenario, soonest first. One timer serves them all, and every answer due when
    /// it fires goes out in one write: a timer and a flush per answer cost more than the answer itself at 50 ms and
    /// thousands in flight.
    private var delayed = Heap<DelayedAnswer>()
    private var delayTimer: (deadline: NIODeadline, task: Scheduled<Void>)?
    /// Orders answers due at the same moment as they came.
    private var delayedSequence = 0
    private var goingAway = false
    private var closed = false
    private var ids = FastUUIDGenerator()
    private var reportedRefusals = 0
    /// A read asked for while the connection could not send, done once it can.
    private var readWaiting = false

    init(validator: RequestValidator, state: SimulatorState, settings: Settings, auth: ConnectionAuthentication) {
        self.validator = validator
        self.state = state
        self.settings = settings
        self.auth = auth
        // APNs allows one stream on a token connection until its first valid provider token.
        self.streamLimitRaised = !auth.isTokenConnection
        self.framing = HTTP2ServerFraming(
            configuration: .init(
                maxConcurrentStreams: auth.isTokenConnection ? 1 : settings.maxConcurrentStreams,
                initialWindowSize: settings.initialWindowSize,
                largestBody: APNsPushType.voip.maximumPayloadSize, resetExcessStreams: settings.resetExcessStreams),
            allocator: ByteBufferAllocator())
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = state.connectionOpened()
        framing.start()
        sendOutput(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closed = true
        delayTimer?.task.cancel()
        delayTimer = nil
        state.connectionClosed(connectionID)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed else { return }
        var bytes = unwrapInboundIn(data)
        do {
            try framing.receive(&bytes)
        } catch {
            failConnection(error, context: context)
            return
        }
        if framing.refusedStreams > reportedRefusals {
            state.recordRefusedStreams(framing.refusedStreams - reportedRefusals)
            reportedRefusals = framing.refusedStreams
        }
        while let event = framing.nextEvent() {
            switch event {
            case .request(let streamID, let headers, let body, let bodyTooLarge):
                handleRequest(streamID, headers: headers, body: body, bodyTooLarge: bodyTooLarge, context: context)
                if closed { return }
            case .reset:
                break
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        sendOutput(context: context)
    }

    func read(context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            readWaiting = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readWaiting {
            readWaiting = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is SimulatorShutdownEvent {
            sendGoAway(reason: "Shutdown", context: context)
            sendOutput(context: context)
            closeIfDrained(context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closed = true
        context.close(promise: nil)
    }

    // MARK: Requests

    private func handleRequest(
        _ streamID: UInt32, headers: HPACKHeaders, body: [UInt8], bodyTooLarge: Bool, context: ChannelHandlerContext
    ) {
        let verdict = validator.validate(headers: headers, body: body, bodyTooLarge: bodyTooLarge, auth: &auth, ids: &ids)
        liftStreamLimitOnceATokenIsValid()
        switch verdict {
        case .failure where ChannelRequests.handles(headers):
            // A broadcast or a channel's management: not a notification, so it failed a notification's checks.
            let scenario = state.scenario(forChannelRequestOn: connectionID)
            if scenario.drop {
                closed = true
                context.close(promise: nil)
                return
            }
            // An injected fault answers instead of the request, which is not carried out (as a refused notification
            // is not delivered).
            let answer = scenario.fault.map { PlainAnswer.rejection($0, requestID: ids.next()) }
                ?? ChannelRequests(validator: validator, state: state).answer(
                    headers: headers, body: body, bodyTooLarge: bodyTooLarge, auth: &auth, ids: &ids)
            liftStreamLimitOnceATokenIsValid()
            if let reason = answer.reason { state.recordRejection(reason) } else { state.recordAcceptance() }
            framing.respond(streamID: streamID, status: answer.status, headers: answer.headers, body: answer.body)
        case .failure(let rejection):
            state.recordRejection(rejection.reason)
            send(streamID, apnsID: rejection.apnsID ?? ids.next(), rejection: (rejection.reason, nil), delay: 0, context: context)
        case .success(let request):
            let decision = state.decide(request, connection: connectionID, stream: Int(streamID))
            switch decision.connectionAction {
            case .drop:
                closed = true
                context.close(promise: nil)
            case .goAway(let reason):
                send(
                    streamID, apnsID: request.apnsID, rejection: decision.rejection, delay: decision.delayMilliseconds,
                    thenGoAway: reason, arrival: decision.logWhenAnswered ? request : nil, context: context)
            case .none:
                send(
                    streamID, apnsID: request.apnsID, rejection: decision.rejection, delay: decision.delayMilliseconds,
                    arrival: decision.logWhenAnswered ? request : nil, context: context)
            }
        }
    }

    /// The first valid provider token on this connection (a notification's, or a broadcast's or channel request's):
    /// lifts the one-stream limit APNs keeps until then.
    private func liftStreamLimitOnceATokenIsValid() {
        guard !streamLimitRaised, auth.verified != nil else { return }
        streamLimitRaised = true
        framing.advertiseMaxConcurrentStreams(settings.maxConcurrentStreams)
    }

    /// Answers now or after `delay` ms; with `thenGoAway`, GOAWAY follows that answer (the scenario's Nth stream).
    /// `arrival`, a delayed accepted notification, is logged when it is answered.
    private func send(
        _ streamID: UInt32, apnsID: String, rejection: (reason: APNsReason, timestamp: Date?)?, delay: Int,
        thenGoAway goAwayReason: String? = nil, arrival: AcceptedRequest? = nil, context: ChannelHandlerContext
    ) {
        guard delay > 0 else {
            respond(streamID, apnsID: apnsID, rejection: rejection)
            if let goAwayReason {
                sendGoAway(reason: goAwayReason, context: context)
                closeIfDrained(context: context)
            }
            return
        }
        delayedSequence += 1
        delayed.insert(DelayedAnswer(
            due: .now() + .milliseconds(Int64(delay)), sequence: delayedSequence, streamID: streamID, apnsID: apnsID,
            rejection: rejection, goAwayReason: goAwayReason, arrival: arrival))
        armDelayTimer(context: context)
    }

    /// Makes sure the timer fires when the soonest held answer is due.
    private func armDelayTimer(context: ChannelHandlerContext) {
        guard let soonest = delayed.min?.due else { return }
        if let armed = delayTimer, armed.deadline <= soonest { return }
        delayTimer?.task.cancel()
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: soonest) {
            self.delayTimer = nil
            self.answerDelayed(context: context)
        }
        delayTimer = (soonest, task)
    }

    /// Sends every held answer that is due, in one write, and re-arms the timer for the rest.
    private func answerDelayed(context: ChannelHandlerContext) {
        guard !closed else { return }
        let now = NIODeadline.now()
        while let next = delayed.min, next.due <= now {
            let answer = delayed.removeMin()
            if let arrival = answer.arrival { state.recordArrival(arrival, connection: connectionID, stream: Int(answer.streamID)) }
            respond(answer.streamID, apnsID: answer.apnsID, rejection: answer.rejection)
            if let goAwayReason = answer.goAwayReason { sendGoAway(reason: goAwayReason, context: context) }
        }
        sendOutput(context: context)
        armDelayTimer(context: context)
        closeIfDrained(context: context)
    }

    private func respond(_ streamID: UInt32, apnsID: String, rejection: (reason: APNsReason, timestamp: Date?)?) {
        let uniqueID = settings.environment == .development ? ids.next() : nil
        guard let rejection else {
            if let uniqueID {
                framing.respond(streamID: streamID, status: 200, headers: [("apns-id", apnsID), ("apns-unique-id", uniqueID)], body: [])
            } else {
                framing.respond(streamID: streamID, status: 200, headers: [("apns-id", apnsID)], body: [])
            }
            return
        }
        let response = APNsResponse(status: rejection.reason.status ?? 400, reason: rejection.reason, timestamp: rejection.timestamp)
        var headers: [(name: String, value: String)] = [("content-type", "application/json"), ("apns-id", apnsID)]
        if let uniqueID { headers.append(("apns-unique-id", uniqueID)) }
        framing.respond(streamID: streamID, status: response.status, headers: headers, body: response.body)
    }

    // MARK: Connection

    private func sendOutput(context: ChannelHandlerContext) {
        guard !closed, framing.output.readableBytes > 0 else { return }
        let bytes = framing.output
        framing.output = context.channel.allocator.buffer(capacity: max(4096, bytes.readableBytes))
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    private func sendGoAway(reason: String, context: ChannelHandlerContext) {
        guard !goingAway else { return }
        goingAway = true
        state.recordGoAway()
        framing.goAway(debugData: (try? JSONValue.object(["reason": .string(reason)]).serialized()) ?? [])
        // Streams the client never finishes must not hold the connection open for ever.
        context.eventLoop.assumeIsolated().scheduleTask(in: settings.goAwayGracePeriod) {
            guard !self.closed else { return }
            self.closed = true
            context.close(promise: nil)
        }
    }

    /// After GOAWAY, close once every stream at or below its last stream id has its answer.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard goingAway, !closed, delayed.isEmpty, !framing.hasUnansweredStreams else { return }
        sendOutput(context: context)
        closed = true
        context.close(promise: nil)
    }

    /// A protocol violation: GOAWAY with the error code and a reason, then close.
    private func failConnection(_ error: HTTP2ServerFraming.ConnectionError, context: ChannelHandlerContext) {
        framing.goAway(code: error.code, debugData: Array(error.message.utf8))
        sendOutput(context: context)
        closed = true
        context.close(promise: nil)
    }
}

/// An answer a latency scenario holds back until `due`.
private struct DelayedAnswer: Comparable {
    var due: NIODeadline
    var sequence: Int
    var streamID: UInt32
    var apnsID: String
    var rejection: (reason: APNsReason, timestamp: Date?)?
    var goAwayReason: String?
    var arrival: AcceptedRequest?

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.due, lhs.sequence) < (rhs.due, rhs.sequence) }
    static func == (lhs: Self, rhs: Self) -> Bool { lhs.due == rhs.due && lhs.sequence == rhs.sequence }
}
