/// An APNs device token: the opaque bytes a device got from `didRegisterForRemoteNotificationsWithDeviceToken`.
///
/// Apple says tokens are of variable length (32 bytes for years, 54 and 80 seen since, 100 allowed by the binary
/// protocol), so any length from 1 to 100 bytes is accepted. Parsing tolerates what apps and old libraries send:
/// either case, spaces, and the `<abcd 1234>` form of `NSData.description`. The canonical form is lowercase hex.
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    public static let maximumByteCount = 100

    /// The token's bytes.
    public let bytes: [UInt8]
    /// Canonical lowercase hex, as it goes into `:path`.
    public let hex: String

    /// Parses a hex token.
    /// - Throws: ``APNsValidationError`` with code `invalidDeviceToken` for anything that is not 1-100 bytes of hex.
    public init(hex input: some StringProtocol, field: String = "deviceToken") throws {
        var text = Substring(input)
        text = text.drop(while: { $0 == " " })
        while text.last == " " { text = text.dropLast() }
        if text.first == "<" {
            guard text.last == ">" else {
                throw APNsValidationError(.invalidDeviceToken, field: field, "token starts with '<' but does not end with '>'")
            }
            text = text.dropFirst().dropLast()
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var high: UInt8? = nil
        for (offset, character) in text.utf8.enumerated() {
            if character == UInt8(ascii: " ") { continue }
            guard let nibble = Self.nibble(character) else {
                throw APNsValidationError(
                    .invalidDeviceToken, field: field,
                    "token has a character that is not hex at position \(offset + 1)")
            }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard high == nil else {
            throw APNsValidationError(.invalidDeviceToken, field: field, "token has an odd number of hex digits")
        }
        try self.init(bytes: bytes, field: field)
    }

    /// Parses a hex token; one already in canonical form (lowercase hex, as the server stores tokens) in one pass,
    /// keeping the text as ``hex``. The dispatcher parses every recipient's token this way, and the general parser
    /// (a generic over `StringProtocol`, not specialized across modules) cost half a core-second per million.
    /// - Throws: ``APNsValidationError`` with code `invalidDeviceToken` for anything that is not 1-100 bytes of hex.
    public init(hex input: String, field: String = "deviceToken") throws {
        let count = input.utf8.count
        let parsed: [UInt8]? =
            if count >= 2, count % 2 == 0, count <= 2 * Self.maximumByteCount {
                input.utf8.withContiguousStorageIfAvailable { text -> [UInt8]? in
                    var valid = true
                    let bytes = [UInt8](unsafeUninitializedCapacity: count / 2) { buffer, initialized in
                        for index in 0..<(count / 2) {
                            guard let high = Self.lowercaseNibble(text[2 * index]), let low = Self.lowercaseNibble(text[2 * index + 1]) else {
                                valid = false
                                break
                            }
                            buffer[index] = high << 4 | low
                            initialized = index + 1
                        }
                    }
                    return valid ? bytes : nil
                } ?? nil
            } else {
                nil
            }
        guard let parsed else {
            // Uppercase, spaces, `<…>`, or not a token at all: the general parser says which.
            try self.init(hex: Substring(input), field: field)
            return
        }
        self.init(parsed: parsed, hex: input)
    }

    /// Bytes and their canonical hex, both already checked.
    private init(parsed bytes: [UInt8], hex: String) {
        self.bytes = bytes
        self.hex = hex
    }

    /// Wraps raw token bytes (from the binary protocol or the feedback service).
    public init(bytes: [UInt8], field: String = "deviceToken") throws {
        guard !bytes.isEmpty else {
            throw APNsValidationError(.invalidDeviceToken, field: field, "token is empty")
        }
        guard bytes.count <= Self.maximumByteCount else {
            throw APNsValidationError(
                .invalidDeviceToken, field: field,
                "token is \(bytes.count) bytes; APNs tokens are at most \(Self.maximumByteCount)")
        }
        self.bytes = bytes
        self.hex = Self.hexString(bytes)
    }

    public var description: String { hex }

    // By the bytes alone (`hex` follows from them), in one go: the dispatcher keys each token's line by the token,
    // so this runs for every notification of a fan-out, and the synthesized form hashed the bytes one at a time and
    // the hex too.
    public static func == (lhs: DeviceToken, rhs: DeviceToken) -> Bool { lhs.bytes == rhs.bytes }

    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// A short form for logs: enough to correlate, not the whole token.
    public var redacted: String { hex.count <= 8 ? hex : String(hex.prefix(8)) + "…" }

    private static func lowercaseNibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Lowercase hex of raw token bytes, without validating them.
    public static func hex(_ bytes: [UInt8]) -> String { hexString(bytes) }

    static func hexString(_ bytes: [UInt8]) -> String {
        // No table: an array of digits made here was an allocation per token parsed.
        @inline(__always) func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? nibble + 0x30 : nibble + 0x57 }
        return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            var i = 0
            for byte in bytes {
                buffer[i] = digit(byte >> 4)
                buffer[i + 1] = digit(byte & 0x0f)
                i += 2
            }
            return i
        }
    }
}
