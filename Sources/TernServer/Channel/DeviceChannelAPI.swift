import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOWebSocket
import TernAPNs
import TernStore
import TernWeb

/// The online channel's endpoints: `GET …/devices/{id}/connect` (a WebSocket per device), and the device's reports:
/// `POST …/devices/{id}/opens` (of its messages, and of pushes that came through APNs) and `…/acks` (a Notification
/// Service Extension's receipts, likewise).
///
/// A connection is authenticated like every device call (the app key and `X-Tern-Device-Secret`, or the master
/// secret) before the upgrade. Once open, the server sends the device's messages as JSON text frames in the device's order, starting
/// after `?after=SEQ` (or with the oldest not acknowledged), and the device acknowledges them with
/// `{"type": "ack", "ids": [...]}`. An acknowledged message is never sent again; one sent and not acknowledged is
/// sent again on the next connection. The messages live in the store, so whichever node a device connects to reads
/// the same; a node only needs to be told that there is something new (``DeviceConnections``).
struct DeviceChannelAPI: Sendable {
    let store: any TernStore
    let apps: AppCache
    let gate: DeviceGate
    let connections: DeviceConnections
    /// Where the connections' reports (sent, acknowledged) go, batched.
    let recorder: ChannelRecorder
    /// Where the connections' work runs (checks, opening, sending).
    let tasks: ChannelTasks
    let pingInterval: Duration
    let clock: any WallClock
    /// The back-off after a failed read of the store.
    let timer: any Clock<Duration>
    let logger: Logger
    /// Told when an open was recorded for the app's webhook: the sender posts it now rather than at its next look.
    let onOpenEvent: @Sendable () -> Void
    /// Upgrades whose check failed on the server's side (the store away): said once per run, not per device.
    private let upgradeFailures: FailureLog

    /// Messages read from the store per frame batch.
    static let page = 100
    /// The largest frame a device may send (an ack of 1,000 ids fits).
    static let maximumInboundFrame = 64 * 1024

    private let deliveredOnline = Counter(label: "tern_channel_messages_delivered_total")
    private let opens = Counter(label: "tern_channel_opens_total")
    private let pushOpens = Counter(label: "tern_push_opens_total")
    private let pushReceipts = Counter(label: "tern_push_receipts_total")
    private let acks = Counter(label: "tern_channel_acks_total")
    private let acksAfterFallback = Counter(label: "tern_channel_acks_after_fallback_total")

    init(
        store: any TernStore, apps: AppCache, gate: DeviceGate, connections: DeviceConnections, recorder: ChannelRecorder, tasks: ChannelTasks,
        pingInterval: Duration, clocks: ServerClocks, onOpenEvent: @escaping @Sendable () -> Void = {}, logger: Logger
    ) {
        self.onOpenEvent = onOpenEvent
        self.store = store
        self.apps = apps
        self.gate = gate
        self.connections = connections
        self.recorder = recorder
        self.tasks = tasks
        self.pingInterval = pingInterval
        self.clock = clocks.wall
        self.timer = clocks.timer
        self.logger = logger
        self.upgradeFailures = FailureLog("cannot check a device's connection", logger: logger)
    }

    /// What the user opened: a device message (`messageId`: a channel frame's `id`, a notification's `tern.id`) or a
    /// push that came through APNs (`pushId`: a notification's `tern.pushId`).
    struct OpenRequest: Decodable {
        var messageId: String?
        var pushId: String?
    }

    /// What arrived: device messages (`ids`: their `tern.id`s) or a push that came through APNs (`pushId`).
    struct AckRequest: Decodable {
        var ids: [String]?
        var pushId: String?
    }

    struct AckAnswer: ResponseEncodable {
        /// How many of the ids (or whether the push) were acknowledged by this call: not before, and the device's own.
        var acked: Int
    }

    /// The plain HTTP side: `GET …/connect` without an upgrade checks the credentials like the upgrade would and
    /// answers 426 (a refused upgrade gets the same JSON error); the opens and the acks.
    func register(on router: Router<ServerRequestContext>) {
        let devices = router.group("v1/apps/:app/devices")
        devices.get(":device/connect") { request, context -> Response in
            _ = try await authorize(.connect, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            _ = try Self.after(request)
            // An upgrade reaches the API only when it was not the connection's first request (those are taken before it,
            // as HTTP/1.1 upgrades are).
            let message =
                request.headers[.upgrade] == nil
                ? "connect with a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)"
                : "a WebSocket upgrade must be a connection's first request: connect again on a new connection"
            throw JSONAPIError(status: .upgradeRequired, error: "upgradeRequired", message: message, field: nil)
        }
        devices.post(":device/opens") { request, context -> HTTPResponse.Status in
            let (app, device) = try await authorize(
                .open, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            let body = try await JSONBody.decode(OpenRequest.self, from: request, limit: 4096)
            switch (body.messageId, body.pushId) {
            case (let messageID?, nil):
                guard let id = UUID(uuidString: messageID) else {
                    throw JSONAPIError.badRequest(field: "messageId", "messageId must be a message id (a UUID), not '\(messageID.prefix(40))'")
                }
                let event = Self.openEvent(app, device)
                guard try await store.openMessage(
                    app: app.id, deviceID: device.deviceID, id: id.uuidString.lowercased(), at: clock.now, openEvent: event)
                else {
                    throw JSONAPIError.notFound("device \(device.deviceID) has no message \(messageID)")
                }
                if event != nil { onOpenEvent() }
                opens.increment()
            case (nil, let pushID?):
                if try await report(.opened, of: pushID, app: app, device: device) { pushOpens.increment() }
            case (.some, .some):
                throw JSONAPIError.badRequest(field: "pushId", "give messageId or pushId, not both")
            case (nil, nil):
                throw JSONAPIError.badRequest(
                    field: "messageId", "give messageId (the device's message: tern.id) or pushId (a push that came through APNs: tern.pushId)")
            }
            return .noContent
        }
        // Acknowledgements outside the connection (a Notification Service Extension's receipt), which must not open
        // a connection of its own: that would replace the app's.
        devices.post(":device/acks") { request, context -> AckAnswer in
            let (app, device) = try await authorize(
                .ack, request: request, appID: context.parameters.get("app"), deviceText: context.parameters.get("device"))
            let body = try await JSONBody.decode(AckRequest.self, from: request, limit: 64 * 1024)
            let given: [String]
            switch (body.ids, body.pushId) {
            case (let ids?, nil):
                given = ids
            case (nil, let pushID?):
                let first = try await report(.received, of: pushID, app: app, device: device)
                if first { pushReceipts.increment() }
                return AckAnswer(acked: first ? 1 : 0)
            case (.some, .some):
                throw JSONAPIError.badRequest(field: "pushId", "give ids or pushId, not both")
            case (nil, nil):
                throw JSONAPIError.badRequest(
                    field: "ids", "give ids (the device's messages: tern.id) or pushId (a push that came through APNs: tern.pushId)")
            }
            if let problem = ChannelFrame.ackIDsProblem(given) { throw JSONAPIError.badRequest(field: "ids", problem) }
            let ids = given.map { $0.lowercased() }
            let recorded = try await store.recordChannel(
                delivered: [], acks: ids.map { (app: app.id, deviceID: device.deviceID, id: $0) }, at: clock.now)
            acks.increment(by: recorded.acked)
            acksAfterFallback.increment(by: recorded.afterFallback)
            return AckAnswer(acked: recorded.acked)
        }
    }

    /// Records what the device reports of push `text`, one that came through APNs (its `tern.pushId`): that it arrived,
    /// or that the user opened it. Taken only from a device the push was handed out to
    /// (``PushRecord/wasHandedOut(to:at:)``): the app key is public, and a device must not count reports of pushes that
    /// were never its own. - Returns: false if the device had reported that already.
    private func report(_ report: PushReport, of text: String, app: AppRecord, device: DeviceRecord) async throws -> Bool {
        guard let id = UUID(uuidString: text) else {
            throw JSONAPIError.badRequest(field: "pushId", "pushId must be a push id (a UUID), not '\(text.prefix(40))'")
        }
        let now = clock.now
        guard let push = try await store.pushWithoutCounts(app: app.id, id: id.uuidString.lowercased()), push.wasHandedOut(to: device, at: now)
        else {
            throw JSONAPIError.notFound("device \(device.deviceID) was sent no push \(text.prefix(40))")
        }
        if push.content?.online != nil {
            let instead = report == .opened ? "the open of its message (messageId: tern.id)" : "its message's arrival (ids: [tern.id])"
            throw JSONAPIError.badRequest(field: "pushId", "push \(push.id) went through the devices' connections: report \(instead)")
        }
        let event = Self.openEvent(app, device)
        let first = try await store.recordPushReport(report, pushID: push.id, deviceID: device.deviceID, at: now, openEvent: event)
        if first, report == .opened, event != nil { onOpenEvent() }
        return first
    }

    /// Whose open to record for the app's webhook: nil unless it posts opens.
    static func openEvent(_ app: AppRecord, _ device: DeviceRecord) -> OpenEventSubject? {
        guard app.webhookURL != nil, app.webhookEvents.contains(.pushOpened) else { return nil }
        return OpenEventSubject(app: app.id, alias: device.alias)
    }

    /// `?after=SEQ`: a whole number, 0 or more (absent: 0, everything not acknowledged).
    static func after(_ request: Request) throws(JSONAPIError) -> Int64 {
        guard let text = try request.query(taking: ["after"]).get("after") else { return 0 }
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

    // MARK: The WebSocket side

    /// Where an accepted upgrade connects: checked before the upgrade, used once it is done.
    struct UpgradeTarget: Sendable {
        var app: String
        var deviceID: String
        var after: Int64
    }

    /// The answer to an upgrade request.
    enum UpgradeCheck: Sendable {
        case accepted(UpgradeTarget)
        /// Refused: answered with this error, in the API's JSON shape, instead of being upgraded.
        case refused(JSONAPIError)
    }

    /// Checks an upgrade request as the API checks `GET …/connect` (the app key and the device's secret, or the master
    /// secret; the device; `after`).
    func checkUpgrade(_ head: HTTPRequestHead) async -> UpgradeCheck {
        let uri = URI(head.uri)
        let parts = uri.path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 7, parts[0].isEmpty, parts[1] == "v1", parts[2] == "apps", parts[4] == "devices", parts[6] == "connect" else {
            // As the API answers an unknown path.
            return .refused(.notFound("no such endpoint: \(head.method) \(uri.path.prefix(200)) (WebSocket upgrades are taken at …/devices/{id}/connect)"))
        }
        do {
            let request = Request(head: try HTTPRequest(head, secure: false, splitCookie: false), body: .init(buffer: ByteBuffer()))
            let (app, device) = try await authorize(.connect, request: request, appID: String(parts[3]), deviceText: String(parts[5]))
            upgradeFailures.succeeded()
            return .accepted(UpgradeTarget(app: app.id, deviceID: device.deviceID, after: try Self.after(request)))
        } catch let error as JSONAPIError {
            if error.status.code < 500 { upgradeFailures.succeeded() }
            return .refused(error)
        } catch {
            upgradeFailures.failed(["error": "\(error)"])
            return .refused(JSONAPIError(status: .internalServerError, error: "internal", message: "an internal error; the server logged it"))
        }
    }

    /// Takes over `channel` once upgraded for `target`: the device's connection runs on NIO handlers from now on,
    /// and its presence is stored before anything is sent. Runs on the channel's event loop.
    func accept(_ channel: any Channel, target: UpgradeTarget) throws {
        let handler = DeviceSocketHandler(pingInterval: pingInterval)
        let connection = DeviceConnection(
            app: target.app, deviceID: target.deviceID, after: target.after, socket: DeviceSocket(channel: channel, handler: handler)
        ) { connection in
            startSender(connection)
        } delivered: { connection, messages in
            reportDelivered(messages, on: connection)
        }
        handler.events = .init(
            text: { text in received(text, on: connection) },
            closed: { ended(connection) })
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(ClientFrameRules())
        try pipeline.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 1, maxAccumulatedFrameCount: 64, maxAccumulatedFrameSize: Self.maximumInboundFrame))
        try pipeline.addHandler(handler)
        if let parserErrors = try? pipeline.handler(type: ParserErrorResponder.self) { pipeline.removeHandler(parserErrors, promise: nil) }
        logger.debug("device connected", metadata: ["app": "\(target.app)", "device": "\(target.deviceID)", "after": "\(target.after)"])
        guard tasks.run({ await open(connection) }) else {
            // The node is stopping.
            handler.close(.goingAway)
            return
        }
    }

    private func presence(of connection: DeviceConnection) -> PresenceEntry {
        PresenceEntry(app: connection.app, deviceID: connection.deviceID, node: connections.node, connection: connection.id)
    }

    /// Registers the connection (replacing the device's older one) and stores its presence, with the other
    /// connections opening now, before anything is read: a message another node keeps from then on finds it.
    /// Whether the device has messages waiting comes back with it.
    private func open(_ connection: DeviceConnection) async {
        if let previous = connections.attach(connection) { await previous.socket.close(.replaced) }
        let waiting = await recorder.arrived(presence(of: connection))
        if !connection.opened(readFirst: waiting) {
            // It closed while its presence was being stored.
            if connections.detach(connection) { recorder.departed(presence(of: connection)) }
        }
    }

    /// The connection ended (on its event loop).
    private func ended(_ connection: DeviceConnection) {
        logger.debug("device disconnected", metadata: ["app": "\(connection.app)", "device": "\(connection.deviceID)"])
        guard connection.closed() else { return }
        if connections.detach(connection) { recorder.departed(presence(of: connection)) }
    }

    /// A text frame from the device (on the connection's event loop): an ack. - Returns: why the connection must
    /// close, if it must.
    private func received(_ text: String, on connection: DeviceConnection) -> ChannelCloseCode? {
        let ids: [String]
        do {
            ids = try ChannelFrame.decodeAck(text)
            try connection.acknowledge(ids)
        } catch {
            return error
        }
        recorder.acknowledged(app: connection.app, deviceID: connection.deviceID, ids: ids)
        return nil
    }

    private func startSender(_ connection: DeviceConnection) {
        if !tasks.run({ await send(connection) }) { connection.senderStopped() }
    }

    /// Sends the device's messages in order until there is nothing left (``SendingState/next()``), then ends.
    ///
    /// It reads the store when the connection opens if the device has messages waiting, when the dispatcher of
    /// another node (or an earlier holder of a chunk) kept messages for the device, and when what this node handed
    /// over leaves a gap; messages this node just kept go out without being read back.
    private func send(_ connection: DeviceConnection) async {
        var retry = ErrorBackoff(initial: .milliseconds(200), maximum: .seconds(5))
        while !Task.isCancelled {
            switch connection.nextStep() {
            case .stop:
                return
            case .send(let messages):
                guard await write(messages, on: connection) else { return connection.senderStopped() }
            case .readStore(let after):
                let pending: [DeviceMessage]
                do {
                    pending = try await store.pendingMessages(
                        app: connection.app, deviceID: connection.deviceID, after: after, limit: Self.page, at: clock.now)
                    _ = retry.succeeded()
                } catch {
                    connection.readFailed()
                    let wait = retry.failed()
                    // Per connection at debug: a database that is away would otherwise log a line for every connection
                    // at every step (the dispatcher and the recorder say it once).
                    logger.debug(
                        "cannot read the device's messages",
                        metadata: ["device": "\(connection.deviceID)", "error": "\(error)", "retryIn": "\(wait)"])
                    do { try await timer.sleep(for: wait) } catch { return connection.senderStopped() }
                    continue
                }
                // A full page: there may be more.
                guard await write(pending, on: connection, more: pending.count == Self.page) else { return connection.senderStopped() }
            }
        }
        connection.senderStopped()
    }

    /// Writes `messages` as frames, in order, and reports them sent. - Returns: false if the connection is gone.
    private func write(_ messages: [DeviceMessage], on connection: DeviceConnection, more: Bool = false) async -> Bool {
        guard let lastSequence = messages.last?.sequence else { return true }
        connection.sending(messages)
        guard await connection.socket.send(messages.map(ChannelFrame.encode)) else { return false }
        connection.sent(through: lastSequence, more: more)
        reportDelivered(messages, on: connection)
        return true
    }

    /// Messages written to the device's socket.
    private func reportDelivered(_ messages: [DeviceMessage], on connection: DeviceConnection) {
        deliveredOnline.increment(by: messages.count)
        recorder.delivered(app: connection.app, deviceID: connection.deviceID, messages: messages)
    }
}
