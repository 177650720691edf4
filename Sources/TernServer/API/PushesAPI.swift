import Foundation
import Hummingbird
import TernAPNs
import TernStore
import TernWeb

/// `POST /v1/apps/{app}/pushes`, `GET …/pushes`, `GET …/pushes/{id}` and `POST …/pushes/{id}/cancel` (master secret);
/// `GET …/token-events`.
struct PushesAPI {
    let store: any TernStore
    let apps: AppCache
    let dispatcher: PushDispatcher
    /// Dates the pushes.
    let clock: any WallClock

    struct PushRequest: Decodable {
        var audience: AudienceInput
        var notification: NotificationInput?
        var payload: JSONValue?
        var apns: APNsOptionsInput?
        var inbox: InboxInput?
        var idempotencyKey: String?
        /// `apns` (the default), `online` or `auto`: see ``OnlineDelivery``.
        var delivery: String?
        /// With `online`: an offline device also gets a silent push, so the app can connect and fetch.
        var wake: Bool?
        /// With `auto`: seconds a connected device has to acknowledge before the message goes through APNs.
        var ackTimeout: Double?
        /// When to send it, an RFC 3339 date-time, at most ``longestSchedule`` ahead: until then it is `scheduled`.
        /// A time already past sends it now.
        var sendAt: String?
        /// Throttles it: at most this many recipients a second (1-100,000), across every node. Such a push is out of
        /// its app's order: it holds none of the app's later pushes back (a later one may reach a device first).
        var ratePerSecond: Int?
        /// A push that starts a Live Activity: the name of one of the app's broadcast channels, whose APNs id goes in
        /// the payload's `aps.input-push-channel`, so that each activity it starts follows the channel's broadcasts.
        var broadcastChannel: String?
    }

    /// `POST …/pushes/{id}/cancel` takes no body, or an empty object: any member is an unknown field, refused, so that
    /// no caller believes a `reason` or the like was kept.
    struct CancelRequest: Decodable {
        private struct NoMember: CodingKey {
            init?(stringValue: String) { nil }
            init?(intValue: Int) { nil }
            var stringValue: String { "" }
            var intValue: Int? { nil }
        }

        init() {}

        init(from decoder: any Decoder) throws {
            _ = try decoder.container(keyedBy: NoMember.self)
        }
    }

    /// Exactly one of: `tokens`, `devices`, `aliases`, `tags` (with `match`: `any` or `all`), `all: true`,
    /// `activity` (with `aliases` or not); with devices, aliases, tags or all, `filters` too. A push's view shows its
    /// audience in this shape (``init(_:filter:)``).
    struct AudienceInput: Codable, Equatable {
        var tokens: [String]?
        var devices: [String]?
        var aliases: [String]?
        var tags: [String]?
        var match: String?
        var all: Bool?
        /// A Live Activity's id: its update tokens, on every device that registered one (of `aliases`, if given).
        var activity: String?
        /// `aliases` given as null, which with an activity is refused: taken as left out, a user's update would reach
        /// every device following the activity.
        var aliasesNull = false
        /// Which of the devices it goes to, by what they registered (``AudienceFilter``).
        var filters: FiltersInput?

        /// `audience.filters`: at least one of them; a device passes when it meets each one given.
        struct FiltersInput: Codable, Equatable {
            var appVersion: VersionsInput?
            var languages: [String]?
            var registeredSince: String?
        }

        /// `audience.filters.appVersion`: versions from `atLeast` (included) to `below` (excluded).
        struct VersionsInput: Codable, Equatable {
            var atLeast: String?
            var below: String?
        }

        private enum CodingKeys: String, CodingKey {
            case tokens, devices, aliases, tags, match, all, activity, filters
        }

        init(from decoder: any Decoder) throws {
            let members = try decoder.container(keyedBy: CodingKeys.self)
            tokens = try members.decodeIfPresent([String].self, forKey: .tokens)
            devices = try members.decodeIfPresent([String].self, forKey: .devices)
            aliases = try members.decodeIfPresent([String].self, forKey: .aliases)
            tags = try members.decodeIfPresent([String].self, forKey: .tags)
            match = try members.decodeIfPresent(String.self, forKey: .match)
            all = try members.decodeIfPresent(Bool.self, forKey: .all)
            activity = try members.decodeIfPresent(String.self, forKey: .activity)
            filters = try members.decodeIfPresent(FiltersInput.self, forKey: .filters)
            aliasesNull = members.contains(.aliases) && aliases == nil
        }

        /// A stored push's audience as it was given (its lists as stored: sorted, each entry once).
        init(_ audience: Audience, filter: AudienceFilter?) {
            switch audience {
            case .tokens(let tokens): self.tokens = tokens
            case .devices(let deviceIDs): devices = deviceIDs
            case .aliases(let aliases): self.aliases = aliases
            case .tags(let tags, let all):
                self.tags = tags
                match = all ? "all" : "any"
            case .everyone: all = true
            case .activity(let activity, let aliases):
                self.activity = activity
                self.aliases = aliases.isEmpty ? nil : aliases
            }
            filters = filter.map { filter in
                FiltersInput(
                    appVersion: filter.appVersions.map { VersionsInput(atLeast: $0.atLeast?.description, below: $0.below?.description) },
                    languages: filter.languages, registeredSince: filter.registeredSince.map(InternetDate.format))
            }
        }
    }

    struct PushView: ResponseEncodable {
        var id: String
        var status: String
        var idempotencyKey: String?
        var counts: Counts
        var createdAt: Date
        var finishedAt: Date?
        /// When it was cancelled (`POST …/pushes/{id}/cancel`): no recipient was handed out after it.
        var cancelledAt: Date?
        /// When it is (or was) to be sent, for a push made with a `sendAt` still ahead.
        var sendAt: Date?
        /// A throttled push's recipients a second at most.
        var ratePerSecond: Int?
        /// Whom it goes to, as it was given (lists sorted, each entry once), with its filters; in the view of one
        /// push (`GET …/pushes/{id}`), not in a list of them.
        var audience: AudienceInput?
        /// By failure reason, what the reason alone does not say, from the first failure that said it: the APNs
        /// client's last connect error (`connectionFailed`, `timedOut`), why the app has no client
        /// (`clientUnavailable`), why a token APNs refused outright was kept. Absent when no failure had one.
        var failureDetails: [String: String]?
        var failures: [FailureView]?
        var nextFailures: String?

        struct Counts: Codable {
            var targeted: Int
            var accepted: Int
            var failed: Int
            var pruned: Int
            var failedByReason: [String: Int]
            /// The online channel's counts, for a push with `delivery` `online` or `auto`.
            var deliveredOnline: Int?
            var acked: Int?
            var fellBackToAPNs: Int?
            var ackedAfterFallback: Int?
            /// Of a push through APNs only (`delivery` `apns`): devices whose Notification Service Extension reported its
            /// arrival (`POST …/devices/{id}/acks` with `pushId`), each once.
            var received: Int?
            /// Devices whose user opened the push: reported by the app (`POST …/devices/{id}/opens`), each device once.
            var opened: Int
            /// Older inbox messages deleted to keep recipients' inboxes within the app's cap.
            var inboxDropped: Int
        }
    }

    /// `GET …/pushes`: a page of the app's pushes, newest first, without their failures.
    struct PushList: ResponseEncodable {
        var pushes: [PushView]
        /// The `after` of the next page; none after the last.
        var next: String?
    }

    /// `GET …/pushes/{id}/reports`: the devices that reported the push, and what.
    struct PushReportList: ResponseEncodable {
        struct Report: Codable {
            var deviceId: String
            /// When its Notification Service Extension reported the push's arrival.
            var receivedAt: Date?
            /// When its app reported the user's open.
            var openedAt: Date?
        }
        var reports: [Report]
        /// The `after` of the next page; none after the last.
        var next: String?
    }

    struct FailureView: Codable {
        var deviceId: String?
        var token: String
        var status: Int?
        var reason: String
        var at: Date
    }

    /// A Live Activity and how many devices follow it (``ActivitySummary``).
    struct ActivityView: ResponseEncodable {
        var activityId: String
        var devices: Int
        var firstStartedAt: Date
        var lastRegisteredAt: Date

        init(_ summary: ActivitySummary) {
            activityId = summary.activityID
            devices = summary.devices
            firstStartedAt = summary.firstStartedAt
            lastRegisteredAt = summary.lastRegisteredAt
        }
    }

    struct ActivityList: ResponseEncodable {
        var activities: [ActivityView]
        var next: String?
    }

    struct TokenEventList: ResponseEncodable {
        struct Event: Codable {
            var id: Int64
            var deviceId: String
            var token: String
            var reason: String
            var apnsTimestamp: Date?
            var occurredAt: Date

            init(_ event: TokenEvent) {
                id = event.id
                deviceId = event.deviceID
                token = event.token
                reason = event.reason.rawValue
                apnsTimestamp = event.apnsTimestamp
                occurredAt = event.occurredAt
            }
        }
        var events: [Event]
        var next: String?
    }

    static let maxListedRecipients = 10_000
    /// How many pushes `GET …/pushes` gives a page, unless asked, and at most (each with its counts).
    static let defaultListedPushes = 20
    static let maxListedPushes = 100
    /// How far ahead a push can be scheduled: far enough for any campaign, near enough that a date in the wrong year
    /// is refused.
    static let longestSchedule = Duration.seconds(90 * 86_400)
    /// How long `?wait=` first waits before it reads the push again, doubling up to ``longestWaitInterval``.
    static let firstWaitInterval = Duration.milliseconds(20)
    static let longestWaitInterval = Duration.seconds(1)

    func register(on router: Router<ServerRequestContext>) {
        let pushes = router.group("v1/apps/:app")
        pushes.post("pushes") { request, context -> EditedResponse<PushView> in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let wait = try Self.wait(request.uri.queryParameters.get("wait"))
            let body = try await JSONBody.decode(PushRequest.self, from: request, limit: 1 << 20)
            var (push, created) = try await create(body, app: app)
            // A push scheduled for after the wait cannot complete within it: answered at once.
            if let wait, push.status != .scheduled || (push.sendAt ?? .distantFuture) <= clock.now.addingTimeInterval(wait.seconds) {
                // On the system's clock, not the injected one: `wait` bounds how long this request holds its caller,
                // a real time, and the push's progress is made in real time too. This node tells when it completes the
                // push; the store is read again after each wait, at growing intervals, for a push another node
                // completes (a poll every 20 ms per waiting request kept the database busy during large pushes).
                let deadline = ContinuousClock.now + wait
                var interval = Self.firstWaitInterval
                var told = false
                while push.status != .completed, case let left = ContinuousClock.now.duration(to: deadline), left > .zero {
                    if told {
                        // Told, and the store does not say so yet: no second telling comes, so only the reads remain.
                        try await Task.sleep(for: min(interval, left))
                    } else {
                        told = await dispatcher.completions.wait(for: push.id, upTo: min(interval, left))
                        try Task.checkCancellation()
                    }
                    interval = min(interval * 2, Self.longestWaitInterval)
                    push = try await store.push(app: app.id, id: push.id) ?? push
                }
            }
            let status: HTTPResponse.Status = push.status == .completed ? (created ? .created : .ok) : .accepted
            return EditedResponse(status: status, response: try await view(push, withFailures: push.status == .completed))
        }
        pushes.get("pushes") { request, context -> PushList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let query = request.uri.queryParameters
            var status: PushRecord.Status?
            if let text = query.get("status") {
                guard let value = PushRecord.Status(rawValue: text) else {
                    throw JSONAPIError.badRequest(field: "status", "status is scheduled, pending, sending or completed")
                }
                status = value
            }
            let after = query.get("after")
            if let after, (Int64(after) ?? -1) < 0 {
                throw JSONAPIError.badRequest(field: "after", "after is the next of the page before")
            }
            let limit = try DevicesAPI.limit(query.get("limit"), default: Self.defaultListedPushes, maximum: Self.maxListedPushes)
            let page = try await store.pushes(app: app.id, status: status, after: after, limit: limit)
            var views: [PushView] = []
            for push in page.items { views.append(try await view(push, withFailures: false)) }
            return PushList(pushes: views, next: page.next)
        }
        pushes.get("pushes/:push") { request, context -> PushView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let id = context.parameters.get("push") ?? ""
            guard let push = try await store.push(app: app.id, id: id) else { throw JSONAPIError.notFound("no push \(id)") }
            let query = request.uri.queryParameters
            let after = query.get("failuresAfter")
            if let after, (Int64(after) ?? -1) < 0 {
                throw JSONAPIError.badRequest(field: "failuresAfter", "failuresAfter is the nextFailures of the page before (a whole number)")
            }
            return try await view(push, withFailures: true, withAudience: true, after: after, limit: try DevicesAPI.limit(query.get("limit")))
        }
        // Which devices reported the push (arrived, opened), in device id order: the app's backend learns who opened it.
        pushes.get("pushes/:push/reports") { request, context -> PushReportList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let id = context.parameters.get("push") ?? ""
            guard let push = try await store.pushWithoutCounts(app: app.id, id: id) else { throw JSONAPIError.notFound("no push \(id)") }
            let query = request.uri.queryParameters
            let after: String?
            do {
                after = try query.get("after").map(DevicesAPI.deviceID)
            } catch {
                throw JSONAPIError.badRequest(field: "after", "after is the next of the page before (a device id)")
            }
            let page = try await store.pushReports(pushID: push.id, after: after, limit: try DevicesAPI.limit(query.get("limit")))
            return PushReportList(
                reports: page.items.map { PushReportList.Report(deviceId: $0.deviceID, receivedAt: $0.receivedAt, openedAt: $0.openedAt) },
                next: page.next)
        }
        // A push sent by mistake (the wrong audience, the wrong words) is stopped: no more of its audience is handed
        // out, on any node; the chunks in flight are sent to the end, and the push completes with them.
        pushes.post("pushes/:push/cancel") { request, context -> PushView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            _ = try await JSONBody.decode(CancelRequest.self, from: request, limit: 1024, allowEmpty: true)
            let push = try await cancel(context.parameters.get("push") ?? "", app: app)
            return try await view(push, withFailures: push.status == .completed)
        }
        pushes.get("token-events") { request, context -> TokenEventList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let query = request.uri.queryParameters
            var after: Int64?
            if let text = query.get("after") {
                guard let value = Int64(text), value >= 0 else { throw JSONAPIError.badRequest(field: "after", "after is an event id") }
                after = value
            }
            return try await tokenEvents(app: app, after: after, limit: try DevicesAPI.limit(query.get("limit")))
        }
        // The app's Live Activities, each with how many devices follow it: whom an update would reach.
        pushes.get("activities") { request, context -> ActivityList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let query = request.uri.queryParameters
            let after = query.get("after")
            if let after, !ActivityTokenRecord.isValidID(after) {
                throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (an activity id)")
            }
            let page = try await store.activities(app: app.id, after: after, limit: try DevicesAPI.limit(query.get("limit")))
            return ActivityList(activities: page.items.map(ActivityView.init), next: page.next)
        }
        pushes.get("activities/:activityId") { request, context -> ActivityView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app)
            let id = try DevicesAPI.activityID(context)
            guard let summary = try await store.activity(app: app.id, id: id) else {
                throw JSONAPIError.notFound("no device follows activity \(id)")
            }
            return ActivityView(summary)
        }
    }

    /// Cancels a push (``TernStore/cancelPush(app:id:at:)``) and tells whoever waits for it when that completed it:
    /// `POST …/pushes/{id}/cancel` and the console's Stop button. - Throws: 404 for no such push of the app, 409 for a
    /// push that had completed by itself.
    func cancel(_ id: String, app: AppRecord) async throws -> PushRecord {
        guard let (push, completedNow) = try await store.cancelPush(app: app.id, id: id, at: clock.now) else {
            throw JSONAPIError.notFound("no push \(id.prefix(64))")
        }
        guard push.cancelledAt != nil else {
            throw JSONAPIError.conflict(field: nil, "push \(id) completed before it was cancelled: nothing is left to stop")
        }
        if completedNow { dispatcher.completed(push.id) }
        return push
    }

    /// Checks and renders a push request, stores it and wakes the dispatcher: `POST …/pushes` and the console's
    /// composer both send this way.
    /// - Returns: the stored push, and false when its idempotency key named an earlier one (then nothing is stored).
    func create(_ body: PushRequest, app: AppRecord) async throws -> (push: PushRecord, created: Bool) {
        var body = body
        if let name = try Self.broadcastChannelName(body) {
            body = try Self.subscribing(body, to: try await store.broadcastChannel(app: app.id, name: name))
        }
        let audience = try Self.audience(body.audience)
        let id = UUID.random().apnsString
        let content = try Self.content(body, app: app, pushID: id)
        let tokenKind = try Self.tokenKind(content, audience: audience)
        let now = clock.now
        let filter = try Self.filter(body.audience, now: now)
        let sendAt = try Self.sendAt(body.sendAt, content: content, now: now)
        let rate = try Self.ratePerSecond(body.ratePerSecond, audience: audience, app: app)
        let record = PushRecord(
            id: id, appID: app.id, idempotencyKey: body.idempotencyKey, audience: audience, filter: filter,
            notification: Array(try JSONEncoder().encode(content)), status: sendAt == nil ? .pending : .scheduled, createdAt: now,
            sendAt: sendAt, ratePerSecond: rate, tokenKind: tokenKind)
        let (push, created) = try await store.createPush(record)
        // A scheduled push is made pending by the claim that finds it due (the dispatcher looks every second).
        if created, push.status != .scheduled { dispatcher.wake() }
        return (push, created)
    }

    /// The name in a push's `broadcastChannel`, checked; nil when it has none.
    static func broadcastChannelName(_ body: PushRequest) throws(JSONAPIError) -> String? {
        try body.broadcastChannel.map { name throws(JSONAPIError) in try BroadcastsAPI.name(name, field: "broadcastChannel") }
    }

    /// The push with its `broadcastChannel` in the payload, as APNs' id in `aps.input-push-channel`: only a raw
    /// payload that starts a Live Activity takes one. - Parameter channel: the app's channel of that name, if it has one.
    static func subscribing(_ body: PushRequest, to channel: BroadcastChannelRecord?) throws(JSONAPIError) -> PushRequest {
        guard let name = try broadcastChannelName(body) else { return body }
        guard case .object(var members)? = body.payload, case .object(var aps)? = members["aps"], aps["event"] == .string("start") else {
            throw .badRequest(
                field: "broadcastChannel", "broadcastChannel goes with a payload that starts a Live Activity (aps.event \"start\", to push-to-start tokens)")
        }
        guard aps["input-push-channel"] == nil else {
            throw .badRequest(
                field: "payload.aps.input-push-channel", "give the channel by its name in broadcastChannel or by APNs' id in aps.input-push-channel, not both")
        }
        guard let channel else {
            throw .badRequest(field: "broadcastChannel", "the app has no broadcast channel '\(name)' (PUT …/broadcast-channels/\(name) makes one)")
        }
        aps["input-push-channel"] = .string(channel.channelID)
        members["aps"] = .object(aps)
        var subscribed = body
        subscribed.payload = .object(members)
        return subscribed
    }

    /// What a push request sends, rendered and checked as ``create(_:app:)`` stores it (the console's preview shows
    /// this, so it cannot differ from what is sent). - Throws: the API's 400 naming the field at fault.
    static func content(_ body: PushRequest, app: AppRecord, pushID: String) throws(JSONAPIError) -> PushContent {
        var content = try PushContent.render(
            notification: body.notification, payload: body.payload, options: body.apns, topic: app.topic, inbox: body.inbox,
            pushID: pushID, app: app)
        content.online = try OnlineDelivery.render(
            delivery: body.delivery, wake: body.wake, ackTimeout: body.ackTimeout, notification: body.notification, payload: body.payload,
            inbox: body.inbox, app: app)
        content.broadcastChannel = try Self.broadcastChannelName(body)
        // The widest payload a recipient can get, against what the app's transport takes: rendering checked the payload
        // against APNs' limit for its type, but not what an `auto` push's fallback adds, nor the binary protocol's
        // smaller frames. Either would otherwise fail at sending, for every recipient.
        let limit = Self.payloadLimit(pushType: content.pushType, app: app)
        let widest = content.widestPayloadSize
        guard widest <= limit else {
            throw JSONAPIError.badRequest(
                field: body.payload != nil ? "payload" : "notification",
                app.transport == AppRecord.legacy
                    ? "app \(app.id) sends through the legacy binary protocol, whose payloads are at most \(limit) bytes: this one is up to \(widest)"
                    : "with delivery auto, a device that is offline gets the push through APNs with tern.id and tern.sequence added: up to \(widest) bytes, over the \(limit) APNs takes")
        }
        if let key = body.idempotencyKey, !(1...128).contains(key.utf8.count) {
            throw JSONAPIError.badRequest(field: "idempotencyKey", "idempotencyKey must be 1-128 bytes")
        }
        return content
    }

    /// The largest payload `app` can send of `pushType`: APNs' limit for the type, or the binary protocol's frame for a
    /// legacy app.
    static func payloadLimit(pushType: String, app: AppRecord) -> Int {
        app.transport == AppRecord.legacy
            ? LegacyCommand.frame.maximumPayloadSize : ((try? APNsPushType(headerValue: pushType)) ?? .alert).maximumPayloadSize
    }

    /// A page of the app's token events, as `GET …/token-events` answers it.
    func tokenEvents(app: AppRecord, after: Int64?, limit: Int) async throws -> TokenEventList {
        let events = try await store.tokenEvents(app: app.id, after: after, limit: limit)
        return TokenEventList(
            events: events.map(TokenEventList.Event.init),
            next: events.count == limit ? events.last.map { String($0.id) } : nil)
    }

    /// - Parameter withAudience: whether the view shows the push's audience (the view of one push).
    func view(_ push: PushRecord, withFailures: Bool, withAudience: Bool = false, after: String? = nil, limit: Int = 100) async throws -> PushView {
        var failures: [FailureView]?
        var next: String?
        if withFailures {
            let page = try await store.failures(pushID: push.id, after: after, limit: limit)
            failures = page.items.map { FailureView(deviceId: $0.deviceID, token: $0.token, status: $0.status, reason: $0.reason.rawValue, at: $0.at) }
            next = page.next
        }
        let counts = push.counts
        var viewCounts = PushView.Counts(
            targeted: counts.targeted, accepted: counts.accepted, failed: counts.failed, pruned: counts.pruned, failedByReason: counts.failedByReason,
            opened: 0, inboxDropped: counts.inboxDropped)
        if push.content?.online != nil {
            let online = try await store.messageCounts(pushID: push.id)
            viewCounts.deliveredOnline = online.deliveredOnline
            viewCounts.acked = online.acked
            viewCounts.fellBackToAPNs = online.fellBackToAPNs
            viewCounts.ackedAfterFallback = online.ackedAfterFallback
            viewCounts.opened = online.opened
        } else {
            let reports = try await store.pushReportCounts(pushID: push.id)
            viewCounts.received = reports.received
            viewCounts.opened = reports.opened
        }
        return PushView(
            id: push.id, status: push.status.rawValue, idempotencyKey: push.idempotencyKey,
            counts: viewCounts,
            createdAt: push.createdAt, finishedAt: push.finishedAt, cancelledAt: push.cancelledAt, sendAt: push.sendAt,
            ratePerSecond: push.ratePerSecond, audience: withAudience ? AudienceInput(push.audience, filter: push.filter) : nil,
            failureDetails: counts.failureDetails.isEmpty ? nil : counts.failureDetails, failures: failures, nextFailures: next)
    }

    // MARK: Validation

    static func wait(_ text: String?) throws(JSONAPIError) -> Duration? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds.isFinite, (0...60).contains(seconds) else {
            throw .badRequest(field: "wait", "wait is 0-60 seconds")
        }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// When a push with `sendAt` is to be sent: nil when it has none, or one already past (it is sent now).
    /// - Throws: 400 for text that is not an RFC 3339 date-time with its offset, a time more than
    ///   ``longestSchedule`` ahead, or one after the notification's `apns.expiration` (APNs would drop it unsent).
    static func sendAt(_ text: String?, content: PushContent, now: Date) throws(JSONAPIError) -> Date? {
        guard let text else { return nil }
        guard let date = InternetDate.parse(text) else {
            throw .badRequest(field: "sendAt", "sendAt is an RFC 3339 date-time with its offset, like 2026-12-01T09:00:00Z or 2026-12-01T18:00:00+09:00")
        }
        guard date > now else { return nil }
        guard date.timeIntervalSince(now) <= Double(longestSchedule.components.seconds) else {
            throw .badRequest(field: "sendAt", "sendAt is at most \(longestSchedule.components.seconds / 86_400) days ahead")
        }
        if let expiration = content.expiration, expiration > 0, Double(expiration) < date.timeIntervalSince1970 {
            throw .badRequest(field: "apns.expiration", "apns.expiration is before sendAt: the notification would expire before it is sent")
        }
        return date
    }

    /// The fastest a push may be throttled to: faster, and throttling would only take it out of its app's order.
    static let fastestThrottle = 100_000

    /// The rate a push is throttled to: its `ratePerSecond`; 0, not throttled; none, the app's `broadcastRatePerSecond`
    /// for a broadcast (to tags or to everyone), else not throttled.
    static func ratePerSecond(_ rate: Int?, audience: Audience, app: AppRecord) throws(JSONAPIError) -> Int? {
        guard let rate else {
            switch audience {
            case .tags, .everyone: return app.broadcastRatePerSecond
            // An activity's update brings no one to the app (it changes what the Lock Screen shows).
            case .tokens, .devices, .aliases, .activity: return nil
            }
        }
        guard (0...fastestThrottle).contains(rate) else {
            throw .badRequest(
                field: "ratePerSecond", "ratePerSecond is 1-\(fastestThrottle) recipients a second, or 0 for none (not the app's broadcastRatePerSecond)")
        }
        return rate == 0 ? nil : rate
    }

    /// The kind of the devices' tokens a push goes to (``PushRecord/tokenKind``). A push type whose tokens are of their
    /// own kind (``APNsPushType/tokenSource``) goes to the tokens the caller gives, or, for the kinds a device registers
    /// here (``PushTokenKind``), to the devices' tokens of that kind: a `voip` push to a user reaches the VoIP token of
    /// each of their devices. Any other such type sent to devices could only fail for every recipient: APNs refuses
    /// a device token on its topic.
    static func tokenKind(_ content: PushContent, audience: Audience) throws(JSONAPIError) -> PushTokenKind? {
        if case .tokens = audience { return nil }
        let type = try? APNsPushType(headerValue: content.pushType)
        if case .activity = audience {
            try checkActivityUpdate(content, type: type)
            return nil
        }
        guard let type, let source = type.tokenSource else { return nil }
        guard let kind = PushTokenKind.of(type) else {
            throw .badRequest(
                field: "apns.pushType",
                "a \(type) push goes to the tokens \(source) gives the app, which devices do not register here: give them as audience.tokens")
        }
        if content.online != nil {
            throw .badRequest(
                field: "delivery", "a \(type) push to devices goes through APNs to their \(kind.rawValue) tokens: delivery is apns")
        }
        if kind == .pushToStart {
            // A push-to-start token starts an activity and nothing else; updates go to each activity's own token.
            guard liveActivityFields(content)?["event"] == .string("start") else {
                throw .badRequest(
                    field: "payload.aps.event",
                    "a liveactivity push to devices goes to their push-to-start tokens, so its payload's aps.event is \"start\"; send updates to audience.activity")
            }
        }
        return kind
    }

    /// The `aps` of a push's raw payload, if it has one.
    private static func liveActivityFields(_ content: PushContent) -> [String: JSONValue]? {
        guard case .object(let members)? = try? JSONValue(parsing: content.payload), case .object(let aps)? = members["aps"] else { return nil }
        return aps
    }

    /// A push to an activity's tokens updates or ends it: a `liveactivity` push (APNs refuses any other type on those
    /// tokens), with what ActivityKit needs to apply it, through APNs only, and kept in no inbox.
    private static func checkActivityUpdate(_ content: PushContent, type: APNsPushType?) throws(JSONAPIError) {
        guard type == .liveactivity else {
            throw .badRequest(field: "apns.pushType", "a push to audience.activity updates a Live Activity: apns.pushType is liveactivity")
        }
        if content.online != nil {
            throw .badRequest(field: "delivery", "a push to audience.activity goes through APNs to the activity's tokens: delivery is apns")
        }
        if content.inbox != nil {
            throw .badRequest(field: "inbox", "a push to audience.activity changes what the activity shows, and is kept in no inbox")
        }
        try checkUpdateOrEnd(
            liveActivityFields(content) ?? [:], sender: "a push to audience.activity", start: "a start goes to the devices' push-to-start tokens")
    }

    /// An update or end of a Live Activity, as ActivityKit applies it, whether it goes to the activity's tokens or to
    /// a broadcast channel: `aps.event` `update` or `end`, `aps.timestamp` (a number) and `aps.content-state` (an
    /// object). - Parameters: `sender`, what sends it, and `start`, where a start goes instead, for the messages.
    static func checkUpdateOrEnd(_ aps: [String: JSONValue], sender: String, start: String) throws(JSONAPIError) {
        guard case .string(let event)? = aps["event"], event == "update" || event == "end" else {
            throw .badRequest(
                field: "payload.aps.event", "\(sender) updates or ends a Live Activity: its payload's aps.event is \"update\" or \"end\" (\(start))")
        }
        switch aps["timestamp"] {
        case .int?, .double?: break
        default:
            throw .badRequest(
                field: "payload.aps.timestamp",
                "\(sender) carries aps.timestamp, the UNIX time it was sent: ActivityKit drops one older than the last it applied")
        }
        guard case .object? = aps["content-state"] else {
            throw .badRequest(field: "payload.aps.content-state", "an update or end carries aps.content-state, the activity's new state")
        }
    }

    /// The most languages an audience's filters give.
    static let mostFilterLanguages = 100

    /// The audience's `filters`, checked; nil when it gives none. Devices given by their tokens, or an activity's
    /// tokens, are not filtered: the first may be no registered device, and the second are one user's activity.
    static func filter(_ input: AudienceInput, now: Date) throws(JSONAPIError) -> AudienceFilter? {
        guard let filters = input.filters else { return nil }
        if input.tokens != nil || input.activity != nil {
            throw .badRequest(
                field: "audience.filters", "filters go with devices, aliases, tags or all: tokens and an activity's tokens are sent to as given")
        }
        var appVersions: AudienceFilter.VersionRange?
        var languages: [String]?
        var registeredSince: Date?
        if let versions = filters.appVersion {
            func version(_ text: String?, _ name: String) throws(JSONAPIError) -> AppVersion? {
                guard let text else { return nil }
                guard let version = AppVersion(text) else {
                    throw .badRequest(field: "audience.filters.appVersion.\(name)", "'\(text.prefix(80))' is not \(AppVersion.rule)")
                }
                return version
            }
            let range = AudienceFilter.VersionRange(atLeast: try version(versions.atLeast, "atLeast"), below: try version(versions.below, "below"))
            guard range.atLeast != nil || range.below != nil else {
                throw .badRequest(field: "audience.filters.appVersion", "give atLeast, below or both (atLeast included, below not)")
            }
            if let atLeast = range.atLeast, let below = range.below, atLeast >= below {
                throw .badRequest(field: "audience.filters.appVersion.below", "below is a later version than atLeast: no version is at least \(atLeast) and below \(below)")
            }
            appVersions = range
        }
        if let tags = filters.languages {
            guard (1...mostFilterLanguages).contains(tags.count) else {
                throw .badRequest(field: "audience.filters.languages", "give 1-\(mostFilterLanguages) languages")
            }
            var keys = Set<String>()
            for (index, tag) in tags.enumerated() {
                guard LanguageTags.isValidTag(tag) else {
                    throw .badRequest(field: "audience.filters.languages[\(index)]", "'\(tag.prefix(LanguageTags.longestTag))' is not \(LanguageTags.tagRule)")
                }
                guard keys.insert(LanguageTags.key(tag)).inserted else {
                    throw .badRequest(field: "audience.filters.languages[\(index)]", "'\(tag)' is given twice (case does not matter)")
                }
            }
            languages = tags
        }
        if let text = filters.registeredSince {
            guard let date = InternetDate.parse(text) else {
                throw .badRequest(
                    field: "audience.filters.registeredSince", "registeredSince is an RFC 3339 date-time with its offset, like 2026-11-01T00:00:00Z")
            }
            guard date <= now else {
                throw .badRequest(field: "audience.filters.registeredSince", "registeredSince is in the future: no device has registered since then yet")
            }
            registeredSince = date
        }
        guard appVersions != nil || languages != nil || registeredSince != nil else {
            throw .badRequest(field: "audience.filters", "give at least one of appVersion, languages, registeredSince (or leave filters out)")
        }
        return AudienceFilter(appVersions: appVersions, languages: languages, registeredSince: registeredSince)
    }

    static func audience(_ input: AudienceInput) throws(JSONAPIError) -> Audience {
        // With an activity, aliases narrow it to their devices.
        let aliasesAlone = input.aliases != nil && input.activity == nil
        let given = [input.tokens != nil, input.devices != nil, aliasesAlone, input.tags != nil, input.all != nil, input.activity != nil]
            .filter { $0 }.count
        guard given == 1 else {
            throw .badRequest(field: "audience", "give exactly one of tokens, devices, aliases, tags, all, activity (with aliases or not)")
        }
        if input.match != nil, input.tags == nil { throw .badRequest(field: "audience.match", "match goes with tags") }
        func list(_ values: [String], _ field: String, _ check: (String) -> String?) throws(JSONAPIError) -> [String] {
            guard (1...maxListedRecipients).contains(values.count) else {
                throw .badRequest(field: "audience.\(field)", "give 1-\(maxListedRecipients) \(field) (use tags or all for more)")
            }
            var result: [String] = []
            for (index, value) in values.enumerated() {
                guard let normalised = check(value) else {
                    throw .badRequest(field: "audience.\(field)[\(index)]", "not a valid \(field.dropLast()): '\(value.prefix(80))'")
                }
                result.append(normalised)
            }
            return Array(Set(result)).sorted()
        }
        if let activity = input.activity {
            if input.aliasesNull {
                throw .badRequest(
                    field: "audience.aliases",
                    "aliases is a list of 1-\(maxListedRecipients) aliases, not null: leave it out to reach every device that follows the activity")
            }
            guard ActivityTokenRecord.isValidID(activity) else {
                throw .badRequest(field: "audience.activity", "an activity id is 1-128 letters, digits, '.', '_', ':' and '-': '\(activity.prefix(80))'")
            }
            let aliases = try input.aliases.map { aliases throws(JSONAPIError) in try list(aliases, "aliases") { DevicesAPI.isValidAlias($0) ? $0 : nil } }
            return .activity(activity, aliases: aliases ?? [])
        }
        if let tokens = input.tokens { return .tokens(try list(tokens, "tokens") { try? DeviceToken(hex: $0).hex }) }
        if let devices = input.devices { return .devices(try list(devices, "devices") { UUID(apnsText: $0)?.apnsString }) }
        if let aliases = input.aliases { return .aliases(try list(aliases, "aliases") { DevicesAPI.isValidAlias($0) ? $0 : nil }) }
        if let tags = input.tags {
            let match = input.match ?? "any"
            guard match == "any" || match == "all" else { throw .badRequest(field: "audience.match", "match is any or all") }
            let valid = try list(tags, "tags") { (try? DevicesAPI.validateTags([$0], field: "tags")) != nil ? $0 : nil }
            // More than a device can carry matches no one, and the store would compare every tagged device with each.
            if match == "all", valid.count > DeviceRecord.maximumTags {
                throw .badRequest(
                    field: "audience.tags",
                    "with match all, give at most \(DeviceRecord.maximumTags) tags: a device carries at most \(DeviceRecord.maximumTags), so more match no one")
            }
            return .tags(valid, all: match == "all")
        }
        guard input.all == true else { throw .badRequest(field: "audience.all", "all must be true") }
        return .everyone
    }
}
