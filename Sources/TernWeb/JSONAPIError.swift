import Foundation
import Hummingbird
import NIOCore
import TernAPNs

/// An error that knows which input field it is about, so an API can name it.
public protocol FieldError: Error {
    var field: String { get }
    var message: String { get }
}

extension APNsValidationError: FieldError {}

/// The one error shape of Tern's JSON APIs: `{"error": "...", "message": "...", "field": "..."}` with a 4xx or 5xx
/// status. `field` names the input at fault (`token`, `audience.aliases[2]`, `body`) when there is one.
public struct JSONAPIError: HTTPResponseError, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let error: String
    public let message: String
    public let field: String?
    /// Seconds to wait before trying again, sent as `Retry-After` (with 429 and 503).
    public var retryAfter: Int?
    /// More header fields for the answer (`Allow` with a 405).
    public var headers: HTTPFields = [:]

    public init(status: HTTPResponse.Status, error: String, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.error = error
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { "\(status.code) \(error): \(message)" + (field.map { " (\($0))" } ?? "") }

    public static func badRequest(field: String?, _ message: String) -> JSONAPIError {
        JSONAPIError(status: .badRequest, error: "badRequest", message: message, field: field)
    }

    public static func notFound(_ message: String) -> JSONAPIError {
        JSONAPIError(status: .notFound, error: "notFound", message: message)
    }

    public static func unauthorized(_ message: String) -> JSONAPIError {
        JSONAPIError(status: .unauthorized, error: "unauthorized", message: message)
    }

    public static func forbidden(_ message: String, field: String? = nil) -> JSONAPIError {
        JSONAPIError(status: .forbidden, error: "forbidden", message: message, field: field)
    }

    public static func conflict(field: String?, _ message: String) -> JSONAPIError {
        JSONAPIError(status: .conflict, error: "conflict", message: message, field: field)
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let (headers, body) = rendered()
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// The answer's headers and JSON body, for a response written outside the router (a refused WebSocket upgrade).
    public func rendered() -> (headers: HTTPFields, body: [UInt8]) {
        var object: [String: JSONValue] = ["error": .string(error), "message": .string(message)]
        if let field { object["field"] = .string(field) }
        // Strings only: serializing cannot fail.
        let body = (try? JSONValue.object(object).serialized()) ?? []
        var headers = self.headers
        headers[.contentType] = "application/json"
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return (headers, body)
    }
}

extension JSONAPIError {
    /// Turns a JSON decoding failure (or a ``FieldError``) into a 400 that names the field.
    public init(decoding error: any Error) {
        switch error {
        case let error as JSONAPIError:
            self = error
        case let error as StrictJSON.SyntaxError:
            self = .badRequest(field: error.path.isEmpty ? "body" : error.path, "the body is not valid JSON: \(error.description)")
        case let error as StrictJSONDecoder.UnknownField:
            self = .badRequest(field: error.path, "unknown field '\(error.path)': this endpoint does not take it (check its spelling)")
        case DecodingError.keyNotFound(let key, let context):
            self = .badRequest(field: Self.path(context.codingPath + [key]), "missing field")
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let field = context.codingPath.isEmpty ? "body" : Self.path(context.codingPath)
            self = .badRequest(field: field, "wrong type: \(context.debugDescription)")
        case DecodingError.dataCorrupted(let context):
            let field = context.codingPath.isEmpty ? "body" : Self.path(context.codingPath)
            self = .badRequest(field: field, "not valid: \(context.debugDescription)")
        case let error as any FieldError:
            self = .badRequest(field: error.field, error.message)
        default:
            self = .badRequest(field: "body", "the body is not the JSON this endpoint takes")
        }
    }

    /// `a.b[2].c` for a coding path.
    public static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
    }
}

/// Reading JSON request bodies with errors that name the field.
public enum JSONBody {
    /// Decodes the body as `T`; a missing or malformed body is a 400 naming the field, a body over `limit` a 413.
    public static func decode<T: Decodable>(
        _ type: T.Type, from request: Request, limit: Int = 1 << 20, allowEmpty: Bool = false
    ) async throws -> T? {
        let buffer: ByteBuffer
        buffer = try await collect(request, upTo: limit, what: "the body")
        if buffer.readableBytes == 0 {
            if allowEmpty { return nil }
            throw JSONAPIError.badRequest(field: "body", "a JSON body is required")
        }
        do {
            return try StrictJSONDecoder().decode(T.self, from: buffer.readableBytesView)
        } catch {
            throw JSONAPIError(decoding: error)
        }
    }

    /// The whole body, up to `limit` bytes. - Throws: a 413 naming `body` over the limit; a 400 naming it when the
    /// body did not arrive whole (its connection ended first: what came is not acted on).
    public static func collect(_ request: Request, upTo limit: Int, what: String) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw JSONAPIError(
                status: .contentTooLarge, error: "payloadTooLarge", message: "\(what) is larger than \(limit) bytes", field: "body")
        } catch {
            throw JSONAPIError.badRequest(field: "body", "\(what) did not arrive whole: \(error)")
        }
    }

    /// Decodes a required body.
    public static func decode<T: Decodable>(_ type: T.Type, from request: Request, limit: Int = 1 << 20) async throws -> T {
        guard let value = try await decode(type, from: request, limit: limit, allowEmpty: false) else {
            throw JSONAPIError.badRequest(field: "body", "a JSON body is required")
        }
        return value
    }
}
