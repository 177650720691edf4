#if canImport(HummingbirdWSClient)
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOWebSocket
import TernKit

/// The online channel's transport for the Linux tests: a WebSocket client on SwiftNIO (hummingbird-project's
/// WSClient), since Foundation's `URLSessionWebSocketTask` fails there ("WebSockets not supported by libcurl").
/// TernKit's channel logic (reconnecting, resuming, acknowledging, de-duplicating) runs unchanged on top of it.
///
/// Liveness: WSClient answers pings and consumes pongs itself, so ``NIOChannelConnection/ping()`` cannot see a pong.
/// The client's own autoPing does the check instead: it pings every `pingInterval` and closes a connection whose
/// pong did not come by the next one, which ends `receive()` as any other end does.
struct NIOChannelTransport: ChannelTransport {
    var pingInterval: Duration = .seconds(30)

    func connect(_ request: URLRequest, maximumFrameSize: Int) async throws -> any ChannelConnection {
        guard let url = request.url?.absoluteString else { throw TestFailure("a channel request without a URL") }
        var headers = HTTPFields()
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            if let name = HTTPField.Name(name) { headers[name] = value }
        }
        let configuration = WebSocketClientConfiguration(maxFrameSize: maximumFrameSize, additionalHeaders: headers, autoPing: .enabled(timePeriod: pingInterval))
        let connection = NIOChannelConnection()
        // WSClient runs a handler for the connection's life; it runs in a task of its own, which closing ends.
        let client = Task {
            do {
                let close = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger(label: "ternkit.tests")) {
                    inbound, outbound, _ in
                    connection.opened(outbound)
                    for try await message in inbound.messages(maxSize: maximumFrameSize) {
                        if case .text(let text) = message { connection.deliver(.text(text)) }
                    }
                }
                connection.deliver(.closed(code: close.map { Int(UInt16(webSocketErrorCode: $0.closeCode)) }, reason: close?.reason ?? ""))
                connection.failed(ChannelTransportError.upgradeRefused(status: nil))
            } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed {
                connection.failed(ChannelTransportError.upgradeRefused(status: nil))
            } catch {
                connection.deliver(.closed(code: nil, reason: "\(error)"))
                connection.failed(error)
            }
        }
        return try await withTaskCancellationHandler {
            try await connection.waitUntilOpen()
        } onCancel: {
            client.cancel()
        }
    }
}

/// One NIO WebSocket as a ``ChannelConnection``: frames queued as they come, taken by `receive()`.
final class NIOChannelConnection: ChannelConnection, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    private let lock = NSLock()
    private var outbound: WebSocketOutboundWriter?
    private var openWaiter: CheckedContinuation<Void, any Error>?
    private var openResult: Result<Void, any Error>?
    private var events: [ChannelEvent] = []
    private var receiver: CheckedContinuation<ChannelEvent, Never>?
    private var ended = false

    func opened(_ writer: WebSocketOutboundWriter) {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, any Error>? in
            outbound = writer
            openResult = .success(())
            defer { openWaiter = nil }
            return openWaiter
        }
        waiter?.resume()
    }

    /// No connection (or it ended before opening).
    func failed(_ error: any Error) {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, any Error>? in
            guard openResult == nil else { return nil }
            openResult = .failure(error)
            defer { openWaiter = nil }
            return openWaiter
        }
        waiter?.resume(throwing: error)
    }

    func waitUntilOpen() async throws -> NIOChannelConnection {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let result = lock.withLock { () -> Result<Void, any Error>? in
                if openResult == nil { openWaiter = continuation }
                return openResult
            }
            if let result { continuation.resume(with: result) }
        }
        return self
    }

    func deliver(_ event: ChannelEvent) {
        let waiting = lock.withLock { () -> CheckedContinuation<ChannelEvent, Never>? in
            guard !ended else { return nil }
            if case .closed = event { ended = true }
            if let receiver {
                self.receiver = nil
                // Once closed, closed from then on.
                if ended { events.append(event) }
                return receiver
            }
            events.append(event)
            return nil
        }
        waiting?.resume(returning: event)
    }

    func receive() async -> ChannelEvent {
        await withCheckedContinuation { continuation in
            let now = lock.withLock { () -> ChannelEvent? in
                if !events.isEmpty {
                    let event = events.removeFirst()
                    // Once closed, closed from then on.
                    if case .closed = event { events.insert(event, at: 0) }
                    return event
                }
                receiver = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    func send(_ text: String) async throws {
        guard let outbound = lock.withLock({ outbound }) else { throw TestFailure("not open") }
        try await outbound.write(.text(text))
    }

    /// Returns at once while the connection is open, and throws once it ended. It sends no ping: WSClient consumes
    /// pongs itself, so none could be seen; its autoPing (``NIOChannelTransport/pingInterval``) closes a silent
    /// connection instead, after which this throws.
    func ping() async throws {
        guard lock.withLock({ !ended && outbound != nil }) else { throw TestFailure("the connection ended") }
    }

    func close() {
        guard let outbound = lock.withLock({ outbound }) else { return }
        // The protocol's close starts closing and returns; the close frame goes from a task of its own.
        Task { try? await outbound.close(.normalClosure, reason: nil) }
    }
}
#endif
