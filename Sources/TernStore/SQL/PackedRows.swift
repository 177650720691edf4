import Foundation
import SQLKit
import SQLiteNIO
import TernAPNs

/// A query's rows read from SQLite one column at a time, for the reads a fan-out makes of every recipient.
///
/// SQLiteNIO makes each row an array of values and each text in it a `String`: for the audience of a push, four to six
/// allocations a recipient. Here SQLite joins each column's values into one BLOB (`group_concat`, a NUL byte between
/// two values), and only what the caller keeps (a recipient's device id and token) becomes a `String`. One aggregate
/// per column costs SQLite less than building a text for each row (`format`, or `||` field by field): those make a
/// string per row and then copy it again into the aggregate.
///
/// Nothing a text holds can be misread:
/// - every column must come back with exactly as many values as the query had rows (`COUNT(*)`). A text with a NUL
///   byte in it would add a value, and a NULL in a column not declared nullable would take one away (`group_concat`
///   skips NULLs): either is an error. The API stores no control characters in these columns;
/// - a nullable column is packed as `'=' || value`, and as an empty text for NULL, so an empty text and NULL stay
///   apart;
/// - integers come back as their decimal text.
struct PackedRows: Sendable {
    /// A column to read, and whether it may be NULL. Its name goes into the SQL as it is: a plain identifier
    /// (``isPlainIdentifier(_:)``), the callers' constants, never anything a request brought.
    struct Column: Sendable, Equatable {
        let name: String
        let nullable: Bool

        init(_ name: String, nullable: Bool = false) {
            precondition(PackedRows.isPlainIdentifier(name), "packed columns are plain identifiers")
            self.name = name
            self.nullable = nullable
        }
    }

    /// The columns read, in the order of their values.
    private let columns: [Column]
    /// Each column's values, NUL between two of them.
    private let values: [[UInt8]]
    /// Where each field is in its column's values (nil for NULL), row after row, the rows in the order of their first
    /// field's bytes: `fields[row * width + column]`.
    private let fields: [Range<Int>?]

    /// Fields in each row.
    private var width: Int { columns.count }
    /// How many rows are packed.
    var count: Int { fields.count / width }

    /// Runs `rows` (a SELECT whose result has `columns`, the first of them a key that is never NULL) and packs them.
    ///
    /// SQLite hands an aggregate the rows of an ordered subquery in its order, but does not promise to; asking it
    /// to (`ORDER BY` in the aggregate) makes it sort them a second time. So the rows are put in key order
    /// here if they ever come otherwise.
    static func read(_ columns: [Column], of rows: SQLQueryString, _ session: SQLiteSession) async throws -> PackedRows {
        let aggregates = columns.map { column in
            let value = column.nullable ? "ifnull('=' || \(column.name), '')" : column.name
            return "CAST(group_concat(\(value), char(0)) AS BLOB)"
        }
        var query: SQLQueryString = "SELECT \(unsafeRaw: aggregates.joined(separator: ", ")), COUNT(*) FROM ("
        query += rows
        query += ")"
        let result = try await session.sqliteRows(query)
        guard result.count == 1 else { throw StoreError.unreadable("packed rows came back as \(result.count) rows, not 1") }
        let values = result[0].columns
        guard values.count == columns.count + 1, case .integer(let count) = values[columns.count].data else {
            throw StoreError.unreadable("packed rows without their count")
        }
        var packed: [[UInt8]] = []
        packed.reserveCapacity(columns.count)
        for (column, value) in zip(columns, values) {
            switch value.data {
            case .blob(var buffer) where count > 0:
                packed.append(buffer.readBytes(length: buffer.readableBytes) ?? [])
            case .null where count == 0:
                packed.append([])
            default:
                throw StoreError.unreadable("column \(column.name) is not packed as \(count) values")
            }
        }
        return try PackedRows(packed, of: columns, count: count)
    }

    /// Whether `name` can go into SQL unquoted as a column: ASCII letters, digits and underscores, not starting with a
    /// digit. Nothing that could end the name or start another clause (quotes, spaces, dots, semicolons, comments).
    static func isPlainIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    /// Takes `values` (each of `columns`' values as SQLite joined them) apart into `count` rows, one field of each
    /// column a row.
    /// - Throws: ``StoreError/unreadable(_:)`` when a column does not hold `count` values, or a nullable one's value
    ///   lacks its `=`.
    init(_ values: [[UInt8]], of columns: [Column], count: Int) throws {
        precondition(!columns.isEmpty && !columns[0].nullable, "packed rows have a key that is never NULL")
        precondition(values.count == columns.count, "one packed value for each column")
        let width = columns.count
        // A value takes one byte at least, with its NUL, except the last: a count the bytes cannot hold is refused
        // before room is made for it.
        guard count >= 0, values.allSatisfy({ count <= $0.count + 1 }), count > 0 || values.allSatisfy(\.isEmpty) else {
            throw StoreError.unreadable("packed columns cannot hold \(count) rows")
        }
        var fields = [Range<Int>?](repeating: nil, count: count * width)
        for (column, bytes) in values.enumerated() where count > 0 {
            let (name, nullable) = (columns[column].name, columns[column].nullable)
            var row = 0
            var start = 0
            try bytes.withUnsafeBufferPointer { buffer in
                while true {
                    let end = Self.valueEnd(in: buffer, from: start)
                    guard row < count else { throw StoreError.unreadable("column \(name) holds more than \(count) values") }
                    if !nullable {
                        fields[row * width + column] = start..<end
                    } else if end > start {
                        guard buffer[start] == UInt8(ascii: "=") else {
                            throw StoreError.unreadable("column \(name) holds a value without its =")
                        }
                        fields[row * width + column] = (start + 1)..<end
                    }
                    row += 1
                    guard end < buffer.count else { break }
                    start = end + 1
                }
            }
            guard row == count else { throw StoreError.unreadable("column \(name) holds \(row) values, not \(count)") }
        }
        self.columns = columns
        self.values = values
        let keys = values[0]
        var inOrder = true
        for row in 1..<max(count, 1) where inOrder {
            inOrder = Self.compare(keys, fields[(row - 1) * width]!, keys, fields[row * width]!) <= 0
        }
        if inOrder {
            self.fields = fields
        } else {
            let rows = (0..<count).sorted { Self.compare(keys, fields[$0 * width]!, keys, fields[$1 * width]!) < 0 }
            self.fields = rows.flatMap { fields[($0 * width)..<($0 * width + width)] }
        }
    }

    /// Where the value that starts at `position` ends: at the next NUL byte, or at the end of the bytes.
    private static func valueEnd(in buffer: UnsafeBufferPointer<UInt8>, from position: Int) -> Int {
        guard let base = buffer.baseAddress, position < buffer.count,
            let found = memchr(base + position, 0, buffer.count - position)
        else { return buffer.count }
        return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
    }

    /// Row `row`'s field `column` as text, or nil for NULL.
    subscript(row: Int, column: Int) -> String? {
        fields[row * width + column].map { String(decoding: values[column][$0], as: UTF8.self) }
    }

    /// Row `row`'s key (its first field) as text.
    func key(_ row: Int) -> String { self[row, 0]! }

    /// Row `row`'s field `column`, which must not be NULL.
    func text(_ row: Int, _ column: Int) throws -> String {
        guard let text = self[row, column] else { throw StoreError.unreadable("column \(columns[column].name) is NULL") }
        return text
    }

    /// Row `row`'s field `column` as the integer its decimal text is.
    func integer(_ row: Int, _ column: Int) throws -> Int64 {
        guard let value = Int64(try text(row, column)) else {
            throw StoreError.unreadable("column \(columns[column].name) is not an integer")
        }
        return value
    }

    /// Row `row`'s field `column` as the value its stored word stands for (`production`, …).
    func word<Word: StoredWord>(_ row: Int, _ column: Int, as _: Word.Type = Word.self) throws -> Word {
        try Word(storedWord: text(row, column), column: columns[column].name)
    }

    /// -1, 0 or 1 as row `row`'s key comes before, with or after the key of `other`'s row `otherRow` by their bytes
    /// (SQLite's order for text).
    func compareKey(_ row: Int, with other: PackedRows, _ otherRow: Int) -> Int {
        Self.compare(values[0], fields[row * width]!, other.values[0], other.fields[otherRow * other.width]!)
    }

    private static func compare(_ first: [UInt8], _ firstField: Range<Int>, _ second: [UInt8], _ secondField: Range<Int>) -> Int {
        first.withUnsafeBufferPointer { first in
            second.withUnsafeBufferPointer { second in
                compareBytes(UnsafeBufferPointer(rebasing: first[firstField]), UnsafeBufferPointer(rebasing: second[secondField]))
            }
        }
    }
}

extension PackedRows {
    /// The columns of a recipient, in the order ``recipient(_:)`` reads them.
    static let recipientColumns: [Column] = [
        Column("device_id"), Column("token"), Column("environment"), Column("last_registered_at"), Column("alias", nullable: true),
    ]

    /// Row `row` as a recipient: its first fields are ``recipientColumns``.
    func recipient(_ row: Int) throws -> Recipient {
        let deviceID = key(row)
        return Recipient(
            key: deviceID, deviceID: deviceID, token: try text(row, 1),
            environment: try word(row, 2),
            lastRegisteredAt: Date(milliseconds: try integer(row, 3)),
            alias: self[row, 4])
    }

    /// The recipients of a SELECT of ``recipientColumns``, by device id.
    static func recipients(_ rows: SQLQueryString, _ session: SQLiteSession) async throws -> [Recipient] {
        let packed = try await read(recipientColumns, of: rows, session)
        return try (0..<packed.count).map(packed.recipient)
    }
}
