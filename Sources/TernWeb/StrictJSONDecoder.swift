import Foundation
import TernAPNs

/// Decodes a `Decodable` from ``StrictJSON`` and refuses members the type never reads.
///
/// A misspelt option (`"prioirty": 5`) that a lenient decoder drops would send at the default priority, and the
/// sender would never know. Every object's members are noted as the type reads them; one left unread is an unknown
/// field, reported with its path, as Stripe's "Received unknown parameter" does.
public struct StrictJSONDecoder {
    public init() {}

    /// What was wrong, and where: `path` names the member (`apns.prioirty`, `audience.aliases[2]`).
    public struct UnknownField: Error, Sendable, Equatable {
        public var path: String
    }

    public func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        let node = try StrictJSON.parse(bytes)
        let ledger = Ledger()
        let value = try T(from: NodeDecoder(node: node, codingPath: [], ledger: ledger))
        if let unknown = ledger.firstUnread() { throw unknown }
        return value
    }

    /// The objects read so far, with the members each has and the ones the type asked for.
    final class Ledger {
        struct Entry {
            var path: [any CodingKey]
            var members: [String]
            var read: Set<String>
        }

        var entries: [Entry] = []

        func firstUnread() -> UnknownField? {
            for entry in entries {
                if let member = entry.members.first(where: { !entry.read.contains($0) }) {
                    return UnknownField(path: JSONAPIError.path(entry.path + [AnyKey(member)]))
                }
            }
            return nil
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(_ string: String) { stringValue = string }
        init(stringValue: String) { self.stringValue = stringValue }
        init(intValue: Int) {
            self.stringValue = "[\(intValue)]"
            self.intValue = intValue
        }
    }

    struct NodeDecoder: Decoder {
        let node: StrictJSON.Node
        let codingPath: [any CodingKey]
        let ledger: Ledger
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard case .object(let members) = node else { throw mismatch([String: Any].self, "an object") }
            ledger.entries.append(.init(path: codingPath, members: members.map(\.key), read: []))
            return KeyedDecodingContainer(Keyed<Key>(members: members, codingPath: codingPath, ledger: ledger, entry: ledger.entries.count - 1))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let elements) = node else { throw mismatch([Any].self, "an array") }
            return Unkeyed(elements: elements, codingPath: codingPath, ledger: ledger)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(node: node, codingPath: codingPath, ledger: ledger) }

        func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(node.kind)"))
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [(key: String, value: StrictJSON.Node)]
        let codingPath: [any CodingKey]
        let ledger: Ledger
        let entry: Int

        var allKeys: [Key] { members.compactMap { Key(stringValue: $0.key) } }

        func contains(_ key: Key) -> Bool { members.contains { $0.key == key.stringValue } }

        func node(_ key: Key) throws -> StrictJSON.Node {
            ledger.entries[entry].read.insert(key.stringValue)
            guard let node = members.first(where: { $0.key == key.stringValue })?.value else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing field"))
            }
            return node
        }

        func decoder(_ key: Key) throws -> NodeDecoder {
            NodeDecoder(node: try node(key), codingPath: codingPath + [key], ledger: ledger)
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            ledger.entries[entry].read.insert(key.stringValue)
            return members.first(where: { $0.key == key.stringValue })?.value == .null
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try Single(node: try node(key), codingPath: codingPath + [key], ledger: ledger).decode(type)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try decoder(key).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try decoder(key).unkeyedContainer() }

        func superDecoder() throws -> any Decoder {
            NodeDecoder(node: .object(members), codingPath: codingPath, ledger: ledger)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder { try decoder(key) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [StrictJSON.Node]
        let codingPath: [any CodingKey]
        let ledger: Ledger
        var currentIndex = 0

        init(elements: [StrictJSON.Node], codingPath: [any CodingKey], ledger: Ledger) {
            self.elements = elements
            self.codingPath = codingPath
            self.ledger = ledger
        }

        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        mutating func next() throws -> NodeDecoder {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the array has no more elements"))
            }
            defer { currentIndex += 1 }
            return NodeDecoder(node: elements[currentIndex], codingPath: codingPath + [AnyKey(intValue: currentIndex)], ledger: ledger)
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, elements[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let decoder = try next()
            return try Single(node: decoder.node, codingPath: decoder.codingPath, ledger: ledger).decode(type)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next().container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { try next() }
    }

    struct Single: SingleValueDecodingContainer {
        let node: StrictJSON.Node
        let codingPath: [any CodingKey]
        let ledger: Ledger

        func decodeNil() -> Bool { node == .null }

        func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(node.kind)"))
        }

        func decode(_ type: Bool.Type) throws -> Bool {
            guard case .bool(let value) = node else { throw mismatch(type, "true or false") }
            return value
        }

        func decode(_ type: String.Type) throws -> String {
            guard case .string(let value) = node else { throw mismatch(type, "a string") }
            return value
        }

        func decode(_ type: Double.Type) throws -> Double {
            guard case .number(let text) = node, let value = Double(text), value.isFinite else { throw mismatch(type, "a number") }
            return value
        }

        func decode(_ type: Float.Type) throws -> Float {
            guard case .number(let text) = node, let value = Float(text), value.isFinite else { throw mismatch(type, "a number") }
            return value
        }

        /// An integer: written without a fraction or exponent, and in range.
        func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
            guard case .number(let text) = node else { throw mismatch(type, "a whole number") }
            guard let value = T(text) else {
                let isWhole = !text.contains(where: { ".eE".contains($0) })
                throw DecodingError.dataCorrupted(.init(
                    codingPath: codingPath, debugDescription: isWhole ? "\(text) is out of range" : "expected a whole number, found \(text)"))
            }
            return value
        }

        func decode(_ type: Int.Type) throws -> Int { try integer(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            // Primitives come through here too when a container is asked for them generically.
            switch type {
            case is Bool.Type: return try decode(Bool.self) as! T
            case is String.Type: return try decode(String.self) as! T
            case is Int.Type: return try decode(Int.self) as! T
            case is Int64.Type: return try decode(Int64.self) as! T
            case is Double.Type: return try decode(Double.self) as! T
            case is JSONValue.Type: return try Self.value(of: node, at: codingPath) as! T
            default: return try T(from: NodeDecoder(node: node, codingPath: codingPath, ledger: ledger))
            }
        }

        /// Free-form JSON (a push's `data`, a raw payload), kept as it was sent or refused: a number Tern would have
        /// to change (a whole number past 64 bits, one too large or too small for a double) is an error naming it.
        static func value(of node: StrictJSON.Node, at path: [any CodingKey]) throws -> JSONValue {
            switch node {
            case .null: return .null
            case .bool(let value): return .bool(value)
            case .string(let value): return .string(value)
            case .array(let elements):
                return .array(try elements.enumerated().map { try value(of: $1, at: path + [AnyKey(intValue: $0)]) })
            case .object(let members):
                var object: [String: JSONValue] = [:]
                for member in members { object[member.key] = try value(of: member.value, at: path + [AnyKey(member.key)]) }
                return .object(object)
            case .number(let text):
                func refuse(_ why: String) -> DecodingError {
                    .dataCorrupted(.init(codingPath: path, debugDescription: "\(text.prefix(40)) is \(why); send it as a string"))
                }
                guard text.contains(where: { ".eE".contains($0) }) else {
                    guard let whole = Int(text) else { throw refuse("a whole number past 64 bits") }
                    return .int(whole)
                }
                guard let value = Double(text), value.isFinite else { throw refuse("too large for a number Tern keeps") }
                // A mantissa with a digit other than 0 that reads as zero went below the smallest double.
                let mantissa = text.prefix { $0 != "e" && $0 != "E" }
                if value == 0, mantissa.contains(where: { ("1"..."9").contains($0) }) { throw refuse("too small for a number Tern keeps") }
                return .double(value)
            }
        }
    }
}

extension StrictJSON.Node {
    /// What the value is, for error messages.
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
