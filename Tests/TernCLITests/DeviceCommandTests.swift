import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// `tern device` as a process, against a `tern serve` process: it registers, connects over a WebSocket, prints and
/// acknowledges messages (or not), and refuses bad input.
@Suite(.serialized)
struct DeviceCommandTests {
    /// Runs `tern device` in the background; its result once it exits.
    private func device(_ arguments: [String]) -> Task<CommandResult, any Error> {
        Task.detached { try Commands.run(Commands.tern, ["device"] + arguments, timeout: 60) }
    }

    /// The demo app `serve` printed: its app key, and a client with its master secret.
    private func demoApp(of serve: ServeProcess) throws -> (appKey: String, master: HTTPTestClient) {
        let appKey = try #require(serve.value(after: "app key"))
        let masterSecret = try #require(serve.value(after: "master secret"))
        return (appKey, serve.client(bearer: masterSecret))
    }

    /// Waits until `count` devices carry `tag`.
    private func waitForDevices(tagged tag: String, count: Int, _ api: HTTPTestClient) async throws {
        try await waitUntil("tern device registers", within: 30, every: .milliseconds(100)) {
            guard case .array(let devices)? = try await api.get("/v1/apps/demo/devices?tag=\(tag)").json()["devices"] else { return false }
            return devices.count == count
        }
    }

    @Test func itPrintsAndAcknowledgesWhatArrivesOnline() async throws {
        let serve = try ServeProcess(folder: ServeCommandTests.folder())
        defer { _ = serve.interrupt() }
        let (appKey, master) = try demoApp(of: serve)
        let running = device(["--url", "http://127.0.0.1:\(serve.port)", "--app-key", appKey, "--tag", "cli", "--messages", "2", "--timeout", "50"])
        try await waitForDevices(tagged: "cli", count: 1, master)
        var ids: [String] = []
        for title in ["one", "two"] {
            let push = try await master.post(
                "/v1/apps/demo/pushes?wait=10",
                #"{"audience": {"tags": ["cli"]}, "notification": {"title": "\#(title)"}, "delivery": "online"}"#)
            #expect([200, 201].contains(push.status), "\(push.text)")
            ids.append(try #require(try push.json()["id"]?.stringValue))
        }
        let result = try await running.value
        #expect(result.status == 0, "\(result.stderr)")
        let frames = try result.stdout.split(separator: "\n").filter { $0.hasPrefix("{") }.map { try JSONValue(parsing: Data($0.utf8)) }
        #expect(frames.map { $0["notification"]?["title"]?.stringValue } == ["one", "two"])
        #expect(frames.map { $0["sequence"] } == [.int(1), .int(2)])
        #expect(result.stderr.contains("registered device "))
        // The same device with a wrong secret: refused, said in one line, exit 2.
        let registered = try #require(result.stderr.split(separator: " ").drop { $0 != "device" }.dropFirst().first).replacingOccurrences(of: ";", with: "")
        let wrong = try Commands.run(Commands.tern, [
            "device", "--url", "http://127.0.0.1:\(serve.port)", "--app-key", appKey, "--device-id", String(registered),
            "--device-secret", "tds_" + String(repeating: "x", count: 43), "--timeout", "20",
        ])
        #expect(wrong.status == 2, "\(wrong.stdout) \(wrong.stderr)")
        #expect(wrong.stderr.contains("refused the connection: 403"), "\(wrong.stderr)")
        // What /metrics says of it.
        try await waitUntil("the acks are counted in /metrics, and the connection gone") {
            let text = try await serve.client(bearer: nil).get("/metrics").text
            return text.contains("tern_channel_acks_total 2") && text.contains("tern_channel_connections 0")
        }
        let metrics = try await serve.client(bearer: nil).get("/metrics").text
        for line in ["tern_channel_messages_kept_total 2", "tern_channel_messages_delivered_total 2"] {
            #expect(metrics.contains(line), "\(line) not in /metrics")
        }
        // Both acknowledged.
        for id in ids {
            try await waitUntil("the ack is counted") {
                try await master.get("/v1/apps/demo/pushes/\(id)").json()["counts"]?["acked"] == .int(1)
            }
        }
    }

    @Test func withNoAckAnAutoPushFallsBackToAPNs() async throws {
        let serve = try ServeProcess(folder: ServeCommandTests.folder())
        defer { _ = serve.interrupt() }
        let (appKey, master) = try demoApp(of: serve)
        let running = device([
            "--url", "http://127.0.0.1:\(serve.port)", "--app-key", appKey, "--tag", "quiet", "--no-ack", "--messages", "1", "--timeout", "50",
        ])
        try await waitForDevices(tagged: "quiet", count: 1, master)
        let push = try await master.post(
            "/v1/apps/demo/pushes?wait=10",
            #"{"audience": {"tags": ["quiet"]}, "notification": {"title": "hello"}, "delivery": "auto", "ackTimeout": 0.5}"#)
        let id = try #require(try push.json()["id"]?.stringValue)
        let result = try await running.value
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains(#""title":"hello""#))
        try await waitUntil("the push completes") { try await master.get("/v1/apps/demo/pushes/\(id)").json()["status"] == "completed" }
        let counts = try await master.get("/v1/apps/demo/pushes/\(id)").json()["counts"]
        #expect(counts?["fellBackToAPNs"] == .int(1))
        #expect(counts?["acked"] == .int(0))
    }

    /// The network between the device and the server goes silent (no FIN, no RST: a cut, or a server gone without a
    /// word): the device's pings go unanswered, so it closes that connection and makes another, which gets the rest.
    @Test func aConnectionWhoseServerWentSilentIsMadeAgain() async throws {
        let serve = try ServeProcess(folder: ServeCommandTests.folder())
        defer { _ = serve.interrupt() }
        let (appKey, master) = try demoApp(of: serve)
        let relay = try await TCPRelay(to: "127.0.0.1", port: serve.port)
        let running = device([
            "--url", "http://127.0.0.1:\(relay.port)", "--app-key", appKey, "--tag", "cut", "--messages", "2", "--timeout", "20",
            "--ping-interval", "0.5",
        ])
        try await waitForDevices(tagged: "cut", count: 1, master)
        for title in ["one", "two"] {
            let push = try await master.post(
                "/v1/apps/demo/pushes?wait=10", #"{"audience": {"tags": ["cut"]}, "notification": {"title": "\#(title)"}, "delivery": "online"}"#)
            #expect([200, 201].contains(push.status), "\(push.text)")
            // After the first, the connection carries nothing more either way, and closes nothing.
            if title == "one" { relay.freeze() }
        }
        let result = try await running.value
        #expect(result.status == 0, "the device waited on the silent connection: \(result.stderr)")
        #expect(result.stdout.contains(#""title":"two""#))
        await relay.close()
    }

    @Test func devicesRegisteredIntoAFileAreTheSameDevicesWhenRunAgain() async throws {
        let serve = try ServeProcess(folder: ServeCommandTests.folder())
        defer { _ = serve.interrupt() }
        let (appKey, master) = try demoApp(of: serve)
        let url = "http://127.0.0.1:\(serve.port)"
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-devices-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let registered = try Commands.run(Commands.tern, [
            "device", "--url", url, "--app-key", appKey, "--count", "3", "--tag", "saved", "--save-devices", file.path, "--register-only",
        ])
        #expect(registered.status == 0, "\(registered.stderr)")
        #expect(registered.stderr.contains("registered 3 devices"), "\(registered.stderr)")
        // Their secrets: the owner's only.
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o600)
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3)
        try await waitForDevices(tagged: "saved", count: 3, master)
        // Registered only: none connected.
        #expect(try await serve.client(bearer: nil).get("/metrics").text.contains("tern_channel_connections 0"))

        // Run again from the file: the same three devices (no new registrations) get a push each.
        let running = device(["--url", url, "--app-key", appKey, "--devices", file.path, "--messages", "3", "--timeout", "50"])
        try await waitUntil("the three devices connect", within: 30) {
            try await serve.client(bearer: nil).get("/metrics").text.contains("tern_channel_connections 3")
        }
        let push = try await master.post(
            "/v1/apps/demo/pushes?wait=10", #"{"audience": {"tags": ["saved"]}, "notification": {"title": "again"}, "delivery": "online"}"#)
        #expect([200, 201].contains(push.status), "\(push.text)")
        let result = try await running.value
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("total 3  connected"), "\(result.stdout)")
        #expect(result.stdout.contains("messages 3  acked 3"), "\(result.stdout)")
        try await waitForDevices(tagged: "saved", count: 3, master)
    }

    @Test func badInputAndAnAbsentServerAreClearErrors() throws {
        let noKey = try Commands.run(Commands.tern, ["device"], environment: ["TERN_APP_KEY": ""])
        #expect(noKey.status == 64)
        #expect(noKey.stderr.contains("--app-key"))
        let badURL = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--url", "ftp://x"])
        #expect(badURL.status == 64)
        #expect(badURL.stderr.contains("--url"))
        let noSecret = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--device-id", UUID().uuidString])
        #expect(noSecret.status == 64)
        #expect(noSecret.stderr.contains("--device-secret"))
        let registerOnly = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--count", "2", "--register-only"])
        #expect(registerOnly.status == 64)
        #expect(registerOnly.stderr.contains("--save-devices"), "\(registerOnly.stderr)")
        let twoSources = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--devices", "/tmp/x", "--count", "2"])
        #expect(twoSources.status == 64)
        #expect(twoSources.stderr.contains("--devices"), "\(twoSources.stderr)")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-devices-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "\(UUID().uuidString) tds_secret\nnot-a-device\n".write(to: file, atomically: true, encoding: .utf8)
        let badFile = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--url", "http://127.0.0.1:9", "--devices", file.path])
        #expect(badFile.status == 64, "\(badFile.stderr)")
        #expect(badFile.stderr.contains("line 2"), "\(badFile.stderr)")
        let missing = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--devices", file.path + ".gone"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("cannot read"), "\(missing.stderr)")
        let absent = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--url", "http://127.0.0.1:9"])
        #expect(absent.status == 2)
        #expect(absent.stderr.contains("cannot reach"))
        // A file for new devices that cannot be written is bad input, said before any device is registered (the
        // absent server is not even tried): found afterwards, the registered devices' secrets were lost.
        let unwritable = file.path + ".folder/devices.txt"
        let noFolder = try Commands.run(
            Commands.tern, ["device", "--app-key", "tak_x", "--url", "http://127.0.0.1:9", "--save-devices", unwritable, "--register-only"])
        #expect(noFolder.status == 64, "\(noFolder.stderr)")
        #expect(noFolder.stderr.contains("cannot write \(unwritable): No such file or directory"), "\(noFolder.stderr)")
        // And a file made for devices that were then not registered is not left behind.
        let unsaved = file.path + ".unsaved"
        let refused = try Commands.run(Commands.tern, ["device", "--app-key", "tak_x", "--url", "http://127.0.0.1:9", "--save-devices", unsaved])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: unsaved))
    }
}

extension JSONValue {
    fileprivate var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}
