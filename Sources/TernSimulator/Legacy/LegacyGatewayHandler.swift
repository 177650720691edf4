import NIOCore
import NIOSSL
import NIOTLS
import TernAPNs
import X509

/// Serves the legacy binary gateway on one TLS connection, as Apple's port 2195 did: notifications in any of the
/// three formats, nothing back on success; on a notification it cannot take, the 6-byte error response (none for
/// the simple format, which has no identifier), then the connection closes and whatever followed on it is
/// discarded. Bytes it cannot frame close the connection without a packet.
final class LegacyGatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let state: SimulatorState
    private let environment: APNsEnvironment
    private var decoder = LegacyGatewayDecoder()
    private var identity: PushCertificateIdentity?
    private var connectionID = 0
    private var taken = 0
    private var lastTakenIdentifier: UInt32 = 0
    private var closing = false

    init(state: SimulatorState, environment: APNsEnvironment) {
        self.state = state
        self.environment = environment
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = state.legacyConnectionOpened()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            // The gateway takes certificate connections only, for an app in this environment.
            identity = LegacyPeer.identity(context, environment: environment)
            if identity == nil { close(context) }
        } else if event is SimulatorShutdownEvent, identity == nil {
            close(context)
        } else if event is SimulatorShutdownEvent {
            // Going down for maintenance: status 10 names the last notification taken; the provider re-sends the rest.
            answer(LegacyErrorResponse(status: .shutdown, identifier: lastTakenIdentifier), context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing, let identity else { return }
        let buffer = unwrapInboundIn(data)
        decoder.feed(buffer.readableBytesView)
        var notifications: [LegacyNotification] = []
        var rejection: (status: LegacyStatus, identifier: UInt32, command: LegacyCommand)?
        do {
            while let event = try decoder.next() {
                switch event {
                case .notification(let notification, _): notifications.append(notification)
                case .rejected(let status, let identifier, let command): rejection = (status, identifier, command)
                }
            }
        } catch {
            // Cannot be framed: take what came before it, then close without a packet.
            take(notifications, identity: identity, context: context)
            guard !closing else { return }
            state.recordLegacyRejection(nil)
            close(context)
            return
        }
        take(notifications, identity: identity, context: context)
        guard !closing, let rejection else { return }
        state.recordLegacyRejection(rejection.status)
        if rejection.command == .simple {
            close(context)
        } else {
            answer(LegacyErrorResponse(status: rejection.status, identifier: rejection.identifier), context: context)
        }
    }

    private func take(_ notifications: [LegacyNotification], identity: PushCertificateIdentity, context: ChannelHandlerContext) {
        guard !notifications.isEmpty else { return }
        let decision = state.decideLegacy(notifications, identity: identity, connection: connectionID, firstPosition: taken + 1)
        taken += decision.taken
        if decision.taken > 0 { lastTakenIdentifier = notifications[decision.taken - 1].identifier }
        if let stop = decision.stop { answer(stop, context: context) }
    }

    private func answer(_ response: LegacyErrorResponse, context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        var buffer = context.channel.allocator.buffer(capacity: LegacyErrorResponse.byteCount)
        buffer.writeBytes(response.encoded)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func close(_ context: ChannelHandlerContext) {
        closing = true
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        close(context)
    }
}

/// Serves the legacy feedback service on one TLS connection, as Apple's port 2196 did: no request; it writes the
/// app's pending tuples at once and closes. Tuples are cleared only once written in full.
final class FeedbackServiceHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let state: SimulatorState
    private let environment: APNsEnvironment

    init(state: SimulatorState, environment: APNsEnvironment) {
        self.state = state
        self.environment = environment
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted = event as? TLSUserEvent else {
            if event is SimulatorShutdownEvent { context.close(promise: nil) }
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard let identity = LegacyPeer.identity(context, environment: environment) else {
            context.close(promise: nil)
            return
        }
        let tuples = state.feedbackForConnection(identity)
        var buffer = context.channel.allocator.buffer(capacity: tuples.count * 38)
        for tuple in tuples {
            // Tokens in the registry are 1-100 bytes, so every tuple encodes.
            if let bytes = try? tuple.encoded() { buffer.writeBytes(bytes) }
        }
        let state = self.state
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { result in
            if case .success = result { state.feedbackDelivered(tuples) }
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The service takes no requests.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Who is on the other end of a legacy connection: a push certificate from the simulator's CA (the TLS handshake
/// already required and checked one), valid in the simulator's environment.
enum LegacyPeer {
    static func identity(_ context: ChannelHandlerContext, environment: APNsEnvironment) -> PushCertificateIdentity? {
        guard let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let peer = handler.peerCertificate, let der = try? peer.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der),
            let identity = try? PushCertificateIdentity(certificate: certificate), identity.environments.contains(environment)
        else { return nil }
        return identity
    }
}
