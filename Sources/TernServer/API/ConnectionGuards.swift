import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// The node's open HTTP connections (devices' WebSockets included) against a ceiling. Past it a new connection is
/// closed as soon as it is accepted: a flood of sockets, held idle or fed a byte at a time, cannot take the file
/// descriptors the server needs for its database, APNs and the connections it already serves. (Run out of them, the
/// accept loop fails on every try and the node answers nobody.)
final class ConnectionCeiling: Sendable {
    let limit: Int
    private let open = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection in. - Returns: false (and counts nothing) when the ceiling is reached.
    func admit() -> Bool {
        if open.add(1, ordering: .relaxed).newValue <= limit { return true }
        open.subtract(1, ordering: .relaxed)
        return false
    }

    /// Counts a connection out, once it closed.
    func release() {
        open.subtract(1, ordering: .relaxed)
    }

    /// Descriptors left for everything but the HTTP connections: the database, APNs connections, files, the
    /// simulator.
    static let reserve = 512

    /// The ceiling when none is configured: the process's open-files limit less ``reserve``, and at least 64.
    static func fromOpenFilesLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(openFilesResource, &limit) == 0, limit.rlim_cur < rlim_t(Int.max) else { return 1_000_000 }
        return max(64, Int(clamping: limit.rlim_cur) - reserve)
    }

    #if canImport(Glibc)
    private static let openFilesResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let openFilesResource = RLIMIT_NOFILE
    #endif
}

/// Closes a connection that has not sent a whole request head within `timeout` of opening: one that sends nothing, or
/// its head a byte at a time, holds its socket no longer than that. Taken out of the pipeline once the head is in (the
/// connection then serves the API, whose later requests ``RequestDeadlines`` times, or is a device's WebSocket, which
/// pings).
final class RequestHeadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(timeout: Duration) {
        self.timeout = TimeAmount(timeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    /// The server is stopping: a connection still sending its first head has a moment left (``stoppingGrace``), not
    /// the whole timeout, so it does not hold the stop.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            deadline?.cancel()
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: stoppingGrace) { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func start(_ context: ChannelHandlerContext) {
        guard deadline == nil else { return }
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { context.close(promise: nil) }
    }
}

/// How long a request still arriving when the server begins to stop may take to finish arriving.
let stoppingGrace = TimeAmount.seconds(1)

/// The deadlines of a kept-alive connection's requests after its first (whose head ``RequestHeadDeadline`` times):
/// each later request's head must arrive within `headTimeout` of its first byte, and any request's body within
/// `bodyTimeout` of its head. A head or a body sent a byte at a time (the idle timer restarts at each byte) holds its
/// socket, and a place under the connection ceiling, no longer than that. Once the server begins to stop, a request
/// still arriving has ``stoppingGrace`` left. Two handlers share it: one sees the bytes (a request begins), the other
/// the parsed parts (its head and its end are in).
final class RequestDeadlines {
    private enum Phase {
        /// A request's end is in (it is being answered, or the connection waits for the next): the idle timeout, or
        /// the answer's own time, is the limit.
        case between
        case head
        case body
    }

    private let headTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    /// The first request's head is in when these handlers are added.
    private var phase = Phase.body
    private var deadline: Scheduled<Void>?
    private var stopping = false

    init(headTimeout: Duration, bodyTimeout: Duration) {
        self.headTimeout = TimeAmount(headTimeout)
        self.bodyTimeout = TimeAmount(bodyTimeout)
    }

    /// Watches the bytes: the first after a request has ended begins the next one's head.
    final class Bytes: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        let deadlines: RequestDeadlines
        init(_ deadlines: RequestDeadlines) { self.deadlines = deadlines }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .between = deadlines.phase {
                deadlines.phase = .head
                deadlines.schedule(context, in: deadlines.stopping ? stoppingGrace : deadlines.headTimeout)
            }
            context.fireChannelRead(data)
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is ChannelShouldQuiesceEvent {
                deadlines.stopping = true
                switch deadlines.phase {
                case .head, .body: deadlines.schedule(context, in: stoppingGrace)
                case .between: break
                }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            deadlines.deadline?.cancel()
            deadlines.deadline = nil
        }
    }

    /// Watches the parsed request: its head starts the body's deadline, its end stops it.
    final class Parts: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        let deadlines: RequestDeadlines
        init(_ deadlines: RequestDeadlines) { self.deadlines = deadlines }

        func handlerAdded(context: ChannelHandlerContext) {
            // The first request's head has just arrived.
            deadlines.schedule(context, in: deadlines.bodyTimeout)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head:
                deadlines.phase = .body
                deadlines.schedule(context, in: deadlines.stopping ? stoppingGrace : deadlines.bodyTimeout)
            case .body:
                break
            case .end:
                // Being answered, or idle: either way, the next byte begins another request (clients send one once
                // the answer is in; the idle timeout, or the answer's own time, is the limit meanwhile).
                deadlines.phase = .between
                deadlines.deadline?.cancel()
                deadlines.deadline = nil
            }
            context.fireChannelRead(data)
        }

        /// The connection ended inside a request's body: a client gone, or one that stopped short of its length and
        /// closed its side (the parser's refusal is answered by ``ParserErrorResponder``). Hummingbird takes a stream
        /// of parts that ends for the body's end, and the route would act on the part of the body that came (a form
        /// cut one byte short named another user); failed, reading the body throws.
        func channelInactive(context: ChannelHandlerContext) {
            if case .body = deadlines.phase { context.fireErrorCaught(RequestBodyCutShort()) }
            context.fireChannelInactive()
        }
    }

    private func schedule(_ context: ChannelHandlerContext, in amount: TimeAmount) {
        deadline?.cancel()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: amount) { context.close(promise: nil) }
    }
}

/// A request's body whose connection ended before the body did.
struct RequestBodyCutShort: Error, CustomStringConvertible {
    var description: String { "the connection ended before the request's body did" }
}
