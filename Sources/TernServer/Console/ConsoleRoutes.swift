import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import TernAPNs
import TernStore
import TernWeb

/// The operator's console: HTML pages under `/console`, signed in with the admin token or an app's master secret.
///
/// Every page reads and writes through what the JSON API uses: ``AppsAPI`` creates apps and rotates their secrets,
/// ``PushesAPI`` checks, renders and stores pushes, the store answers the rest, and a form is decoded into the API's
/// own request body (``ConsoleRequests``), so it is refused with the API's message for the same field.
///
/// Sessions (``ConsoleSessions``) ride in a cookie `HttpOnly; SameSite=Strict; Path=/console` (`Secure` behind TLS);
/// a sign-in always starts a new one (no fixation). Every POST carries the session's CSRF token and must come from
/// this origin. Secrets appear in no URL, page or log, except the new ones an app's creation or rotation shows once.
struct ConsoleRoutes: Sendable {
    static let root = "/console"
    static let cookieName = "tern_console"
    /// The most a form may send (a raw payload and its data fit easily; PEM credentials too).
    static let formLimit = 1 << 20
    /// Recent pushes on the pushes page; failures listed on a push's page.
    static let recentPushes = 50
    static let failuresShown = 100

    let store: any TernStore
    let apps: AppsAPI
    let cache: AppCache
    let pushes: PushesAPI
    let broadcasts: BroadcastsAPI
    let authorization: Authorization
    let sessions: ConsoleSessions
    let limiter: SecretGuessLimiter
    let activity: ConsoleActivity
    let connections: DeviceConnections
    let renderer: ConsoleRenderer
    let secureCookies: Bool
    let clock: any WallClock
    let logger: Logger

    func register(on router: Router<ServerRequestContext>) {
        let console = router.group("console").add(middleware: ConsoleMiddleware(renderer: renderer, logger: logger))
        console.get("static/console.js") { _, _ in Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8") }
        console.get("static/console.css") { _, _ in Self.asset(ConsoleAssets.stylesheet, type: "text/css; charset=utf-8") }
        console.get("sign-in") { request, _ in
            if try await signedIn(request) != nil { return Self.redirect(Self.root) }
            return page("sign-in", Chrome(title: "Sign in"))
        }
        console.post("sign-in") { request, context in try await signIn(request, context) }
        console.post("sign-out") { request, _ in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            _ = try await form(request, user)
            sessions.end(id: user.id)
            var response = Self.redirect("\(Self.root)/sign-in")
            response.headers[values: .setCookie].append(Self.cookie("", secure: isSecure(request), clear: true))
            return response
        }
        console.get { request, _ in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            activity.sample()
            let view = OverviewView(
                activity: activity, deviceConnections: connections.count, now: clock.now, apps: try await visibleApps(user))
            return page("overview", chrome(user, "Overview") { $0.overview = true }, view: view)
        }
        console.get("overview/data") { request, _ -> Response in
            // The overview's own polling, every few seconds: it does not keep an open tab signed in.
            _ = try await requireSession(request, touch: false)
            activity.sample()
            return try Self.json(OverviewView(activity: activity, deviceConnections: connections.count, now: clock.now, apps: nil))
        }
        registerApps(console)
        registerAppData(console)
        // Any other path under /console: a page saying so, not the API's JSON.
        console.get("**") { request, _ -> Response in
            throw JSONAPIError.notFound("no page \(request.uri.path.prefix(200))")
        }
    }

    // MARK: Apps (the admin's)

    private func registerApps(_ console: RouterGroup<ServerRequestContext>) {
        console.get("apps") { request, _ in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            guard Authorization.consoleAccess(user.principal, .manageApps) else { return Self.redirect(home(of: user)) }
            return try await appsPage(user, form: ConsoleForm(), problem: nil, status: .ok)
        }
        console.post("apps") { request, _ in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            guard Authorization.consoleAccess(user.principal, .manageApps) else { throw Self.forbidden }
            do {
                let created = try await apps.create(try ConsoleRequests.createApp(form))
                logger.info("console: app created", metadata: ["app": "\(created.id)"])
                return page("secrets", chrome(user, "App \(created.id) created") { $0.appsPage = true }, view: SecretsView(created), status: .created)
            } catch let error as JSONAPIError where error.status.code < 500 {
                return try await appsPage(user, form: form, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
        console.get("apps/:app") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            guard Authorization.consoleAccess(user.principal, .manageApps) else { return Self.redirect("\(Self.root)/apps/\(app.id)/devices") }
            return try appPage(user, app, problem: nil, status: .ok)
        }
        console.post("apps/:app/rotate") { request, context in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            guard Authorization.consoleAccess(user.principal, .manageApps) else { throw Self.forbidden }
            let app = try await appRecord(context, user)
            do {
                // Whoever signed in with the old master secret is signed out with it: their next request finds the
                // secret is no longer the app's (``signedIn(_:touch:)``), as for a rotation through the API.
                let rotated = try await apps.update(app, try ConsoleRequests.rotate(form))
                logger.info("console: secrets rotated", metadata: ["app": "\(app.id)", "secrets": "\(form.all("rotate").joined(separator: ","))"])
                return page("secrets", chrome(user, "New secrets of \(app.id)", app: app.id) { $0.app?.settings = true }, view: SecretsView(rotated))
            } catch let error as JSONAPIError where error.status.code < 500 {
                return try appPage(user, app, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
    }

    private func appsPage(_ user: SignedIn, form: ConsoleForm, problem: Problem?, status: HTTPResponse.Status) async throws -> Response {
        let now = clock.now
        let rows = try apps.views(try await store.apps()).map { AppRow($0, now: now) }
        return page("apps", chrome(user, "Apps") { $0.appsPage = true }, view: AppsView(apps: rows, form: form), problem: problem, status: status)
    }

    private func appPage(_ user: SignedIn, _ app: AppRecord, problem: Problem?, status: HTTPResponse.Status) throws -> Response {
        struct View { var app: AppRow }
        return page(
            "app", chrome(user, "App \(app.id)", app: app.id) { $0.app?.settings = true }, view: View(app: AppRow(try apps.view(app), now: clock.now)),
            problem: problem, status: status)
    }

    // MARK: An app's devices, pushes and token events

    private func registerAppData(_ console: RouterGroup<ServerRequestContext>) {
        console.get("apps/:app/devices") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            return try await devicesPage(request, user, app)
        }
        console.get("apps/:app/devices/:device") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            let deviceID = try DevicesAPI.deviceID(context.parameters.get("device") ?? "")
            guard let device = try await store.device(app: app.id, deviceID: deviceID) else { throw JSONAPIError.notFound("no device \(deviceID)") }
            let history = try await store.tokenHistory(app: app.id, deviceID: deviceID).reversed().map {
                DeviceView.HistoryRow(
                    token: $0.token, environment: $0.environment.rawValue, firstRegisteredAt: ConsoleFormat.date($0.firstRegisteredAt),
                    replacedAt: ConsoleFormat.date($0.replacedAt), reason: $0.reason.rawValue)
            }
            let events = try await store.tokenEvents(app: app.id, deviceID: deviceID, limit: 50).map {
                DeviceView.EventRow(PushesAPI.TokenEventList.Event($0))
            }
            let pushTokens = try await store.pushTokens(app: app.id, deviceID: deviceID).map(DeviceView.PushTokenRow.init)
            let activities = try await store.activityTokens(app: app.id, deviceIDs: [deviceID])[deviceID, default: []]
                .map(DeviceView.ActivityRow.init)
            return page(
                "device", chrome(user, "Device \(deviceID)", app: app.id) { $0.app?.devices = true },
                view: DeviceView(device: DeviceRow(device), pushTokens: pushTokens, activities: activities, history: history, events: events))
        }
        console.get("apps/:app/compose") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            // A link may start the composer with an audience (a device's page: "send to this device").
            var form = ConsoleForm()
            let query = request.uri.queryParameters
            for name in ["audience.kind", "audience.values"] { if let value = query.get(name) { form = ConsoleForm(form.fields + [(name, value)]) } }
            return try await composePage(user, app, form: form, problem: nil, status: .ok)
        }
        console.post("apps/:app/preview") { request, context -> Response in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            let app = try await appRecord(context, user)
            return try Self.json(await preview(form, app: app))
        }
        console.post("apps/:app/pushes") { request, context in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            let app = try await appRecord(context, user)
            do {
                let (push, _) = try await pushes.create(try ConsoleRequests.push(form), app: app)
                return Self.redirect("\(Self.root)/apps/\(app.id)/pushes/\(push.id)")
            } catch let error as JSONAPIError where error.status.code < 500 {
                return try await composePage(user, app, form: form, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
        // The Stop button of a push's page: as `POST …/pushes/{id}/cancel`. A push that completed meanwhile (the page
        // was open) shows as completed.
        console.post("apps/:app/pushes/:push/cancel") { request, context in
            let user = try await requireSession(request)
            _ = try await form(request, user)
            let app = try await appRecord(context, user)
            let id = context.parameters.get("push") ?? ""
            do {
                _ = try await pushes.cancel(id, app: app)
                logger.info("console: push cancelled", metadata: ["app": "\(app.id)", "push": "\(id)"])
            } catch let error as JSONAPIError where error.status == .conflict {}
            return Self.redirect("\(Self.root)/apps/\(app.id)/pushes/\(id)")
        }
        console.get("apps/:app/pushes") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            let recent = try await store.pushes(app: app.id, status: nil, after: nil, limit: Self.recentPushes).items
            let opens = try await store.openCounts(pushIDs: recent.map(\.id))
            return page("pushes", chrome(user, "Pushes", app: app.id) { $0.app?.pushes = true }, view: PushesView(recent, opens: opens))
        }
        console.get("apps/:app/pushes/:push") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            let view = try await pushView(context, app: app)
            return page(
                "push", chrome(user, "Push \(view.id.prefix(8))", app: app.id) { $0.app?.pushes = true },
                view: PushPageView(view, failureLimit: Self.failuresShown))
        }
        console.get("apps/:app/pushes/:push/status") { request, context -> Response in
            // The push page's own polling: it does not keep an open tab signed in.
            let user = try await requireSession(request, touch: false)
            let app = try await appRecord(context, user)
            return try Self.json(PushPageView(try await pushView(context, app: app, failures: false), failureLimit: 0).push)
        }
        console.get("apps/:app/broadcast-channels/:name") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            var before: Int64?
            if let text = request.uri.queryParameters.get("before") {
                guard let value = Int64(text), value > 0 else { throw JSONAPIError.badRequest(field: "before", "before is a broadcast's id") }
                before = value
            }
            return try await channelPage(user, app, try await channelRecord(app, context), form: ConsoleForm(), before: before, problem: nil, status: .ok)
        }
        // A broadcast from the channel's page: as `POST …/broadcast-channels/{name}/broadcasts`. APNs' refusal or
        // silence is shown on the page with the form as sent (and is in the history below it).
        console.post("apps/:app/broadcast-channels/:name/broadcasts") { request, context in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            let app = try await appRecord(context, user)
            let channel = try await channelRecord(app, context)
            do {
                _ = try await broadcasts.send(try ConsoleRequests.broadcast(form, now: clock.now), to: channel, app: app)
                logger.info("console: broadcast sent", metadata: ["app": "\(app.id)", "channel": "\(channel.name)"])
                return Self.redirect("\(Self.root)/apps/\(app.id)/broadcast-channels/\(channel.name)")
            } catch let error as JSONAPIError {
                return try await channelPage(
                    user, app, channel, form: form, before: nil, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
        console.get("apps/:app/token-events") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            var after: Int64?
            if let text = request.uri.queryParameters.get("after") {
                guard let value = Int64(text), value >= 0 else { throw JSONAPIError.badRequest(field: "after", "after is an event id") }
                after = value
            }
            let list = try await pushes.tokenEvents(app: app, after: after, limit: 100)
            return page(
                "token-events", chrome(user, "Token events", app: app.id) { $0.app?.events = true },
                view: TokenEventsView(events: list.events.map(DeviceView.EventRow.init), next: list.next))
        }
        console.get("apps/:app/activities") { request, context in
            guard let user = try await signedIn(request) else { return Self.redirect("\(Self.root)/sign-in") }
            let app = try await appRecord(context, user)
            let query = request.uri.queryParameters
            let after = query.get("after")
            if let after, !ActivityTokenRecord.isValidID(after) {
                throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (an activity id)")
            }
            let channelsAfter = query.get("channelsAfter")
            if let channelsAfter, !ActivityTokenRecord.isValidID(channelsAfter) {
                throw JSONAPIError.badRequest(field: "channelsAfter", "channelsAfter is the cursor from the last page of channels (a channel's name)")
            }
            return try await activitiesPage(user, app, after: after, channelsAfter: channelsAfter, form: ConsoleForm(), problem: nil, status: .ok)
        }
        // A channel made from the Live Activities page: as `PUT …/broadcast-channels/{name}`, in the app's environment.
        console.post("apps/:app/broadcast-channels") { request, context in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            let app = try await appRecord(context, user)
            do {
                let name = try BroadcastsAPI.name(form.given("name") ?? "", field: "name")
                let (channel, _) = try await broadcasts.make(
                    name, BroadcastsAPI.ChannelRequest(storage: form.given("storage") ?? "none", environment: nil), app: app)
                logger.info("console: broadcast channel made", metadata: ["app": "\(app.id)", "channel": "\(channel.name)"])
                return Self.redirect("\(Self.root)/apps/\(app.id)/broadcast-channels/\(channel.name)")
            } catch let error as JSONAPIError {
                return try await activitiesPage(
                    user, app, after: nil, channelsAfter: nil, form: form, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
        // Deleting a channel from its page, once its name is typed: as `DELETE …/broadcast-channels/{name}`.
        console.post("apps/:app/broadcast-channels/:name/delete") { request, context in
            let user = try await requireSession(request)
            let form = try await form(request, user)
            let app = try await appRecord(context, user)
            let channel = try await channelRecord(app, context)
            do {
                guard form.given("confirm") == channel.name else {
                    throw JSONAPIError.badRequest(field: "confirm", "type the channel's name, \(channel.name), to delete it")
                }
                try await broadcasts.delete(channel, app: app)
                return Self.redirect("\(Self.root)/apps/\(app.id)/activities")
            } catch let error as JSONAPIError {
                return try await channelPage(
                    user, app, channel, form: ConsoleForm(), before: nil, problem: Problem(message: error.message, field: error.field), status: error.status)
            }
        }
    }

    /// The app's Live Activities, and on the first page its broadcast channels with the form to make one.
    private func activitiesPage(
        _ user: SignedIn, _ app: AppRecord, after: String?, channelsAfter: String?, form: ConsoleForm, problem: Problem?,
        status: HTTPResponse.Status
    ) async throws -> Response {
        let page = try await store.activities(app: app.id, after: after, limit: 100)
        var view = ActivitiesView(activities: page.items.map(ActivitiesView.Row.init), next: page.next, firstPage: after == nil)
        view.keep(form)
        if after == nil {
            let channels = try await store.broadcastChannels(app: app.id, after: channelsAfter, limit: 100)
            let latest = try await store.latestBroadcasts(app: app.id, channels: channels.items.map(\.name))
            view.channels = channels.items.map { ActivitiesView.ChannelRow($0, latest: latest[$0.name]) }
            view.nextChannels = channels.next
        }
        return self.page(
            "activities", chrome(user, "Live Activities", app: app.id) { $0.app?.activities = true }, view: view, problem: problem, status: status)
    }

    private func pushView(_ context: ServerRequestContext, app: AppRecord, failures: Bool = true) async throws -> PushesAPI.PushView {
        let id = context.parameters.get("push") ?? ""
        guard UUID(apnsText: id) != nil, let push = try await store.push(app: app.id, id: id) else {
            throw JSONAPIError.notFound("no push \(id.prefix(64))")
        }
        return try await pushes.view(push, withFailures: failures, withAudience: true, limit: Self.failuresShown)
    }

    private func devicesPage(_ request: Request, _ user: SignedIn, _ app: AppRecord) async throws -> Response {
        let query = request.uri.queryParameters
        let kind = query.get("by") ?? "alias"
        let text = (query.get("q") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        var view = DevicesView(
            kinds: Choice.list(DevicesView.searchKinds, selected: kind), query: text, searched: !text.isEmpty, resultSummary: "", devices: [])
        var problem: Problem?
        do {
            if !text.isEmpty {
                // What the API's listings take (`?alias=`, `?tag=`), and a device by its token or id.
                switch kind {
                case "tag":
                    let page = try await store.devices(app: app.id, tag: text, after: query.get("after"), limit: 100)
                    view.devices = page.items.map(DeviceRow.init)
                    view.next = page.next
                case "token":
                    let token: DeviceToken
                    do {
                        token = try DeviceToken(hex: text, field: "token")
                    } catch {
                        throw JSONAPIError.badRequest(field: "token", "token must be the device token in hex (APNs tokens are 32 bytes)")
                    }
                    // A VoIP or push-to-start token finds its device too: the token in a failed call's record.
                    view.devices = try await store.devices(app: app.id, token: token.hex).map(DeviceRow.init)
                case "device":
                    let deviceID = try DevicesAPI.deviceID(text)
                    view.devices = try await store.device(app: app.id, deviceID: deviceID).map { [DeviceRow($0)] } ?? []
                default:
                    view.devices = try await store.devices(app: app.id, alias: text).map(DeviceRow.init)
                }
                view.resultSummary = view.devices.count == 1 ? "1 device" : "\(view.devices.count) devices" + (view.next == nil ? "" : " (more on the next page)")
            }
        } catch let error as JSONAPIError where error.status.code < 500 {
            problem = Problem(message: error.message, field: error.field)
            view.searched = false
        }
        return page(
            "devices", chrome(user, "Devices", app: app.id) { $0.app?.devices = true }, view: view, problem: problem,
            status: problem == nil ? .ok : .badRequest)
    }

    // MARK: Broadcast channels

    private func channelRecord(_ app: AppRecord, _ context: ServerRequestContext) async throws -> BroadcastChannelRecord {
        let name = try BroadcastsAPI.name(context)
        guard let channel = try await store.broadcastChannel(app: app.id, name: name) else {
            throw JSONAPIError.notFound("app \(app.id) has no broadcast channel '\(name)'")
        }
        return channel
    }

    private func channelPage(
        _ user: SignedIn, _ app: AppRecord, _ channel: BroadcastChannelRecord, form: ConsoleForm, before: Int64?, problem: Problem?,
        status: HTTPResponse.Status
    ) async throws -> Response {
        let history = try await store.broadcasts(app: app.id, channel: channel.name, before: before, limit: 50)
        return page(
            "channel", chrome(user, "Channel \(channel.name)", app: app.id) { $0.app?.activities = true },
            view: ChannelPageView(channel: channel, form: form, history: history), problem: problem, status: status)
    }

    // MARK: The composer

    private func composePage(
        _ user: SignedIn, _ app: AppRecord, form: ConsoleForm, problem: Problem?, status: HTTPResponse.Status
    ) async throws -> Response {
        let preview = await preview(form, app: app)
        let view = ComposeView(form: form, preview: preview)
        return page("compose", chrome(user, "Compose a push", app: app.id) { $0.app?.compose = true }, view: view, problem: problem, status: status)
    }

    /// The payload the server would send for the composer's form, checked as `POST …/pushes` checks it, and how
    /// many devices its audience reaches now (counted through the same paging the dispatcher uses, up to a cap).
    func preview(_ form: ConsoleForm, app: AppRecord) async -> ComposePreview {
        var preview = ComposePreview()
        let body: FormJSON
        do {
            body = try ConsoleRequests.pushBody(form)
        } catch {
            preview.problem = (error.field.map { "\($0): " } ?? "") + error.message
            return preview
        }
        // A push-to-start push's channel, by its name (looked up here: the check below is not async). A database that
        // does not answer is said as such, not as a channel the app lacks.
        var channel: BroadcastChannelRecord?
        if let name = form.given("broadcastChannel"), ActivityTokenRecord.isValidID(name) {
            do {
                channel = try await store.broadcastChannel(app: app.id, name: name)
            } catch {
                preview.problem = "broadcastChannel: the database is not available to look the channel up; try again"
                return preview
            }
        }
        // Known once the push is checked: for a VoIP push, the audience counts the devices with a VoIP token.
        var tokenKind: PushTokenKind?
        do {
            let request = try PushesAPI.subscribing(try ConsoleRequests.decode(PushesAPI.PushRequest.self, body), to: channel)
            // A stand-in of the same length for the push's id, which the payload carries (`tern.pushId`, and an inbox's
            // `tern.messageId`): the size shown is the size sent.
            let content = try PushesAPI.content(request, app: app, pushID: PushContent.previewPushID)
            // What sending it would refuse, said before it is sent: a widgets push to a tag, a sendAt past expiry.
            let audience = try PushesAPI.audience(request.audience)
            tokenKind = try PushesAPI.tokenKind(content, audience: audience)
            _ = try PushesAPI.filter(request.audience, now: clock.now)
            _ = try PushesAPI.sendAt(request.sendAt, content: content, now: clock.now)
            let rate = try PushesAPI.ratePerSecond(request.ratePerSecond, audience: audience, app: app)
            preview.show(content, app: app)
            if let tokenKind {
                preview.note = [preview.note, "Goes to the devices' \(tokenKind.rawValue) tokens: a device that registered none is passed over."]
                    .filter { !$0.isEmpty }.joined(separator: " ")
            }
            if request.ratePerSecond == nil, let rate {
                preview.note = [preview.note, "Throttled to \(rate) recipients a second, the app's rate for broadcasts (0 in the field: not throttled)."]
                    .filter { !$0.isEmpty }.joined(separator: " ")
            }
        } catch {
            preview.problem = (error.field.map { "\($0): " } ?? "") + error.message
        }
        // Counted once, whatever else the form gets wrong, as sending would hand the push out.
        preview.audience = await estimate(body, app: app, kind: tokenKind)
        return preview
    }

    /// "reaches N devices", counted page by page as the dispatcher would hand them out, up to ``estimateCap``.
    /// - Parameter kind: for a push to the devices' tokens of a kind (a VoIP push), only the devices with an active
    ///   one count.
    private func estimate(_ body: FormJSON, app: AppRecord, kind: PushTokenKind? = nil) async -> String {
        guard case .object(let members)? = body.member("audience") else { return "" }
        do {
            let input = try ConsoleRequests.decode(PushesAPI.AudienceInput.self, FormJSON(members))
            let audience = try PushesAPI.audience(input)
            let filter = try PushesAPI.filter(input, now: clock.now)
            let pageSize = 1000
            var count = 0
            var read = 0
            var cursor: String?
            repeat {
                // With a filter, a page holds the devices it admits among the next `pageSize` of the audience.
                let page = try await store.recipients(app: app.id, audience: audience, filter: filter, after: cursor, limit: pageSize)
                read += filter == nil ? page.items.count : pageSize
                if let kind {
                    let tokens = try await store.pushTokens(app: app.id, deviceIDs: page.items.compactMap(\.deviceID))
                    count += page.items.filter { item in
                        item.deviceID.flatMap { tokens[$0] }?.contains { $0.kind == kind && $0.isActive } == true
                    }.count
                } else {
                    count += page.items.count
                }
                cursor = page.next
            } while cursor != nil && read < Self.estimateCap
            // An activity's audience is its tokens: each recipient is a device's token for it.
            if case .activity = audience {
                if cursor != nil { return "Reaches more than \(Self.estimateCap.formatted()) devices' tokens for the activity now." }
                return count == 1 ? "Reaches 1 device's token for the activity now." : "Reaches \(count.formatted()) devices' tokens for the activity now."
            }
            let what = kind.map { "devices' \($0.rawValue) tokens" } ?? "devices"
            if cursor != nil {
                return kind == nil && filter == nil
                    ? "Reaches more than \(Self.estimateCap.formatted()) devices now."
                    : "Reaches more than \(count.formatted()) \(what) now (among the first \(Self.estimateCap.formatted()) devices)."
            }
            if let kind { return count == 1 ? "Reaches 1 device's \(kind.rawValue) token now." : "Reaches \(count.formatted()) \(what) now." }
            return count == 1 ? "Reaches 1 device now." : "Reaches \(count.formatted()) devices now."
        } catch let error as JSONAPIError {
            return "Audience: " + (error.field.map { "\($0): " } ?? "") + error.message
        } catch {
            return "The audience cannot be counted now."
        }
    }

    /// How many recipients the estimate counts at most (ten pages).
    static let estimateCap = 10_000

    // MARK: Signing in

    private func signIn(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        guard Self.isSameOrigin(request) else { throw Self.crossSite }
        let address = SecretGuessLimiter.key(for: context.clientAddress)
        if let retryAfter = limiter.retryAfter(address) {
            var response = page(
                "sign-in", Chrome(title: "Sign in"),
                problem: Problem(message: "too many wrong secrets from this address; try again in \(retryAfter) s"), status: .tooManyRequests)
            response.headers[.retryAfter] = String(retryAfter)
            return response
        }
        let form = ConsoleForm(urlEncoded: try await Self.body(request))
        let secret = form["secret"]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard let principal = authorization.consolePrincipal(secret: secret, apps: try await store.apps()) else {
            limiter.recordFailure(address)
            logger.notice("console: a sign-in was refused", metadata: ["address": "\(address)"])
            return page(
                "sign-in", Chrome(title: "Sign in"), problem: Problem(message: "that is not the admin token or an app's master secret", field: "secret"),
                status: .unauthorized)
        }
        // A new session whatever came with the request: a session id planted before the sign-in is never the one that
        // gets signed in (fixation).
        if let old = request.cookies[Self.cookieName]?.value { sessions.end(id: old) }
        let (id, _) = sessions.start(principal, credential: Secrets.hash(secret))
        logger.info("console: signed in", metadata: ["as": "\(Self.describe(principal))"])
        var response = Self.redirect(Self.root)
        response.headers[values: .setCookie].append(Self.cookie(id, secure: isSecure(request)))
        return response
    }

    struct SignedIn {
        let id: String
        let session: ConsoleSessions.Session
        var principal: ConsolePrincipal { session.principal }
    }

    /// The request's session, if it is live and the secret it was signed in with is still its principal's (an app's
    /// master secret rotated or the app deleted, through the API or on another node, ends it here); `touch` as in
    /// ``ConsoleSessions/session(id:touch:)``.
    private func signedIn(_ request: Request, touch: Bool = true) async throws -> SignedIn? {
        guard let id = request.cookies[Self.cookieName]?.value, !id.isEmpty, let session = sessions.session(id: id, touch: touch) else {
            return nil
        }
        let current: [UInt8]? =
            switch session.principal {
            case .admin: authorization.adminTokenHash
            case .master(let app): try await cache.app(app)?.masterSecretHash
            }
        guard let current, Secrets.sameHash(current, session.credential) else {
            sessions.end(id: id)
            return nil
        }
        return SignedIn(id: id, session: session)
    }

    /// A POST or a script's call: signed in, or a 401 (a page; for a script, the API's JSON shape, and the script
    /// goes to the sign-in page).
    private func requireSession(_ request: Request, touch: Bool = true) async throws -> SignedIn {
        guard let user = try await signedIn(request, touch: touch) else {
            throw JSONAPIError.unauthorized("sign in first (your session may have expired)")
        }
        return user
    }

    /// A form's fields, once the request proved it comes from this origin and from a page of this session.
    /// - Throws: 403 for a missing or wrong CSRF token or another origin; 413 for a body over ``formLimit``.
    private func form(_ request: Request, _ user: SignedIn) async throws -> ConsoleForm {
        guard Self.isSameOrigin(request) else { throw Self.crossSite }
        let form = ConsoleForm(urlEncoded: try await Self.body(request))
        let presented = request.headers[Self.csrfHeader] ?? form["csrf"] ?? ""
        guard ConstantTime.equal(Array(presented.utf8), Array(user.session.csrfToken.utf8)) else {
            throw JSONAPIError.forbidden("this form is out of date or did not come from the console: reload the page and try again", field: "csrf")
        }
        return form
    }

    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    private static func body(_ request: Request) async throws -> String {
        String(decoding: try await JSONBody.collect(request, upTo: formLimit, what: "the form").readableBytesView, as: UTF8.self)
    }

    /// Whether a POST comes from a page of this origin: its `Origin` (or, without one, its `Referer`) names the host
    /// the request was sent to. A request with neither (not a browser's) is judged by its CSRF token alone.
    static func isSameOrigin(_ request: Request) -> Bool {
        // HTTP/1.1's Host header is the request's authority here.
        isSameOrigin(authority: request.head.authority, source: request.headers[.origin] ?? request.headers[.referer])
    }

    /// Whether `source` (an `Origin` or a `Referer`) names `authority` (the `Host` the request was sent to), compared
    /// as written: `[::1]:8080` too, which Foundation's `URL.host` gives without its brackets (so no form from an IPv6
    /// address was ever taken, the sign-in's included).
    static func isSameOrigin(authority: String?, source: String?) -> Bool {
        guard let host = authority?.lowercased() else { return false }
        guard let source else { return true }
        guard let schemeEnd = source.range(of: "://"), ["http", "https"].contains(source[..<schemeEnd.lowerBound].lowercased()) else {
            return false
        }
        let sourceAuthority = source[schemeEnd.upperBound...].prefix { !"/?#".contains($0) }
        // A user name in the source (`http://localhost@evil.example/`) is no origin a browser sends.
        guard !sourceAuthority.isEmpty, !sourceAuthority.contains("@") else { return false }
        return sourceAuthority.lowercased() == host
    }

    static let crossSite = JSONAPIError.forbidden("this form did not come from the console's own pages", field: "Origin")
    static let forbidden = JSONAPIError.forbidden("only the admin token manages apps")

    /// Whether the browser reached us over TLS: a proxy in front says so with `X-Forwarded-Proto`, or the
    /// configuration does (`console.secureCookies`).
    private func isSecure(_ request: Request) -> Bool {
        secureCookies || request.headers[Self.forwardedProto]?.lowercased() == "https"
    }

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    static func cookie(_ id: String, secure: Bool, clear: Bool = false) -> String {
        "\(cookieName)=\(id); Path=\(root); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "") + (clear ? "; Max-Age=0" : "")
    }

    static func describe(_ principal: ConsolePrincipal) -> String {
        switch principal {
        case .admin: "admin"
        case .master(let app): "master secret of \(app)"
        }
    }

    // MARK: Pages

    private func home(of user: SignedIn) -> String {
        switch user.principal {
        case .admin: "\(Self.root)/apps"
        case .master(let app): "\(Self.root)/apps/\(app)/devices"
        }
    }

    /// The app named in the path, if the principal may see it; another app's id answers as one that does not exist.
    private func appRecord(_ context: ServerRequestContext, _ user: SignedIn) async throws -> AppRecord {
        let id = context.parameters.get("app") ?? ""
        guard Authorization.consoleAccess(user.principal, .appData(id)), let app = try await cache.app(id) else {
            throw JSONAPIError.notFound("no app '\(id.prefix(64))'")
        }
        return app
    }

    /// The apps the principal may open.
    private func visibleApps(_ user: SignedIn) async throws -> [String] {
        try await store.apps().map(\.id).filter { Authorization.consoleAccess(user.principal, .appData($0)) }
    }

    private func chrome(_ user: SignedIn, _ title: String, app: String? = nil, _ adjust: (inout Chrome) -> Void = { _ in }) -> Chrome {
        var chrome = Chrome(title: title, csrf: user.session.csrfToken, signedIn: true, principal: "Signed in: \(Self.describe(user.principal))")
        if let app { chrome.app = .init(id: app, canManage: Authorization.consoleAccess(user.principal, .manageApps)) }
        adjust(&chrome)
        return chrome
    }

    private func page(_ template: String, _ chrome: Chrome, view: Any? = nil, problem: Problem? = nil, status: HTTPResponse.Status = .ok) -> Response {
        renderer.response(template, ConsolePage(chrome: chrome, view: view, problem: problem), status: status)
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    static func json(_ value: some Encodable) throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: try APIJSON.encoder.encode(value))))
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
