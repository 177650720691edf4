import Foundation
import HTTPTypes
import Hummingbird
import TernAPNs
import TernStore
import TernWeb

/// The message inbox: `GET /v1/apps/{app}/inbox`, `POST …/inbox/read`, `DELETE …/inbox/{messageId}`.
///
/// A device reads its user's inbox (its alias's, or its own while it has none) with the app key, its id
/// (`?deviceId=`) and its device secret (`X-Tern-Device-Secret`), so one user cannot read another's. The backend
/// (master secret) reads anyone's: `?alias=` or `?deviceId=`. A message of a push with `notification.localizations`
/// is listed in the reading device's language (the locale it registered), or in `?locale=`'s.
struct InboxAPI {
    let store: any TernStore
    let apps: AppCache
    let gate: DeviceGate
    let badgeUpdates: BadgeUpdates
    /// What "expired" and "read at" go by.
    let clock: any WallClock

    struct MessageView: Codable {
        var id: String
        var sequence: Int64
        var title: String?
        var body: String?
        var data: JSONValue?
        var createdAt: Date
        var expiresAt: Date
        var read: Bool
        var readAt: Date?
    }

    struct InboxView: ResponseEncodable {
        var messages: [MessageView]
        /// The cursor for the next page (`?after=`), if there is one.
        var next: String?
        var unread: Int
    }

    struct ReadRequest: Decodable {
        /// Marks this message and every older one read.
        var upTo: String?
        var ids: [String]?
        /// Sends the user's devices their new unread count as a silent badge update (default true).
        var updateBadge: Bool?
    }

    struct ReadView: ResponseEncodable {
        var marked: Int
        var unread: Int
    }

    func register(on router: Router<ServerRequestContext>) {
        let inbox = router.group("v1/apps/:app/inbox")
        inbox.get { request, context -> InboxView in
            let (app, owner, reader) = try await caller(request, context)
            let query = request.uri.queryParameters
            var locale = reader?.locale
            if let text = query.get("locale") {
                guard LanguageTags.isValidTag(LanguageTags.key(text)), !text.contains("@") else {
                    throw JSONAPIError.badRequest(field: "locale", "locale is \(LanguageTags.tagRule)")
                }
                locale = text
            }
            var after: Int64?
            if let text = query.get("after") {
                guard let value = Int64(text), value >= 0 else {
                    throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (a number)")
                }
                after = value
            }
            let limit = try DevicesAPI.limit(query.get("limit"))
            let now = clock.now
            let page = try await store.inbox(app: app.id, owner: owner, after: after, limit: limit, at: now)
            return InboxView(
                messages: page.items.map { Self.view($0, locale: locale) }, next: page.next,
                unread: try await store.unreadCount(app: app.id, owner: owner, at: now))
        }
        inbox.post("read") { request, context -> ReadView in
            let (app, owner, _) = try await caller(request, context)
            let body = try await JSONBody.decode(ReadRequest.self, from: request, limit: 1 << 20)
            guard body.upTo != nil || body.ids != nil else {
                throw JSONAPIError.badRequest(field: "upTo", "give upTo (a message id) or ids")
            }
            let upTo = try body.upTo.map { id throws(JSONAPIError) in try Self.messageID(id, field: "upTo") }
            guard (body.ids ?? []).count <= 1000 else { throw JSONAPIError.badRequest(field: "ids", "at most 1000 ids at once") }
            var ids: [String] = []
            for (index, id) in (body.ids ?? []).enumerated() { ids.append(try Self.messageID(id, field: "ids[\(index)]")) }
            let now = clock.now
            let marked = try await store.markRead(app: app.id, owner: owner, upTo: upTo, ids: ids, at: now)
            if marked > 0, body.updateBadge ?? true { badgeUpdates.schedule(app: app, owner: owner) }
            return ReadView(marked: marked, unread: try await store.unreadCount(app: app.id, owner: owner, at: now))
        }
        inbox.delete(":message") { request, context -> HTTPResponse.Status in
            let (app, owner, _) = try await caller(request, context)
            let id = try Self.messageID(context.parameters.get("message") ?? "", field: "messageId")
            guard try await store.deleteFromInbox(app: app.id, owner: owner, messageID: id) else {
                throw JSONAPIError.notFound("no message \(id) in this inbox")
            }
            return .noContent
        }
    }

    /// The app, whose inbox the request is about and the device reading it if one is named, after checking the caller
    /// may read it.
    private func caller(_ request: Request, _ context: ServerRequestContext) async throws -> (AppRecord, InboxOwner, DeviceRecord?) {
        let app = try await apps.app(request, context)
        let query = request.uri.queryParameters
        let alias = query.get("alias")
        if let alias, !DevicesAPI.isValidAlias(alias) { throw JSONAPIError.badRequest(field: "alias", DevicesAPI.aliasRule) }
        var deviceID: String?
        if let text = query.get("deviceId") {
            guard let uuid = UUID(apnsText: text) else {
                throw JSONAPIError.badRequest(field: "deviceId", "the device id must be a UUID (8-4-4-4-12 hex)")
            }
            deviceID = uuid.apnsString
        }
        let caller = try Authorization.caller(request, app: app)
        switch caller {
        case .master:
            switch (alias, deviceID) {
            case (let alias?, nil):
                return (app, .alias(alias), nil)
            case (nil, let deviceID?):
                let device = try await device(deviceID, app: app)
                return (app, InboxOwner(device), device)
            default:
                throw JSONAPIError.badRequest(field: "alias", "give alias or deviceId: whose inbox")
            }
        case .appKey:
            guard let deviceID else {
                throw JSONAPIError.badRequest(field: "deviceId", "a device reads its inbox with ?deviceId= and its X-Tern-Device-Secret")
            }
            let device = try await device(deviceID, app: app)
            try gate.authorize(.inbox, caller: caller, request: request, app: app.id, device: device)
            let owner = InboxOwner(device)
            if let alias, owner != .alias(alias) {
                throw JSONAPIError.forbidden("a device reads only its own user's inbox", field: "alias")
            }
            return (app, owner, device)
        }
    }

    private func device(_ deviceID: String, app: AppRecord) async throws -> DeviceRecord {
        guard let device = try await store.device(app: app.id, deviceID: deviceID) else {
            throw JSONAPIError.notFound("no device \(deviceID)")
        }
        return device
    }

    /// A message id in the form it is stored in.
    private static func messageID(_ id: String, field: String) throws(JSONAPIError) -> String {
        guard let uuid = UUID(apnsText: id) else { throw .badRequest(field: field, "a message id is a UUID (the push's id)") }
        return uuid.apnsString
    }

    /// A message as `locale` reads it: in the language it picks among the message's (``Localizations``), if any.
    private static func view(_ item: InboxItem, locale: String?) -> MessageView {
        let message = item.message
        var title = message.title
        var body = message.body
        if let localizations = message.localizations,
            case .object(let languages)? = try? JSONValue(parsing: Data(localizations.utf8)),
            let language = LanguageTags.pick(locale: locale, has: { languages[$0] != nil }),
            case .object(let texts)? = languages[language]
        {
            if case .string(let text)? = texts["title"] { title = text } else { title = nil }
            if case .string(let text)? = texts["body"] { body = text } else { body = nil }
        }
        return MessageView(
            id: message.id, sequence: item.sequence, title: title, body: body,
            data: message.data.flatMap { try? JSONValue(parsing: Data($0.utf8)) }, createdAt: message.createdAt,
            expiresAt: message.expiresAt, read: item.readAt != nil, readAt: item.readAt)
    }
}

extension InboxOwner {
    /// Whose inbox a device reads: its user's, or its own while it has no alias.
    init(_ device: DeviceRecord) {
        self.init(deviceID: device.deviceID, alias: device.alias)
    }
}
