import NIOHTTP1
import TernTestSupport

/// How a test calls Tern's API: over a socket (``HTTPTestClient``, against a running server) or straight through the
/// router (``RouterTestClient``). Both answer in ``HTTPTestResponse``, so a test body reads the same either way.
protocol APIClient: Sendable {
    /// Sent as `Authorization: Bearer …` when set.
    var bearer: String? { get }
    /// The same client with another bearer secret.
    func with(bearer: String?) -> Self
    /// Sends a body as raw bytes (which need not be UTF-8).
    func send(
        _ method: HTTPMethod, _ path: String, bytes body: [UInt8]?, headers extra: [(String, String)], timeout: Double
    ) async throws -> HTTPTestResponse
}

extension APIClient {
    func get(_ path: String) async throws -> HTTPTestResponse { try await send(.GET, path) }
    func put(_ path: String, _ body: String) async throws -> HTTPTestResponse { try await send(.PUT, path, body: body) }
    func post(_ path: String, _ body: String? = nil) async throws -> HTTPTestResponse { try await send(.POST, path, body: body) }
    func patch(_ path: String, _ body: String) async throws -> HTTPTestResponse { try await send(.PATCH, path, body: body) }
    func delete(_ path: String) async throws -> HTTPTestResponse { try await send(.DELETE, path) }

    func send(
        _ method: HTTPMethod, _ path: String, body: String? = nil, headers extra: [(String, String)] = [], timeout: Double = 10
    ) async throws -> HTTPTestResponse {
        try await send(method, path, bytes: body.map { Array($0.utf8) }, headers: extra, timeout: timeout)
    }

    func send(_ method: HTTPMethod, _ path: String, bytes body: [UInt8]?, headers extra: [(String, String)] = []) async throws -> HTTPTestResponse {
        try await send(method, path, bytes: body, headers: extra, timeout: 10)
    }
}

extension HTTPTestClient: APIClient {}

/// A `tern serve` with the demo app on the built-in simulator, as the tests see it: ``RunningServer`` over sockets,
/// ``RoutedServer`` through the router. The helpers in Fixtures.swift (register, push, arrivals) work on both.
protocol TestServer: Sendable {
    associatedtype Client: APIClient
    /// The API with the admin token.
    var admin: Client { get }
    /// The API with the demo app's master secret.
    var master: Client { get }
    /// The API with the demo app's app key.
    var device: Client { get }
    /// The built-in simulator's control API (a socket in either case: the simulator is a real APNs on real ports).
    var simulator: HTTPTestClient { get }
    /// The demo app's identity secret (signs alias tokens).
    var identitySecret: String { get }
    /// The device secrets the demo app's registrations answered, by device id.
    var deviceSecrets: DeviceSecrets { get }
}

extension TestServer {
    /// The API without a bearer secret.
    var api: Client { admin.with(bearer: nil) }
}
