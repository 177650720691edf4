import Foundation
import TernTestSupport
import Testing

/// A start that cannot bind, open or reach something says so in one line and exits non-zero within 2 s, before
/// anything else starts; and a stop always ends, whatever the server is busy with.
@Suite(.serialized) struct StartupFailureTests {
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-start-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// `tern serve` with `arguments`, timed; the result must be a failure that names `expected` in one line.
    static func expectOneLineFailure(_ arguments: [String], naming expected: String, environment: [String: String] = [:]) throws {
        let started = Date()
        let result = try Commands.run(Commands.tern, ["serve", "--no-demo"] + arguments, timeout: 20, environment: environment)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status != 0, "\(arguments): exit status 0")
        #expect(elapsed < 2, "\(arguments): took \(elapsed) s to fail")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(arguments): stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stderr.contains(expected), "\(arguments): stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stdout.isEmpty, "\(arguments): printed a banner: \(result.stdout.prefix(500))")
    }

    /// `tern sevre --help` printed the overview and exited 0, as if the mistyped word were not there.
    @Test func aFirstWordThatIsNoCommandIsAnErrorEvenBeforeHelp() throws {
        for arguments in [["sevre"], ["sevre", "--help"]] {
            let result = try Commands.run(Commands.tern, arguments)
            #expect(result.status == 64, "\(arguments): exit status \(result.status)")
            #expect(result.stderr.contains("'sevre' is not a tern command (see tern --help)"), "\(arguments): \(result.stderr)")
        }
        // The commands, their help, `help` and the overview still answer.
        for arguments in [["serve", "--help"], ["help", "serve"], ["--help"], ["simulator", "run", "--help"]] {
            let result = try Commands.run(Commands.tern, arguments)
            #expect(result.status == 0, "\(arguments): exit status \(result.status): \(result.stderr)")
            #expect(result.stdout.contains("USAGE: tern"), "\(arguments): \(result.stdout)")
        }
    }

    @Test func aPortInUseIsOneLineAndAFailingExitNotALogFlood() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // Another server holds the port, as in the report (`python3 -m http.server 8080 & tern serve`).
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", """
            import socket, sys, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen()
            print(s.getsockname()[1], flush=True); time.sleep(60)
            """]
        let output = Pipe()
        holder.standardOutput = output
        try holder.run()
        defer { holder.terminate() }
        let port = try #require(Int(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        try Self.expectOneLineFailure(
            ["--port", "\(port)", "--database", folder.appendingPathComponent("tern.db").path, "--server-key-file", folder.appendingPathComponent("tern.key").path],
            naming: "127.0.0.1:\(port): the address is in use")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("tern.db").path), "the store was opened before the port was checked")
    }

    /// A restart right after a server whose connections the server side closed: their sockets wait in TIME_WAIT on
    /// the port for a minute, which is no reason to refuse it (the API's own listener reuses such addresses).
    @Test func aPortLeftInTimeWaitByTheLastServersConnectionsIsServedAgain() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let leaver = Process()
        leaver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        leaver.arguments = ["python3", "-c", """
            import socket
            server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", 0)); server.listen(); port = server.getsockname()[1]
            client = socket.create_connection(("127.0.0.1", port))
            accepted, _ = server.accept()
            accepted.close()  # the server's side closes first: its socket on the port goes to TIME_WAIT
            client.recv(1); client.close(); server.close()
            print(port, flush=True)
            """]
        let output = Pipe()
        leaver.standardOutput = output
        try leaver.run()
        leaver.waitUntilExit()
        let port = try #require(Int(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        let serve = try ServeProcess(folder: folder, arguments: ["--port", "\(port)", "--no-simulator", "--no-demo"])
        #expect(serve.port == port)
        #expect(serve.interrupt() == 0)
    }

    /// With `--port 0` the host went unchecked, and an address not of this machine failed later in five log lines.
    @Test func anAddressNotOfThisMachineIsOneLineWhateverThePort() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let files = ["--database", folder.appendingPathComponent("tern.db").path, "--server-key-file", folder.appendingPathComponent("tern.key").path]
        for port in ["0", "8080"] {
            // TEST-NET-1 (RFC 5737): documentation's own address, never a machine's.
            try Self.expectOneLineFailure(["--host", "192.0.2.1", "--port", port] + files, naming: "cannot listen on 192.0.2.1:\(port)")
        }
    }

    @Test func aDatabaseThatCannotBeOpenedIsOneLine() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = ["--server-key-file", folder.appendingPathComponent("tern.key").path, "--port", "0", "--no-simulator"]
        // A folder where the file should be.
        let directory = folder.appendingPathComponent("a-folder.db")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.expectOneLineFailure(["--database", directory.path] + key, naming: "database")
        // A file that is not a database.
        let garbage = folder.appendingPathComponent("garbage.db")
        try Data(repeating: 0x42, count: 8192).write(to: garbage)
        try Self.expectOneLineFailure(["--database", garbage.path] + key, naming: "database")
        // A folder that does not exist.
        try Self.expectOneLineFailure(["--database", folder.appendingPathComponent("nowhere/tern.db").path] + key, naming: "database")
    }

    @Test func aBadServerKeyIsOneLine() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("tern.key")
        try Data("not base64 at all!\n".utf8).write(to: keyFile)
        let database = ["--database", folder.appendingPathComponent("tern.db").path, "--port", "0", "--no-simulator"]
        try Self.expectOneLineFailure(database + ["--server-key-file", keyFile.path], naming: "server key \(keyFile.path)")
        try Data((Data(repeating: 1, count: 16).base64EncodedString() + "\n").utf8).write(to: keyFile)
        try Self.expectOneLineFailure(database + ["--server-key-file", keyFile.path], naming: "32 bytes")
        // A key file that is not text was taken for a missing one and replaced by a new key, which left every sealed
        // credential unopenable. It is refused and left as it was.
        let notText = Data([0xFF, 0xFE, 0x00] + Array("garbage".utf8))
        try notText.write(to: keyFile)
        try Self.expectOneLineFailure(database + ["--server-key-file", keyFile.path], naming: "server key")
        #expect(try Data(contentsOf: keyFile) == notText)
        // A folder where the key file should be: it cannot be read, and nothing is made in its place.
        let folderKey = folder.appendingPathComponent("key-folder")
        try FileManager.default.createDirectory(at: folderKey, withIntermediateDirectories: true)
        try Self.expectOneLineFailure(database + ["--server-key-file", folderKey.path], naming: "cannot read the file")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folderKey.path).isEmpty)
    }

    @Test func aServerKeyFileOtherUsersMayReadIsWarnedOfAndAnOwnerOnlyOneIsNot() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("tern.key")
        try Data((Data(repeating: 7, count: 32).base64EncodedString() + "\n").utf8).write(to: keyFile)
        let arguments = ["--no-simulator", "--server-key-file", keyFile.path, "--database", folder.appendingPathComponent("tern.db").path]
        let warning = "other users may read it (mode 644)"

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile.path)
        let exposed = try ServeProcess(folder: folder.appendingPathComponent("first"), arguments: arguments)
        #expect(exposed.diagnosis(lines: 50).contains(warning), "\(exposed.diagnosis(lines: 50))")
        #expect(exposed.interrupt() == 0)

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        let ownerOnly = try ServeProcess(folder: folder.appendingPathComponent("second"), arguments: arguments)
        #expect(!ownerOnly.diagnosis(lines: 50).contains("other users may read it"), "\(ownerOnly.diagnosis(lines: 50))")
        #expect(ownerOnly.interrupt() == 0)
    }

    @Test func aServerKeyThatCannotBeWrittenWholeLeavesNoFileBehindAndTheNextStartMakesIt() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("tern.key")
        let arguments = [
            "serve", "--no-demo", "--no-simulator", "--port", "0", "--server-key-file", keyFile.path,
            "--database", folder.appendingPathComponent("tern.db").path,
        ]
        // No byte may be written (a full disk, as far as the write is concerned: EFBIG, the signal ignored).
        let result = try Commands.run(
            "/bin/sh", ["-c", #"trap "" XFSZ; ulimit -f 0; exec "$0" "$@""#, Commands.tern] + arguments, timeout: 20)
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stderr.contains("server key \(keyFile.path): cannot create the file"), "\(result.stderr)")
        // An empty tern.key was left, and every later start refused it ("must be 32 bytes, not 0").
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("tern.key") } == [])

        let serve = try ServeProcess(folder: folder, arguments: ["--no-demo", "--no-simulator", "--server-key-file", keyFile.path])
        #expect(serve.interrupt() == 0)
        #expect(try Data(contentsOf: keyFile).count == 45, "a key of 32 bytes in base64, with its newline")
    }

    @Test func aSecondServeOnTheSameSQLiteFileIsOneLineAndTheFileIsFreeOnceTheFirstStops() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try ServeProcess(folder: folder, arguments: ["--no-demo", "--no-simulator"])
        // Both in one folder: each would think itself the only node on the file.
        let database = folder.appendingPathComponent("tern.db").path
        try Self.expectOneLineFailure(
            ["--database", database, "--port", "0", "--no-simulator", "--server-key-file", folder.appendingPathComponent("tern.key").path],
            naming: "another process uses this database")
        #expect(first.interrupt() == 0)
        let again = try ServeProcess(folder: folder, arguments: ["--no-demo", "--no-simulator"])
        #expect(again.interrupt() == 0)
    }

    @Test func aDatabaseThatTakesNoWritesAtStartIsOneLine() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try ServeProcess(folder: folder, arguments: ["--no-demo", "--no-simulator"])
        #expect(first.interrupt() == 0)
        // Another program (sqlite3, a backup tool) holds the file's write lock: reads work, writes wait and fail.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = [
            "python3", "-c",
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)",
            folder.appendingPathComponent("tern.db").path,
        ]
        let output = Pipe()
        holder.standardOutput = output
        try holder.run()
        defer { holder.terminate() }
        #expect(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("locked"))

        let result = try Commands.run(
            Commands.tern, ["serve", "--no-demo", "--no-simulator", "--port", "0", "--database", folder.appendingPathComponent("tern.db").path,
                            "--server-key-file", folder.appendingPathComponent("tern.key").path], timeout: 30)
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stderr.contains("cannot start: database: cannot store the admin token"), "\(result.stderr)")
        #expect(result.stderr.contains("locked"), "SQLite's own words: \(result.stderr)")
    }

    /// A first start that fails after storing the admin token's hash lost the token for good: it is printed once,
    /// by the banner, and the next start printed none (nor the demo app's secrets). The simulator's folder is made
    /// before anything is stored now, and a start that ends before its banner takes back what it made to show once.
    @Test func aFirstStartThatFailsLeavesTheAdminTokenAndTheDemoToTheNextStart() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // A file where the simulator's folder should be, as in the report (`echo x > notadir`).
        let blocked = folder.appendingPathComponent("notadir")
        try Data("x".utf8).write(to: blocked)
        let files = ["--database", folder.appendingPathComponent("tern.db").path, "--server-key-file", folder.appendingPathComponent("tern.key").path]
        let result = try Commands.run(
            Commands.tern, ["serve", "--port", "0"] + files, timeout: 20, environment: ["TERN_SIMULATOR_STATE_DIRECTORY": blocked.path])
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stderr.contains("cannot start: simulator.stateDirectory \(blocked.path)"), "\(result.stderr)")
        #expect(!result.stderr.contains("NSCocoaErrorDomain"), "\(result.stderr)")
        #expect(result.stdout.isEmpty)

        try FileManager.default.removeItem(at: blocked)
        let serve = try ServeProcess(folder: folder, arguments: files, environment: ["TERN_SIMULATOR_STATE_DIRECTORY": blocked.path])
        defer { _ = serve.interrupt() }
        let token = try #require(serve.value(after: "admin token"), "no admin token in the banner:\n\(serve.banner)")
        #expect(serve.value(after: "app key") != nil, "no demo app in the banner:\n\(serve.banner)")
        let apps = try await serve.client(bearer: token).get("/v1/apps")
        #expect(apps.status == 200, "the printed admin token does not manage apps: \(apps.status)")
    }

    @Test func anUnreachablePostgreSQLIsOneLineWithoutThePassword() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let arguments = [
            "--database", "postgres://tern:hunter2-secret@127.0.0.1:1/tern", "--server-key-file", folder.appendingPathComponent("tern.key").path,
            "--port", "0", "--no-simulator",
        ]
        let result = try Commands.run(Commands.tern, ["serve", "--no-demo"] + arguments, timeout: 20)
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "stderr was:\n\(result.stderr.prefix(2000))")
        #expect(result.stderr.contains("database"))
        #expect(!result.stderr.contains("hunter2"))
        try Self.expectOneLineFailure(arguments, naming: "database")
    }

    @Test func newDataFilesAreOwnerOnlyWhateverTheUmask() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // No umask at all, the harshest a process can be started with; the test process's own is whatever CI has.
        let previous = umask(0)
        defer { umask(previous) }
        let serve = try ServeProcess(folder: folder)
        _ = serve.interrupt()
        for name in ["tern.db", "tern.db-wal", "tern.db-shm", "tern.key", ".tern/simulator/ca-key.pem", ".tern/simulator/ca.pem"] {
            let path = folder.appendingPathComponent(name).path
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode.map { $0 & 0o077 } == 0, "\(name) is \(String(mode ?? 0, radix: 8))")
        }
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("tern.db").path))
        for name in [".tern", ".tern/simulator"] {
            let mode = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.posixPermissions] as? Int
            #expect(mode.map { $0 & 0o077 } == 0, "\(name) is \(String(mode ?? 0, radix: 8))")
        }
    }

    @Test func sigtermEndsTheProcessWithinTheShutdownTimeEvenWhileAPNsHoldsEveryAnswer() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let serve = try await Self.serveWithAPushOnTheWire(in: folder, answeringAfter: 60_000, shutdownTimeout: 2)
        let stopping = Date()
        kill(serve.process.processIdentifier, SIGTERM)
        serve.process.waitUntilExit()
        let took = Date().timeIntervalSince(stopping)
        // The 2 s graceful time, then the embedded simulator's 1 s grace and the rest of the cancellation.
        #expect(took < 2 + 3, "SIGTERM took \(took) s with a 2 s shutdown time")
        #expect(serve.process.terminationStatus == 0)
        let log = try String(contentsOf: folder.appendingPathComponent("serve.log"), encoding: .utf8)
        #expect(log.contains("stopping: no new requests; the chunks in flight are sent and recorded, for at most 2 s"), "\(serve.diagnosis())")
        #expect(log.split(separator: "\n").contains { $0.hasSuffix("] stopped") }, "\(serve.diagnosis())")
    }

    /// A second Ctrl-C did nothing: the operator waited out the whole shutdown time (30 s by default).
    @Test func aSecondSignalStopsAtOnceWhileTheFirstOnesGracefulStopWaitsForAPNs() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let serve = try await Self.serveWithAPushOnTheWire(in: folder, answeringAfter: 60_000, shutdownTimeout: 60)
        let log = folder.appendingPathComponent("serve.log")
        kill(serve.process.processIdentifier, SIGINT)
        // Once the graceful stop has begun, the second.
        try await waitUntil("the graceful stop begins", within: 10) {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("] stopping: no new requests")
        }
        let second = Date()
        kill(serve.process.processIdentifier, SIGINT)
        serve.process.waitUntilExit()
        let took = Date().timeIntervalSince(second)
        // The embedded simulator's 1 s grace and the rest of the cancellation, not the 60 s shutdown time.
        #expect(took < 5, "the second SIGINT took \(took) s")
        #expect(serve.process.terminationStatus == 0)
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("a second signal: stopping now"), "\(serve.diagnosis())")
        #expect(text.split(separator: "\n").contains { $0.hasSuffix("] stopped") }, "\(serve.diagnosis())")
    }

    /// The process traps the stop signals twice (the service group's and the second-signal watch): one signal must
    /// still be one graceful stop, which waits for APNs' answers.
    @Test func oneSignalStillWaitsForTheAnswersInFlight() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let serve = try await Self.serveWithAPushOnTheWire(in: folder, answeringAfter: 3_000, shutdownTimeout: 60)
        let stopping = Date()
        kill(serve.process.processIdentifier, SIGINT)
        serve.process.waitUntilExit()
        let took = Date().timeIntervalSince(stopping)
        #expect(took > 1.5, "one SIGINT stopped after \(took) s, before the answers due up to 3 s after the push")
        #expect(serve.process.terminationStatus == 0)
        let text = try String(contentsOf: folder.appendingPathComponent("serve.log"), encoding: .utf8)
        #expect(!text.contains("a second signal: stopping now"), "\(serve.diagnosis())")
    }

    /// A server at info (for the lines that say when the stop began and ended) whose APNs (the built-in simulator)
    /// answers after `latency` ms, with a push to 20 devices whose notifications the simulator has all received.
    private static func serveWithAPushOnTheWire(in folder: URL, answeringAfter latency: Int, shutdownTimeout: Int) async throws -> ServeProcess {
        let serve = try ServeProcess(
            folder: folder, arguments: ["--log-level", "info"], environment: ["TERN_SERVER_SHUTDOWN_TIMEOUT": "\(shutdownTimeout)"])
        let appKey = try #require(serve.value(after: "app key"))
        let master = try #require(serve.value(after: "master secret"))
        let control = try #require(serve.banner.range(of: "control API http://127.0.0.1:").map { Int(serve.banner[$0.upperBound...].prefix(while: \.isNumber)) } ?? nil)
        let scenario = try Commands.curl(["-X", "PUT", "http://127.0.0.1:\(control)/scenario/latency", "-d", #"{"fixedMilliseconds": \#(latency)}"#])
        #expect(scenario.status == 0)
        for n in 0..<20 {
            let registered = try await serve.client(bearer: appKey).put(
                "/v1/apps/demo/devices/\(ServeCommandTests.device(n))", #"{"token": "\#(ServeCommandTests.token(n))", "environment": "production"}"#)
            #expect(registered.status == 200)
        }
        let push = try await serve.client(bearer: master).post("/v1/apps/demo/pushes", #"{"audience": {"all": true}, "notification": {"title": "held"}}"#)
        #expect(push.status == 202)
        try await waitUntil("the notifications are on the wire (the simulator has them)", within: 10) {
            ((try? Commands.curl(["http://127.0.0.1:\(control)/stats"]).stdout) ?? "").contains("\"requests\":20")
        }
        return serve
    }
}
