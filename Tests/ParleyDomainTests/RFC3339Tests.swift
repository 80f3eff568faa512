import Foundation
import ParleyAPI
import Testing

@Suite("Dates and times: one strict reader (RFC 3339 and plain dates)")
struct RFC3339Tests {
    @Test("timestamps: every RFC 3339 form, at millisecond precision, equal to Foundation's reading of the same instant")
    func timestamps() throws {
        let midnight = Date(timeIntervalSince1970: 1_795_478_400)  // 2026-11-24T00:00:00Z
        #expect(RFC3339.timestamp("2026-11-24T00:00:00Z") == midnight)
        #expect(RFC3339.timestamp("2026-11-24t00:00:00z") == midnight)
        #expect(RFC3339.timestamp("2026-11-24T01:30:00+01:30") == midnight)
        #expect(RFC3339.timestamp("2026-11-23T20:00:00-04:00") == midnight)
        // Whole milliseconds, as the database keeps them.
        let millis = { (ms: Int64) in Date(timeIntervalSince1970: Double(1_795_478_400_000 + ms) / 1000) }
        #expect(RFC3339.timestamp("2026-11-24T00:00:00.125Z") == millis(125))
        #expect(RFC3339.timestamp("2026-11-24T00:00:00.1Z") == millis(100))
        #expect(RFC3339.timestamp("2026-11-24T00:00:00.123456789Z") == millis(123))
        #expect(RFC3339.timestamp("2026-11-24T00:00:00.9996Z") == millis(1000))
        #expect(RFC3339.timestamp("2024-02-29T12:00:00Z") != nil)
        #expect(RFC3339.timestamp("1970-01-01T00:00:00Z") == Date(timeIntervalSince1970: 0))
        #expect(RFC3339.timestamp("1969-12-31T23:59:59Z") == Date(timeIntervalSince1970: -1))
        // Whatever the server writes, it reads back.
        let now = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded() / 1000)
        #expect(ParleyJSON.parseDate(ParleyJSON.formatDate(now)) == now)
    }

    @Test("anything else is not a time", arguments: [
        "2026-11-24T00:00:00Zjunk", "2026-02-30T00:00:00Z", "2026-11-24T25:00:00Z", "2026-11-24T23:60:00Z", "2026-11-24T23:59:60Z",
        "2026-13-01T00:00:00Z", "2026-11-00T00:00:00Z", "2025-02-29T00:00:00Z", "2026-11-24 00:00:00Z", "2026-11-24T00:00:00",
        "2026-11-24T00:00Z", "2026-11-24T00:00:00.Z", "2026-11-24T00:00:00.1234567890Z", "2026-11-24T00:00:00+0100",
        "2026-11-24T00:00:00+24:00", "+2026-11-24T00:00:00Z", " 2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z ", "２０２６-11-24T00:00:00Z",
        "0000-01-01T00:00:00Z", "", "yesterday",
    ])
    func notTimes(text: String) {
        #expect(RFC3339.timestamp(text) == nil)
    }

    @Test("plain dates: real days only, nothing before or after")
    func days() {
        #expect(RFC3339.day("2026-11-24")?.start == Date(timeIntervalSince1970: 1_795_478_400))
        #expect(RFC3339.day("2024-02-29") != nil)
        #expect(RFC3339.day("2000-02-29") != nil)
        for text in ["2026-02-30", "1900-02-29", "2026-04-31", "2026-1-5", "2026-11-24junk", "2026/11/24", "20261124", "2026-11-24T00:00:00Z"] {
            #expect(RFC3339.day(text) == nil, "\(text)")
        }
        #expect(RFC3339.instant("2026-11-30", endOfDay: true) == RFC3339.day("2026-12-01")?.start)
        #expect(RFC3339.instant("2026-11-30T10:00:00Z", endOfDay: true) == RFC3339.timestamp("2026-11-30T10:00:00Z"))
    }

    @Test("a JSON body's time goes through the same reader")
    func json() throws {
        struct Body: Decodable { var at: Date }
        let decoder = ParleyJSON.makeDecoder()
        #expect(try decoder.decode(Body.self, from: Data(#"{"at":"2026-11-24T00:00:00.5Z"}"#.utf8)).at == Date(timeIntervalSince1970: 1_795_478_400.5))
        #expect(throws: DecodingError.self) { try decoder.decode(Body.self, from: Data(#"{"at":"2026-02-30T00:00:00Z"}"#.utf8)) }
    }
}
