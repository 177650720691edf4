import Testing

@testable import TernStore

/// The order keys are paged, merged and marked in: the databases' order for text, by UTF-8 bytes.
struct ByteOrderTests {
    @Test func keysCompareByTheirUTF8Bytes() {
        #expect("device-0001".comparedByBytes(with: "device-0002") == -1)
        #expect("device-0002".comparedByBytes(with: "device-0001") == 1)
        #expect("device-0001".comparedByBytes(with: "device-0001") == 0)
        // A key that begins another comes first; the empty key before every other.
        #expect("device-000".comparedByBytes(with: "device-0000") == -1)
        #expect("device-0000".comparedByBytes(with: "device-000") == 1)
        #expect("".comparedByBytes(with: "a") == -1)
        #expect("".comparedByBytes(with: "") == 0)
        // Upper case before lower case (0x5A, 0x7A); anything beyond ASCII after all of ASCII.
        #expect("Zulu".precedesByBytes("zulu"))
        #expect("zzz".precedesByBytes("\u{E9}"))
        #expect(!"\u{1F426}".precedesByBytes("\u{E9}"))
    }

    @Test func equalStringsThatAreDifferentBytesAreDifferentKeys() {
        let precomposed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(precomposed == decomposed, "Swift's equality is canonical equivalence")
        // "e" (0x65) before the first byte of "é" (0xC3): the decomposed key comes first, as in the database.
        #expect(decomposed.comparedByBytes(with: precomposed) == -1)
        #expect(precomposed.comparedByBytes(with: decomposed) == 1)
    }

    @Test func theOrderIsTheUTF8ViewsLexicographicOrder() {
        let keys = ["", "a", "ab", "b", "Z", "0", "device-0001", "device-000", "\u{E9}", "e\u{301}", "\u{1F426}", "caf\u{E9}", "cafe"]
        for first in keys {
            for second in keys {
                let expected =
                    first.utf8.lexicographicallyPrecedes(second.utf8) ? -1 : (second.utf8.lexicographicallyPrecedes(first.utf8) ? 1 : 0)
                #expect(first.comparedByBytes(with: second) == expected, "\(first.debugDescription) vs \(second.debugDescription)")
            }
        }
    }
}
