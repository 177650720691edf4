import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import TernAPNs
import TernStore
import TernWeb

/// The device registry: `PUT/GET/DELETE /v1/apps/{app}/devices/{deviceId}`, aliases, tags, listings.
struct DevicesAPI {
    let store: any TernStore
    let apps: AppCache
    let serverKey: ServerKey
    let gate: DeviceGate
    let clock: any WallClock
    /// Told when devices' secrets were replaced or the devices deleted: their open connections (the online channel)
    /// are closed, on every node.
    let credentialsChanged: @Sendable (_ app: String, _ deviceIDs: [String]) async -> Void
    /// New device ids registered: what a flood of made-up devices with the (public) app key shows up in.
    private let devicesCreated = Counter(label: "tern_devices_created_total")

    struct RegisterRequest: Decodable {
        var token: String
        var environment: String
        var alias: String?
        /// With the app key, binding `alias` needs this: a JWT (HS256) the app's backend signed with the app's
        /// identity secret (``AliasToken``). Keeping the alias the device has needs none.
        var aliasToken: String?
        var tags: [String]?
        var locale: String?
        var timezone: String?
        var appVersion: String?
    }

    struct TagsRequest: Decodable {
        var add: [String]?
        var remove: [String]?
    }

    struct PushTokenRequest: Decodable {
        var token: String
    }

    /// A device's token of a ``PushTokenKind`` (its VoIP token, its push-to-start token).
    struct PushTokenView: ResponseEncodable {
        var kind: String
        var token: String
        var active: Bool
        var registeredAt: Date
        var deactivatedAt: Date?
        var deactivationReason: String?

        init(_ record: PushTokenRecord) {
            kind = record.kind.rawValue
            token = record.token
            active = record.isActive
            registeredAt = record.registeredAt
            deactivatedAt = record.deactivatedAt
            deactivationReason = record.deactivationReason?.rawValue
        }
    }

    /// A Live Activity's update token on the device (``ActivityTokenRecord``).
    struct ActivityTokenView: ResponseEncodable {
        var activityId: String
        var token: String
        var startedAt: Date
        var registeredAt: Date
        /// When Tern forgets it: the activity cannot be running any more.
        var expiresAt: Date

        init(_ record: ActivityTokenRecord) {
            activityId = record.activityID
            token = record.token
            startedAt = record.startedAt
            registeredAt = record.registeredAt
            expiresAt = record.startedAt.addingTimeInterval(ActivityTokenRecord.lifetime)
        }
    }

    struct DeviceView: ResponseEncodable {
        var deviceId: String
        var token: String
        var environment: String
        var alias: String?
        var tags: [String]
        var locale: String?
        var timezone: String?
        var appVersion: String?
        var active: Bool
        var lastRegisteredAt: Date
        var deactivatedAt: Date?
        var deactivationReason: String?
        var createdAt: Date
        /// Only in the registration's answer: what the device sends (with the app key) to act as itself.
        var deviceSecret: String?
        /// In reads (`GET …/devices/{id}`, the listings), not in a registration's answer: its tokens of other kinds, by
        /// kind.
        var pushTokens: [String: PushTokenView]?
        /// In reads too: the Live Activities it registered an update token for, oldest first.
        var activities: [ActivityTokenView]?

        init(_ record: DeviceRecord, deviceSecret: String? = nil) {
            deviceId = record.deviceID
            token = record.token
            environment = record.environment.rawValue
            alias = record.alias
            tags = record.tags.sorted()
            locale = record.locale
            timezone = record.timezone
            appVersion = record.appVersion
            active = record.isActive
            lastRegisteredAt = record.lastRegisteredAt
            deactivatedAt = record.deactivatedAt
            deactivationReason = record.deactivationReason?.rawValue
            createdAt = record.createdAt
            self.deviceSecret = deviceSecret
        }
    }

    struct DeviceList: ResponseEncodable {
        var devices: [DeviceView]
        var next: String?
    }

    struct SecretView: ResponseEncodable {
        var deviceId: String
        var deviceSecret: String
    }

    struct TokenHistoryView: ResponseEncodable {
        struct Entry: Codable {
            var token: String
            var environment: String
            var firstRegisteredAt: Date
            var replacedAt: Date
            var reason: String
        }
        var tokens: [Entry]
    }

    func register(on router: Router<ServerRequestContext>) {
        let devices = router.group("v1/apps/:app/devices")
        devices.put(":device") { request, context -> DeviceView in
            let app = try await apps.app(request, context)
            let caller = try Authorization.caller(request, app: app)
            let deviceID = try Self.deviceID(context)
            let body = try await JSONBody.decode(RegisterRequest.self, from: request, limit: 64 * 1024)
            return try await register(body, app: app, deviceID: deviceID, caller: caller, request: request)
        }
        devices.get(":device") { request, context -> DeviceView in
            let (app, device, _) = try await deviceCall(.read, request, context)
            return try await views([device], app: app)[0]
        }
        // The device's token of another kind (PushKit's VoIP token, ActivityKit's push-to-start token), which pushes of
        // that type to the device, its user, its tags or everyone go to.
        devices.put(":device/push-tokens/:kind") { request, context -> PushTokenView in
            let (app, device, _) = try await deviceCall(.pushToken, request, context)
            let kind = try Self.pushTokenKind(context)
            let token = try await Self.tokenBody(request, "the \(kind.rawValue) token in hex, as the framework gives it")
            guard let record = try await store.setPushToken(
                app: app.id, deviceID: device.deviceID, kind: kind, token: token, at: clock.now)
            else { throw JSONAPIError.notFound("no device \(device.deviceID)") }
            return PushTokenView(record)
        }
        devices.delete(":device/push-tokens/:kind") { request, context -> HTTPResponse.Status in
            let (app, device, _) = try await deviceCall(.pushToken, request, context)
            let kind = try Self.pushTokenKind(context)
            guard try await store.deletePushToken(app: app.id, deviceID: device.deviceID, kind: kind) else {
                throw JSONAPIError.notFound("device \(device.deviceID) has no \(kind.rawValue) token")
            }
            return .noContent
        }
        // A Live Activity's update token (ActivityKit's `pushTokenUpdates`), under the activity's id, which a
        // `liveactivity` push to `audience.activity` updates or ends.
        devices.put(":device/activities/:activityId") { request, context -> ActivityTokenView in
            let (app, device, _) = try await deviceCall(.activityToken, request, context)
            let activity = try Self.activityID(context)
            let token = try await Self.tokenBody(request, "the activity's push token in hex, as ActivityKit gives it")
            guard let record = try await store.setActivityToken(
                app: app.id, deviceID: device.deviceID, activity: activity, token: token, at: clock.now)
            else { throw JSONAPIError.notFound("no device \(device.deviceID)") }
            return ActivityTokenView(record)
        }
        devices.delete(":device/activities/:activityId") { request, context -> HTTPResponse.Status in
            let (app, device, _) = try await deviceCall(.activityToken, request, context)
            let activity = try Self.activityID(context)
            guard try await store.deleteActivityToken(app: app.id, deviceID: device.deviceID, activity: activity) else {
                throw JSONAPIError.notFound("device \(device.deviceID) has no token for activity \(activity)")
            }
            return .noContent
        }
        devices.delete(":device") { request, context -> HTTPResponse.Status in
            let (app, device, _) = try await deviceCall(.delete, request, context)
            guard try await store.deleteDevice(app: app.id, deviceID: device.deviceID) else {
                throw JSONAPIError.notFound("no device \(device.deviceID)")
            }
            await credentialsChanged(app.id, [device.deviceID])
            return .noContent
        }
        devices.delete(":device/alias") { request, context -> DeviceView in
            let (app, device, _) = try await deviceCall(.logout, request, context)
            guard let record = try await store.removeAlias(app: app.id, deviceID: device.deviceID, at: clock.now) else {
                throw JSONAPIError.notFound("no device \(device.deviceID)")
            }
            return DeviceView(record)
        }
        devices.patch(":device/tags") { request, context -> DeviceView in
            let (app, device, _) = try await deviceCall(.tags, request, context)
            let body = try await JSONBody.decode(TagsRequest.self, from: request, limit: 64 * 1024)
            let add = try Self.validateTags(body.add ?? [], field: "add")
            let remove = try Self.validateTags(body.remove ?? [], field: "remove")
            let updated: DeviceRecord?
            do {
                updated = try await store.updateTags(app: app.id, deviceID: device.deviceID, add: add, remove: remove, at: clock.now)
            } catch StoreError.tooManyTags(let count) {
                throw JSONAPIError(
                    status: .conflict, error: "tooManyTags",
                    message: "a device has at most \(DeviceRecord.maximumTags) tags; with these it would have \(count): remove some first",
                    field: "add")
            }
            guard let record = updated else { throw JSONAPIError.notFound("no device \(device.deviceID)") }
            return DeviceView(record)
        }
        // A new secret for the device: the old one stops working at once. The device (with its current secret)
        // or the backend (e.g. after a secret leaked) may ask.
        devices.post(":device/secret") { request, context -> SecretView in
            let (app, device, caller) = try await deviceCall(.rotateSecret, request, context)
            let secret = Secrets.generate(prefix: Secrets.devicePrefix)
            // The device's own rotation holds only while the secret it proved is still the device's: raced by the
            // backend revoking that secret, it must not be the one left. The backend's always lands.
            let byDevice = caller == .appKey
            guard try await store.setDeviceSecret(
                app: app.id, deviceID: device.deviceID, secretHash: Secrets.hash(secret),
                onlyReplacing: byDevice ? StoredSecret(device.secretHash) : nil, at: clock.now)
            else {
                guard try await store.device(app: app.id, deviceID: device.deviceID) != nil else {
                    throw JSONAPIError.notFound("no device \(device.deviceID)")
                }
                throw JSONAPIError.forbidden("the device's secret was replaced meanwhile", field: "X-Tern-Device-Secret")
            }
            await credentialsChanged(app.id, [device.deviceID])
            return SecretView(deviceId: device.deviceID, deviceSecret: secret)
        }
        devices.get(":device/tokens") { request, context -> TokenHistoryView in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app, call: .tokenHistory)
            let deviceID = try Self.deviceID(context)
            let history = try await store.tokenHistory(app: app.id, deviceID: deviceID)
            if history.isEmpty, try await store.device(app: app.id, deviceID: deviceID) == nil {
                throw JSONAPIError.notFound("no device \(deviceID)")
            }
            return TokenHistoryView(tokens: history.map {
                .init(
                    token: $0.token, environment: $0.environment.rawValue, firstRegisteredAt: $0.firstRegisteredAt, replacedAt: $0.replacedAt,
                    reason: $0.reason.rawValue)
            })
        }
        devices.get { request, context -> DeviceList in
            let app = try await apps.app(request, context)
            try Authorization.requireMaster(request, app: app, call: .list)
            let query = request.uri.queryParameters
            // One way of listing at a time, and createdBefore only with createdSince.
            let ways = ["alias", "tag", "createdSince"].filter { query.get($0) != nil }
            guard ways.count <= 1 else {
                throw JSONAPIError.badRequest(field: ways[1], "list devices by ?alias=…, ?tag=… or ?createdSince=…, one of them")
            }
            if query.get("createdBefore") != nil, ways != ["createdSince"] {
                throw JSONAPIError.badRequest(field: "createdBefore", "createdBefore goes with createdSince")
            }
            if let alias = query.get("alias") {
                guard Self.isValidAlias(alias) else { throw JSONAPIError.badRequest(field: "alias", Self.aliasRule) }
                for name in ["after", "limit"] where query.get(name) != nil {
                    throw JSONAPIError.badRequest(field: name, "a user's devices come in one answer: \(name) goes with ?tag= or ?createdSince=")
                }
                return DeviceList(devices: try await views(store.devices(app: app.id, alias: alias), app: app), next: nil)
            }
            if query.get("createdSince") != nil { return try await devicesCreated(app: app, query: query) }
            guard let tag = query.get("tag") else {
                throw JSONAPIError.badRequest(field: "alias", "list devices by ?alias=…, ?tag=… or ?createdSince=…")
            }
            guard Self.isValidTag(tag) else { throw JSONAPIError.badRequest(field: "tag", Self.tagRule) }
            let limit = try Self.limit(query.get("limit"))
            let after = query.get("after")
            if let after, UUID(apnsText: after) == nil {
                throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (a device id)")
            }
            let page = try await store.devices(app: app.id, tag: tag, after: after, limit: limit)
            return DeviceList(devices: try await views(page.items, app: app), next: page.next)
        }
    }

    /// Devices as the reads show them: each with its tokens of other kinds and its activities' tokens (two more
    /// queries for them all), so the backend sees which of a user's phones a call can ring.
    private func views(_ records: [DeviceRecord], app: AppRecord) async throws -> [DeviceView] {
        let deviceIDs = records.map(\.deviceID)
        let tokens = try await store.pushTokens(app: app.id, deviceIDs: deviceIDs)
        let activities = try await store.activityTokens(app: app.id, deviceIDs: deviceIDs)
        return records.map { record in
            var view = DeviceView(record)
            view.pushTokens = Dictionary(uniqueKeysWithValues: (tokens[record.deviceID] ?? []).map { ($0.kind.rawValue, PushTokenView($0)) })
            view.activities = (activities[record.deviceID] ?? []).map(ActivityTokenView.init)
            return view
        }
    }

    /// `GET …/devices?createdSince=…[&createdBefore=…]`: the devices created in that time, oldest first, paged.
    private func devicesCreated(app: AppRecord, query: Parameters) async throws -> DeviceList {
        let dateRule = "an RFC 3339 date-time with its offset, like 2026-12-01T09:00:00Z"
        guard let since = InternetDate.parse(query.get("createdSince") ?? "") else {
            throw JSONAPIError.badRequest(field: "createdSince", "createdSince is \(dateRule)")
        }
        var before: Date?
        if let text = query.get("createdBefore") {
            guard let date = InternetDate.parse(text) else { throw JSONAPIError.badRequest(field: "createdBefore", "createdBefore is \(dateRule)") }
            guard date > since else { throw JSONAPIError.badRequest(field: "createdBefore", "createdBefore is after createdSince") }
            before = date
        }
        let limit = try Self.limit(query.get("limit"))
        var cursor: DeviceCreationCursor?
        if let after = query.get("after") {
            guard let given = DeviceCreationCursor(after), UUID(apnsText: given.deviceID) != nil else {
                throw JSONAPIError.badRequest(field: "after", "after is the cursor from the last page (its next)")
            }
            cursor = given
        }
        let page = try await store.devices(app: app.id, createdSince: since, before: before, after: cursor, limit: limit)
        return DeviceList(devices: try await views(page.items, app: app), next: page.next)
    }

    /// Registers (or registers again) a device. A device created now gets a new random secret, in this answer only.
    private func register(_ body: RegisterRequest, app: AppRecord, deviceID: String, caller: Caller, request: Request) async throws -> DeviceView {
        var registration = try Self.validate(body, deviceID: deviceID)
        let now = clock.now
        let newSecret = Secrets.generate(prefix: Secrets.devicePrefix)
        registration.newSecretHash = Secrets.hash(newSecret)
        let presented = DeviceGate.presentedSecretHash(request)
        switch caller {
        case .master:
            registration.caller = .backend
        case .appKey:
            let identitySecret = try app.sealedIdentitySecret.map { sealed throws(JSONAPIError) in try openIdentitySecret(sealed) }
            let proof = try Authorization.aliasProof(
                alias: body.alias, aliasToken: body.aliasToken, app: app, deviceID: deviceID, identitySecret: identitySecret, now: now)
            registration.caller = .device(
                presentedSecretHash: presented, legacySecretHash: gate.legacySecretHash(app: app.id, deviceID: deviceID), aliasProof: proof)
        }
        do {
            let record = try await store.register(registration, app: app.id, at: now)
            // The token moved here, and the device that had it is deleted: its connection ends as any deleted
            // device's does (on whichever node holds it), before its id can be registered afresh and be sent to.
            if let deleted = record.tokenTakenFrom { await credentialsChanged(app.id, [deleted]) }
            let created = record.secretHash == registration.newSecretHash
            if created { devicesCreated.increment() }
            return DeviceView(record, deviceSecret: created ? newSecret : nil)
        } catch StoreError.refused(.deviceSecret) {
            // The device exists: the table's registerExisting row, with what was presented.
            let access = Authorization.access(.registerExisting, caller: caller, proof: presented == nil ? .none : .wrong)
            if access == .wrongDeviceSecret { try gate.refuseWrongSecret(app: app.id, deviceID: deviceID, call: .registerExisting) }
            throw Authorization.refusal(access, call: .registerExisting)
        } catch StoreError.refused(.aliasBinding) {
            throw JSONAPIError.forbidden(
                "app \(app.id) binds users only with aliasToken: a JWT (HS256) your backend signs with the app's identity secret "
                    + "(sub = the alias, aud = \(app.id), exp within an hour)",
                field: "aliasToken")
        }
    }

    private func openIdentitySecret(_ sealed: [UInt8]) throws(JSONAPIError) -> [UInt8] {
        do {
            return try serverKey.open(sealed)
        } catch {
            throw JSONAPIError(status: .internalServerError, error: "internal", message: "the app's identity secret cannot be opened")
        }
    }

    /// A call about one existing device, after the table allowed it.
    private func deviceCall(
        _ call: DeviceCall, _ request: Request, _ context: ServerRequestContext
    ) async throws -> (app: AppRecord, device: DeviceRecord, caller: Caller) {
        let app = try await apps.app(request, context)
        let caller = try Authorization.caller(request, app: app)
        let deviceID = try Self.deviceID(context)
        guard let device = try await store.device(app: app.id, deviceID: deviceID) else { throw JSONAPIError.notFound("no device \(deviceID)") }
        try gate.authorize(call, caller: caller, request: request, app: app.id, device: device)
        return (app, device, caller)
    }

    // MARK: Validation

    static func pushTokenKind(_ context: ServerRequestContext) throws(JSONAPIError) -> PushTokenKind {
        let text = context.parameters.get("kind") ?? ""
        guard let kind = PushTokenKind(rawValue: text) else {
            throw .badRequest(
                field: "kind",
                "the token's kind is \(PushTokenKind.allCases.map(\.rawValue).joined(separator: " or ")), not '\(text.prefix(64))'")
        }
        return kind
    }

    /// The token of a `{"token"}` body (at most 4 KiB), as lowercase hex. - Throws: 400 naming `token`, saying it
    /// must be `what`.
    static func tokenBody(_ request: Request, _ what: String) async throws -> String {
        let body = try await JSONBody.decode(PushTokenRequest.self, from: request, limit: 4096)
        do {
            return try DeviceToken(hex: body.token, field: "token").hex
        } catch {
            throw JSONAPIError.badRequest(field: "token", "token must be \(what)")
        }
    }

    static func activityID(_ context: ServerRequestContext) throws(JSONAPIError) -> String {
        let text = context.parameters.get("activityId") ?? ""
        guard ActivityTokenRecord.isValidID(text) else {
            throw .badRequest(field: "activityId", "an activity id is 1-128 letters, digits, '.', '_', ':' and '-', not '\(text.prefix(64))'")
        }
        return text
    }

    static func deviceID(_ context: ServerRequestContext) throws(JSONAPIError) -> String {
        try deviceID(context.parameters.get("device") ?? "")
    }

    static func deviceID(_ text: String) throws(JSONAPIError) -> String {
        guard let uuid = UUID(apnsText: text) else {
            throw .badRequest(field: "deviceId", "the device id must be a UUID (8-4-4-4-12 hex), not '\(text.prefix(64))'")
        }
        return uuid.apnsString
    }

    static func validate(_ body: RegisterRequest, deviceID: String) throws(JSONAPIError) -> DeviceRegistration {
        let token: DeviceToken
        do {
            token = try DeviceToken(hex: body.token, field: "token")
        } catch {
            throw .badRequest(field: "token", "token must be the device token in hex (APNs tokens are 32 bytes)")
        }
        let environment: APNsEnvironment
        switch body.environment {
        case APNsEnvironment.production.rawValue: environment = .production
        case APNsEnvironment.development.rawValue: environment = .development
        default:
            throw .badRequest(field: "environment", "environment must be production or development (the APNs environment of the app build)")
        }
        if let alias = body.alias {
            guard isValidAlias(alias) else { throw .badRequest(field: "alias", aliasRule + " (log out with DELETE …/alias)") }
        }
        try checkText(body.locale, field: "locale", max: 35)
        try checkText(body.timezone, field: "timezone", max: 64)
        try checkText(body.appVersion, field: "appVersion", max: 64)
        let tags = try body.tags.map { tags throws(JSONAPIError) in try validateTags(tags, field: "tags") }
        return DeviceRegistration(
            deviceID: deviceID, token: token.hex, environment: environment, alias: body.alias, tags: tags, locale: body.locale,
            timezone: body.timezone, appVersion: body.appVersion)
    }

    /// What an alias may be, as the README documents it.
    static let aliasRule =
        "an alias is 1-128 bytes of UTF-8 text in Unicode NFC (composed form), without control, bidirectional-override or invisible formatting characters"

    /// Whether `alias` is a user id Tern stores: printable text that reads the same in a console, a log and a
    /// terminal (no NUL, control characters, bidi overrides or other invisible formatting), in NFC.
    ///
    /// NFC because Swift compares and hashes text by canonical equivalence, and the database by bytes: the KELVIN
    /// SIGN and "ate" equal "Kate" to Swift, not to SQL. Of two different texts in NFC, neither is equivalent to the
    /// other, so an alias names one user however it is compared.
    static func isValidAlias(_ alias: String) -> Bool {
        guard (1...128).contains(alias.utf8.count), isPrintable(alias) else { return false }
        return alias.utf8.elementsEqual(alias.precomposedStringWithCanonicalMapping.utf8)
    }

    /// Whether `text` has no NUL, control characters, bidi overrides or other invisible formatting, nor code points
    /// that are not characters.
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .surrogate, .unassigned, .lineSeparator, .paragraphSeparator, .privateUse: false
            default: !scalar.properties.isNoncharacterCodePoint
            }
        }
    }

    static func validateTags(_ tags: [String], field: String) throws(JSONAPIError) -> Set<String> {
        guard tags.count <= DeviceRecord.maximumTags else { throw .badRequest(field: field, "at most \(DeviceRecord.maximumTags) tags") }
        for (index, tag) in tags.enumerated() where !isValidTag(tag) {
            throw .badRequest(field: "\(field)[\(index)]", tagRule)
        }
        return Set(tags)
    }

    static let tagRule = "a tag is 1-64 letters, digits or - _ . :"

    static func isValidTag(_ tag: String) -> Bool {
        (1...64).contains(tag.utf8.count)
            && tag.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "-_.:".utf8.contains(byte)
            }
    }

    /// A device's descriptive field: stored as it comes, so it must be text that reads as it is (a NUL would end it
    /// early in the database, a control character would rewrite a terminal's line).
    private static func checkText(_ value: String?, field: String, max: Int) throws(JSONAPIError) {
        guard let value else { return }
        guard value.utf8.count <= max, isPrintable(value) else {
            throw .badRequest(field: field, "\(field) is at most \(max) bytes of text without control or invisible formatting characters")
        }
    }

    /// A listing's `limit`: `default` when not given, else 1-`maximum`.
    static func limit(_ text: String?, default: Int = 100, maximum: Int = 1000) throws(JSONAPIError) -> Int {
        guard let text else { return `default` }
        guard let value = Int(text), (1...maximum).contains(value) else { throw .badRequest(field: "limit", "limit must be 1-\(maximum)") }
        return value
    }
}
