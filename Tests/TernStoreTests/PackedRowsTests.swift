import TernAPNs
import Testing

@testable import TernStore

/// How the packed rows of a fan-out's reads are taken apart: the value, without SQLite (the round trip through SQLite
/// is in RecipientTests).
@Suite("Packed rows")
struct PackedRowsTests {
    /// Every field of `columns` (each column's values as SQLite joins them, NUL between two), as `count` rows, row
    /// after row; `nullable` marks the columns packed with `=` before a value.
    private func fields(_ columns: [String], nullable: [Bool]? = nil, count: Int) throws -> [String?] {
        let packed = try PackedRows(
            columns.map { Array($0.utf8) },
            of: columns.indices.map { PackedRows.Column("c\($0)", nullable: nullable?[$0] ?? false) }, count: count)
        return (0..<count).flatMap { row in (0..<columns.count).map { packed[row, $0] } }
    }

    @Test("each column holds one value a row, NUL between two; a nullable one has = before a value and nothing for NULL")
    func fieldsReadBack() throws {
        #expect(
            try fields(["a\u{0}b", "12:~x\u{0}", "\u{0}=-1:=\u{65E5}"], nullable: [false, false, true], count: 2) == [
                "a", "12:~x", nil, "b", "", "-1:=\u{65E5}",
            ])
        // One row whose texts are empty: SQLite gives an empty text, not NULL.
        #expect(try fields(["", "", "="], nullable: [false, false, true], count: 1) == ["", "", ""])
        #expect(try fields(["", ""], count: 0) == [])
    }

    @Test("rows that come out of key order are put in it, their fields with them")
    func rowsAreInKeyOrder() throws {
        #expect(
            try fields(["b\u{0}a\u{0}d\u{0}c", "=2\u{0}=1\u{0}\u{0}=3"], nullable: [false, true], count: 4) == [
                "a", "1", "b", "2", "c", "3", "d", nil,
            ])
    }

    @Test("columns that do not hold the rows they should are an error naming the column, never a misread", arguments: [
        // A text with a NUL in it: one value more than rows.
        (["a\u{0}b\u{0}c", "x\u{0}y"], [false, false], 2, "column c0 holds more than 2 values"),
        // A NULL in a column not declared nullable, which SQLite's group_concat skipped: one value fewer.
        (["a\u{0}b", "x"], [false, false], 2, "column c1 holds 1 values, not 2"),
        // A nullable value without its =.
        (["a", "x"], [false, true], 1, "column c1 holds a value without its ="),
        // A count the bytes cannot hold: refused before an array is made for it.
        (["a", "x"], [false, false], 3, "cannot hold 3 rows"),
        (["a", "x"], [false, false], 1 << 50, "cannot hold"),
        (["", ""], [false, false], -1, "cannot hold -1 rows"),
        (["a", ""], [false, false], 0, "cannot hold 0 rows"),
    ])
    func malformedColumnsAreErrors(_ columns: [String], _ nullable: [Bool], _ count: Int, _ fault: String) {
        #expect {
            _ = try fields(columns, nullable: nullable, count: count)
        } throws: { error in
            guard case StoreError.unreadable(let message) = error else { return false }
            return message.contains(fault)
        }
    }

    @Test("keys compare by their bytes, as SQLite orders text")
    func keysCompareByBytes() throws {
        let left = try PackedRows([Array("ab\u{0}abc\u{0}abd".utf8)], of: [PackedRows.Column("key")], count: 3)
        let right = try PackedRows([Array("abc".utf8)], of: [PackedRows.Column("key")], count: 1)
        #expect(left.compareKey(0, with: right, 0) == -1)
        #expect(left.compareKey(1, with: right, 0) == 0)
        #expect(left.compareKey(2, with: right, 0) == 1)
    }

    @Test("a field read as a number, a stored word or a required text is an error naming its column when it is not one")
    func fieldErrorsNameTheirColumn() throws {
        let columns = [
            PackedRows.Column("device_id"), PackedRows.Column("last_registered_at"), PackedRows.Column("alias", nullable: true),
            PackedRows.Column("environment"),
        ]
        let packed = try PackedRows(
            [Array("a\u{0}b".utf8), Array("17\u{0}x".utf8), Array("=z\u{0}".utf8), Array("development\u{0}sandbox".utf8)],
            of: columns, count: 2)
        #expect(try packed.integer(0, 1) == 17)
        #expect(try packed.text(0, 2) == "z")
        #expect(try packed.word(0, 3, as: APNsEnvironment.self) == .development)
        for (read, fault) in [
            ({ _ = try packed.integer(1, 1) }, "column last_registered_at is not an integer"),
            ({ _ = try packed.text(1, 2) }, "column alias is NULL"),
            ({ _ = try packed.word(1, 3, as: APNsEnvironment.self) }, "column environment holds 'sandbox', which is none of production, development"),
        ] as [(() throws -> Void, String)] {
            #expect {
                try read()
            } throws: { error in
                guard case StoreError.unreadable(let message) = error else { return false }
                return message == fault
            }
        }
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
