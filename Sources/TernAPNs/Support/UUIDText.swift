import Foundation

/// UUIDs as APNs writes them (`8-4-4-4-12` hex digits, lowercase), formatted and parsed without Foundation's
/// `sprintf`/`sscanf` path, which cost a few percent per push at hundreds of thousands of ids a second.
public enum UUIDText {
    /// The 36-character lowercase form of the 128 bits `high ‖ low`.
    public static func format(high: UInt64, low: UInt64) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            digits.withUTF8Buffer { hex in
                var index = 0
                for nibble in 0..<32 {
                    if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                        buffer[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    let word = nibble < 16 ? high : low
                    let shift = UInt64(60 - (nibble % 16) * 4)
                    buffer[index] = hex[Int((word >> shift) & 0xf)]
                    index += 1
                }
            }
            return 36
        }
    }

    /// The 128 bits of a `8-4-4-4-12` hex UUID in either case, or nil when `text` is not one.
    ///
    /// Every APNs request and answer carries an `apns-id` that the other side parses. Called from another module,
    /// a loop over a generic `StringProtocol`'s `utf8` is not specialized and goes through the protocol for every
    /// byte, which cost 4-5% of a push's CPU; so the bytes are read from their contiguous storage when the text has
    /// one (a native `String` or `Substring` always does).
    public static func parse(_ text: some StringProtocol) -> (high: UInt64, low: UInt64)? {
        if let parsed = text.utf8.withContiguousStorageIfAvailable({ parse(utf8: $0) }) { return parsed }
        return parse(utf8: text.utf8)
    }

    private static func parse(utf8 text: some Sequence<UInt8>) -> (high: UInt64, low: UInt64)? {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var nibbles = 0
        var position = 0
        for byte in text {
            // Longer than a UUID: said at its 37th byte, not after reading all of it.
            guard position < 36 else { return nil }
            defer { position += 1 }
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                continue
            }
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            if nibbles < 16 {
                high = high << 4 | UInt64(value)
            } else {
                low = low << 4 | UInt64(value)
            }
            nibbles += 1
        }
        guard position == 36, nibbles == 32 else { return nil }
        return (high, low)
    }
}

extension UUID {
    /// The UUID of the 128 bits `high ‖ low`.
    public init(high: UInt64, low: UInt64) {
        func byte(_ word: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: word >> UInt64(56 - index * 8)) }
        self.init(uuid: (
            byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5), byte(high, 6), byte(high, 7),
            byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5), byte(low, 6), byte(low, 7)))
    }

    /// The UUID's 128 bits as two words, most significant first.
    public var words: (high: UInt64, low: UInt64) {
        withUnsafeBytes(of: uuid) { raw in
            (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }

    /// Parses `8-4-4-4-12` hex in either case; nil for anything else.
    public init?(apnsText text: some StringProtocol) {
        guard let (high, low) = UUIDText.parse(text) else { return nil }
        self.init(high: high, low: low)
    }
}
