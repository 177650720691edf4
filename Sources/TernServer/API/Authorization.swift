import Hummingbird
import TernStore
import TernWeb

/// Who a request's bearer secret says it is.
enum Caller {
    /// The app's backend (master secret): everything about the app.
    case master
    /// The mobile app (app key): registering devices.
    case appKey
}

/// Bearer-secret checks. Every secret is compared by its SHA-256 in constant time; a missing or wrong secret is a
/// 401, a right secret used where it is not enough a 403.
struct Authorization: Sendable {
    let adminTokenHash: [UInt8]

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

    /// The admin token (app management).
    func requireAdmin(_ request: Request) throws(JSONAPIError) {
        guard Secrets.matches(try Self.bearer(request), storedHash: adminTokenHash) else {
            throw .unauthorized("this call needs the admin token")
        }
    }

    /// The caller of an app's endpoint, by its secret.
    static func caller(_ request: Request, app: AppRecord) throws(JSONAPIError) -> Caller {
        let secret = try bearer(request)
        if Secrets.matches(secret, storedHash: app.masterSecretHash) { return .master }
        if Secrets.matches(secret, storedHash: app.appKeyHash) { return .appKey }
        throw .unauthorized("the secret is not this app's app key or master secret")
    }

    /// With the app key, a device acts only as itself: its secret (derived from the server key) must come in
    /// `X-Tern-Device-Secret`. - Throws: a 403 otherwise.
    static func requireDeviceSecret(_ request: Request, app: AppRecord, deviceID: String, serverKey: ServerKey, _ refusal: String) throws(JSONAPIError) {
        let expected = serverKey.deviceSecret(app: app.id, deviceID: deviceID)
        guard let presented = request.headers[DevicesAPI.deviceSecretHeader], Secrets.matches(presented, storedHash: Secrets.hash(expected)) else {
            throw .forbidden(refusal)
        }
    }

    /// The app's master secret, and nothing less.
    static func requireMaster(_ request: Request, app: AppRecord) throws(JSONAPIError) {
        guard case .master = try caller(request, app: app) else {
            throw .forbidden("this call needs the app's master secret; the app key is only for devices")
        }
    }
}
