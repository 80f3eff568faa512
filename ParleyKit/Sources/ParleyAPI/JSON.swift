import Foundation

/// The JSON coders every Parley party uses: ISO 8601 dates with milliseconds, UTC.
public enum ParleyJSON {
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatDate(date))
        }
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let string = try container.decode(String.self)
            guard let date = parseDate(string) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: dateError(string))
            }
            return date
        }
        return decoder
    }

    /// `2026-11-22T03:23:35.745Z`: whole milliseconds, rounded, so that a time survives a round trip
    /// through the database (which stores milliseconds) unchanged.
    public static func formatDate(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, fraction) = millis.quotientAndRemainder(dividingBy: 1000)
        let wholeSeconds = fraction < 0 ? seconds - 1 : seconds
        let milliseconds = fraction < 0 ? fraction + 1000 : fraction
        let base = Date(timeIntervalSince1970: TimeInterval(wholeSeconds)).formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
        let digits = String(milliseconds)
        return String(base.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses an RFC 3339 time (`RFC3339.timestamp`: strict, with or without fractional seconds) at
    /// millisecond precision (exactly the `Date` a value of whole milliseconds makes, so that parsed
    /// and stored times compare equal).
    public static func parseDate(_ string: String) -> Date? {
        RFC3339.timestamp(string)
    }

    /// The decoding error's description for a time that is not one: it starts with `dateErrorPrefix`,
    /// which the server turns into `400 invalid_date`.
    public static func dateError(_ string: String) -> String {
        "\(dateErrorPrefix) (2026-11-24T09:30:00Z), got '\(string.prefix(64))'"
    }

    public static let dateErrorPrefix = "expected an RFC 3339 time"
}
