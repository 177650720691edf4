import Foundation
import TernAPNs
import Testing

@Suite struct UUIDTextTests {
    /// Push, node and connection ids come from the system's generator (`getrandom`), not from Foundation's `UUID()`,
    /// which reads `/dev/urandom` and gave the all-zero id once the process had no descriptor left (a probe's push was
    /// stored under it, and every later push refused).
    @Test func randomIdsAreVersionFourAndDistinct() {
        var seen: Set<UUID> = []
        for _ in 0..<10_000 {
            let id = UUID.random()
            let text = id.uuidString.lowercased()
            #expect(text.count == 36)
            #expect(Array(text)[14] == "4", "version 4: \(text)")
            #expect("89ab".contains(Array(text)[19]), "variant 10: \(text)")
            #expect(!text.hasPrefix("00000000-0000"), "\(text)")
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
    }

    @Test func formattingMatchesFoundationInLowercase() {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(uuid.apnsString == uuid.uuidString.lowercased())
        }
        #expect(UUID(high: 0, low: 0).apnsString == "00000000-0000-0000-0000-000000000000")
        #expect(UUID(high: .max, low: .max).apnsString == "ffffffff-ffff-ffff-ffff-ffffffffffff")
    }

    @Test func parsingRoundTripsInEitherCase() throws {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(UUID(apnsText: uuid.apnsString) == uuid)
            #expect(UUID(apnsText: uuid.uuidString) == uuid)
        }
        let mixed = "7E726EBE-6e0c-4000-8000-0000000000Ff"
        #expect(UUID(apnsText: mixed) == UUID(uuidString: mixed))
    }

    @Test func parsingASliceReadsOnlyItsOwnBytes() {
        let uuid = UUID()
        let line = "apns-id: \(uuid.apnsString); trailing"
        let slice = line.dropFirst("apns-id: ".count).prefix(36)
        #expect(UUID(apnsText: slice) == uuid)
        #expect(UUID(apnsText: line.dropFirst("apns-id: ".count)) == nil)  // the rest of the line follows it
        #expect(UUIDText.parse(String(repeating: "0", count: 100_000)) == nil)
    }

    @Test(arguments: [
        "", "7e726ebe-6e0c-4000-8000-00000000000",  // 35 characters
        "7e726ebe-6e0c-4000-8000-0000000000000",  // 37
        "7e726ebe6e0c-4000-8000-0000000000000-",  // dash out of place
        "7e726ebe-6e0c-4000-8000-00000000000g",  // not hex
        "{7e726ebe-6e0c-4000-8000-000000000000}", "7e726ebe 6e0c 4000 8000 000000000000",
        "7e726ebe-6e0c-4000-8000-00000000000é",
    ])
    func malformedTextIsRejected(_ text: String) {
        #expect(UUID(apnsText: text) == nil)
        #expect(UUIDText.parse(text) == nil)
        #expect(throws: APNsValidationError.self) { try UUID(apnsID: text) }
    }

    @Test func wordsAreTheBytesMostSignificantFirst() {
        let uuid = UUID(uuidString: "01234567-89AB-CDEF-0011-223344556677")!
        #expect(uuid.words.high == 0x0123_4567_89ab_cdef)
        #expect(uuid.words.low == 0x0011_2233_4455_6677)
        #expect(UUID(high: uuid.words.high, low: uuid.words.low) == uuid)
    }

    @Test func generatedIDsAreDistinctVersion4UUIDs() {
        var ids = FastUUIDGenerator()
        var seen: Set<UUID> = []
        for _ in 0..<10_000 {
            let uuid = ids.nextUUID()
            let text = uuid.apnsString
            // xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx, y one of 8, 9, a, b.
            #expect(Array(text)[14] == "4")
            #expect("89ab".contains(Array(text)[19]))
            #expect(UUID(apnsText: ids.next()) != nil)
            seen.insert(uuid)
        }
        #expect(seen.count == 10_000)
        // Two generators (two chunks, two connections) do not repeat each other.
        var other = FastUUIDGenerator()
        #expect(!seen.contains(other.nextUUID()))
    }
}
