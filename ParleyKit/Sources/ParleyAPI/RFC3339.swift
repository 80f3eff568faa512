import Foundation

/// The one reader of dates and times that Parley accepts from anyone: RFC 3339 timestamps
/// (`2026-11-24T09:30:00Z`, `2026-11-24T09:30:00.125+01:00`) and plain dates (`2026-11-24`).
///
/// Written by hand because Foundation's ISO 8601 parsers are lenient: they read
/// `2026-11-24T00:00:00Zjunk` as midnight, `2026-02-30` as 2 March and hour 25 as the next day.
/// Here every character is accounted for, every field is in range for its month and year, or the
/// text is not a date.
public enum RFC3339 {
    /// A calendar day (proleptic Gregorian), as written in `yyyy-MM-dd`.
    public struct Day: Hashable, Sendable, Comparable, CustomStringConvertible {
        public var year: Int
        public var month: Int
        public var day: Int

        /// Midnight UTC at the start of the day.
        public var start: Date { Date(timeIntervalSince1970: TimeInterval(RFC3339.daysSinceEpoch(year, month, day)) * 86_400) }

        public var description: String { String(format: "%04d-%02d-%02d", year, month, day) }

        public static func < (a: Day, b: Day) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
    }

    /// `yyyy-MM-dd`, a real day of a year 0001-9999; nothing before or after it.
    public static func day(_ text: String) -> Day? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            let year = number(bytes, 0, 4), let month = number(bytes, 5, 2), let day = number(bytes, 8, 2),
            year >= 1, (1...12).contains(month), (1...daysIn(month, year)).contains(day)
        else { return nil }
        return Day(year: year, month: month, day: day)
    }

    /// `yyyy-MM-ddTHH:mm:ss[.fraction](Z|±HH:mm)` (RFC 3339's date-time; `T` and `Z` in either case),
    /// at millisecond precision: exactly the `Date` a stored value of whole milliseconds makes.
    /// A leap second (`:60`) is refused.
    public static func timestamp(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, let day = day(String(decoding: bytes[0..<10], as: UTF8.self)),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let hour = number(bytes, 11, 2), let minute = number(bytes, 14, 2), let second = number(bytes, 17, 2),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        var millis = 0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            let digits = index - start
            guard (1...9).contains(digits) else { return nil }
            // Rounded to the millisecond.
            var nanos = 0
            for position in 0..<9 { nanos = nanos * 10 + (position < digits ? Int(bytes[start + position] - 48) : 0) }
            millis = (nanos + 500_000) / 1_000_000
        }
        guard index < bytes.count else { return nil }
        var offsetMinutes = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard bytes.count == index + 6, bytes[index + 3] == UInt8(ascii: ":"),
                let hours = number(bytes, index + 1, 2), let minutes = number(bytes, index + 4, 2), hours < 24, minutes < 60
            else { return nil }
            offsetMinutes = (hours * 60 + minutes) * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        default:
            return nil
        }
        guard index == bytes.count else { return nil }
        let seconds = daysSinceEpoch(day.year, day.month, day.day) * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60
        return Date(timeIntervalSince1970: Double(seconds * 1000 + millis) / 1000)
    }

    /// A timestamp, or a plain date taken as midnight UTC (or, with `endOfDay`, the next midnight:
    /// `to=2026-11-30` covers the whole of the 30th).
    public static func instant(_ text: String, endOfDay: Bool = false) -> Date? {
        if let day = day(text) { return day.start.addingTimeInterval(endOfDay ? 86_400 : 0) }
        return timestamp(text)
    }

    static func isDigit(_ byte: UInt8) -> Bool { (48...57).contains(byte) }

    static func number(_ bytes: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[start..<(start + count)] {
            guard isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    static func daysSinceEpoch(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
