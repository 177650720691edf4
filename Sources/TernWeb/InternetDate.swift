import Foundation

/// Reads an RFC 3339 date-time as the API takes it: `2026-12-01T09:00:00Z`, `2026-12-01T18:00:00.250+09:00` (or
/// `+0900`, as Foundation's ISO 8601 style writes the offset).
///
/// Strict where Foundation's ISO 8601 parsing is lenient: `2026-02-30T09:00:00Z` is refused, not read as March 2, and
/// the offset is required (a time without one would be read in whichever zone the server runs).
public enum InternetDate {
    /// `date` as the API writes it: UTC, to the millisecond, rounded (`2026-12-01T09:00:00.250Z`). Foundation's style
    /// cuts the digits off instead, and a millisecond stored as 0.916 s is 0.91599… as a `Date`: it wrote `.915`.
    public static func format(_ date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        // Half a millisecond on: cut off, the digits are the rounded ones.
        return Date(timeIntervalSince1970: (milliseconds + 0.5) / 1000).formatted(style)
    }

    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        // yyyy-mm-ddThh:mm:ss, then optional .fraction, then Z or ±hh:mm.
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func at(_ index: Int, _ character: Unicode.Scalar) -> Bool { bytes[index] == UInt8(ascii: character) }
        guard at(4, "-"), at(7, "-"), at(10, "T"), at(13, ":"), at(16, ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        var fraction = 0.0
        if at(index, ".") {
            let start = index + 1
            index = start
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > start, index - start <= 9, let digits = number(start..<index) else { return nil }
            fraction = Double(digits) / pow(10, Double(index - start))
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        if at(index, "Z") {
            index += 1
        } else if at(index, "+") || at(index, "-") {
            // ±hh:mm, or ±hhmm as Foundation's ISO 8601 style writes it.
            let colon = bytes.count - index == 6 && at(index + 3, ":")
            guard colon || bytes.count - index == 5, let hours = number(index + 1..<index + 3),
                let minutes = number((colon ? index + 4 : index + 3)..<bytes.count), hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (at(index, "-") ? -1 : 1)
            index = bytes.count
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }

        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        // A day the month does not have (the 30th of February) comes back as another date: refused.
        guard let date = calendar.date(from: components),
            calendar.dateComponents([.year, .month, .day], from: date) == DateComponents(year: year, month: month, day: day)
        else { return nil }
        return date.addingTimeInterval(fraction - TimeInterval(offset))
    }
}
