import Testing

@testable import TernAPNs

@Suite("DeviceToken")
struct DeviceTokenTests {
    @Test("Hex in either case parses to the canonical lowercase form", arguments: [
        token32Hex,
        token32Hex.uppercased(),
        "0123456789ABCDEF0123456789abcdefFEDCBA9876543210fedcba9876543210",
    ])
    func hexInEitherCaseIsCanonicalisedToLowercase(input: String) throws {
        let token = try DeviceToken(hex: input)
        #expect(token.hex == token32Hex)
        #expect(token.description == token32Hex)
        #expect(token.bytes.count == 32)
        #expect(Array(token.bytes.prefix(4)) == [0x01, 0x23, 0x45, 0x67])
        #expect(Array(token.bytes.suffix(2)) == [0x32, 0x10])
    }

    @Test("A canonical token parses the same whether given as a String or a Substring")
    func canonicalStringsParseLikeTheGeneralParser() throws {
        for length in [1, 8, 32, 54, 100] {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
                let hex = DeviceToken.hex(bytes)
                let fromString = try DeviceToken(hex: hex)
                let fromSubstring = try DeviceToken(hex: hex[...])
                #expect(fromString == fromSubstring)
                #expect(fromString.bytes == bytes)
                #expect(fromString.hex == hex && fromSubstring.hex == hex)
            }
        }
    }

    @Test("Spaces and the <…> wrapper of NSData.description are tolerated", arguments: [
        "<01234567 89abcdef 01234567 89abcdef fedcba98 76543210 fedcba98 76543210>",
        "  <0123456789ABCDEF 0123456789abcdef fedcba9876543210 fedcba9876543210>  ",
        " 01 23 45 67 89 ab cd ef 01 23 45 67 89 ab cd ef fe dc ba 98 76 54 32 10 fe dc ba 98 76 54 32 10 ",
        "< 0123456789abcdef0123456789abcdeffedcba9876543210fedcba9876543210 >",
    ])
    func spacesAndAngleBracketWrapperAreTolerated(input: String) throws {
        #expect(try DeviceToken(hex: input).hex == token32Hex)
    }

    @Test("Tokens of 1 and 100 bytes are accepted")
    func oneAndHundredByteTokensAreAccepted() throws {
        let one = try DeviceToken(hex: "Ab")
        #expect(one.bytes == [0xab])
        #expect(one.hex == "ab")

        let hundredHex = String(repeating: "0f", count: 100)
        let hundred = try DeviceToken(hex: hundredHex)
        #expect(hundred.bytes == [UInt8](repeating: 0x0f, count: 100))
        #expect(hundred.hex == hundredHex)
        #expect(DeviceToken.maximumByteCount == 100)
    }

    @Test("Tokens of unusual production lengths (54 and 80 bytes) are accepted", arguments: [54, 80])
    func productionLengthsSeenInTheWildAreAccepted(byteCount: Int) throws {
        let token = try DeviceToken(hex: String(repeating: "a1", count: byteCount))
        #expect(token.bytes.count == byteCount)
    }

    @Test("Malformed tokens are rejected with invalidDeviceToken and the caller's field", arguments: [
        "",  // 0 bytes
        "   ",  // 0 bytes after trimming
        "<>",  // 0 bytes inside the wrapper
        String(repeating: "ab", count: 101),  // 101 bytes
        "abc",  // odd digit count
        String(repeating: "a", count: 63),  // odd digit count, near the classic size
        "abcg",  // non-hex letter
        "ab-cd",  // punctuation
        "0x abcd",  // a prefix is not hex
        "ab\tcd",  // only spaces are tolerated, not tabs
        "<abcd",  // unbalanced '<'
        "abcd>",  // unbalanced '>'
        "é1",  // non-ASCII
    ])
    func malformedTokensAreRejectedWithCallersField(input: String) {
        expectValidationError(.invalidDeviceToken, field: "tokens[3]") {
            try DeviceToken(hex: input, field: "tokens[3]")
        }
    }

    @Test("The field defaults to deviceToken")
    func defaultFieldIsDeviceToken() {
        expectValidationError(.invalidDeviceToken, field: "deviceToken") { try DeviceToken(hex: "xyz") }
        expectValidationError(.invalidDeviceToken, field: "deviceToken") { try DeviceToken(bytes: []) }
    }

    @Test("init(bytes:) accepts 1…100 bytes and round-trips through hex")
    func bytesInitRoundTripsThroughHex() throws {
        let bytes: [UInt8] = (0..<32).map { UInt8($0 * 8) }
        let fromBytes = try DeviceToken(bytes: bytes)
        #expect(fromBytes.hex == "0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8")
        let fromHex = try DeviceToken(hex: fromBytes.hex)
        #expect(fromHex == fromBytes)
        #expect(fromHex.bytes == bytes)
        #expect(try DeviceToken(bytes: [0x00]).hex == "00")
        #expect(try DeviceToken(bytes: [UInt8](repeating: 0xff, count: 100)).hex == String(repeating: "ff", count: 100))
    }

    @Test("init(bytes:) rejects 0 and 101 bytes with the caller's field", arguments: [0, 101])
    func bytesInitRejectsEmptyAndOversizedTokens(count: Int) {
        expectValidationError(.invalidDeviceToken, field: "feedback.token") {
            try DeviceToken(bytes: [UInt8](repeating: 1, count: count), field: "feedback.token")
        }
    }

    @Test("Tokens that differ only in case or formatting are equal and hash alike")
    func formattingDoesNotAffectEquality() throws {
        let a = try DeviceToken(hex: token32Hex)
        let b = try DeviceToken(hex: "<" + token32Hex.uppercased() + ">")
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
    }

    @Test("redacted shows a prefix for correlation, never the whole token")
    func redactedDoesNotRevealTheWholeToken() throws {
        let token = try DeviceToken(hex: token32Hex)
        #expect(token.redacted == "01234567…")
        #expect(!token.redacted.contains(token32Hex))
        #expect(token.redacted.count < token32Hex.count)
    }

    @Test func tokensParsedFromAnyFormOfTheSameBytesAreOneKey() throws {
        let lower = try DeviceToken(hex: "00ab ff10")
        let upper = try DeviceToken(hex: "<00ABFF10>")
        #expect(lower == upper && lower.hex == "00abff10" && upper.hex == "00abff10")
        #expect(Set([lower, upper]).count == 1)
        #expect(lower != (try DeviceToken(hex: "00abff11")))
    }
}
