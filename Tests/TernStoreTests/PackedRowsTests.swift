import Testing

@testable import TernStore

/// How the packed rows of a fan-out's reads are taken apart: the value, without SQLite (the round trip through SQLite
/// is in RecipientTests).
@Suite("Packed rows")
struct PackedRowsTests {
    /// Every field of `text`, packed as `count` rows of `width`, row after row.
    private func fields(_ text: String, count: Int, width: Int = 1) throws -> [String?] {
        let packed = try PackedRows(bytes: Array(text.utf8), count: count, width: width)
        return (0..<count).flatMap { row in (0..<width).map { packed[row, $0].map(packed.text) } }
    }

    @Test("a field is its length, a colon and its bytes, whatever they hold; -1 is NULL; a NUL byte ends a row")
    func fieldsReadBack() throws {
        #expect(try fields("5:12:~x-1:0:\u{0}3:abc3:-1:3:\u{65E5}", count: 2, width: 3) == ["12:~x", nil, "", "abc", "-1:", "\u{65E5}"])
        #expect(try fields("", count: 0) == [])
    }

    @Test("rows that come out of key order are put in it, their fields with them")
    func rowsAreInKeyOrder() throws {
        #expect(try fields("1:b1:2\u{0}1:a1:1\u{0}1:d-1:\u{0}1:c1:3", count: 4, width: 2) == ["a", "1", "b", "2", "c", "3", "d", nil])
    }

    @Test("bytes that are not the rows they should be are an error naming the fault, never a read past the row", arguments: [
        ("3:ab", 1, "ends before its fields do"),
        ("30", 1, "ends before its fields do"),
        ("x:abc", 1, "without its length"),
        (":abc", 1, "without its length"),
        ("12345678901:a", 1, "without its length"),
        ("-1:", 1, "without its key"),
        ("-2:", 1, "without its length"),
        ("-1", 1, "without its length"),
        ("1:a1:b", 1, "does not end where its fields do"),
        ("1:a\u{0}1:b", 1, "more than 1 rows"),
        ("10:abcdefghij", 2, "end inside a row"),
        // A count the bytes cannot hold: refused before an array is made for it.
        ("1:a", 2, "cannot hold 2 rows"),
        ("1:a", 1 << 50, "cannot hold"),
        ("", -1, "cannot hold -1 rows"),
        // A text with a NUL in it, which SQLite's `format` cut short: its length reaches into the next row.
        ("3:a\u{0}1:b", 2, "ends before its fields do"),
    ])
    func malformedRowsAreErrors(_ text: String, _ count: Int, _ fault: String) {
        #expect {
            _ = try fields(text, count: count)
        } throws: { error in
            guard case StoreError.unreadable(let message) = error else { return false }
            return message.contains(fault)
        }
    }

    @Test("fields compare by their bytes, as SQLite orders text")
    func fieldsCompareByBytes() throws {
        let left = try PackedRows(bytes: Array("2:ab\u{0}3:abc\u{0}3:abd".utf8), count: 3, width: 1)
        let right = try PackedRows(bytes: Array("3:abc".utf8), count: 1, width: 1)
        #expect(left.compare(left.key(0), with: right, right.key(0)) == -1)
        #expect(left.compare(left.key(1), with: right, right.key(0)) == 0)
        #expect(left.compare(left.key(2), with: right, right.key(0)) == 1)
    }

    @Test("only plain identifiers may name a packed column: nothing that could end the name or add a clause")
    func columnNamesArePlainIdentifiers() {
        for name in ["device_id", "deactivated_at", "Token2", "_x"] {
            #expect(PackedRows.isPlainIdentifier(name), "\(name)")
        }
        for name in ["", "2x", "device id", "d.device_id", "x;DROP TABLE devices", "x--", "\"x\"", "x'", "tokén", "x)", "x\u{0}"] {
            #expect(!PackedRows.isPlainIdentifier(name), "\(name)")
        }
    }
}
