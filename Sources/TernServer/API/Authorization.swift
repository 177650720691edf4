import Foundation
import HTTPTypes
import Hummingbird
import Logging
import TernAPNs
import TernStore
import TernWeb

/// Who a request's bearer secret says it is.
enum Caller: Sendable, Equatable, CaseIterable {
    /// The app's backend (master secret): everything about the app.
    case master
    /// The mobile app (app key). The key ships inside every copy of the app, so it is public: with it, a device acts
    /// only as itself, proven by its device secret.
    case appKey
}

/// The calls a device can make, one row each of the authorization table (README, "Who may do what").
enum DeviceCall: String, Sendable, CaseIterable {
    /// `PUT …/devices/{id}` for an id no device has yet.
    case registerNew
    /// `PUT …/devices/{id}` for an existing device.
    case registerExisting
    /// `GET …/devices/{id}`.
    case read
    /// `DELETE …/devices/{id}`.
    case delete
    /// `DELETE …/devices/{id}/alias` (log out).
    case logout
    /// `PATCH …/devices/{id}/tags`.
    case tags
    /// `POST …/devices/{id}/secret`: a new device secret.
    case rotateSecret
    /// `GET …/inbox`, `POST …/inbox/read`, `DELETE …/inbox/{id}`, for the device's own user.
    case inbox
    /// `GET …/devices/{id}/tokens`.
    case tokenHistory
    /// `GET …/devices?alias=|tag=`.
    case list
    /// `GET …/devices/{id}/connect`: the device's own connection (the online channel).
    case connect
    /// `POST …/devices/{id}/opens`: the device reports that its user opened a message.
    case open
    /// `POST …/devices/{id}/acks`: the device acknowledges messages outside its connection (a Notification Service
    /// Extension's delivery receipt).
    case ack
    /// `PUT/DELETE …/devices/{id}/push-tokens/{kind}`: the device's VoIP or push-to-start token.
    case pushToken
    /// `PUT/DELETE …/devices/{id}/activities/{activityId}`: a Live Activity's update token on the device.
    case activityToken
    /// `GET …/broadcast-channels/{name}`: a broadcast channel's id, which the app subscribes its Live Activity to.
    /// Public, as the app key is: every copy of the app subscribed to the channel holds its id, and only the master
    /// secret makes, lists, deletes, broadcasts to channels or reads their broadcasts.
    case readChannel
}

/// What a request presented in `X-Tern-Device-Secret`, judged against the device.
enum SecretProof: String, Sendable, CaseIterable {
    case none
    case wrong
    case right
}

/// The table's verdict on one cell.
enum Access: Sendable, Equatable {
    case allowed
    /// 403: the call needs the master secret.
    case needsMaster
    /// 403: the call needs the device's secret (none was sent).
    case needsDeviceSecret
    /// 403 (or 429 once a device has had too many): the secret sent is not the device's.
    case wrongDeviceSecret
}

/// Bearer-secret checks and the authorization table. Every secret is compared by its SHA-256 in constant time; a
/// missing or wrong bearer secret is a 401 (the same for an app that does not exist), a right secret used where it is
/// not enough a 403.
struct Authorization: Sendable {
    let adminTokenHash: [UInt8]
    /// Wrong admin tokens per address (shared with the console's sign-ins); nil counts none.
    let guesses: SecretGuessLimiter?
    let logger: Logger

    init(adminTokenHash: [UInt8], guesses: SecretGuessLimiter? = nil, logger: Logger = Logger(label: "tern")) {
        self.adminTokenHash = adminTokenHash
        self.guesses = guesses
        self.logger = logger
    }

    // MARK: The table

    /// Who may make `call`: the one place that decides. The store checks a registration's proof again in the
    /// transaction that writes it (``RegistrationCaller``), so nothing can come between the check and the write.
    static func access(_ call: DeviceCall, caller: Caller, proof: SecretProof) -> Access {
        switch (caller, call) {
        case (.master, _):
            return .allowed
        case (.appKey, .tokenHistory), (.appKey, .list):
            return .needsMaster
        case (.appKey, .registerNew):
            // Nothing to prove yet: the answer carries the new device's secret.
            return .allowed
        case (.appKey, .readChannel):
            // No device's business: the channel is the same for every device of the app.
            return .allowed
        case (.appKey, .registerExisting), (.appKey, .read), (.appKey, .delete), (.appKey, .logout), (.appKey, .tags),
            (.appKey, .rotateSecret), (.appKey, .inbox), (.appKey, .connect), (.appKey, .open), (.appKey, .ack), (.appKey, .pushToken),
            (.appKey, .activityToken):
            switch proof {
            case .right: return .allowed
            case .none: return .needsDeviceSecret
            case .wrong: return .wrongDeviceSecret
            }
        }
    }

    /// What a device (app key) shows for the alias in its registration, before the store compares it with the alias
    /// it has (keeping the same alias, bound with proof, needs no new proof).
    /// - Returns: `.token` for a valid alias token; without one, `.open` on an app whose binding is open, else `.none`.
    /// - Throws: 403 naming the reason when an alias token is given and does not verify.
    static func aliasProof(
        alias: String?, aliasToken: String?, app: AppRecord, deviceID: String, identitySecret: [UInt8]?, now: Date
    ) throws(JSONAPIError) -> AliasProof {
        guard let aliasToken else { return app.userBinding == .open ? .open : .none }
        guard let alias else { throw .badRequest(field: "aliasToken", "aliasToken goes with alias: the alias it was signed for") }
        guard let identitySecret else {
            throw .forbidden(
                "app \(app.id) has no identity secret yet: make one with PATCH /v1/apps/\(app.id) {\"rotate\": [\"identitySecret\"]}",
                field: "aliasToken")
        }
        do {
            try AliasToken.verify(aliasToken, alias: alias, app: app.id, deviceID: deviceID, secret: identitySecret, now: now)
        } catch {
            throw .forbidden("the alias token is refused: \(error.rawValue)", field: "aliasToken")
        }
        return .token
    }

    // MARK: Bearer secrets

    static func bearer(_ request: Request) throws(JSONAPIError) -> String {
        guard let header = request.headers[.authorization] else {
            throw .unauthorized("send the secret as 'Authorization: Bearer <secret>'")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw .unauthorized("the Authorization header must be 'Bearer <secret>'")
        }
        return String(parts[1])
    }

    /// The admin token (app management). Wrong ones are counted per address (``SecretGuessLimiter``): past the limit,
    /// the address gets 429 before its token is looked at, so a guess then tells nothing.
    func requireAdmin(_ request: Request, _ context: ServerRequestContext) throws(JSONAPIError) {
        try requireSecret(request, context, storedHash: adminTokenHash, named: "the admin token")
    }

    /// The node's own secret stored as `storedHash` (its SHA-256), called `name` in the refusal and the log. Wrong ones
    /// are counted as wrong admin tokens are.
    func requireSecret(_ request: Request, _ context: ServerRequestContext, storedHash: [UInt8], named name: String) throws(JSONAPIError) {
        let address = SecretGuessLimiter.key(for: context.clientAddress)
        if let retryAfter = guesses?.retryAfter(address) {
            throw JSONAPIError(
                status: .tooManyRequests, error: "tooManyAttempts",
                message: "too many wrong secrets from this address; try again in \(retryAfter) s", field: "Authorization",
                retryAfter: retryAfter)
        }
        guard Secrets.matches(try Self.bearer(request), storedHash: storedHash) else {
            if guesses?.recordFailure(address) == true {
                logger.warning(
                    "wrong secrets (\(name)): too many from one address, answering 429 until the minute is over",
                    metadata: ["address": "\(address)"])
            }
            throw .unauthorized("this call needs \(name)")
        }
    }

    /// The caller of an app's endpoint, by its secret.
    static func caller(_ request: Request, app: AppRecord) throws(JSONAPIError) -> Caller {
        let secret = try bearer(request)
        if Secrets.matches(secret, storedHash: app.masterSecretHash) { return .master }
        if Secrets.matches(secret, storedHash: app.appKeyHash) { return .appKey }
        throw wrongAppSecret
    }

    /// A secret that is not the app's, or an app that does not exist: the same answer.
    static let wrongAppSecret = JSONAPIError.unauthorized("the secret is not this app's app key or master secret")

    /// The app's master secret, and nothing less (calls outside the device table, such as pushes, pass nil).
    static func requireMaster(_ request: Request, app: AppRecord, call: DeviceCall? = nil) throws(JSONAPIError) {
        let caller = try caller(request, app: app)
        let access = call.map { Self.access($0, caller: caller, proof: .none) } ?? (caller == .master ? .allowed : .needsMaster)
        guard access == .allowed else { throw refusal(access, call: call ?? .list) }
    }

    /// The error a refused cell answers.
    static func refusal(_ access: Access, call: DeviceCall) -> JSONAPIError {
        switch access {
        case .allowed, .needsMaster:
            return .forbidden("this call needs the app's master secret; the app key is only for devices")
        case .needsDeviceSecret:
            return .forbidden(
                call == .inbox
                    ? "with the app key, a device reads only its own inbox: send its secret in X-Tern-Device-Secret"
                    : "with the app key, a device acts only as itself: send its secret in X-Tern-Device-Secret",
                field: "X-Tern-Device-Secret")
        case .wrongDeviceSecret:
            return .forbidden("X-Tern-Device-Secret is not this device's secret", field: "X-Tern-Device-Secret")
        }
    }
}

/// Applies the table to requests about one device: reads the presented device secret, judges it, and counts wrong
/// ones per device (``DeviceSecretLimiter``).
struct DeviceGate: Sendable {
    let serverKey: ServerKey
    let limiter: DeviceSecretLimiter
    let logger: Logger

    static let secretHeader = HTTPField.Name("X-Tern-Device-Secret")!

    /// The presented device secret's hash, if one was sent.
    static func presentedSecretHash(_ request: Request) -> [UInt8]? {
        request.headers[secretHeader].map(Secrets.hash)
    }

    /// The hash a device's secret must have: its stored one, or for a device registered before random secrets
    /// (no stored hash), that of the secret derived from the server key.
    func expectedSecretHash(app: String, device: DeviceRecord) -> [UInt8] {
        device.secretHash ?? legacySecretHash(app: app, deviceID: device.deviceID)
    }

    /// Checks `call` on an existing `device` by `caller`. - Throws: 403 (or 429 past the limit) when refused.
    func authorize(_ call: DeviceCall, caller: Caller, request: Request, app: String, device: DeviceRecord) throws(JSONAPIError) {
        let proof: SecretProof
        if let presented = Self.presentedSecretHash(request) {
            proof = Secrets.sameHash(presented, expectedSecretHash(app: app, device: device)) ? .right : .wrong
        } else {
            proof = .none
        }
        let access = Authorization.access(call, caller: caller, proof: proof)
        if access == .wrongDeviceSecret { try refuseWrongSecret(app: app, deviceID: device.deviceID, call: call) }
        guard access == .allowed else { throw Authorization.refusal(access, call: call) }
    }

    /// The hash of the secret derived for a device registered before random secrets.
    func legacySecretHash(app: String, deviceID: String) -> [UInt8] {
        Secrets.hash(serverKey.legacyDeviceSecret(app: app, deviceID: deviceID))
    }

    /// A wrong device secret: counted, and answered 403, or 429 once the device has had too many this minute.
    func refuseWrongSecret(app: String, deviceID: String, call: DeviceCall) throws(JSONAPIError) -> Never {
        switch limiter.recordFailure(app: app, deviceID: deviceID) {
        case .counted:
            throw Authorization.refusal(.wrongDeviceSecret, call: call)
        case .limited(let retryAfter, let firstTime):
            if firstTime {
                logger.warning(
                    "wrong device secrets: too many for one device, answering 429 until the minute is over",
                    metadata: ["app": "\(app)", "device": "\(deviceID)"])
            }
            throw JSONAPIError(
                status: .tooManyRequests, error: "tooManyAttempts",
                message: "too many wrong device secrets for this device; try again in \(retryAfter) s",
                field: "X-Tern-Device-Secret", retryAfter: retryAfter)
        }
    }
}

// MARK: The console

/// Who signed in to the console, by the secret they gave (``ConsoleRoutes``).
enum ConsolePrincipal: Sendable, Hashable {
    /// The admin token: every app.
    case admin
    /// An app's master secret: that app only.
    case master(app: String)
}

/// What a console page does, as the API's calls group them.
enum ConsoleCall: Sendable, Equatable {
    /// Listing, creating and changing apps (rotating their secrets): the API's `/v1/apps` calls, admin only.
    case manageApps
    /// Devices, pushes and token events of one app: the API's master-secret calls.
    case appData(String)
}

extension Authorization {
    /// Whether `principal` may make `call` in the console: the API's rules, with one addition. The admin may also
    /// see and send what an app's master secret may: it can already rotate that secret and use the new one, so
    /// saying no would protect nothing.
    static func consoleAccess(_ principal: ConsolePrincipal, _ call: ConsoleCall) -> Bool {
        switch (principal, call) {
        case (.admin, _): true
        case (.master, .manageApps): false
        case (.master(let own), .appData(let app)): own == app
        }
    }

    /// Who `secret` signs in as: the admin token, or the master secret of one of `apps` (each compared by its hash in
    /// constant time). Nil for anything else, app keys included: the console is not for devices.
    func consolePrincipal(secret: String, apps: [AppRecord]) -> ConsolePrincipal? {
        let presented = Secrets.hash(secret)
        if Secrets.sameHash(presented, adminTokenHash) { return .admin }
        return apps.first { Secrets.sameHash(presented, $0.masterSecretHash) }.map { .master(app: $0.id) }
    }
}
