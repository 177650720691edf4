import Testing

@testable import TernSimulator

/// The byte scan that tells whether a payload mentions `content-available` (every request's payload goes through
/// it before any JSON is parsed), as values.
struct PayloadScanTests {
    static let key = Array("content-available".utf8)

    @Test("The key is found at the start, in the middle and at the very end", arguments: [
        #"content-available"#, #"{"aps":{"content-available":1}}"#, #"{"x":"content-available"#,
    ])
    func found(_ body: String) {
        #expect(RequestValidator.mentions(Self.key, in: Array(body.utf8)))
    }

    @Test("A near miss, a key cut off at the end, a shorter body and an empty one are not matches", arguments: [
        #"{"aps":{"content-availabl":1}}"#, #"{"aps":{"alert":"x"}} content-availabl"#, #"content"#, "",
        #"ccontent-availablx content-avail"#,
    ])
    func notFound(_ body: String) {
        #expect(!RequestValidator.mentions(Self.key, in: Array(body.utf8)))
    }

    @Test func aMatchThatStartsInsideAFailedOneIsFound() {
        #expect(RequestValidator.mentions(Array("aab".utf8), in: Array("aaab".utf8)))
    }

    @Test func isContentAvailableOnlyStillParsesWhatTheScanLetsThrough() {
        #expect(RequestValidator.isContentAvailableOnly(Array(#"{"aps":{"content-available":1}}"#.utf8)))
        #expect(!RequestValidator.isContentAvailableOnly(Array(#"{"aps":{"content-available":1,"sound":"a"}}"#.utf8)))
        #expect(!RequestValidator.isContentAvailableOnly(Array(#"{"aps":{"alert":"content-available"}}"#.utf8)))
        #expect(!RequestValidator.isContentAvailableOnly(Array(#"{"aps":{"content-available":0}}"#.utf8)))
    }
}
