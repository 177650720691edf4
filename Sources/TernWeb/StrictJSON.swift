import Foundation

/// JSON as RFC 8259 writes it, and nothing more: what request bodies are read with.
///
/// Foundation's reader is lenient where an API must not be: it takes trailing commas and a byte-order mark, and of
/// a key given twice keeps one silently. Here each of those, invalid UTF-8, and nesting deeper than ``maximumDepth``
/// is an error that says where.
public enum StrictJSON {
    /// A parsed value. Numbers keep their text, so each type decodes them exactly; objects keep their order.
    public indirect enum Node: Sendable, Equatable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([Node])
        case object([(key: String, value: Node)])

        public static func == (lhs: Node, rhs: Node) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): true
            case (.bool(let a), .bool(let b)): a == b
            case (.number(let a), .number(let b)): a == b
            case (.string(let a), .string(let b)): a == b
            case (.array(let a), .array(let b)): a == b
            case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            default: false
            }
        }
    }

    /// Where and why the text is not JSON; `path` names the member being read (`audience.aliases[2]`), empty at the top.
    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var path: String
        public var offset: Int
        public var description: String { "\(message) at byte \(offset)" + (path.isEmpty ? "" : " (in \(path))") }
    }

    public static let maximumDepth = 64

    public static func parse(_ bytes: some Collection<UInt8>) throws(SyntaxError) -> Node {
        var parser = Parser(bytes: Array(bytes))
        if parser.bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw SyntaxError(message: "the body starts with a byte-order mark; send plain UTF-8 JSON", path: "", offset: 0)
        }
        parser.skipWhitespace()
        let node = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the JSON value") }
        return node
    }

    struct Parser {
        let bytes: [UInt8]
        var index = 0
        var path: [String] = []

        func error(_ message: String) -> SyntaxError {
            SyntaxError(message: message, path: path.joined(separator: ".").replacingOccurrences(of: ".[", with: "["), offset: index)
        }

        /// The text ends before the JSON does: the body is cut short, whichever member it was in.
        func truncated(_ message: String) -> SyntaxError {
            SyntaxError(message: message, path: "", offset: index)
        }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) throws(SyntaxError) -> Node {
            guard depth < StrictJSON.maximumDepth else { throw error("nested more than \(StrictJSON.maximumDepth) deep") }
            guard index < bytes.count else { throw truncated("the JSON ends early") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected character '\(Self.printable(bytes[index]))'")
            }
        }

        mutating func literal(_ word: String) throws(SyntaxError) {
            let expected = Array(word.utf8)
            guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
                throw error("unexpected character '\(Self.printable(bytes[index]))'")
            }
            index += expected.count
        }

        mutating func object(depth: Int) throws(SyntaxError) -> Node {
            index += 1
            var members: [(key: String, value: Node)] = []
            var seen: Set<String> = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object([])
            }
            while true {
                skipWhitespace()
                guard index < bytes.count else { throw truncated("the JSON ends inside an object") }
                guard bytes[index] == UInt8(ascii: "\"") else {
                    throw error(members.isEmpty ? "expected a member name in quotes" : "expected a member name after ',' (no trailing commas)")
                }
                let key = try string()
                guard seen.insert(key).inserted else {
                    path.append(key)
                    throw error("'\(key.prefix(64))' is given twice")
                }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
                index += 1
                skipWhitespace()
                path.append(key)
                let member = try value(depth: depth + 1)
                path.removeLast()
                members.append((key, member))
                skipWhitespace()
                guard index < bytes.count else { throw truncated("the JSON ends inside an object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { throw error("expected ',' or '}' in an object") }
                index += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) throws(SyntaxError) -> Node {
            index += 1
            var elements: [Node] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array([])
            }
            while true {
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { throw error("a ']' after ',' (no trailing commas)") }
                path.append("[\(elements.count)]")
                elements.append(try value(depth: depth + 1))
                path.removeLast()
                skipWhitespace()
                guard index < bytes.count else { throw truncated("the JSON ends inside an array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { throw error("expected ',' or ']' in an array") }
                index += 1
                return .array(elements)
            }
        }

        mutating func number() throws(SyntaxError) -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, Self.isDigit(bytes[index]) else { throw error("a number needs digits") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
                if index < bytes.count, Self.isDigit(bytes[index]) { throw error("a number may not start with 0") }
            } else {
                while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, Self.isDigit(bytes[index]) else { throw error("a '.' needs digits after it") }
                while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, Self.isDigit(bytes[index]) else { throw error("an exponent needs digits") }
                while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func string() throws(SyntaxError) -> String {
            index += 1
            var scalars = String.UnicodeScalarView()
            var runStart = index
            func flush(_ end: Int) throws(SyntaxError) {
                guard runStart < end else { return }
                // Validated UTF-8 only: a lone continuation byte or an overlong form is an error, not U+FFFD.
                guard let text = String(validating: bytes[runStart..<end], as: UTF8.self) else { throw error("the text is not valid UTF-8") }
                scalars.append(contentsOf: text.unicodeScalars)
            }
            while true {
                guard index < bytes.count else { throw truncated("a string is not closed") }
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    try flush(index)
                    index += 1
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    try flush(index)
                    index += 1
                    scalars.append(try escape())
                    runStart = index
                case 0x00..<0x20:
                    throw error("a control character in a string must be escaped")
                default:
                    index += 1
                }
            }
        }

        mutating func escape() throws(SyntaxError) -> Unicode.Scalar {
            guard index < bytes.count else { throw truncated("a string is not closed") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return "\""
            case UInt8(ascii: "\\"): return "\\"
            case UInt8(ascii: "/"): return "/"
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                let high = try hex4()
                if (0xD800..<0xDC00).contains(high) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("a lone surrogate in \\u escapes")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("a lone surrogate in \\u escapes") }
                    return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
                }
                guard let scalar = Unicode.Scalar(high) else { throw error("a lone surrogate in \\u escapes") }
                // The databases keep no NUL in text (SQLite's reader ends a text at it, PostgreSQL refuses it), so a
                // value with one would be stored other than it was sent.
                guard scalar != "\u{0}" else { throw error("a NUL character (\\u0000) in a string") }
                return scalar
            default:
                throw error("an unknown escape '\\\(Self.printable(byte))'")
            }
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw error("\\u needs four hex digits") }
            var value: UInt32 = 0
            for byte in bytes[index..<index + 4] {
                guard let digit = Self.hexValue(byte) else { throw error("\\u needs four hex digits") }
                value = value << 4 | digit
            }
            index += 4
            return value
        }

        static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

        static func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
            }
        }

        static func printable(_ byte: UInt8) -> String {
            (0x21..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : String(format: "0x%02X", byte)
        }
    }
}
