import Foundation

/// A plain JSON value: what custom keys beside `aps`, Live Activity state and attributes may hold.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON text (any top-level value).
    public init(parsing data: Data) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: data)
    }

    /// The value as compact JSON, keys sorted so the same value always renders to the same bytes.
    public func serialized() throws -> [UInt8] {
        var writer = JSONWriter()
        try writer.write(self)
        return writer.bytes
    }

    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
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
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// `text` as a JSON string literal, escaped as ``serialized()`` escapes it: for JSON put together by hand on a hot
    /// path (the online channel's frames, a chunk's progress record).
    public static func quoted(_ text: String) -> String {
        var quoted = ""
        appendQuoted(text, to: &quoted)
        return quoted
    }

    /// Appends ``quoted(_:)`` of `text` to `json`, without a string of its own in between: a chunk's progress record
    /// quotes two device ids for each run of recipients it names, hundreds of runs a record.
    public static func appendQuoted(_ text: String, to json: inout String) {
        var text = text
        // Ids, timestamps and most text need no escape: taken as they are. Read from the string's own bytes: a loop
        // over `utf8` is not specialized across modules.
        let plain = text.withUTF8 { bytes in
            bytes.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        }
        if plain {
            json += "\""
            json += text
            json += "\""
            return
        }
        var writer = JSONWriter()
        writer.write(text)
        json += String(decoding: writer.bytes, as: UTF8.self)
    }
}

/// A small, allocation-light JSON writer. Payloads are rendered on the send path, so this avoids
/// `JSONEncoder`'s reflection; keys are sorted for stable output.
struct JSONWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(256) }

    mutating func write(_ value: JSONValue) throws {
        switch value {
        case .null: append("null")
        case .bool(let value): append(value ? "true" : "false")
        case .int(let value): append(String(value))
        case .double(let value): try write(value)
        case .string(let value): write(value)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                try write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            try writeObject(object.sorted(by: { $0.key < $1.key }))
        }
    }

    mutating func writeObject(_ members: [(key: String, value: JSONValue)]) throws {
        bytes.append(UInt8(ascii: "{"))
        for (index, member) in members.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            write(member.key)
            bytes.append(UInt8(ascii: ":"))
            try write(member.value)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    mutating func write(_ value: Double) throws {
        guard value.isFinite else {
            throw APNsValidationError(.invalidPayload, field: "payload", "JSON has no representation for \(value)")
        }
        if value == value.rounded(), abs(value) < 1e15 {
            append(String(Int64(value)))
        } else {
            append(String(value))
        }
    }

    mutating func write(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xf)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }
}
