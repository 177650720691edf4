import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What happened on a WebSocket: a text frame, or its end.
public enum ChannelEvent: Sendable, Equatable {
    case text(String)
    /// The connection ended: with the close code and reason the server sent, or with no code if it broke.
    case closed(code: Int?, reason: String)
}

/// Opens WebSockets. TernKit's reconnecting, resuming, acknowledging and de-duplicating are the same code whatever
/// opens them: ``URLSessionChannelTransport`` in apps; a transport on a SwiftNIO WebSocket client in the Linux tests,
/// where Foundation's `URLSessionWebSocketTask` is not available ("WebSockets not supported by libcurl").
public protocol ChannelTransport: Sendable {
    /// Opens the WebSocket at `request`'s URL with its headers, and returns once the server took the upgrade.
    /// Cancelling the calling task gives up.
    /// - Throws: ``ChannelTransportError/upgradeRefused(status:)`` when the server answered with a plain HTTP
    ///   status instead of switching protocols; any other error when no connection could be made.
    func connect(_ request: URLRequest, maximumFrameSize: Int) async throws -> any ChannelConnection
}

/// One open WebSocket.
public protocol ChannelConnection: AnyObject, Sendable {
    /// The next text frame, or ``ChannelEvent/closed(code:reason:)`` once the connection ended (and from then on).
    /// Binary frames are skipped: the channel speaks JSON text.
    func receive() async -> ChannelEvent
    func send(_ text: String) async throws
    /// Sends a ping; returns when its pong arrives; throws once the connection ended (also while it waits: closing
    /// the connection ends an unanswered ping). The channel pings every `pingInterval` (``TernConfiguration/Channel``)
    /// and closes a connection whose pong does not come within it: a connection can go silent without ending, and
    /// only a ping shows it.
    func ping() async throws
    /// Starts closing with 1000 (normal closure) and returns at once; ``receive()`` then ends with `closed`.
    func close()
}

public enum ChannelTransportError: Error, Sendable, Equatable {
    /// The server answered the upgrade with this HTTP status (nil if the transport cannot tell which).
    case upgradeRefused(status: Int?)
}

/// The online channel on Apple platforms: `URLSessionWebSocketTask`. (It compiles on Linux, where Foundation's
/// WebSocket support is missing at run time, so the Linux tests use another transport.)
public struct URLSessionChannelTransport: ChannelTransport {
    public let session: URLSession

    public init(session: URLSession = URLSession(configuration: .ephemeral)) {
        self.session = session
    }

    public func connect(_ request: URLRequest, maximumFrameSize: Int) async throws -> any ChannelConnection {
        let task = session.webSocketTask(with: request)
        task.maximumMessageSize = maximumFrameSize
        task.resume()
        // The task says nothing when it opens; a ping that is answered proves it, and a refused upgrade fails it.
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    task.sendPing { error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                    }
                }
            } onCancel: {
                task.cancel()
            }
        } catch {
            task.cancel()
            if let status = (task.response as? HTTPURLResponse)?.statusCode, status != 101 {
                throw ChannelTransportError.upgradeRefused(status: status)
            }
            throw error
        }
        return URLSessionChannelConnection(task: task)
    }
}

final class URLSessionChannelConnection: ChannelConnection {
    private let task: URLSessionWebSocketTask

    init(task: URLSessionWebSocketTask) {
        self.task = task
    }

    func receive() async -> ChannelEvent {
        while true {
            do {
                switch try await task.receive() {
                case .string(let text): return .text(text)
                case .data: continue
                @unknown default: continue
                }
            } catch {
                let code = task.closeCode.rawValue
                let reason = task.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? error.localizedDescription
                return .closed(code: code == URLSessionWebSocketTask.CloseCode.invalid.rawValue ? nil : code, reason: reason)
            }
        }
    }

    func send(_ text: String) async throws {
        try await task.send(.string(text))
    }

    func ping() async throws {
        // The handler is called once: with nil when the pong arrives, with an error once the task ended (a cancel
        // from `close()` included), so a ping on a silent connection ends when the channel closes it.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            task.sendPing { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    func close() {
        task.cancel(with: .normalClosure, reason: nil)
    }
}
