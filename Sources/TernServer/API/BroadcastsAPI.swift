import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import TernAPNs
import TernAPNsClient
import TernStore
import TernWeb

/// Broadcast channels (iOS 18): `PUT/GET/DELETE /v1/apps/{app}/broadcast-channels/{name}`, `GET …/broadcast-channels`,
/// and `POST/GET …/broadcast-channels/{name}/broadcasts` (a broadcast; the latest, with what became of each), with the
/// app's master secret; a channel by its name with the app
/// key too (``DeviceCall/readChannel``).
///
/// A channel updates one Live Activity on every device at once (a match's score for a million fans) with a single
/// request to APNs, where a push to the activity's tokens sends one per device. The backend names each channel (its
/// match's id, say); Tern makes it at APNs, keeps APNs' id under that name, and the app subscribes its activity to
/// that id (`pushType: .channel(id)`). Making a channel under a name it has already is answered with the channel
/// kept, so a backend that retries makes no second one (APNs allows 10,000 per environment).
struct BroadcastsAPI {
    let store: any TernStore
    let apps: AppCache
    let clients: ClientDirectory
    /// Dates the channels, and a storing channel's default expiration.
    let clock: any WallClock
    let logger: Logger

    init(store: any TernStore, apps: AppCache, clients: ClientDirectory, clock: any WallClock, logger: Logger) {
        self.store = store
        self.apps = apps
        self.clients = clients
        self.clock = clock
        self.logger = logger
        self.refusals = FailureLog("APNs refuses broadcasts", logger: logger)
        self.unrecorded = FailureLog("broadcasts cannot be recorded", logger: logger)
    }

    struct ChannelRequest: Decodable {
        /// `none` (APNs keeps nothing for a device that is offline; a broadcast's expiration is 0) or `mostRecent`
        /// (APNs keeps the last broadcast up to 8 hours).
        var storage: String
        /// For an app on Apple's APNs: the environment the channel belongs to (the app's by default).
        var environment: String?
    }

    struct BroadcastRequest: Decodable {
        /// The whole payload: `aps` with `event` (update or end), `timestamp` and `content-state`.
        var payload: JSONValue
        /// 10 (the default) or 5.
        var priority: Int?
        /// Epoch seconds until which a storing channel keeps it (8 hours from now by default); 0 on a channel that
        /// stores nothing.
        var expiration: Int64?
    }

    struct ChannelView: ResponseEncodable {
        var name: String
        /// APNs' id, which the app subscribes its Live Activity to.
        var channelId: String
        var environment: String
        var storage: String
        var createdAt: Date

        init(_ record: BroadcastChannelRecord) {
            name = record.name
            channelId = record.channelID
            environment = record.environment.rawValue
            storage = record.storesMessages ? "mostRecent" : "none"
            createdAt = record.createdAt
        }
    }

    struct ChannelList: ResponseEncodable {
        var channels: [ChannelView]
        var next: String?
    }

    struct BroadcastView: ResponseEncodable {
        var channel: String
        var channelId: String
        /// `apns-request-id`, as APNs answered.
        var requestId: String?
        /// `apns-unique-id`, which Apple's push console finds the broadcast by.
        var uniqueId: String?
        var attempts: Int
        /// Its number in the channel's history; nil when it could not be recorded (it was sent all the same).
        var id: String?
    }

    /// One broadcast of a channel's history.
    struct SentView: ResponseEncodable {
        var id: String
        var sentAt: Date
        /// `delivered`, `rejected` (by APNs, `reason` says why) or `failed` (no answer: `reason` is the error the
        /// call was answered with).
        var result: String
        var reason: String?
        var priority: Int
        /// Epoch seconds; 0 for at once.
        var expiration: Int64
        var payload: JSONValue
        var requestId: String?
        var uniqueId: String?
        var attempts: Int

        init(_ record: BroadcastRecord) {
            id = String(record.id)
            sentAt = record.sentAt
            result = record.result.rawValue
            reason = record.reason
            priority = record.priority
            expiration = record.expiration
            // Recorded from what was sent, which was JSON.
            payload = (try? JSONValue(parsing: Data(record.payload.utf8))) ?? .string(record.payload)
            requestId = record.requestID
            uniqueId = record.uniqueID
            attempts = record.attempts
        }
    }

    struct SentList: ResponseEncodable {
        var broadcasts: [SentView]
        var next: String?
    }

    /// The longest a storing channel keeps a broadcast for a device that is offline.
    static let longestStorage: TimeInterval = 8 * 3600

    /// APNs' refusals of broadcasts, said when they start, once a minute while they go on, and when they end.
    private let refusals: FailureLog
    /// Broadcasts sent that the database would not record, said the same way.
    private let unrecorded: FailureLog
    private let broadcasts = (
        delivered: Counter(label: "tern_broadcasts_total", dimensions: [("result", "delivered")]),
        rejected: Counter(label: "tern_broadcasts_total", dimensions: [("result", "rejected")]),
        failed: Counter(label: "tern_broadcasts_total", dimensions: [("result", "failed")])
    )

    func register(on router: Router<ServerRequestContext>) {
        let channels = router.group("v1/apps/:app/broadcast-channels")
        channels.get { request, context -> ChannelList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let query = request.uri.queryParameters
            let after = query.get("after")
            if let after, !ActivityTokenRecord.isValidID(after) {
                throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (a channel's name)")
            }
            let page = try await store.broadcastChannels(app: app.id, after: after, limit: try DevicesAPI.limit(query.get("limit")))
            return ChannelList(channels: page.items.map(ChannelView.init), next: page.next)
        }
        channels.put(":name") { request, context -> EditedResponse<ChannelView> in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let name = try Self.name(context)
            let body = try await JSONBody.decode(ChannelRequest.self, from: request, limit: 4096)
            let (record, created) = try await make(name, body, app: app)
            return EditedResponse(status: created ? .created : .ok, response: ChannelView(record))
        }
        // With the app key too: the app asks for the channel of a name (its match's id) and subscribes its activity to it.
        channels.get(":name") { request, context -> ChannelView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app, call: .readChannel)
            return ChannelView(try await channel(app: app, context))
        }
        channels.delete(":name") { request, context -> HTTPResponse.Status in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            try await delete(try await channel(app: app, context), app: app)
            return .noContent
        }
        channels.post(":name/broadcasts") { request, context -> BroadcastView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let record = try await channel(app: app, context)
            let body = try await JSONBody.decode(BroadcastRequest.self, from: request, limit: 64 * 1024)
            return try await send(body, to: record, app: app)
        }
        // The channel's latest broadcasts, newest first, with what became of each.
        channels.get(":name/broadcasts") { request, context -> SentList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let record = try await channel(app: app, context)
            let query = request.uri.queryParameters
            var before: Int64?
            if let text = query.get("before") {
                guard let id = Int64(text), id > 0 else {
                    throw JSONAPIError.badRequest(field: "before", "before is the cursor from the last page (a broadcast's id)")
                }
                before = id
            }
            let page = try await store.broadcasts(app: app.id, channel: record.name, before: before, limit: try DevicesAPI.limit(query.get("limit")))
            return SentList(broadcasts: page.items.map(SentView.init), next: page.next)
        }
    }

    /// Sends one broadcast to the channel, checked as APNs would check it, and records it in the channel's history.
    /// - Returns: APNs' answer. - Throws: a ``JSONAPIError`` for bad input or APNs' refusal or silence.
    func send(_ body: BroadcastRequest, to record: BroadcastChannelRecord, app: AppRecord) async throws -> BroadcastView {
        let sentAt = clock.now
        let broadcast = try Self.broadcast(body, to: record, bundleID: app.topic, now: sentAt)
        let expiration: Int64 = if case .at(let date) = broadcast.expiration { APNsExpiration.wholeSeconds(date) } else { 0 }
        var sent = BroadcastRecord(
            channel: record.name, sentAt: sentAt, priority: broadcast.priority.rawValue, expiration: expiration,
            payload: String(decoding: broadcast.payload, as: UTF8.self), result: .failed, requestID: broadcast.requestID.apnsString, attempts: 0)
        let delivery: APNsBroadcastDelivery
        do {
            delivery = try await clients.broadcastClient(for: app, environment: record.environment, service: .http2).broadcast(broadcast)
        } catch {
            broadcasts.failed.increment()
            let answer = Self.apnsError(error, doing: "broadcast")
            sent.reason = answer.error
            _ = await keep(sent, app: app)
            throw answer
        }
        sent.requestID = delivery.requestID ?? sent.requestID
        sent.uniqueID = delivery.uniqueID
        sent.attempts = delivery.attempts
        guard delivery.isDelivered else {
            broadcasts.rejected.increment()
            let reason = delivery.response.reason?.metricLabel ?? "status \(delivery.response.status)"
            // A backend that goes on broadcasting to a channel APNs no longer has is a few lines, not one a call.
            refusals.failed(["app": "\(app.id)", "channel": "\(record.name)", "reason": "\(reason)"])
            sent.result = .rejected
            sent.reason = reason
            _ = await keep(sent, app: app)
            throw Self.apnsError(APNsChannelRejection(response: delivery.response, requestID: delivery.requestID), doing: "broadcast")
        }
        refusals.succeeded()
        broadcasts.delivered.increment()
        sent.result = .delivered
        let kept = await keep(sent, app: app)
        return BroadcastView(
            channel: record.name, channelId: record.channelID, requestId: delivery.requestID, uniqueId: delivery.uniqueID,
            attempts: delivery.attempts, id: kept.map { String($0.id) })
    }

    /// Records a broadcast in its channel's history. The broadcast went out (or was tried) whatever the database
    /// says, so a failure here is logged, not answered. - Returns: the broadcast as recorded, or nil.
    private func keep(_ sent: BroadcastRecord, app: AppRecord) async -> BroadcastRecord? {
        do {
            let kept = try await store.recordBroadcast(app: app.id, sent)
            unrecorded.succeeded()
            return kept
        } catch StoreError.notFound {
            // The channel was deleted while the broadcast was out: its history went with it.
            return nil
        } catch {
            unrecorded.failed(["app": "\(app.id)", "channel": "\(sent.channel)", "error": "\(error)"])
            return nil
        }
    }

    /// Deletes the channel at APNs and here, with its history: `DELETE …/broadcast-channels/{name}` and the console's
    /// channel page. - Throws: APNs' refusal or silence, and then nothing is deleted here.
    func delete(_ record: BroadcastChannelRecord, app: AppRecord) async throws {
        if let waiting = try await scheduledStart(following: record.name, app: app) {
            throw JSONAPIError.conflict(
                field: nil,
                "push \(waiting.id), scheduled for \(waiting.sendAt.map(InternetDate.format) ?? "later"), starts Live Activities that follow channel '\(record.name)': "
                    + "cancel it (POST …/pushes/\(waiting.id)/cancel) before deleting the channel, or they would follow a channel APNs no longer has")
        }
        do {
            try await clients.broadcastClient(for: app, environment: record.environment, service: .channels)
                .deleteChannel(bundleID: app.topic, id: record.channelID)
        } catch let rejection as APNsChannelRejection where rejection.response.reason == .channelNotRegistered {
            // Gone at APNs already (deleted elsewhere): forgotten here too.
        } catch {
            throw Self.apnsError(error, doing: "delete the channel")
        }
        _ = try await store.deleteBroadcastChannel(app: app.id, name: record.name)
        logger.info("broadcast channel deleted", metadata: ["app": "\(app.id)", "channel": "\(record.name)"])
    }

    /// The app's first scheduled push that names the channel in `broadcastChannel`, if there is one: its payload holds
    /// the channel's id for when it goes.
    private func scheduledStart(following name: String, app: AppRecord) async throws -> PushRecord? {
        var cursor: String?
        repeat {
            let page = try await store.pushes(app: app.id, status: .scheduled, after: cursor, limit: 500)
            for push in page.items {
                if push.content?.broadcastChannel == name { return push }
            }
            cursor = page.next
        } while cursor != nil
        return nil
    }

    /// Makes the channel at APNs and keeps it, or answers with the one kept under that name: `PUT
    /// …/broadcast-channels/{name}` and the console's Live Activities page.
    /// - Returns: the channel, and whether it was made now.
    func make(_ name: String, _ body: ChannelRequest, app: AppRecord) async throws -> (BroadcastChannelRecord, Bool) {
        let storesMessages: Bool
        switch body.storage {
        case "none": storesMessages = false
        case "mostRecent": storesMessages = true
        default: throw JSONAPIError.badRequest(field: "storage", "storage is none or mostRecent")
        }
        let environment: APNsEnvironment
        if let text = body.environment {
            guard app.environment.apnsEnvironment != nil else {
                throw JSONAPIError.badRequest(
                    field: "environment", "app \(app.id) delivers to \(app.environment.rawValue), which has one environment: leave environment out")
            }
            do {
                environment = try APNsEnvironment(text, field: "environment")
            } catch {
                throw JSONAPIError(decoding: error)
            }
        } else {
            environment = app.environment.apnsEnvironment ?? .production
        }
        func same(_ kept: BroadcastChannelRecord) throws -> BroadcastChannelRecord {
            guard kept.storesMessages == storesMessages, kept.environment == environment else {
                throw JSONAPIError.conflict(
                    field: kept.storesMessages == storesMessages ? "environment" : "storage",
                    "channel '\(name)' exists with storage \(kept.storesMessages ? "mostRecent" : "none") in \(kept.environment): a channel's storage and environment are fixed; delete it to make it again")
            }
            return kept
        }
        if let kept = try await store.broadcastChannel(app: app.id, name: name) { return (try same(kept), false) }

        let client: APNsClient
        let made: APNsChannel
        do {
            client = try await clients.broadcastClient(for: app, environment: environment, service: .channels)
            made = try await client.createChannel(bundleID: app.topic, storagePolicy: storesMessages ? .mostRecentMessage : .noStorage)
        } catch {
            throw Self.apnsError(error, doing: "make the channel")
        }
        let record = BroadcastChannelRecord(
            name: name, channelID: made.id, environment: environment, storesMessages: storesMessages, createdAt: clock.now)
        let kept: (channel: BroadcastChannelRecord, added: Bool)
        do {
            kept = try await store.addBroadcastChannel(app: app.id, record)
        } catch {
            // Not kept: not left at APNs either, where it would count against the app's channels with no name to find it by.
            try? await client.deleteChannel(bundleID: app.topic, id: made.id)
            throw error
        }
        guard kept.added else {
            // Another request made one under this name meanwhile: that one stays.
            try? await client.deleteChannel(bundleID: app.topic, id: made.id)
            return (try same(kept.channel), false)
        }
        logger.info("broadcast channel made", metadata: ["app": "\(app.id)", "channel": "\(name)", "environment": "\(environment)"])
        return (record, true)
    }

    private func channel(app: AppRecord, _ context: ServerRequestContext) async throws -> BroadcastChannelRecord {
        let name = try Self.name(context)
        guard let record = try await store.broadcastChannel(app: app.id, name: name) else {
            throw JSONAPIError.notFound("app \(app.id) has no broadcast channel '\(name)'")
        }
        return record
    }

    static func name(_ context: ServerRequestContext) throws(JSONAPIError) -> String {
        try name(context.parameters.get("name") ?? "", field: "name")
    }

    /// `text` as a channel's name, or a 400 naming `field`: the one rule for a name in a path, a push or a form.
    static func name(_ text: String, field: String) throws(JSONAPIError) -> String {
        guard ActivityTokenRecord.isValidID(text) else {
            throw .badRequest(field: field, "a channel's name is 1-128 letters, digits, '.', '_', ':' and '-', not '\(text.prefix(64))'")
        }
        return text
    }

    /// The broadcast a request asks for, checked as APNs would check it (spec §7): an update or end with its
    /// timestamp and state, at most 5,120 bytes, priority 5 or 10, expiration 0 on a channel that stores nothing.
    static func broadcast(_ body: BroadcastRequest, to channel: BroadcastChannelRecord, bundleID: String, now: Date) throws(JSONAPIError) -> APNsBroadcast {
        guard case .object(let aps)? = body.payload["aps"] else {
            throw .badRequest(field: "payload.aps", "a broadcast's payload has aps, with event, timestamp and content-state")
        }
        try PushesAPI.checkUpdateOrEnd(aps, sender: "a broadcast", start: "a channel cannot start one")
        let payload: [UInt8]
        do {
            payload = try body.payload.serialized()
        } catch {
            throw .badRequest(field: "payload", "the payload cannot be written as JSON")
        }
        guard payload.count <= APNsBroadcastRules.maximumPayloadSize else {
            throw .badRequest(field: "payload", "a broadcast's payload is at most \(APNsBroadcastRules.maximumPayloadSize) bytes, not \(payload.count)")
        }
        let priority = body.priority ?? 10
        guard priority == 10 || priority == 5 else { throw .badRequest(field: "priority", "priority is 10 or 5") }
        let expiration: APNsExpiration
        switch (body.expiration, channel.storesMessages) {
        case (nil, false), (0?, _): expiration = .immediately
        case (nil, true): expiration = .at(now.addingTimeInterval(longestStorage))
        case (let seconds?, true):
            guard seconds > 0, seconds <= APNsOptionsInput.latestExpiration else {
                throw .badRequest(field: "expiration", "expiration is epoch seconds, 0-\(APNsOptionsInput.latestExpiration)")
            }
            expiration = .at(Date(timeIntervalSince1970: TimeInterval(seconds)))
        case (_?, false):
            throw .badRequest(field: "expiration", "channel '\(channel.name)' stores nothing: a broadcast to it expires at once (0, or leave it out)")
        }
        return APNsBroadcast(
            bundleID: bundleID, channelID: channel.channelID, payload: payload, priority: priority == 5 ? .throttled : .immediate, expiration: expiration)
    }

    /// What APNs' refusal, or no answer from it, is to the caller: 409 for a channel APNs no longer has or one too
    /// many, for an app on the legacy protocol and for a topic APNs cannot take in a broadcast's path; 502 for any
    /// other refusal (with APNs' reason); 503 for no APNs to ask; 504 for no answer in time.
    static func apnsError(_ error: any Error, doing what: String) -> JSONAPIError {
        switch error {
        case let error as JSONAPIError:
            return error
        case let rejection as APNsChannelRejection:
            let reason = rejection.response.reason?.metricLabel ?? "status \(rejection.response.status)"
            switch rejection.response.reason {
            case .channelNotRegistered?:
                return JSONAPIError(
                    status: .conflict, error: "channelNotRegistered",
                    message: "APNs has no such channel (deleted elsewhere, or in another environment): delete it here and make it again")
            case .cannotCreateChannelConfig?:
                return JSONAPIError(status: .conflict, error: "channelLimit", message: "APNs refused to make the channel: the environment has its 10,000 channels")
            default:
                return JSONAPIError(status: .badGateway, error: "apnsRejected", message: "APNs refused to \(what): \(reason)")
            }
        case let error as EndpointUnavailable where error.reason == .legacyHasNoBroadcasts:
            return JSONAPIError(status: .conflict, error: "legacyTransport", message: error.description)
        case let error as EndpointUnavailable:
            return JSONAPIError(status: .serviceUnavailable, error: "apnsUnavailable", message: error.description)
        case let error as APNsClientError where error.code == .invalidRequest:
            // Not sent: the app's topic is not a bundle id APNs takes in a broadcast's path.
            return JSONAPIError(status: .conflict, error: "notSendable", message: "cannot \(what) with the app's topic: \(error.message)")
        case let error as APNsClientError where error.code == .timedOut:
            return JSONAPIError(status: .gatewayTimeout, error: "apnsTimedOut", message: "no answer from APNs in time: \(error.message)")
        case let error as APNsClientError:
            return JSONAPIError(status: .badGateway, error: "apnsUnavailable", message: "cannot reach APNs to \(what): \(error.message)")
        default:
            return JSONAPIError(status: .badGateway, error: "apnsUnavailable", message: "cannot reach APNs to \(what): \(ClientDirectory.whyUnavailable(error))")
        }
    }
}
