import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import TernAPNs
import TernEmbeddedSimulator
import TernTestSupport

@testable import TernServer

/// `tern serve` as ``ServerAssembly`` makes it (a real SQLite file in its own temporary folder, the demo app on the
/// built-in simulator), with the API's requests handed straight to its router by HummingbirdTesting's `.router`
/// framework: no listening socket, no connection per request.
///
/// `.router` runs the application's services around the test (see hummingbird's RouterTestFramework.swift: a
/// ServiceGroup of them, started before the test and shut down gracefully after it), so the dispatcher, the
/// simulator, the sweepers all run as in `tern serve` and pushes are delivered. What it does not have is the HTTP
/// server: the parser's limits (431), the `Server`/`Date` headers, connections. Tests of those use ``ServerHarness``.
struct RoutedServer: TestServer {
    let admin: RouterTestClient
    let master: RouterTestClient
    let device: RouterTestClient
    let simulator: HTTPTestClient
    let identitySecret: String
    let deviceSecrets = DeviceSecrets()
    /// Where the database (`tern.db`), the server key and the simulator's state are.
    let folder: URL
    /// `METHOD /path` of every route the router serves, as `tern serve` records them.
    let servedRoutes: [String]
}

/// Calls the router as ``HTTPTestClient`` calls a server: the same headers (bearer, JSON content type, the length,
/// extra headers appended after them), the answer as an ``HTTPTestResponse``.
struct RouterTestClient: APIClient {
    let client: any TestClientProtocol
    let bearer: String?

    func with(bearer: String?) -> RouterTestClient { RouterTestClient(client: client, bearer: bearer) }

    func send(
        _ method: HTTPMethod, _ path: String, bytes body: [UInt8]?, headers extra: [(String, String)], timeout: Double
    ) async throws -> HTTPTestResponse {
        guard let requestMethod = HTTPRequest.Method(method.rawValue) else {
            throw HTTPTestClientError(description: "\(method) is not an HTTP method")
        }
        var fields = HTTPFields()
        if body != nil { fields[.contentType] = "application/json" }
        if let bearer { fields[.authorization] = "Bearer \(bearer)" }
        for (name, value) in extra {
            guard let fieldName = HTTPField.Name(name) else { throw HTTPTestClientError(description: "\(name) is not a header name") }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        let headers = fields
        let client = self.client
        // Always a body, empty if need be: the framework then sends `Content-Length` as the socket client does.
        let response = try await withTimeout(HTTPTestClient.patience(for: path, timeout: timeout), "an answer to \(method) \(path)") {
            try await client.executeRequest(uri: path, method: requestMethod, headers: headers, body: ByteBuffer(bytes: body ?? []))
        }
        var answered = HTTPHeaders()
        for field in response.headers { answered.add(name: field.name.rawName, value: field.value) }
        return HTTPTestResponse(status: response.status.code, headers: answered, body: Array(response.body.readableBytesView))
    }
}

enum RouterHarness {
    /// One routed server that many small tests share (each uses device ids of its own), made by the first that asks
    /// and left to end with the test process.
    static let shared = Task { () throws -> RoutedServer in
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-router-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let started = AsyncStream.makeStream(of: RoutedServer.self)
        let running = Task {
            // A start that fails ends the wait below too, and the failure is thrown from `running.value`.
            defer { started.continuation.finish() }
            try await serve(ServerHarness.configuration(in: folder), folder: folder) { server in
                started.continuation.yield(server)
                // Serves until the test process ends: this waits on a stream that nothing finishes.
                for await _ in forever.stream {}
            }
        }
        for await server in started.stream { return server }
        try await running.value
        throw HTTPTestClientError(description: "the shared routed server stopped before it was ready")
    }

    /// Never yields nor finishes (its continuation is kept here): what the shared server waits on.
    private static let forever = AsyncStream.makeStream(of: Never.self)

    /// Makes a server for `body` on a new temporary folder (or `folder`, holding a database prepared by the test),
    /// runs its services around `body`, and stops them gracefully afterwards; `configure` adjusts the defaults, and
    /// `clocks` (``ServerClocks/manual(_:)`` for a test that moves time itself) are the server's.
    /// The whole, start and stop included, fails after `timeout` seconds rather than hang.
    static func withServer<T: Sendable>(
        folder given: URL? = nil,
        configure: (inout TernServerConfiguration) -> Void = { _ in },
        clocks: ServerClocks = .system,
        timeout: Double = 120,
        logs: LogRecorder? = nil,
        _ body: @escaping @Sendable (RoutedServer) async throws -> T
    ) async throws -> T {
        let folder = given ?? FileManager.default.temporaryDirectory.appendingPathComponent("tern-router-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if given == nil { try? FileManager.default.removeItem(at: folder) } }
        var configuration = ServerHarness.configuration(in: folder)
        configure(&configuration)
        let prepared = configuration
        return try await withTimeout(timeout, "the test on the router, with its services' start and stop") {
            try await serve(prepared, folder: folder, clocks: clocks, logs: logs, body)
        }
    }

    /// Opens the store and loads the key as `tern serve` does, assembles the server, and runs `body` on its router.
    private static func serve<T: Sendable>(
        _ configuration: TernServerConfiguration, folder: URL, clocks: ServerClocks = .system, logs: LogRecorder? = nil,
        _ body: @escaping @Sendable (RoutedServer) async throws -> T
    ) async throws -> T {
        var logger = logs?.logger ?? Logger(label: "tern.test")
        logger.logLevel = .warning
        let serverKey = try TernServer.loadServerKey(configuration).key
        let store = try await TernServer.openStore(configuration, logger: logger)
        // As `tern serve` does, the store's pool runs around everything that uses it.
        return try await withThrowingTaskGroup(of: Void.self) { pool in
            pool.addTask { await store.run() }
            defer { pool.cancelAll() }
            do {
                let assembly = try await ServerAssembly(
                    configuration: configuration, store: store, serverKey: serverKey, clocks: clocks, metrics: nil,
                    embeddedAPNs: BuiltInSimulator.factory(
                        stateDirectory: URL(fileURLWithPath: configuration.simulator.stateDirectory, isDirectory: true), logger: logger),
                    logger: logger)
                let app = Application(router: assembly.router, services: assembly.services, logger: logger)
                let (simulator, demo, servedRoutes, clients) = (assembly.simulator, assembly.demo, assembly.servedRoutes, assembly.clients)
                let result = try await app.test(.router) { client in
                    // As `tern serve`'s banner does, the test starts once the simulator listens (it gives its control port),
                    // and once the node knows it: the dispatcher tells the APNs clients when it starts, and an app's call to
                    // APNs before then (the feedback service's, an admin's feedback read) finds no simulator.
                    let address = try await withTimeout(30, "the simulator to start") { try await simulator?.waitUntilReady() }
                    if simulator != nil { try await waitUntil("the node to know the simulator") { await clients.knowsSimulator } }
                    let router = RouterTestClient(client: client, bearer: nil)
                    return try await body(RoutedServer(
                        admin: router.with(bearer: RunningServer.adminToken),
                        master: router.with(bearer: demo?.masterSecret),
                        device: router.with(bearer: demo?.appKey),
                        simulator: HTTPTestClient(port: address?.controlPort ?? 0),
                        identitySecret: demo?.identitySecret ?? "",
                        folder: folder, servedRoutes: servedRoutes))
                }
                try await store.close()
                return result
            } catch {
                try? await store.close()
                throw error
            }
        }
    }
}

extension ServerClocks {
    /// A test's manual clock as the server's: its wall time dates what the server stores, and the server's
    /// background work (sweeps, polls, badge gathering, the webhook loop) waits on it, so the test advances it.
    static func manual(_ clock: ManualClock) -> ServerClocks {
        ServerClocks(wall: clock.wall, timer: clock, named: { clock.labeled($0.rawValue) })
    }
}
