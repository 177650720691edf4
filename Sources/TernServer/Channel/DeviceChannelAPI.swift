import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import Metrics
import NIOWebSocket
import TernAPNs
import TernStore
import TernWeb

/// The online channel's endpoints: `GET …/devices/{id}/connect` (a WebSocket per device) and
/// `POST …/devices/{id}/opens`.
///
/// A connection is authenticated like every device call (the app key and `X-Tern-Device-Secret`, or the master
/// secret) before the upgrade. Once open, the server sends the device's messages as JSON text frames in the device's order, starting
/// after `?after=SEQ` (or with the oldest not acknowledged), and the device acknowledges them with
/// `{"type": "ack", "ids": [...]}`. An acknowledged message is never sent again; one sent and not acknowledged is
/// sent again on the next connection. The messages live in the store, so whichever node a device connects to reads
/// the same; a node only needs to be told that there is something new (``DeviceConnections``).
struct DeviceChannelAPI {
    let store: any TernStore
    let apps: AppCache
    let gate: DeviceGate
    let connections: DeviceConnections
    /// Where the connections' reports (sent, acknowledged) go, batched.
    let recorder: ChannelRecorder
    let clock: any WallClock
    let logger: Logger

    /// Messages read from the store per frame batch.
    static let page = 100
    /// The largest frame a device may send (an ack of 1,000 ids fits).
    static let maximumInboundFrame = 64 * 1024

    private let deliveredOnline = Counter(label: "tern_channel_messages_delivered_total")
    private let opens = Counter(label: "tern_channel_opens_total")
    private let acks = Counter(label: "tern_channel_acks_total")
    private let acksAfterFallback = Counter(label: "tern_channel_acks_after_fallback_total")

    init(
        store: any TernStore, apps: AppCache, gate: DeviceGate, connections: DeviceConnections, recorder: ChannelRecorder, clock: any WallClock,
        logger: Logger
    ) {
        self.store = store
        self.apps = apps
        self.gate = gate
        self.connections = connections
        self.recorder = recorder
        self.clock = clock
        self.logger = logger
    }

    struct OpenRequest: Decodable {
        var messageId: String
    }

    struct AckRequest: Decodable {
        var ids: [String]
    }

    struct AckAnswer: ResponseEncodable {
        /// How many of the ids were acknowledged by this call (not before, and the device's own).
        var acked: Int
    }

    /// The plain HTTP side: `GET …/connect` without an upgrade checks the credentials like the upgrade would and
    /// answers 426 (so a client can see a refusal's JSON, which a refused upgrade cannot carry); and the opens.
    func register(on router: Router<ServerRequestContext>) {
        let devices = router.group("v1/apps/:app/devices")
        devices.get(":device/connect") { request, context -> Response in
            _ = try await authorize(.connect, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            _ = try Self.after(request)
            throw JSONAPIError(
                status: .upgradeRequired, error: "upgradeRequired",
                message: "connect with a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)", field: nil)
        }
        devices.post(":device/opens") { request, context -> HTTPResponse.Status in
            let (app, device) = try await authorize(
                .open, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            let body = try await JSONBody.decode(OpenRequest.self, from: request, limit: 4096)
            guard let id = UUID(uuidString: body.messageId) else {
                throw JSONAPIError.badRequest(field: "messageId", "messageId must be a message id (a UUID), not '\(body.messageId.prefix(40))'")
            }
            guard try await store.openMessage(app: app.id, deviceID: device.deviceID, id: id.uuidString.lowercased(), at: clock.now) else {
                throw JSONAPIError.notFound("device \(device.deviceID) has no message \(body.messageId)")
            }
            opens.increment()
            return .noContent
        }
        // Acknowledgements outside the connection (a Notification Service Extension's receipt), which must not open
        // a connection of its own: that would replace the app's.
        devices.post(":device/acks") { request, context -> AckAnswer in
            let (app, device) = try await authorize(
                .ack, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            let body = try await JSONBody.decode(AckRequest.self, from: request, limit: 64 * 1024)
            if let problem = ChannelFrame.ackIDsProblem(body.ids) { throw JSONAPIError.badRequest(field: "ids", problem) }
            let ids = body.ids.map { $0.lowercased() }
            let recorded = try await store.recordChannel(
                delivered: [], acks: ids.map { (app: app.id, deviceID: device.deviceID, id: $0) }, at: clock.now)
            acks.increment(by: recorded.acked)
            acksAfterFallback.increment(by: recorded.afterFallback)
            return AckAnswer(acked: recorded.acked)
        }
    }

    /// The WebSocket side, on the router that serves upgrades. A refused upgrade can only be a bare 400 (the
    /// WebSocket library answers nothing else), so the same GET without the upgrade is there to say why, in JSON.
    func register(webSocket router: Router<ServerRequestContext>) {
        router.ws("v1/apps/:app/devices/:device/connect") { request, context in
            do {
                let (appID, deviceText) = (context.parameters.get("app"), context.parameters.get("device"))
                _ = try await ShortLived.run { try await authorize(.connect, request: request, appID: appID, deviceText: deviceText) }
                _ = try Self.after(request)
                return .upgrade([:])
            } catch {
                return .dontUpgrade
            }
        } onUpgrade: { inbound, outbound, context in
            // Checked before the upgrade.
            let parameters = context.requestContext.parameters
            guard let app = parameters.get("app"), let deviceID = try? DevicesAPI.deviceID(parameters.get("device") ?? ""),
                let after = try? Self.after(context.request)
            else { return }
            await serve(app: app, deviceID: deviceID, after: after, inbound: inbound, outbound: outbound)
        }
    }

    /// `?after=SEQ`: a whole number, 0 or more (absent: 0, everything not acknowledged).
    static func after(_ request: Request) throws(JSONAPIError) -> Int64 {
        guard let text = request.uri.queryParameters.get("after") else { return 0 }
        guard let value = Int64(text), value >= 0 else {
            throw .badRequest(field: "after", "after is the sequence of the last message the device has (a whole number, 0 or more), not '\(text.prefix(32))'")
        }
        return value
    }

    private func authorize(
        _ call: DeviceCall, request: Request, appID: String?, deviceText: String?
    ) async throws -> (app: AppRecord, device: DeviceRecord) {
        _ = try Authorization.bearer(request)
        guard let app = try await apps.app(appID ?? "") else { throw Authorization.wrongAppSecret }
        let caller = try Authorization.caller(request, app: app)
        let deviceID = try DevicesAPI.deviceID(deviceText ?? "")
        guard let device = try await store.device(app: app.id, deviceID: deviceID) else { throw JSONAPIError.notFound("no device \(deviceID)") }
        try gate.authorize(call, caller: caller, request: request, app: app.id, device: device)
        return (app, device)
    }

    /// One device's connection, from the moment it is accepted until it ends.
    private func serve(app: String, deviceID: String, after: Int64, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let connection = DeviceConnection(app: app, deviceID: deviceID) { code in
            try? await outbound.close(.unknown(code.code), reason: code.reason)
        }
        let logger = {
            var logger = self.logger
            logger[metadataKey: "app"] = "\(app)"
            logger[metadataKey: "device"] = "\(deviceID)"
            logger[metadataKey: "connection"] = "\(connection.id)"
            return logger
        }()
        let presence = PresenceEntry(app: app, deviceID: deviceID, node: connections.node, connection: connection.id)
        // Stored (with the other connections opening now) before anything is read, so a message another node keeps
        // from now on finds this connection; whether the device has messages waiting comes back with it.
        let waiting = await ShortLived.run { [connections, recorder] in
            if let previous = connections.attach(connection) { await previous.replace() }
            return await recorder.arrived(presence)
        }
        logger.debug("device connected", metadata: ["after": "\(after)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await receive(inbound, connection: connection, logger: logger) }
            group.addTask { await send(after: after, readFirst: waiting, connection: connection, outbound: outbound, logger: logger) }
            // Either side ending ends the connection: the peer closed, a bad frame, or a close from here.
            await group.next()
            group.cancelAll()
        }
        if connections.detach(connection) { recorder.departed(presence) }
        logger.debug("device disconnected", metadata: ["closedBy": "\(connection.closeReason.map { "\($0.code)" } ?? "device")"])
    }

    /// Reads the device's frames (which also answers its pings and takes its pongs) until it closes.
    private func receive(_ inbound: WebSocketInboundStream, connection: DeviceConnection, logger: Logger) async {
        do {
            for try await message in inbound.messages(maxSize: Self.maximumInboundFrame) {
                switch message {
                case .binary:
                    await connection.close(.binaryFrame)
                    return
                case .text(let text):
                    let ids: [String]
                    do {
                        ids = try ChannelFrame.decodeAck(text)
                        try connection.acknowledge(ids)
                    } catch {
                        await connection.close(error)
                        return
                    }
                    recorder.acknowledged(app: connection.app, deviceID: connection.deviceID, ids: ids)
                }
            }
        } catch {
            logger.debug("device connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Sends the device's messages in order, then waits to be rung (new messages) and sends what is new.
    ///
    /// It reads the store when the connection opens if the device has messages waiting (`readFirst`), when the
    /// dispatcher of another node (or an earlier holder of a chunk) kept messages for the device, and when what this
    /// node handed over leaves a gap; messages this node just kept go out without being read back. Each step runs in a
    /// short-lived child task (``ShortLived``): this task lives as long as the connection and, idle, holds only the
    /// memory of its wait.
    private func send(after: Int64, readFirst: Bool, connection: DeviceConnection, outbound: WebSocketOutboundWriter, logger: Logger) async {
        var last = after
        var mustRead = readFirst
        var retry = ErrorBackoff(initial: .milliseconds(200), maximum: .seconds(5))
        while !Task.isCancelled, connection.closeReason == nil {
            let step = mustRead ? .readStore : connection.next(after: last)
            mustRead = false
            let outcome: SendOutcome
            switch step {
            case .wait:
                await connection.doorbell.wait()
                continue
            case .send(let messages):
                outcome = await ShortLived.run { await write(messages, connection: connection, outbound: outbound) }
            case .readStore:
                outcome = await ShortLived.run { [store, clock, last] in
                    let pending: [DeviceMessage]
                    do {
                        pending = try await store.pendingMessages(
                            app: connection.app, deviceID: connection.deviceID, after: last, limit: Self.page, at: clock.now)
                    } catch {
                        return .readFailed(error)
                    }
                    let written = await write(pending, connection: connection, outbound: outbound)
                    guard case .sent(let sequence) = written else { return written }
                    return pending.count == Self.page ? .sentPage(sequence) : written
                }
            }
            switch outcome {
            case .sent(let sequence):
                last = max(last, sequence ?? last)
                _ = retry.succeeded()
            case .sentPage(let sequence):
                // A full page: there may be more.
                last = max(last, sequence ?? last)
                mustRead = true
                _ = retry.succeeded()
            case .readFailed(let error):
                let wait = retry.failed()
                // Per connection at debug: a database that is away would otherwise log a line for every connection
                // at every step (the dispatcher and the recorder say it once).
                logger.debug("cannot read the device's messages", metadata: ["error": "\(error)", "retryIn": "\(wait)"])
                await ShortLived.run { await connection.doorbell.wait(upTo: wait) }
                mustRead = true
            case .connectionEnded:
                return
            }
        }
    }

    private enum SendOutcome: Sendable {
        /// Written (or nothing to write); the last sequence sent, if any.
        case sent(Int64?)
        /// A whole page read from the store was written: read again.
        case sentPage(Int64?)
        case readFailed(any Error)
        case connectionEnded
    }

    /// Writes `messages` as frames, in order, and reports them sent.
    private func write(_ messages: [DeviceMessage], connection: DeviceConnection, outbound: WebSocketOutboundWriter) async -> SendOutcome {
        guard let lastSequence = messages.last?.sequence else { return .sent(nil) }
        // Noted before they go: the device may acknowledge one before the last is written.
        connection.sent(messages)
        do {
            for message in messages {
                try await outbound.write(.text(ChannelFrame.encode(message)))
            }
        } catch {
            return .connectionEnded
        }
        deliveredOnline.increment(by: messages.count)
        recorder.delivered(app: connection.app, deviceID: connection.deviceID, sequences: messages.map(\.sequence))
        return .sent(lastSequence)
    }
}
