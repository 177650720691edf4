import Foundation
import SQLKit
import SQLiteNIO
import TernAPNs

/// A query's rows read from SQLite as one BLOB, for the reads a fan-out makes of every recipient.
///
/// SQLiteNIO makes each row an array of values and each text in it a `String`: for the audience of a push, four to six
/// allocations a recipient. Here SQLite packs the rows into one value, and only what the caller keeps (a recipient's
/// device id and token) becomes a `String`.
///
/// Each field is the byte length of its text, a colon and the bytes (`36:6f1c…`); NULL is `-1:`. Integers are packed
/// as their decimal text. The lengths make any text safe, separators and colons included. Rows end with a NUL byte:
/// SQLite's `format` stops a text at its first NUL, so a text that held one would come out shorter than its length
/// says, and the row's fields would not end at the row's end. That is an error, never a misread (the API stores no
/// control characters in these columns).
struct PackedRows: Sendable {
    /// The packed fields, row after row.
    let bytes: [UInt8]
    /// Fields in each row.
    let width: Int
    /// Where each field is in ``bytes``, row after row (nil for NULL), the rows in the order of their first field's
    /// bytes: `fields[row * width + column]`.
    let fields: [Range<Int>?]

    /// How many rows are packed.
    var count: Int { fields.count / width }

    /// Runs `rows` (a SELECT whose result has `columns`, the first of them a key that is never NULL) and packs them.
    ///
    /// SQLite hands an aggregate the rows of an ordered subquery in its order, but does not promise to; asking it
    /// to (`ORDER BY` in the aggregate) makes it sort them a second time. So the rows are put in key order
    /// here if they ever come otherwise.
    ///
    /// The column names go into the SQL as they are: they must be plain identifiers (the callers' constants), never
    /// anything a request brought.
    static func read(_ columns: [String], of rows: SQLQueryString, _ session: SQLiteSession) async throws -> PackedRows {
        precondition(!columns.isEmpty && columns.allSatisfy(isPlainIdentifier), "packed columns are plain identifiers")
        // One `format` a row, rather than a concatenation per field, each of which makes a string of its own.
        let pattern = String(repeating: "%d:%s", count: columns.count)
        let arguments = columns.map { "ifnull(octet_length(\($0)), -1), \($0)" }.joined(separator: ", ")
        var query: SQLQueryString = """
            SELECT CAST(group_concat(format('\(unsafeRaw: pattern)', \(unsafeRaw: arguments)), char(0)) AS BLOB) AS packed,
                COUNT(*) AS count
            FROM (
            """
        query += rows
        query += ")"
        let result = try await session.sqliteRows(query)
        guard result.count == 1 else { throw StoreError.unreadable("packed rows came back as \(result.count) rows, not 1") }
        let values = result[0].columns
        guard values.count == 2, case .integer(let count) = values[1].data else {
            throw StoreError.unreadable("packed rows without their count")
        }
        switch values[0].data {
        case .blob(var buffer) where count > 0:
            return try PackedRows(bytes: buffer.readBytes(length: buffer.readableBytes) ?? [], count: count, width: columns.count)
        case .null where count == 0:
            return try PackedRows(bytes: [], count: 0, width: columns.count)
        default:
            throw StoreError.unreadable("packed rows are not a BLOB of \(count) rows")
        }
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

    /// Takes `bytes` apart into `count` rows of `width` fields.
    /// - Throws: ``StoreError/unreadable(_:)`` when they are not that, or a row's key is NULL.
    init(bytes: [UInt8], count: Int, width: Int) throws {
        precondition(width > 0)
        // A field takes two bytes at least (`0:`): a count the bytes cannot hold is refused before room is made for it.
        guard count >= 0, count <= bytes.count / (2 * width) else {
            throw StoreError.unreadable("\(bytes.count) packed bytes cannot hold \(count) rows")
        }
        self.bytes = bytes
        self.width = width
        var fields: [Range<Int>?] = []
        fields.reserveCapacity(count * width)
        var position = 0
        var inOrder = true
        while position < bytes.count {
            guard fields.count < count * width else { throw StoreError.unreadable("packed rows hold more than \(count) rows") }
            let end = Self.rowEnd(in: bytes, from: position)
            for column in 0..<width {
                let field = try Self.field(in: bytes, at: &position, before: end)
                if column == 0 {
                    guard let key = field else { throw StoreError.unreadable("a packed row without its key") }
                    if inOrder, fields.count > 0, let previous = fields[fields.count - width] {
                        inOrder = Self.compare(bytes, previous, bytes, key) <= 0
                    }
                }
                fields.append(field)
            }
            guard position == end else { throw StoreError.unreadable("a packed row does not end where its fields do") }
            position = end + 1
        }
        guard fields.count == count * width else { throw StoreError.unreadable("packed rows end inside a row") }
        if !inOrder {
            let rows = (0..<count).sorted { Self.compare(bytes, fields[$0 * width]!, bytes, fields[$1 * width]!) < 0 }
            fields = rows.flatMap { fields[($0 * width)..<($0 * width + width)] }
        }
        self.fields = fields
    }

    /// Where the row that starts at `position` ends: at the next NUL byte, or at the end of the bytes.
    private static func rowEnd(in bytes: [UInt8], from position: Int) -> Int {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, let found = memchr(base + position, 0, buffer.count - position) else { return buffer.count }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The field at `position`, in a row that ends at `end`: where its bytes are, or nil for NULL; `position` moves
    /// past it.
    private static func field(in bytes: [UInt8], at position: inout Int, before end: Int) throws -> Range<Int>? {
        guard position < end else { throw StoreError.unreadable("a packed row ends before its fields do") }
        if bytes[position] == UInt8(ascii: "-") {
            guard end - position >= 3, bytes[position + 1] == UInt8(ascii: "1"), bytes[position + 2] == UInt8(ascii: ":") else {
                throw StoreError.unreadable("packed rows hold a field without its length")
            }
            position += 3
            return nil
        }
        var length = 0
        var digits = 0
        while position < end, bytes[position] != UInt8(ascii: ":") {
            let digit = Int(bytes[position]) - Int(UInt8(ascii: "0"))
            guard (0...9).contains(digit), digits < 10 else { throw StoreError.unreadable("packed rows hold a field without its length") }
            length = length * 10 + digit
            digits += 1
            position += 1
        }
        guard digits > 0 else { throw StoreError.unreadable("packed rows hold a field without its length") }
        guard position < end, end - position - 1 >= length else { throw StoreError.unreadable("a packed row ends before its fields do") }
        position += 1
        defer { position += length }
        return position..<(position + length)
    }

    /// Row `row`'s field `column`: where its bytes are, or nil for NULL.
    subscript(row: Int, column: Int) -> Range<Int>? { fields[row * width + column] }

    /// Row `row`'s key (its first field).
    func key(_ row: Int) -> Range<Int> { fields[row * width]! }

    /// The field's text.
    func text(_ field: Range<Int>) -> String {
        String(decoding: bytes[field], as: UTF8.self)
    }

    /// The field's text; `column` names it in the error when it is NULL.
    func text(_ field: Range<Int>?, column: String) throws -> String {
        guard let field else { throw StoreError.unreadable("column \(column) is NULL") }
        return text(field)
    }

    /// The field as the integer its decimal text is.
    func integer(_ field: Range<Int>?, column: String) throws -> Int64 {
        guard let field, let value = Int64(text(field)) else { throw StoreError.unreadable("column \(column) is not an integer") }
        return value
    }

    /// -1, 0 or 1 as the field comes before, with or after `other`'s field by their bytes (SQLite's order for text).
    func compare(_ field: Range<Int>, with other: PackedRows, _ otherField: Range<Int>) -> Int {
        Self.compare(bytes, field, other.bytes, otherField)
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
    static let recipientColumns = ["device_id", "token", "environment", "last_registered_at", "alias"]

    /// Row `row` as a recipient: its first fields are ``recipientColumns``.
    func recipient(_ row: Int) throws -> Recipient {
        let deviceID = text(key(row))
        return Recipient(
            key: deviceID, deviceID: deviceID, token: try text(self[row, 1], column: "token"),
            environment: try APNsEnvironment(storedWord: text(self[row, 2], column: "environment"), column: "environment"),
            lastRegisteredAt: Date(milliseconds: try integer(self[row, 3], column: "last_registered_at")),
            alias: self[row, 4].map(text))
    }

    /// The recipients of a SELECT of ``recipientColumns``, by device id.
    static func recipients(_ rows: SQLQueryString, _ session: SQLiteSession) async throws -> [Recipient] {
        let packed = try await read(recipientColumns, of: rows, session)
        return try (0..<packed.count).map(packed.recipient)
    }
}
