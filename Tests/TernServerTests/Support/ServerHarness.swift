import Foundation
import Synchronization
import Logging
import TernAPNs
import TernEmbeddedSimulator
import TernServer
import TernTestSupport
import Testing

/// A running `tern serve` (in-process, port 0, its own temporary folder) with the demo app on the built-in simulator,
/// called over sockets. For what only a listening server shows: the HTTP parser's own refusals (431), and the
/// several-nodes suite (it runs only with PostgreSQL, so it was not moved without a run to prove it). The other API
/// tests use ``RouterHarness``.
struct RunningServer: TestServer {
    let server: TernServer
    let banner: TernServer.Banner
    let folder: URL
    /// The API with the admin token.
    let admin: HTTPTestClient
    /// The API with the demo app's master secret.
    let master: HTTPTestClient
    /// The API with the demo app's app key.
    let device: HTTPTestClient
    /// The built-in simulator's control API.
    let simulator: HTTPTestClient
    /// The demo app's identity secret (signs alias tokens).
    let identitySecret: String
    /// The device secrets the demo app's registrations answered, by device id.
    let deviceSecrets = DeviceSecrets()

    static let adminToken = "test-admin-token-0123456789"
}

enum ServerHarness {
    /// One server that many small tests share (each uses device ids of its own), started by the first that asks and
    /// left to end with the test process.
    static let shared = Task { () throws -> RunningServer in
        let started = AsyncStream.makeStream(of: RunningServer.self)
        let running = Task {
            try await withServer { server in
                started.continuation.yield(server)
                // Serves until the test process ends (this waits for nothing to happen; no test asserts on it).
                try await Task.sleep(for: .seconds(86_400))
            }
        }
        for await server in started.stream { return server }
        try await running.value
        throw HTTPTestClientError(description: "the shared server stopped before it was ready")
    }

    /// Runs a server for `body` and stops it gracefully afterwards; `configure` adjusts the defaults.
    static func withServer<T: Sendable>(
        folder given: URL? = nil,
        configure: (inout TernServerConfiguration) -> Void = { _ in },
        clocks: ServerClocks = .system,
        logs: LogRecorder? = nil,
        _ body: (RunningServer) async throws -> T
    ) async throws -> T {
        let folder = given ?? FileManager.default.temporaryDirectory.appendingPathComponent("tern-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var configuration = configuration(in: folder)
        configure(&configuration)
        var logger = logs?.logger ?? Logger(label: "tern.test")
        logger.logLevel = .warning
        let server = TernServer(
            configuration: configuration, metrics: nil, logger: logger, clocks: clocks,
            embeddedAPNs: BuiltInSimulator.factory(
                stateDirectory: URL(fileURLWithPath: configuration.simulator.stateDirectory, isDirectory: true), logger: logger))
        let ready = AsyncStream.makeStream(of: TernServer.Banner.self)
        let serving = Task {
            try await server.run(gracefulShutdownSignals: []) { banner in
                ready.continuation.yield(banner)
                ready.continuation.finish()
            }
        }
        do {
            let banner = try await withTimeout(30, "the server to start") {
                var iterator = ready.stream.makeAsyncIterator()
                guard let banner = await iterator.next() else { throw HTTPTestClientError(description: "the server stopped before it was ready") }
                return banner
            }
            let port = server.boundPort!
            let state = running(server, banner, folder: folder, port: port)
            let result = try await body(state)
            await server.shutdown()
            try await withTimeout(20, "the server to stop") { try await serving.value }
            if given == nil { try? FileManager.default.removeItem(at: folder) }
            return result
        } catch {
            await server.shutdown()
            serving.cancel()
            _ = try? await serving.value
            if given == nil { try? FileManager.default.removeItem(at: folder) }
            throw error
        }
    }

    /// The tests' defaults: everything in `folder` (the SQLite file, the server key, the simulator's CA), any free
    /// port, a known admin token.
    static func configuration(in folder: URL) -> TernServerConfiguration {
        var configuration = TernServerConfiguration()
        configuration.http.port = 0
        configuration.database.path = folder.appendingPathComponent("tern.db").path
        configuration.server.keyFile = folder.appendingPathComponent("tern.key").path
        configuration.simulator.stateDirectory = folder.appendingPathComponent("simulator").path
        configuration.admin.token = RunningServer.adminToken
        // The suite runs in parallel on two cores: the simulator's legacy gateway may answer an error later than the
        // default half second, and a rejected token would be counted as accepted (a push then settles 2 s later).
        configuration.apns.legacyReplayWindow = .seconds(2)
        return configuration
    }

    private static func running(_ server: TernServer, _ banner: TernServer.Banner, folder: URL, port: Int) -> RunningServer {
        // The demo's secrets are printed on the first start only; a restarted server (same folder) reuses them.
        let file = folder.appendingPathComponent("demo-secrets.txt")
        var secrets = banner.demo.map { (appKey: $0.appKey, masterSecret: $0.masterSecret, identitySecret: $0.identitySecret) }
        if let demo = banner.demo {
            try? "\(demo.appKey)\n\(demo.masterSecret)\n\(demo.identitySecret)\n".write(to: file, atomically: true, encoding: .utf8)
        } else if let lines = try? String(contentsOf: file, encoding: .utf8).split(separator: "\n"), lines.count == 3 {
            secrets = (String(lines[0]), String(lines[1]), String(lines[2]))
        }
        return RunningServer(
            server: server, banner: banner, folder: folder,
            admin: HTTPTestClient(port: port, bearer: RunningServer.adminToken),
            master: HTTPTestClient(port: port, bearer: secrets?.masterSecret),
            device: HTTPTestClient(port: port, bearer: secrets?.appKey),
            simulator: HTTPTestClient(port: banner.simulator?.controlPort ?? 0), identitySecret: secrets?.identitySecret ?? "")
    }
}

/// Device secrets kept by a test, as an app keeps its own in the keychain.
final class DeviceSecrets: Sendable {
    private let secrets = Mutex<[String: String]>([:])

    subscript(device: String) -> String? {
        get { secrets.withLock { $0[device] } }
        set { secrets.withLock { $0[device] = newValue } }
    }
}
