import Foundation
import TernTestSupport

/// A `tern serve` process in its own working folder (database, server key, simulator state), on a free port.
final class ServeProcess {
    let process = Process()
    let folder: URL
    private let output = Pipe()
    private(set) var banner = ""
    private(set) var port = 0
    private var logURL: URL { folder.appendingPathComponent("serve.log") }

    /// - Parameter environment: added to this process's (e.g. `TERN_ADMIN_TOKEN`).
    init(folder: URL, arguments: [String] = [], environment: [String: String] = [:]) throws {
        self.folder = folder
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: Commands.tern)
        process.arguments = ["serve", "--port", "0", "--log-level", "warning"] + arguments
        process.currentDirectoryURL = folder
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = output
        // Its log (warnings and worse) to a file in its folder, for a failing test to quote: see ``diagnosis()``.
        guard FileManager.default.createFile(atPath: logURL.path, contents: nil) else {
            throw CLITestError("cannot create the server's log file \(logURL.path)")
        }
        let log = try FileHandle(forWritingTo: logURL)
        process.standardError = log
        try process.run()
        try log.close()  // the child has its own copy
        try readBanner()
    }

    /// Reads stdout until the banner is complete, within 30 seconds.
    private func readBanner() throws {
        let deadline = Date().addingTimeInterval(30)
        let handle = output.fileHandleForReading
        while !(banner.contains("Tern is serving") && (banner.hasSuffix("\n"))), Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            banner += String(decoding: chunk, as: UTF8.self)
            // The demo block ends with the push example.
            if banner.contains("Tern is serving"), !banner.contains("demo app") || banner.contains("pushes?wait") { break }
        }
        guard let range = banner.range(of: "http://127.0.0.1:"), let port = Int(banner[range.upperBound...].prefix(while: \.isNumber)) else {
            process.terminate()
            throw CLITestError("tern serve printed no address; output was:\n\(banner)")
        }
        self.port = port
    }

    /// A value printed after `label` in the banner (the demo's secrets, the admin token).
    func value(after label: String) -> String? {
        guard let line = banner.split(separator: "\n").first(where: { $0.contains(label) }) else { return nil }
        return line.split(separator: " ").first(where: { $0.hasPrefix("t") && $0.contains("_") }).map(String.init)
    }

    func client(bearer: String?) -> HTTPTestClient { HTTPTestClient(port: port, bearer: bearer) }

    /// SIGINT, as Ctrl-C; returns the exit status.
    func interrupt() -> Int32 {
        process.interrupt()
        return wait()
    }

    /// SIGKILL: no chance to finish anything.
    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        _ = wait()
    }

    private func wait() -> Int32 {
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Whether it runs (or how it ended) and the last lines it logged: what a failing test reports about it.
    func diagnosis(lines: Int = 30) -> String {
        let state = process.isRunning ? "running" : "exited with status \(process.terminationStatus)"
        let log = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
        let tail = log.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
        return "tern serve on port \(port): \(state); its log ends:\n\(tail.isEmpty ? "(nothing)" : tail)"
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}

/// Devices the `tern serve` end-to-end tests register, and what a `tern simulator` received.
extension ServeProcess {
    /// Creates the app `shop`, delivering to `simulator` with its demo signing key, through this node's admin API.
    /// - Returns: the app key and the master secret.
    func createShopApp(on simulator: SimulatorProcess, admin: String) async throws -> (appKey: String, master: String) {
        let keyPEM = try String(contentsOf: simulator.stateDirectory.appendingPathComponent("SIMKEY0001.p8"), encoding: .utf8)
        let caPEM = try String(contentsOf: simulator.stateDirectory.appendingPathComponent("ca.pem"), encoding: .utf8)
        func escaped(_ text: String) -> String { text.replacingOccurrences(of: "\n", with: "\\n") }
        let created = try await client(bearer: admin).post("/v1/apps", """
            {"id": "shop", "topic": "com.example.app", "environment": "custom",
             "endpoint": {"host": "127.0.0.1", "port": \(simulator.port), "caPEM": "\(escaped(caPEM))"},
             "credentials": {"type": "token", "keyPEM": "\(escaped(keyPEM))", "keyID": "SIMKEY0001", "teamID": "SIMTEAM001"}}
            """)
        guard created.status == 201, case .string(let appKey)? = try created.json()["appKey"],
            case .string(let master)? = try created.json()["masterSecret"]
        else { throw CLITestError("creating the app: \(created.status) \(created.text)") }
        return (appKey, master)
    }
}

enum Devices {
    /// Registers devices 0..<count (ids and tokens from ``ServeCommandTests``), tagged `all`, for app `shop`, with
    /// sixteen workers taking `clients` in turn.
    static func register(_ count: Int, through clients: [HTTPTestClient]) async throws {
        let workers = 16
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                let client = clients[worker % clients.count]
                group.addTask {
                    for number in stride(from: worker, to: count, by: workers) {
                        let response = try await client.put(
                            "/v1/apps/shop/devices/\(ServeCommandTests.device(number))",
                            #"{"token": "\#(ServeCommandTests.token(number))", "environment": "production", "tags": ["all"]}"#)
                        guard response.status == 200 else { throw CLITestError("registration \(number): \(response.text)") }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// How many times each token arrived at the simulator behind `control`.
    static func received(from control: HTTPTestClient) async throws -> [String: Int] {
        var received: [String: Int] = [:]
        var after = 0
        while true {
            let page = try await control.get("/notifications?after=\(after)&limit=10000").json()
            guard case .array(let items)? = page["items"], !items.isEmpty else { break }
            for item in items { if case .string(let token)? = item["token"] { received[token, default: 0] += 1 } }
            guard case .int(let next)? = page["next"] else { break }
            after = next
        }
        return received
    }
}
