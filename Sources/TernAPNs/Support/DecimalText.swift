/// Header values that are whole numbers in decimal digits only (`apns-priority`, `apns-expiration`): no sign, no
/// spaces, no fraction.
///
/// Read from the text's bytes: the simulator reads a priority on every request, and Swift's `Int(_:)` over a generic
/// `StringProtocol` from another module is not specialized; with the digit check before it, that cost 1-2% of a
/// push's CPU.
enum DecimalText {
    /// The value of `text`, or nil if it is empty, has anything but ASCII digits, or does not fit in 64 bits.
    static func parse(_ text: some StringProtocol) -> Int64? {
        if let parsed = text.utf8.withContiguousStorageIfAvailable({ parse(utf8: $0) }) { return parsed }
        return parse(utf8: text.utf8)
    }

    private static func parse(utf8 text: some Sequence<UInt8>) -> Int64? {
        var value: Int64 = 0
        var digits = 0
        for byte in text {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowToo) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !overflow, !overflowToo else { return nil }
            value = sum
            digits += 1
        }
        return digits > 0 ? value : nil
    }
}
