import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import TernAPNs
import TernTestSupport

/// An answer of the control API.
struct ControlResponse: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as JSON (throws if it is not).
    func json() throws -> JSONValue { try JSONValue(parsing: Data(body)) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(type, from: Data(body)) }
}

/// A one-request-per-connection HTTP/1.1 client for the control API, on NIO.
struct ControlClient: Sendable {
    let port: Int

    func get(_ path: String) async throws -> ControlResponse { try await send(.GET, path) }
    func put(_ path: String, _ body: String) async throws -> ControlResponse { try await send(.PUT, path, body: body) }
    func post(_ path: String, _ body: String? = nil) async throws -> ControlResponse { try await send(.POST, path, body: body) }
    func delete(_ path: String) async throws -> ControlResponse { try await send(.DELETE, path) }

    func send(_ method: HTTPMethod, _ path: String, body: String? = nil, timeout: Double = 10) async throws -> ControlResponse {
        let port = self.port
        return try await withTimeout(timeout, "the control API to answer \(method) \(path)") {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
            return try await channel.executeThenClose { inbound, outbound in
                let bytes = body.map { Array($0.utf8) } ?? []
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
                head.headers.add(name: "host", value: "127.0.0.1:\(port)")
                head.headers.add(name: "connection", value: "close")
                head.headers.add(name: "content-length", value: String(bytes.count))
                if body != nil { head.headers.add(name: "content-type", value: "application/json") }
                try await outbound.write(.head(head))
                if !bytes.isEmpty { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: bytes)))) }
                try await outbound.write(.end(nil))

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
                        return ControlResponse(status: status, headers: headers, body: received)
                    }
                }
                throw StreamEndedWithoutResponse(detail: "the control API closed the connection mid-answer")
            }
        }
    }
}
