import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import TernAPNs

/// An answer of an HTTP/1.1 JSON API.
public struct HTTPTestResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    /// For answers that did not come over a socket (the server tests' router client gives them in this shape, so a
    /// test reads them alike).
    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as JSON (throws if it is not).
    public func json() throws -> JSONValue { try JSONValue(parsing: Data(body)) }

    public func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(type, from: Data(body)) }
}

/// A one-request-per-connection HTTP/1.1 client for Tern's JSON APIs (the simulator's control API, `tern serve`),
/// on NIO.
public struct HTTPTestClient: Sendable {
    public let port: Int
    /// Sent as `Authorization: Bearer …` when set.
    public var bearer: String?

    public init(port: Int, bearer: String? = nil) {
        self.port = port
        self.bearer = bearer
    }

    public func get(_ path: String) async throws -> HTTPTestResponse { try await send(.GET, path) }
    public func put(_ path: String, _ body: String) async throws -> HTTPTestResponse { try await send(.PUT, path, body: body) }
    public func post(_ path: String, _ body: String? = nil) async throws -> HTTPTestResponse { try await send(.POST, path, body: body) }
    public func patch(_ path: String, _ body: String) async throws -> HTTPTestResponse { try await send(.PATCH, path, body: body) }
    public func delete(_ path: String) async throws -> HTTPTestResponse { try await send(.DELETE, path) }

    /// The same client with another bearer secret.
    public func with(bearer: String?) -> HTTPTestClient { HTTPTestClient(port: port, bearer: bearer) }

    public func send(
        _ method: HTTPMethod, _ path: String, body: String? = nil, headers extra: [(String, String)] = [], timeout: Double = 10
    ) async throws -> HTTPTestResponse {
        try await send(method, path, bytes: body.map { Array($0.utf8) }, headers: extra, timeout: timeout)
    }

    /// Sends a body as raw bytes (which need not be UTF-8).
    public func send(
        _ method: HTTPMethod, _ path: String, bytes body: [UInt8]?, headers extra: [(String, String)] = [], timeout: Double = 10
    ) async throws -> HTTPTestResponse {
        let port = self.port
        let bearer = self.bearer
        do {
            return try await exchange(method, path, body: body, headers: extra, port: port, bearer: bearer, timeout: timeout)
        } catch let error as HTTPTestClientError {
            throw error
        } catch let error as TimeoutError {
            throw error
        } catch {
            throw HTTPTestClientError(description: "\(method) \(path): \(error)")
        }
    }

    /// How long to wait for the answer to a request for `path`: `timeout`, or longer when the request asks the server
    /// to wait (`?wait=N` seconds, as `POST /v1/apps/…/pushes` takes): N and ten seconds more.
    public static func patience(for path: String, timeout: Double) -> Double {
        let wait = URLComponents(string: path)?.queryItems?.first { $0.name == "wait" }?.value.flatMap(Double.init)
        return max(timeout, (wait ?? 0) + 10)
    }

    private func exchange(
        _ method: HTTPMethod, _ path: String, body: [UInt8]?, headers extra: [(String, String)], port: Int, bearer: String?, timeout: Double
    ) async throws -> HTTPTestResponse {
        try await withTimeout(Self.patience(for: path, timeout: timeout), "an answer to \(method) \(path)") {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
            return try await channel.executeThenClose { inbound, outbound in
                let bytes = body ?? []
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
                head.headers.add(name: "host", value: "127.0.0.1:\(port)")
                head.headers.add(name: "connection", value: "close")
                head.headers.add(name: "content-length", value: String(bytes.count))
                if body != nil { head.headers.add(name: "content-type", value: "application/json") }
                if let bearer { head.headers.add(name: "authorization", value: "Bearer \(bearer)") }
                for (name, value) in extra { head.headers.add(name: name, value: value) }
                // One write and one flush: written part by part, a server that answers (and, with `connection:
                // close`, closes) as soon as it has the body would fail the write of the empty end part.
                var parts: [HTTPClientRequestPart] = [.head(head)]
                if !bytes.isEmpty { parts.append(.body(.byteBuffer(ByteBuffer(bytes: bytes)))) }
                parts.append(.end(nil))
                try await outbound.write(contentsOf: parts)

                var status = 0
                var headers = HTTPHeaders()
                var received: [UInt8] = []
                for try await part in inbound {
                    switch part {
                    case .head(let responseHead):
                        status = Int(responseHead.status.code)
                        headers = responseHead.headers
                    case .body(let buffer):
                        received.append(contentsOf: buffer.readableBytesView)
                    case .end:
                        return HTTPTestResponse(status: status, headers: headers, body: received)
                    }
                }
                throw HTTPTestClientError(description: "the server closed the connection mid-answer")
            }
        }
    }
}

public struct HTTPTestClientError: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) {
        self.description = description
    }
}
