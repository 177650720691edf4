import Foundation

/// Keys in the order the databases keep text: by their UTF-8 bytes (SQLite's `BINARY` collation; on PostgreSQL every
/// text column is `COLLATE "C"`). That is neither `String`'s order nor its equality: `"é"` precomposed and `"e"` with
/// a combining accent are equal strings and different keys. Audiences are paged, merged and marked in this order.
extension String {
    /// -1, 0 or 1 as this string comes before, with or after `other` by their UTF-8 bytes: one `memcmp`, where the
    /// `utf8` views' `lexicographicallyPrecedes` went byte by byte through their iterators (a microsecond a key in a
    /// fan-out's merge).
    func comparedByBytes(with other: String) -> Int {
        var first = self
        var second = other
        return first.withUTF8 { first in second.withUTF8 { second in compareBytes(first, second) } }
    }

    /// Whether this string comes before `other` by their UTF-8 bytes.
    func precedesByBytes(_ other: String) -> Bool { comparedByBytes(with: other) < 0 }
}

/// -1, 0 or 1 as `first` comes before, with or after `second`, byte by byte (a shorter prefix first): one `memcmp`.
func compareBytes(_ first: UnsafeBufferPointer<UInt8>, _ second: UnsafeBufferPointer<UInt8>) -> Int {
    let common = Swift.min(first.count, second.count)
    if common > 0, let a = first.baseAddress, let b = second.baseAddress {
        let order = memcmp(a, b, common)
        if order != 0 { return order < 0 ? -1 : 1 }
    }
    return first.count == second.count ? 0 : (first.count < second.count ? -1 : 1)
}
