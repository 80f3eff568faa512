import Foundation
import ParleyAPI
import ParleyDomain
import Testing

@Suite("Lifecycle rules")
struct LifecycleRulesTests {
    static let newYork: LifecycleSettingsDTO = {
        var settings = LifecycleSettingsDTO.default
        settings.timeZone = "America/New_York"
        settings.businessHours = (1...5).map { OpeningHoursDTO(weekday: $0, opens: "09:00", closes: "17:30") }
            + [OpeningHoursDTO(weekday: 6, opens: "22:00", closes: "00:00")]
        settings.holidays = ["2026-12-25"]
        return settings
    }()

    static func utc(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    @Test("open inside a day's span in the brand's time zone, closed outside it and on holidays", arguments: [
        ("2026-11-23T14:00:00Z", true),  // Monday 09:00 New York: opens
        ("2026-11-23T13:59:00Z", false),
        ("2026-11-23T22:29:00Z", true),  // 17:29
        ("2026-11-23T22:30:00Z", false),  // 17:30: closed
        ("2026-11-22T15:00:00Z", false),  // Sunday
        ("2026-11-29T04:30:00Z", true),  // Saturday 23:30: a span that closes at midnight
        ("2026-12-25T15:00:00Z", false),  // Friday, Christmas
        ("2026-07-06T13:30:00Z", true),  // Monday 09:30 in summer time (UTC-4)
    ])
    func businessHours(at: String, open: Bool) {
        #expect(LifecycleRules.isOpen(at: Self.utc(at), Self.newYork) == open)
    }

    @Test("a brand without hours is always open")
    func alwaysOpen() {
        #expect(LifecycleRules.isOpen(at: Date(), .default))
    }

    @Test("the close timer: wait, warn once per quiet spell, close")
    func closeSteps() {
        let start = Date(timeIntervalSince1970: 1_000_000)
        func step(_ minutes: Double, warnedAt: Date? = nil, warning: Int? = 10) -> LifecycleRules.CloseStep {
            LifecycleRules.closeStep(
                lastActivity: start, warnedAt: warnedAt, now: start.addingTimeInterval(minutes * 60), closeAfterMinutes: 60, warningMinutes: warning)
        }
        #expect(step(0) == .wait(until: start.addingTimeInterval(50 * 60)))
        #expect(step(50) == .warn(closeAt: start.addingTimeInterval(60 * 60)))
        #expect(step(55, warnedAt: start.addingTimeInterval(50 * 60)) == .wait(until: start.addingTimeInterval(60 * 60)))
        // A warning from before the customer's last message does not count.
        #expect(step(55, warnedAt: start.addingTimeInterval(-60)) == .warn(closeAt: start.addingTimeInterval(60 * 60)))
        #expect(step(60) == .close)
        #expect(step(10, warning: nil) == .wait(until: start.addingTimeInterval(60 * 60)))
    }

    @Test("ratings answered as text", arguments: [
        ("4", 4, nil), ("5 great service", 5, "great service"), ("3. slow", 3, "slow"), (" 1 - never again ", 1, "never again"),
    ] as [(String, Int, String?)])
    func ratingText(text: String, score: Int, comment: String?) {
        #expect(LifecycleRules.parseRating(text) == RateConversationRequest(score: score, comment: comment))
    }

    @Test("texts that are not ratings", arguments: ["0", "6", "45", "4th of July", "hello", "", "10 out of 10"])
    func notRatings(text: String) {
        #expect(LifecycleRules.parseRating(text) == nil)
    }

    @Test("the customer's language, then its base, then the brand's, then Parley's English")
    func languages() {
        let written = ["pt": "Olá", "es-MX": "Hola", "fr": "Bonjour"]
        #expect(LifecycleRules.pickText(written, language: "pt-BR", defaultLanguage: "fr", kind: .welcome) == "Olá")
        #expect(LifecycleRules.pickText(written, language: "es-mx", defaultLanguage: "fr", kind: .welcome) == "Hola")
        #expect(LifecycleRules.pickText(written, language: "de", defaultLanguage: "fr", kind: .welcome) == "Bonjour")
        #expect(LifecycleRules.pickText([:], language: "de", defaultLanguage: "fr", kind: .closed) == LifecycleRules.defaultMessage(.closed).text)
        #expect(LifecycleRules.fill("Hi, I'm {agent}. {unknown}", ["agent": "Sam"]) == "Hi, I'm Sam. {unknown}")
    }

    @Test("language tags", arguments: [("en", "en"), ("PT-BR", "pt-BR"), ("zh-Hant-TW", "zh-Hant-TW")])
    func languageTags(raw: String, stored: String) throws {
        #expect(try LifecycleRules.validateLanguage(raw, field: "language") == stored)
    }

    @Test("not language tags", arguments: ["e", "english", "en_US", "en-", "12", "en-toolongsubtag"])
    func badLanguageTags(raw: String) {
        #expect(throws: ParleyError.self) { try LifecycleRules.validateLanguage(raw, field: "language") }
    }
}
