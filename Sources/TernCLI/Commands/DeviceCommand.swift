import ArgumentParser
import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOWebSocket
import Synchronization
import TernAPNs

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Act as a device on the online channel: register, connect, print and acknowledge messages.",
        discussion: """
            Registers a device with the app key (or uses --device-id and \
            --device-secret), connects to `GET …/devices/{id}/connect` as a \
            WebSocket, and prints each message as it arrives (the frame's JSON, one \
            line each), acknowledging it unless --no-ack (then `delivery: auto` \
            pushes fall back to APNs after their ackTimeout). A dropped connection is \
            reconnected with back-off, resuming after the last message received; so \
            is one whose server stops answering pings (every --ping-interval \
            seconds), which a network cut or a server gone without a word leaves open.

            With --count N it runs N new devices from one process, for load tests, \
            and prints a progress line every second instead of the messages. \
            --save-devices FILE keeps their ids and secrets, --register-only stops \
            once they are registered, and --devices FILE runs them again.

            A new device's id and secret go to standard error once: pass them back \
            with --device-id and --device-secret (or TERN_DEVICE_SECRET) to be the \
            same device again.

            Exit status: 0 stopped (Ctrl-C) or --messages reached, 1 --timeout \
            passed first, 2 the server refused or could not be reached, 64 bad input.

            Examples:
              # A device of the demo app of `tern serve` (its app key is in the banner):
              tern device --app-key tak_… --tag test
              # Then, from another terminal:
              curl -X POST 'localhost:8080/v1/apps/demo/pushes?wait=5' -H "Authorization: Bearer $MS" \\
                -d '{"audience": {"tags": ["test"]}, "notification": {"title": "Hi"}, "delivery": "online"}'

              # 1,000 devices, until 1,000 messages arrived, within a minute:
              tern device --app-key tak_… --count 1000 --tag load --messages 1000 --timeout 60
            """
    )

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The server's address (default http://127.0.0.1:8080). Repeat it for several nodes: a device whose connection ends connects to the next, as behind a load balancer.",
            valueName: "url"))
    var url: [String] = []

    @Option(name: .long, help: "The app's id.")
    var app = "demo"

    @Option(name: .long, help: ArgumentHelp("The app's key (or TERN_APP_KEY).", valueName: "key"))
    var appKey: String?

    @Option(name: .long, help: ArgumentHelp("Be this existing device (needs --device-secret).", valueName: "uuid"))
    var deviceId: String?

    @Option(name: .long, help: ArgumentHelp("The existing device's secret (or TERN_DEVICE_SECRET).", valueName: "secret"))
    var deviceSecret: String?

    @Option(name: .long, help: ArgumentHelp("A tag each new device registers with (repeatable).", valueName: "tag"))
    var tag: [String] = []

    @Option(name: .long, help: "How many new devices to run (load tests).")
    var count = 1

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write the new devices' ids and secrets to this file (one device per line, owner-only), to be the same devices again with --devices.",
            valueName: "file"))
    var saveDevices: String?

    @Flag(name: .long, help: "Register the new devices (with --save-devices) and stop, without connecting them.")
    var registerOnly = false

    @Option(name: .long, help: ArgumentHelp("Be the devices of this file (written by --save-devices) instead of new ones.", valueName: "file"))
    var devices: String?

    @Flag(name: .long, help: "Do not acknowledge messages.")
    var noAck = false

    @Option(name: .long, help: ArgumentHelp("Resume after this sequence on the first connection.", valueName: "seq"))
    var after: Int64?

    @Option(name: .long, help: ArgumentHelp("Stop once this many messages arrived (all devices together).", valueName: "n"))
    var messages: Int?

    @Option(name: .long, help: ArgumentHelp("Stop with status 1 after this many seconds.", valueName: "seconds"))
    var timeout: Double?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Ping the server this often; a connection with no answer by the next ping is closed and made again.", valueName: "seconds"))
    var pingInterval = 30.0

    @Option(name: .long, help: "Log level for the connections (trace … critical).")
    var logLevel = Logger.Level.error

    func validate() throws {
        for url in url {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ValidationError("--url must be an http:// or https:// address, not '\(url)'")
            }
        }
        guard (1...100_000).contains(count) else { throw ValidationError("--count must be 1-100000") }
        if deviceId != nil, count != 1 { throw ValidationError("--device-id is one device: leave out --count") }
        if devices != nil, count != 1 || deviceId != nil || saveDevices != nil {
            throw ValidationError("--devices runs the devices of the file: leave out --count, --device-id and --save-devices")
        }
        if registerOnly, saveDevices == nil { throw ValidationError("--register-only needs --save-devices (where the devices go)") }
        if let deviceId, UUID(uuidString: deviceId) == nil { throw ValidationError("--device-id must be a UUID, not '\(deviceId)'") }
        if deviceId != nil, secret == nil { throw ValidationError("--device-id needs --device-secret (or TERN_DEVICE_SECRET)") }
        if key == nil { throw ValidationError("--app-key (or TERN_APP_KEY) is required: `tern serve` prints the demo app's") }
        if let messages, messages < 1 { throw ValidationError("--messages must be 1 or more") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be more than 0 seconds") }
        guard (0.1...3600).contains(pingInterval) else { throw ValidationError("--ping-interval must be 0.1-3600 seconds") }
        if let after, after < 0 { throw ValidationError("--after must be 0 or more") }
        for tag in tag where tag.isEmpty || tag.utf8.count > 64 { throw ValidationError("--tag must be 1-64 bytes") }
    }

    private var key: String? { (appKey ?? ProcessInfo.processInfo.environment["TERN_APP_KEY"]).flatMap { $0.isEmpty ? nil : $0 } }
    private var secret: String? {
        (deviceSecret ?? ProcessInfo.processInfo.environment["TERN_DEVICE_SECRET"]).flatMap { $0.isEmpty ? nil : $0 }
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        // A file of devices that cannot be read is bad input (64), said before anything connects.
        var loaded: [(id: String, secret: String)]?
        if let devices {
            do {
                loaded = try Self.load(devices)
            } catch {
                printError("Error: \(error.message)")
                throw ExitCode(64)
            }
        }
        // So is a file for the new devices that cannot be written: found after registering, their secrets were lost.
        var madeSaveFile = false
        if let saveDevices {
            do {
                madeSaveFile = try Self.checkWritable(saveDevices)
            } catch {
                printError("Error: \(error.message)")
                throw ExitCode(64)
            }
        }
        let bases = (url.isEmpty ? ["http://127.0.0.1:8080"] : url).map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        let base = bases[0]
        var httpConfiguration = HTTPClient.Configuration()
        // A server that is not there is said at once, not after the client's retries.
        httpConfiguration.connectionPool.retryConnectionEstablishment = false
        httpConfiguration.timeout.connect = .seconds(5)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
        let identities: [(id: String, secret: String)]
        do {
            if let deviceId, let secret {
                identities = [(deviceId.lowercased(), secret)]
            } else if let loaded {
                identities = loaded
            } else {
                identities = try await register(count, base: base, http: http)
                if let saveDevices { try Self.save(identities, to: saveDevices) }
            }
        } catch let error as DeviceCommandError {
            try? await http.shutdown()
            if madeSaveFile, let saveDevices { try? FileManager.default.removeItem(atPath: saveDevices) }
            printError("Error: \(error.message)")
            throw ExitCode(2)
        }
        if registerOnly {
            try? await http.shutdown()
            printError("registered \(identities.count) devices into \(saveDevices ?? "")")
            return
        }
        let tally = DeviceTally(count: identities.count)
        let many = identities.count > 1
        if deviceId == nil, devices == nil, count == 1, let identity = identities.first {
            printError("registered device \(identity.id); to be it again: --device-id \(identity.id) --device-secret \(identity.secret)")
        }

        let outcome: Outcome = await withTaskGroup(of: Outcome.self) { group in
            for identity in identities {
                group.addTask {
                    await connect(identity, bases: bases, single: !many, tally: tally, http: http)
                    return .refused
                }
            }
            if many {
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(1))
                        emit(tally.progressLine())
                    }
                    return .stopped
                }
            }
            if let messages {
                group.addTask {
                    await tally.waitFor(messages)
                    return .reached
                }
            }
            if let timeout {
                group.addTask {
                    try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                    return Task.isCancelled ? .stopped : .timedOut
                }
            }
            group.addTask {
                await Self.interrupted()
                return .stopped
            }
            var first: Outcome = .stopped
            // Every device refused: nothing left to wait for.
            var refused = 0
            while let next = await group.next() {
                if next == .refused {
                    refused += 1
                    if refused < identities.count { continue }
                }
                first = next
                break
            }
            group.cancelAll()
            return first
        }
        try? await http.shutdown()
        if many || messages != nil { emit(tally.progressLine(final: true)) }
        switch outcome {
        case .stopped, .reached: return
        case .timedOut: throw ExitCode(1)
        case .refused: throw ExitCode(2)
        }
    }

    private enum Outcome: Sendable, Equatable { case stopped, reached, timedOut, refused }

    /// Waits for SIGINT.
    private static func interrupted() async {
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        signal(SIGINT, SIG_IGN)
        let (stream, input) = AsyncStream.makeStream(of: Void.self)
        source.setEventHandler { input.yield() }
        source.resume()
        for await _ in stream { break }
        source.cancel()
    }

    // MARK: Registering

    /// Whether `path` can be written, tried before anything is registered (an existing file is left as it is until the
    /// devices are saved). - Returns: whether this made the file (empty, owner-only), to remove if nothing is saved.
    private static func checkWritable(_ path: String) throws(DeviceCommandError) -> Bool {
        let existed = FileManager.default.fileExists(atPath: path)
        let descriptor = open(path, O_WRONLY | O_CREAT, 0o600)
        guard descriptor >= 0 else { throw DeviceCommandError(message: "cannot write \(path): \(String(cString: strerror(errno)))") }
        close(descriptor)
        return !existed
    }

    /// Writes "id secret" lines, readable by the owner only (they are the devices' secrets).
    private static func save(_ identities: [(id: String, secret: String)], to path: String) throws(DeviceCommandError) {
        let text = identities.map { "\($0.id) \($0.secret)\n" }.joined()
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw DeviceCommandError(message: "cannot write \(path)")
        }
    }

    private static func load(_ path: String) throws(DeviceCommandError) -> [(id: String, secret: String)] {
        guard let data = FileManager.default.contents(atPath: path) else { throw DeviceCommandError(message: "cannot read \(path)") }
        var identities: [(id: String, secret: String)] = []
        for (number, line) in String(decoding: data, as: UTF8.self).split(separator: "\n").enumerated() {
            let words = line.split(separator: " ")
            guard words.count == 2, let id = UUID(uuidString: String(words[0])) else {
                throw DeviceCommandError(message: "\(path), line \(number + 1): expected \"<device id> <secret>\"")
            }
            identities.append((id.uuidString.lowercased(), String(words[1])))
        }
        guard !identities.isEmpty, identities.count <= 100_000 else { throw DeviceCommandError(message: "\(path) must list 1-100000 devices") }
        return identities
    }

    private struct Registered: Decodable {
        var deviceId: String
        var deviceSecret: String?
    }

    private func register(_ count: Int, base: String, http: HTTPClient) async throws -> [(id: String, secret: String)] {
        var identities: [(id: String, secret: String)] = []
        var lastReport = ContinuousClock.now
        for number in 0..<count {
            let id = UUID().uuidString.lowercased()
            let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            var request = HTTPClientRequest(url: "\(base)/v1/apps/\(app)/devices/\(id)")
            request.method = .PUT
            request.headers.add(name: "Authorization", value: "Bearer \(key ?? "")")
            request.headers.add(name: "Content-Type", value: "application/json")
            let tags = tag.isEmpty ? "" : #", "tags": [\#(tag.map { "\"\($0)\"" }.joined(separator: ", "))]"#
            request.body = .bytes(ByteBuffer(string: #"{"token": "\#(token)", "environment": "production"\#(tags)}"#))
            let response: HTTPClientResponse
            do {
                response = try await http.execute(request, timeout: .seconds(30))
            } catch {
                throw DeviceCommandError(message: "cannot reach \(base): \(error)")
            }
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok, let registered = try? JSONDecoder().decode(Registered.self, from: Data(buffer: body)),
                let secret = registered.deviceSecret
            else {
                throw DeviceCommandError(message: "registering answered \(response.status.code): \(String(buffer: body).prefix(300))")
            }
            identities.append((registered.deviceId, secret))
            if count > 1, ContinuousClock.now - lastReport > .seconds(1) {
                printError("registered \(number + 1) of \(count) devices")
                lastReport = .now
            }
        }
        return identities
    }

    // MARK: Connecting

    /// Keeps one device connected until cancelled (or refused), resuming after the last message it received.
    private func connect(_ identity: (id: String, secret: String), bases: [String], single: Bool, tally: DeviceTally, http: HTTPClient) async {
        var turn = 0
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(key ?? "")"
        headers[HTTPField.Name("X-Tern-Device-Secret")!] = identity.secret
        // Pings of its own: a server that went silent (a network cut, a process gone without a close) sends nothing
        // that would end the connection, and the device would wait on it for ever.
        let configuration = WebSocketClientConfiguration(
            maxFrameSize: 1 << 20, additionalHeaders: headers, autoPing: .enabled(timePeriod: .milliseconds(Int(pingInterval * 1000))))
        let logger = Logger(label: "tern.device")
        let last = Atomic<Int64>(after ?? 0)
        var pause = Duration.milliseconds(500)
        let acknowledge = !noAck
        while !Task.isCancelled {
            // The next node after a connection ended, as a load balancer would pick another.
            let base = bases[turn % bases.count]
            turn += 1
            let wsBase = base.replacingOccurrences(of: "http://", with: "ws://").replacingOccurrences(of: "https://", with: "wss://")
            let resume = last.load(ordering: .relaxed)
            let address = "\(wsBase)/v1/apps/\(app)/devices/\(identity.id)/connect" + (resume > 0 ? "?after=\(resume)" : "")
            let counted = Atomic<Bool>(false)
            do {
                let close = try await WebSocketClient.connect(url: address, configuration: configuration, logger: logger) { inbound, outbound, _ in
                    counted.store(true, ordering: .relaxed)
                    tally.connected(1)
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message else { continue }
                        if single { emit(text) }
                        guard let frame = Frame(prefixOf: text) ?? (try? JSONDecoder().decode(Frame.self, from: Data(text.utf8))) else { continue }
                        last.store(max(last.load(ordering: .relaxed), frame.sequence), ordering: .relaxed)
                        if acknowledge {
                            try await outbound.write(.text(#"{"type": "ack", "ids": ["\#(frame.id)"]}"#))
                            tally.acked(1)
                        }
                        tally.received(1)
                    }
                }
                if counted.load(ordering: .relaxed) { tally.connected(-1) }
                if let close, let code = Self.number(close.closeCode), code == 4400 {
                    printError("device \(identity.id): the server closed the connection: \(code) \(close.reason ?? "")")
                    return
                }
                pause = .milliseconds(500)
            } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed {
                // Refused: the same GET without the upgrade says why.
                if let refusal = await refusal(of: identity, base: base, http: http) {
                    printError("device \(identity.id): the server refused the connection: \(refusal)")
                    return
                }
            } catch {
                if counted.load(ordering: .relaxed) { tally.connected(-1) }
                if Task.isCancelled { return }
                printError("device \(identity.id): \(error); connecting again in \(pause)")
            }
            // Drawn between half and all of the pause (so a fleet that lost its server together does not come back
            // together), the pause doubling from 0.5 s to 5 s.
            let milliseconds = Int(pause.components.seconds * 1000 + pause.components.attoseconds / 1_000_000_000_000_000)
            try? await Task.sleep(for: .milliseconds(Int.random(in: (milliseconds / 2)...milliseconds)))
            pause = min(pause * 2, .seconds(5))
        }
    }

    /// Why the server refuses this device's connection (its JSON error), or nil if it is worth trying again.
    private func refusal(of identity: (id: String, secret: String), base: String, http: HTTPClient) async -> String? {
        var request = HTTPClientRequest(url: "\(base)/v1/apps/\(app)/devices/\(identity.id)/connect")
        request.headers.add(name: "Authorization", value: "Bearer \(key ?? "")")
        request.headers.add(name: "X-Tern-Device-Secret", value: identity.secret)
        guard let response = try? await http.execute(request, timeout: .seconds(10)),
            let body = try? await response.body.collect(upTo: 1 << 16)
        else { return nil }
        let code = Int(response.status.code)
        guard (400..<500).contains(code), code != 426, code != 429 else { return nil }
        return "\(code) \(String(buffer: body))"
    }

    private struct Frame: Decodable {
        var id: String
        var sequence: Int64

        init(id: String, sequence: Int64) {
            self.id = id
            self.sequence = sequence
        }

        /// The id and sequence from the start of a frame as the server writes it (`{"type":"message","id":"…",
        /// "sequence":N,…`), without decoding the rest: one process running thousands of devices reads a frame per
        /// message. Nil for any other shape, which the JSON decoder then reads.
        init?(prefixOf text: String) {
            let head = #"{"type":"message","id":""#
            let middle = #"","sequence":"#
            guard text.hasPrefix(head), let idEnd = text.range(of: middle) else { return nil }
            let id = text[text.index(text.startIndex, offsetBy: head.count)..<idEnd.lowerBound]
            let digits = text[idEnd.upperBound...].prefix { $0.isASCII && $0.isNumber }
            guard UUID(uuidString: String(id)) != nil, let sequence = Int64(digits) else { return nil }
            self.init(id: String(id), sequence: sequence)
        }
    }

    private static func number(_ code: WebSocketErrorCode) -> Int? {
        if case .unknown(let value) = code { return Int(value) }
        return nil
    }
}

/// Writes a line to standard output at once, also into a pipe or a file (which `print` would buffer).
private func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

private struct DeviceCommandError: Error {
    var message: String
}

/// What the devices of one `tern device` did, across all of them.
private final class DeviceTally: Sendable {
    private struct State {
        var connected = 0
        var received = 0
        var acked = 0
    }

    private let state = Mutex(State())
    private let count: Int
    private let started = ContinuousClock.now

    init(count: Int) {
        self.count = count
    }

    func connected(_ change: Int) { state.withLock { $0.connected += change } }
    func acked(_ number: Int) { state.withLock { $0.acked += number } }

    func received(_ number: Int) { state.withLock { $0.received += number } }

    /// Returns once `total` messages arrived, or when cancelled.
    func waitFor(_ total: Int) async {
        while !Task.isCancelled, state.withLock({ $0.received }) < total {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    func progressLine(final: Bool = false) -> String {
        let (connected, received, acked) = state.withLock { ($0.connected, $0.received, $0.acked) }
        let seconds = Double((ContinuousClock.now - started).components.seconds)
        let rate = seconds > 0 ? Int(Double(received) / seconds) : received
        return "\(final ? "total" : "devices") \(count)  connected \(connected)  messages \(received)  acked \(acked)  (\(rate)/s)"
    }
}
