import Foundation
import Hummingbird
import TernAPNs

/// The control API's one error shape: `{"error": "...", "message": "...", "field": "..."}`.
struct ControlAPIError: HTTPResponseError {
    let status: HTTPResponse.Status
    let error: String
    let message: String
    let field: String?

    static func badRequest(field: String?, _ message: String) -> ControlAPIError {
        ControlAPIError(status: .badRequest, error: "badRequest", message: message, field: field)
    }

    static func notFound(_ message: String) -> ControlAPIError {
        ControlAPIError(status: .notFound, error: "notFound", message: message, field: nil)
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var object: [String: JSONValue] = ["error": .string(error), "message": .string(message)]
        if let field { object["field"] = .string(field) }
        let body = try JSONValue.object(object).serialized()
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

extension ControlAPIError {
    /// Turns a JSON decoding failure into a 400 that names the field.
    init(decoding error: any Error) {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            self = .badRequest(field: Self.path(context.codingPath + [key]), "missing field")
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let field = context.codingPath.isEmpty ? "body" : Self.path(context.codingPath)
            self = .badRequest(field: field, "wrong type: \(context.debugDescription)")
        case DecodingError.dataCorrupted(let context):
            let field = context.codingPath.isEmpty ? "body" : Self.path(context.codingPath)
            self = .badRequest(field: field, "not valid: \(context.debugDescription)")
        case let error as ScenarioError:
            self = .badRequest(field: error.field, error.message)
        case let error as APNsValidationError:
            self = .badRequest(field: error.field, error.message)
        default:
            self = .badRequest(field: "body", "the body is not the JSON this endpoint takes")
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
    }
}
