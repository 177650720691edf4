#if os(Linux)
import Foundation
import Glibc
import TernKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `tern serve` in a temporary folder (its database, server key and simulator state), on a free port, with
/// its demo app: the server the SDK talks to in the integration tests. The binary is `TERN_BINARY`, by default
/// `/tmp/ternkit-tern/tern` (a copy of the main package's `.build/debug/tern`).
///
/// It is started with `posix_spawn` rather than Foundation's `Process`: on Linux, `Process.run()` waits on a socket
/// pair that a child started at the same moment can inherit (it then waits until that child exits), and it waits on
/// a thread of the tests' small concurrency pool; with two cores, two such waits stalled every test. Here the child
/// inherits nothing but its output, and every wait is asynchronous.
final class TernServerProcess: @unchecked Sendable {
    // @unchecked: the banner and secrets are written by `start` before anything reads them; `port` and the child,
    // which the SDK's transports and `deinit` read meanwhile, are behind a lock.

    static var binary: String { ProcessInfo.processInfo.environment["TERN_BINARY"] ?? "/tmp/ternkit-tern/tern" }
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: binary) }

    let folder: URL
    private let lock = NSLock()
    private var _port = 0
    private var child: pid_t?
    private(set) var port: Int {
        get { lock.withLock { _port } }
        set { lock.withLock { _port = newValue } }
    }
    private(set) var banner = ""
    /// The demo app's secrets, from the first start's banner.
    private(set) var appKey = ""
    private(set) var masterSecret = ""
    private(set) var identitySecret = ""
    /// The in-process APNs simulator's control API (it moves on each start).
    private(set) var simulatorControl: URL?

    private init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ternkit-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        Leftovers.track(folder, pid: nil)
    }

    /// A new server with its demo app.
    static func start() async throws -> TernServerProcess {
        let server = try TernServerProcess()
        try await server.start()
        guard let appKey = server.value(after: "app key"), let master = server.value(after: "master secret"),
            let identity = server.value(after: "identity secret")
        else {
            await server.stop()
            throw TestFailure("tern serve printed no demo app secrets; its banner was:\n\(server.banner)")
        }
        server.appKey = appKey
        server.masterSecret = master
        server.identitySecret = identity
        return server
    }

    /// Starts it (again after ``stop()``: the same data, on a new port; see ``Forwarding``).
    func start() async throws {
        let restart = port != 0
        let errors = folder.appendingPathComponent("stderr.log")
        let (pid, output) = try Self.spawn([Self.binary, "serve", "--port", "0", "--log-level", "error"], in: folder, errors: errors)
        lock.withLock { child = pid }
        Leftovers.track(folder, pid: pid)
        // The banner ends with the demo's curl lines on a first start, with the simulator's line on a restart.
        banner = await Self.read(output, within: 30) { text in
            text.contains("pushes?wait") || (restart && text.contains("control API") && text.hasSuffix("\n"))
        }
        guard let range = banner.range(of: "http://127.0.0.1:"), let port = Int(banner[range.upperBound...].prefix(while: \.isNumber)) else {
            await stop()
            let text = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw TestFailure("tern serve printed no address; its output was:\n\(banner)\n\(text)")
        }
        self.port = port
        if let range = banner.range(of: "control API http://127.0.0.1:"), let control = Int(banner[range.upperBound...].prefix(while: \.isNumber)) {
            simulatorControl = URL(string: "http://127.0.0.1:\(control)")
        }
    }

    /// Stops it as Ctrl-C does (the server closes the channel connections), and waits (20 s at most) for it to exit.
    func stop() async {
        guard let pid = lock.withLock({ child }) else { return }
        kill(pid, SIGINT)
        for _ in 0..<1000 where !Self.exited(pid) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if !Self.exited(pid) {
            kill(pid, SIGKILL)
            for _ in 0..<250 where !Self.exited(pid) {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        lock.withLock { child = nil }
        Leftovers.track(folder, pid: nil)
    }

    deinit {
        // A test that did not stop it: SIGKILL, which ends it within milliseconds (short enough to wait for here),
        // then the folder, once nothing writes in it any more.
        if let pid = lock.withLock({ child }) {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
        try? FileManager.default.removeItem(at: folder)
        Leftovers.forget(folder)
    }

    /// Whether the child exited. Reaped here, or by whoever reaps children in this process (then it is gone).
    private static func exited(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        if reaped == pid { return true }
        return reaped == -1 && errno == ECHILD && kill(pid, 0) != 0
    }

    /// Starts `arguments` in `folder` with its standard output on a pipe (returned) and its standard error in
    /// `errors`. It inherits no other descriptor: a shell closes them and changes folder before it becomes the
    /// command (glibc's `closefrom` and `chdir` spawn actions are not in Swift's view of it).
    private static func spawn(_ arguments: [String], in folder: URL, errors: URL) throws -> (pid_t, Int32) {
        var pipe: [Int32] = [-1, -1]
        guard Glibc.pipe(&pipe) == 0 else { throw TestFailure("pipe: errno \(errno)") }
        _ = fcntl(pipe[0], F_SETFD, FD_CLOEXEC)
        let errorFile = open(errors.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard errorFile >= 0 else { throw TestFailure("open \(errors.path): errno \(errno)") }
        defer {
            close(pipe[1])
            close(errorFile)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorFile, 2)
        // The child starts with no signal blocked and SIGINT at its default, whatever this process set.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGINT)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let script =
            #"for fd in /proc/self/fd/*; do n=${fd##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done 2>/dev/null; cd "$1" && exec "${@:2}""#
        let shell = ["/bin/bash", "-c", script, "tern-serve", folder.path] + arguments
        let argv = shell.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, shell[0], &actions, &attributes, argv, environ)
        guard status == 0 else {
            close(pipe[0])
            throw TestFailure("posix_spawn \(arguments[0]): \(status)")
        }
        return (pid, pipe[0])
    }

    /// Reads `fd` on a thread of its own until `complete` says the text is whole, the child closes it, or `seconds`
    /// pass; then goes on reading and dropping, so the child never blocks on a full pipe, until it closes.
    private static func read(_ fd: Int32, within seconds: Double, until complete: @escaping @Sendable (String) -> Bool) async -> String {
        let state = LockedText()
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = Foundation.read(fd, &buffer, buffer.count)
                if count <= 0 { break }
                state.append(String(decoding: buffer[0..<count], as: UTF8.self), complete: complete)
            }
            state.finish()
            close(fd)
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await state.waitUntilDone() }
            group.addTask { try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000))) }
            await group.next()
            group.cancelAll()
            state.finish()
        }
        return state.text
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    func configuration() -> TernConfiguration {
        var configuration = TernConfiguration(serverURL: url, appID: "demo", appKey: appKey)
        configuration.requestTimeout = 10
        configuration.channel.reconnect = RetryBackoff(initial: 0.05, maximum: 0.5)
        configuration.channel.connectTimeout = 5
        return configuration
    }

    func aliasToken(for user: String, deviceID: String? = nil) -> String {
        AliasTokenMinter.token(user: user, app: "demo", identitySecret: identitySecret, deviceID: deviceID)
    }

    private func value(after label: String) -> String? {
        guard let line = banner.split(separator: "\n").first(where: { $0.contains(label) }) else { return nil }
        return line.split(separator: " ").first(where: { $0.hasPrefix("t") && $0.contains("_") }).map(String.init)
    }

    // MARK: The backend's side, with the master secret

    /// Calls the API as the app's backend. - Returns: the status and the JSON answer.
    @discardableResult
    func backend(_ method: String, _ path: String, _ body: String? = nil) async throws -> (status: Int, json: TernJSON?) {
        try await Self.call(method, url.appendingPathComponent(path), bearer: masterSecret, body: body)
    }

    /// A push through the master secret, waiting for its outcome. - Returns: its id.
    func push(_ body: String) async throws -> String {
        let (status, json) = try await backend("POST", "v1/apps/demo/pushes?wait=10", body)
        guard (200..<300).contains(status), let id = json?["id"]?.stringValue else {
            throw TestFailure("push answered \(status): \(String(describing: json))")
        }
        return id
    }

    /// A push's counts (`acked`, `fellBackToAPNs`, `ackedAfterFallback`, `opened`, …).
    func counts(ofPush id: String) async throws -> TernJSON? {
        try await backend("GET", "v1/apps/demo/pushes/\(id)").json?["counts"]
    }

    /// The payloads the in-process APNs simulator accepted for `token`, oldest first.
    func apnsPayloads(token: String) async throws -> [[String: TernJSON]] {
        guard let control = simulatorControl else { throw TestFailure("no simulator control API in the banner") }
        let (_, json) = try await Self.call(
            "GET", URL(string: "\(control.absoluteString)/notifications?token=\(token)&limit=1000")!, bearer: nil, body: nil)
        guard case .array(let items)? = json?["items"] else { return [] }
        return items.compactMap { item in
            guard let text = item["payload"]?.stringValue,
                case .object(let payload)? = try? JSONDecoder().decode(TernJSON.self, from: Data(text.utf8))
            else { return nil }
            return payload
        }
    }

    static func call(_ method: String, _ url: URL, bearer: String?, body: String?) async throws -> (status: Int, json: TernJSON?) {
        var request = URLRequest(url: url, timeoutInterval: 20)
        // The path may carry a query (appendingPathComponent escaped its "?").
        if let decoded = url.absoluteString.removingPercentEncoding, let fixed = URL(string: decoded) { request.url = fixed }
        request.httpMethod = method
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSessionHTTPTransport(session: .shared).send(request)
        let status = response.statusCode
        return (status, try? JSONDecoder().decode(TernJSON.self, from: data))
    }
}

/// The servers (and folders) of this test process, cleaned up when it exits: a test's last references (the SDK's
/// tasks winding down after cancellation) can outlive the run by a moment, and a server must not outlive the tests.
private enum Leftovers {
    private static let lock = NSLock()
    /// Guarded by `lock`.
    nonisolated(unsafe) private static var servers: [URL: pid_t?] = [:]
    private static let installed: Void = { atexit { Leftovers.cleanUp() } }()

    static func track(_ folder: URL, pid: pid_t?) {
        _ = installed
        lock.withLock { servers[folder] = .some(pid) }
    }

    static func forget(_ folder: URL) {
        _ = lock.withLock { servers.removeValue(forKey: folder) }
    }

    private static func cleanUp() {
        for (folder, pid) in lock.withLock({ servers }) {
            if let pid = pid ?? nil {
                kill(pid, SIGKILL)
                _ = waitpid(pid, nil, 0)
            }
            try? FileManager.default.removeItem(at: folder)
        }
    }
}

/// Text read so far, and a waiter told once it is complete (or the reading ended).
final class LockedText: @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    private let lock = NSLock()
    private var _text = ""
    private var done = false
    private var waiter: CheckedContinuation<Void, Never>?

    var text: String { lock.withLock { _text } }

    func append(_ more: String, complete: (String) -> Bool) {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            guard !done else { return nil }
            _text += more
            guard complete(_text) else { return nil }
            done = true
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume()
    }

    func finish() {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            done = true
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume()
    }

    func waitUntilDone() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = lock.withLock { () -> Bool in
                    if done { return true }
                    waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            finish()
        }
    }
}
#endif
