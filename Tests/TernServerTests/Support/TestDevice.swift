import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOWebSocket
import TernAPNs
import TernTestSupport

/// A device on the online channel, over a real WebSocket: the frames it receives arrive in ``next(within:)``, and it
/// sends what the test tells it to (acks, bad frames), as an app would.
final class TestDevice: Sendable {
    enum Command: Sendable {
        case text(String)
        case binary
        case close
    }

    private let inbox: FrameInbox
    private let commands: AsyncStream<Command>.Continuation
    /// The connection's end: the close frame the server sent (nil if none), or the error that ended it.
    let ended: Task<WebSocketCloseFrame?, any Error>

    /// Connects device `deviceID` of app `app` on `port` with the app key and `secret`, from `after` if given.
    init(port: Int, app: String = "demo", deviceID: String, appKey: String?, secret: String?, after: Int64? = nil, readsFrames: Bool = true) {
        let (frames, frameInput) = AsyncStream.makeStream(of: String.self)
        let (commands, commandInput) = AsyncStream.makeStream(of: Command.self)
        self.inbox = FrameInbox(frames)
        self.commands = commandInput
        var headers = HTTPFields()
        if let appKey { headers[.authorization] = "Bearer \(appKey)" }
        if let secret { headers[HTTPField.Name("X-Tern-Device-Secret")!] = secret }
        let query = after.map { "?after=\($0)" } ?? ""
        let url = "ws://127.0.0.1:\(port)/v1/apps/\(app)/devices/\(deviceID)/connect\(query)"
        var logger = Logger(label: "tern.test.device")
        logger.logLevel = .critical
        let configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20, additionalHeaders: headers)
        ended = Task {
            defer { frameInput.finish() }
            return try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                let sender = Task {
                    for await command in commands {
                        switch command {
                        case .text(let text): try await outbound.write(.text(text))
                        case .binary: try await outbound.write(.binary(ByteBuffer(bytes: [1, 2, 3])))
                        case .close:
                            try await outbound.close(.normalClosure, reason: "bye")
                            return
                        }
                    }
                }
                defer { sender.cancel() }
                if readsFrames {
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        if case .text(let text) = message { frameInput.yield(text) }
                    }
                } else {
                    // A device that went silent: it reads nothing, so it answers no ping, until the server gives up.
                    try await sender.value
                }
            }
        }
    }

    /// The next frame, parsed. - Throws: if none arrives within `seconds` or the connection ended.
    func next(within seconds: Double = 10) async throws -> JSONValue {
        let text = try await withTimeout(seconds, "a frame from the server") { () async throws -> String in
            guard let frame = await self.inbox.next() else { throw HTTPTestClientError(description: "the connection ended") }
            return frame
        }
        return try JSONValue(parsing: Data(text.utf8))
    }

    func send(_ command: Command) { commands.yield(command) }

    func ack(_ ids: [String]) {
        send(.text(#"{"type": "ack", "ids": [\#(ids.map { "\"\($0)\"" }.joined(separator: ", "))]}"#))
    }

    /// Drops the connection without a goodbye (the device's task is cancelled), and waits for it to end.
    func drop() async {
        ended.cancel()
        _ = try? await ended.value
    }

    /// Closes from the device's side and waits for the end.
    func close() async {
        send(.close)
        _ = try? await closeFrame()
    }

    /// The close frame the server sent, once the connection ended (within `seconds`).
    func closeFrame(within seconds: Double = 10, _ what: String = "") async throws -> WebSocketCloseFrame? {
        try await withTimeout(seconds, "the connection to end \(what)") { try await self.ended.value }
    }
}

/// The frames received, read one at a time by whichever test call waits.
private actor FrameInbox {
    private var iterator: AsyncStream<String>.AsyncIterator

    init(_ frames: AsyncStream<String>) {
        iterator = frames.makeAsyncIterator()
    }

    func next() async -> String? {
        var current = iterator
        defer { iterator = current }
        return await current.next(isolation: self)
    }
}
