import Foundation
import NIOCore
import TernAPNs
import TernSimulator

/// A 32-byte device token, and a second one for filtering.
let deviceToken = String(repeating: "ab", count: 32)
let otherDeviceToken = String(repeating: "cd", count: 32)
let alertPayload = #"{"aps":{"alert":"Hello"}}"#

/// A running simulator with the credentials and clock a test needs.
struct TestSimulator: Sendable {
    static let keyID = "KEY0000001"
    static let teamID = "TEAM000001"

    let simulator: APNsSimulator
    /// The provider-token key the simulator trusts.
    let key: APNsSigningKey
    /// The simulator's clock; it moves only when a test advances it.
    let clock: ManualWallClock
    /// `bearer <JWT>` issued at the clock's start: one token string, so a connection never changes tokens by accident.
    let authorization: String

    var state: SimulatorState { simulator.state }
    var control: ControlClient { ControlClient(port: simulator.controlPort ?? 0) }

    func connect(certificate: IssuedCertificate? = nil) async throws -> HTTP2TestClient {
        try await HTTP2TestClient.connect(
            port: simulator.port, trusting: simulator.certificateAuthority.certificatePEM, clientCertificate: certificate)
    }

    /// `bearer <JWT>` signed by `key` (default: the trusted key) at `issuedAt` (default: the clock's now).
    func bearer(_ key: APNsSigningKey? = nil, issuedAt: Date? = nil) throws -> String {
        try (key ?? self.key).makeToken(issuedAt: issuedAt ?? clock.now).authorizationHeader
    }

    /// A push request with the trusted provider token; every header can be changed or left out (nil).
    func push(
        token: String = deviceToken,
        topic: String? = "com.example.app",
        pushType: String? = "alert",
        apnsID: String? = nil,
        priority: String? = nil,
        expiration: String? = nil,
        collapseID: String? = nil,
        authorization: Authorization = .trusted,
        payload: String = alertPayload,
        method: String? = "POST",
        path: String? = nil,
        extraHeaders: [(name: String, value: String)] = []
    ) -> HTTP2Request {
        HTTP2Request.push(
            token: token, topic: topic, pushType: pushType, apnsID: apnsID, priority: priority, expiration: expiration,
            collapseID: collapseID, authorization: authorization.header(trusted: self.authorization), payload: payload, method: method,
            path: path, extraHeaders: extraHeaders)
    }
}

/// The `authorization` header of a push.
enum Authorization: Sendable {
    /// The simulator's trusted key, issued at the clock's start.
    case trusted
    /// No header at all.
    case omitted
    case header(String)

    func header(trusted: String) -> String? {
        switch self {
        case .trusted: return trusted
        case .omitted: return nil
        case .header(let value): return value
        }
    }
}

extension HTTP2Request {
    /// An APNs push: `POST /3/device/<token>` with the given `apns-*` headers (nil leaves one out).
    static func push(
        token: String = deviceToken,
        topic: String? = "com.example.app",
        pushType: String? = "alert",
        apnsID: String? = nil,
        priority: String? = nil,
        expiration: String? = nil,
        collapseID: String? = nil,
        authorization: String? = nil,
        payload: String = alertPayload,
        method: String? = "POST",
        path: String? = nil,
        extraHeaders: [(name: String, value: String)] = []
    ) -> HTTP2Request {
        var headers: [(name: String, value: String)] = []
        if let authorization { headers.append(("authorization", authorization)) }
        if let topic { headers.append(("apns-topic", topic)) }
        if let pushType { headers.append(("apns-push-type", pushType)) }
        if let apnsID { headers.append(("apns-id", apnsID)) }
        if let priority { headers.append(("apns-priority", priority)) }
        if let expiration { headers.append(("apns-expiration", expiration)) }
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        headers.append(contentsOf: extraHeaders)
        return HTTP2Request(
            method: method, path: path ?? "/3/device/\(token)", headers: headers, body: Array(payload.utf8))
    }
}

/// Runs a simulator for `body` on free ports with an in-memory CA, one trusted provider-token key and a manual
/// clock; `configure` adjusts the configuration first.
func withSimulator<T: Sendable>(
    _ configure: (inout APNsSimulator.Configuration) throws -> Void = { _ in },
    _ body: (TestSimulator) async throws -> T
) async throws -> T {
    let key = APNsSigningKey.generate(keyID: TestSimulator.keyID, teamID: TestSimulator.teamID)
    let clock = ManualWallClock()
    var configuration = try APNsSimulator.Configuration()
    configuration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
    configuration.clock = clock
    configuration.shutdownGracePeriod = .seconds(2)
    try configure(&configuration)
    let authorization = try key.makeToken(issuedAt: clock.now).authorizationHeader
    return try await APNsSimulator.withRunning(configuration) { simulator in
        try await body(TestSimulator(simulator: simulator, key: key, clock: clock, authorization: authorization))
    }
}

/// A payload of exactly `size` bytes: `{"aps":{"alert":"xxx…"}}`.
func payload(ofSize size: Int) -> String {
    let frame = #"{"aps":{"alert":""}}"#
    return #"{"aps":{"alert":""# + String(repeating: "x", count: size - frame.utf8.count) + #""}}"#
}
