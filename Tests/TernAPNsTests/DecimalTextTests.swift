import Testing

@testable import TernAPNs

/// The decimal reader under `apns-priority` and `apns-expiration`, as values.
struct DecimalTextTests {
    @Test("Digits read as their value, leading zeros included, up to the largest 64-bit number", arguments: [
        ("0", 0), ("5", 5), ("10", 10), ("010", 10), ("1700003600", 1_700_003_600),
        ("9223372036854775807", Int64.max),
    ] as [(String, Int64)])
    func digits(_ text: String, _ value: Int64) {
        #expect(DecimalText.parse(text) == value)
    }

    @Test("Anything else is not a number", arguments: [
        "", " 1", "1 ", "+1", "-1", "1.5", "1e9", "0x10", "١٠",  // Arabic-Indic digits are not ASCII digits
        "9223372036854775808", String(repeating: "9", count: 100_000),
    ])
    func notANumber(_ text: String) {
        #expect(DecimalText.parse(text) == nil)
    }

    @Test func aSliceReadsOnlyItsOwnBytes() {
        let line = "apns-priority: 10; apns-expiration: 1700003600"
        let parts = line.split(separator: ";").map { $0.split(separator: ":")[1].dropFirst() }
        #expect(parts.map(DecimalText.parse) == [10, 1_700_003_600])
    }
}
