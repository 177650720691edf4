import Foundation
import Testing

@testable import TernAPNs

/// Expects `body` to throw an ``APNsValidationError`` with exactly this code and field.
func expectValidationError<R>(
    _ code: APNsValidationError.Code,
    field: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> R
) {
    let error = #expect(throws: APNsValidationError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.code == code, "wrong error code", sourceLocation: sourceLocation)
    #expect(error?.field == field, "wrong error field", sourceLocation: sourceLocation)
}

/// The bytes as a UTF-8 string, for comparing rendered JSON with a literal.
func utf8(_ bytes: [UInt8]) -> String {
    String(decoding: bytes, as: UTF8.self)
}

/// A 32-byte token, the historical size.
let token32Hex = "0123456789abcdef0123456789abcdeffedcba9876543210fedcba9876543210"
