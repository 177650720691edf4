import Foundation

/// A JSON value: the custom data of a message (`data` in a push, the keys beside `aps`), as the server sent it.
public enum TernJSON: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([TernJSON])
    case object([String: TernJSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([TernJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: TernJSON].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value of `key` if this is an object that has it.
    public subscript(key: String) -> TernJSON? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    public var stringValue: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// A whole number, also one written as `3.0`.
    public var intValue: Int64? {
        switch self {
        case .int(let value): value
        case .double(let value) where value.rounded() == value && abs(value) < 9e15: Int64(value)
        default: nil
        }
    }

    public var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    public var objectValue: [String: TernJSON]? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    public var description: String {
        guard let data = try? JSONEncoder.tern.encode(self) else { return "<unencodable>" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A Foundation property list or JSON object (what `userInfo` holds: dictionaries, arrays, strings, numbers),
    /// or nil if it is not one (a date, data, a key that is not a string).
    public init?(foundationObject object: Any) {
        // JSONSerialization tells booleans from numbers on every platform (an NSNumber from an Objective-C
        // dictionary is both `as? Bool` and `as? Int`); its output is read back with the decoder above.
        guard JSONSerialization.isValidJSONObject(object) || object is String || object is NSNumber || object is NSNull else { return nil }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed]),
            let value = try? JSONDecoder().decode(TernJSON.self, from: data)
        else { return nil }
        self = value
    }
}

extension TernJSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: TernJSON...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }

    public init(dictionaryLiteral elements: (String, TernJSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { $1 }))
    }
}

extension JSONEncoder {
    /// Sorted keys, so what TernKit sends is the same bytes for the same value.
    static var tern: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

extension JSONDecoder {
    /// Tern's dates: RFC 3339 with milliseconds (`2026-11-24T07:34:03.525Z`), also read without them.
    static var tern: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = TernDate.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text.prefix(40))' is not an RFC 3339 date")
            }
            return date
        }
        return decoder
    }
}

/// Reads the server's timestamps.
enum TernDate {
    static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}
