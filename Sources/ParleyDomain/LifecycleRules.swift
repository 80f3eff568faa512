import Foundation
import ParleyAPI

/// Conversations' lives after the first message: closing on their own, the rating question,
/// business hours, and the brand's automatic messages.
public enum LifecycleRules {
    /// An automatic close is 5 minutes to 30 days after the customer's last message.
    public static let autoCloseMinutesRange = 5...43_200
    /// The warning comes 1 minute to a day before the close.
    public static let warningMinutesRange = 0...1_440
    public static let maxOpeningSpans = 28
    public static let maxHolidays = 200
    public static let maxAutomaticMessageLength = 1_000
    public static let maxRatingComment = 1_000
    /// A rating answered as text on a messaging channel is taken for this long after the question.
    public static let surveyAnswerWindow: TimeInterval = 7 * 86_400

    // MARK: Settings

    /// A BCP 47 language tag as browsers and apps send it ("en", "pt-BR", "zh-Hant-TW"), lowercased
    /// language and the rest as given.
    public static func validateLanguage(_ raw: String, field: String) throws(ParleyError) -> String {
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard raw.count <= 35, let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }),
            parts.dropFirst().allSatisfy({ (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        else {
            throw .invalidField(field, "'\(field)' must be a language tag like \"en\" or \"pt-BR\".")
        }
        return ([first.lowercased()] + parts.dropFirst()).joined(separator: "-")
    }

    /// A device's or browser's language as a hint: a language tag, or a POSIX locale turned into one
    /// (`pt_BR.UTF-8` → `pt-BR`); nil for anything else (`C`, `POSIX`, junk), never an error.
    public static func languageHint(_ raw: String) -> String? {
        var text = raw.trimmingCharacters(in: .whitespaces)
        if let cut = text.firstIndex(where: { $0 == "." || $0 == "@" }) { text = String(text[..<cut]) }
        text = text.replacingOccurrences(of: "_", with: "-")
        guard !["c", "posix"].contains(text.lowercased()) else { return nil }
        return try? validateLanguage(text, field: "language")
    }

    /// The brand's settings with `request` applied, or the first thing wrong with them.
    public static func apply(_ request: UpdateLifecycleRequest, to current: LifecycleSettingsDTO) throws(ParleyError) -> LifecycleSettingsDTO {
        var settings = current
        if let minutes = request.autoCloseMinutes {
            for (channel, value) in minutes {
                guard Channel(rawValue: channel) != nil else {
                    throw .invalidField("autoCloseMinutes", "'\(channel)' is not a channel (\(Channel.allCases.map(\.rawValue).joined(separator: ", "))).")
                }
                guard autoCloseMinutesRange.contains(value) else {
                    throw .invalidField("autoCloseMinutes", "A conversation closes on its own 5 to 43,200 minutes (30 days) after the customer's last message.")
                }
            }
            settings.autoCloseMinutes = minutes
        }
        if let warning = request.warningMinutes {
            guard warningMinutesRange.contains(warning) else {
                throw .invalidField("warningMinutes", "The warning comes 1 to 1,440 minutes before the close (0: no warning).")
            }
            settings.warningMinutes = warning == 0 ? nil : warning
        }
        if let warning = settings.warningMinutes, let shortest = settings.autoCloseMinutes.values.min(), warning >= shortest {
            throw .invalidField("warningMinutes", "The warning must come before the close: less than \(shortest) minutes.")
        }
        if let survey = request.survey { settings.survey = survey }
        if let zone = request.timeZone {
            guard TimeZone(identifier: zone) != nil else {
                throw .invalidField("timeZone", "'\(zone)' is not a time zone; use an IANA name like \"Europe/Lisbon\".")
            }
            settings.timeZone = zone
        }
        if let hours = request.businessHours {
            guard hours.count <= maxOpeningSpans else { throw .invalidField("businessHours", "At most \(maxOpeningSpans) opening spans.") }
            for span in hours {
                guard (1...7).contains(span.weekday) else {
                    throw .invalidField("businessHours", "'weekday' is 1 (Monday) to 7 (Sunday).")
                }
                guard let opens = minuteOfDay(span.opens), let closes = minuteOfDay(span.closes) else {
                    throw .invalidField("businessHours", "Opening hours are \"HH:mm\", 24-hour (\"09:00\", \"17:30\").")
                }
                guard opens < closes || closes == 0 else {
                    throw .invalidField("businessHours", "A span closes after it opens (\(span.opens)-\(span.closes)); \"00:00\" closes at midnight.")
                }
            }
            settings.businessHours = hours.sorted { ($0.weekday, $0.opens) < ($1.weekday, $1.opens) }
        }
        if let holidays = request.holidays {
            guard holidays.count <= maxHolidays else { throw .invalidField("holidays", "At most \(maxHolidays) holidays.") }
            for day in holidays where dayNumber(day) == nil {
                throw .invalidDate("holidays")
            }
            settings.holidays = Array(Set(holidays)).sorted()
        }
        if let language = request.defaultLanguage {
            settings.defaultLanguage = try validateLanguage(language, field: "defaultLanguage")
        }
        return settings
    }

    /// "09:30" -> 570; nil when it is not a time of day. "24:00" is not; midnight is "00:00".
    static func minuteOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2, let hour = Int(parts[0]), let minute = Int(parts[1]),
            (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }

    /// "2026-12-25" -> its (year, month, day), when it is a real date.
    static func dayNumber(_ text: String) -> DateComponents? {
        RFC3339.day(text).map { DateComponents(year: $0.year, month: $0.month, day: $0.day) }
    }

    // MARK: Business hours

    /// Whether the brand is open at `date`: not a holiday, and inside one of the day's spans (in the
    /// brand's time zone). A brand without hours is always open.
    public static func isOpen(at date: Date, _ settings: LifecycleSettingsDTO) -> Bool {
        guard !settings.businessHours.isEmpty else { return true }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: settings.timeZone) ?? TimeZone(identifier: "UTC")!
        let local = calendar.dateComponents([.year, .month, .day, .weekday, .hour, .minute], from: date)
        guard let year = local.year, let month = local.month, let day = local.day, let weekday = local.weekday,
            let hour = local.hour, let minute = local.minute
        else { return true }
        let today = String(format: "%04d-%02d-%02d", year, month, day)
        if settings.holidays.contains(today) { return false }
        // Calendar's weekday is 1 for Sunday; ISO's is 7.
        let isoWeekday = weekday == 1 ? 7 : weekday - 1
        let now = hour * 60 + minute
        return settings.businessHours.contains { span in
            guard span.weekday == isoWeekday, let opens = minuteOfDay(span.opens), let closes = minuteOfDay(span.closes) else { return false }
            return now >= opens && now < (closes == 0 ? 24 * 60 : closes)
        }
    }

    // MARK: Automatic close

    /// What an open conversation's lifecycle timer does now.
    public enum CloseStep: Sendable, Equatable {
        /// Nothing yet: look again at `until`.
        case wait(until: Date)
        /// Warn the customer, then look again at `closeAt`.
        case warn(closeAt: Date)
        case close
    }

    /// The next step for a conversation whose customer last wrote at `lastActivity` (or that began
    /// then), closing `closeAfterMinutes` later with a warning `warningMinutes` before, once per quiet
    /// spell: `warnedAt` after `lastActivity` means the customer was warned already.
    public static func closeStep(
        lastActivity: Date, warnedAt: Date?, now: Date, closeAfterMinutes: Int, warningMinutes: Int?
    ) -> CloseStep {
        let closeAt = lastActivity.addingTimeInterval(TimeInterval(closeAfterMinutes) * 60)
        if now >= closeAt { return .close }
        if let warning = warningMinutes, warning < closeAfterMinutes {
            let warnAt = closeAt.addingTimeInterval(-TimeInterval(warning) * 60)
            let warned = warnedAt.map { $0 >= lastActivity } ?? false
            if !warned {
                return now >= warnAt ? .warn(closeAt: closeAt) : .wait(until: warnAt)
            }
        }
        return .wait(until: closeAt)
    }

    // MARK: Automatic messages

    /// Parley's English text of each automatic message, and whether a brand that never touched it
    /// has it on. The ones the widget and apps show by themselves (who the customer is talking to,
    /// their place in line) are off until a brand turns them on.
    public static func defaultMessage(_ kind: AutomaticMessageKind) -> (text: String, enabled: Bool) {
        switch kind {
        case .welcome: ("Thanks for getting in touch! An agent will be with you shortly.", false)
        case .outsideHours: ("Thanks for your message. We're closed right now; an agent will answer when we're back.", true)
        case .agentJoined: ("{agent} joined the conversation.", false)
        case .transferred: ("You've been passed to {agent}. They can see everything so far.", false)
        case .queuePosition: ("You're number {position} in line. Expected wait: about {wait}.", false)
        case .closeWarning: ("Are you still there? This conversation will close in {minutes} minutes if we don't hear from you.", true)
        case .closed: ("This conversation has been closed. Write to us any time to start a new one.", true)
        case .survey: ("How did we do? Reply with a number from 1 (bad) to 5 (great), and a comment if you like.", true)
        case .surveyThanks: ("Thank you for your feedback!", true)
        }
    }

    /// The brand's written text in the best language for the customer: their language, then its base
    /// ("pt" for "pt-BR"), then the brand's default language, then Parley's English.
    public static func pickText(_ written: [String: String], language: String?, defaultLanguage: String, kind: AutomaticMessageKind) -> String {
        var candidates: [String] = []
        if let language {
            candidates.append(language)
            if let base = language.split(separator: "-").first { candidates.append(String(base)) }
        }
        candidates.append(defaultLanguage)
        if let base = defaultLanguage.split(separator: "-").first { candidates.append(String(base)) }
        for candidate in candidates {
            if let text = written[candidate] ?? written.first(where: { $0.key.lowercased() == candidate.lowercased() })?.value { return text }
        }
        return written["en"] ?? defaultMessage(kind).text
    }

    /// The text with `{name}` placeholders filled; unknown placeholders stay as they are.
    public static func fill(_ text: String, _ values: [String: String]) -> String {
        values.reduce(text) { result, pair in result.replacingOccurrences(of: "{\(pair.key)}", with: pair.value) }
    }

    public static func validateAutomaticText(_ text: String) throws(ParleyError) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= maxAutomaticMessageLength else {
            throw .invalidField("text", "An automatic message is 1 to \(maxAutomaticMessageLength) characters.")
        }
        return trimmed
    }

    /// "about 4 minutes", "about 1 hour".
    public static func describeWait(seconds: Int?) -> String {
        guard let seconds, seconds > 0 else { return "a few minutes" }
        let minutes = max(1, Int((Double(seconds) / 60).rounded()))
        if minutes < 90 { return minutes == 1 ? "1 minute" : "\(minutes) minutes" }
        let hours = Int((Double(minutes) / 60).rounded())
        return hours == 1 ? "1 hour" : "\(hours) hours"
    }

    // MARK: Ratings

    public static func validateRating(_ request: RateConversationRequest) throws(ParleyError) -> RateConversationRequest {
        guard (1...5).contains(request.score) else { throw .invalidField("score", "A rating is 1 (bad) to 5 (great).") }
        let comment = request.comment?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let comment, comment.count > maxRatingComment {
            throw .invalidField("comment", "A comment is at most \(maxRatingComment) characters.")
        }
        return RateConversationRequest(score: request.score, comment: comment?.isEmpty == false ? comment : nil)
    }

    /// A rating answered as text ("4", "5 - quick and friendly", "3. slow"): the score, and the rest
    /// as the comment; nil when the text does not start with a digit 1-5 standing alone.
    public static func parseRating(_ text: String) -> RateConversationRequest? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let first = trimmed.first, let score = first.wholeNumberValue, (1...5).contains(score) else { return nil }
        let rest = trimmed.dropFirst()
        if let next = rest.first, next.isNumber || next.isLetter { return nil }
        let comment = rest.trimmingCharacters(in: CharacterSet(charactersIn: " \t\n.,:;-–—/|").union(.whitespacesAndNewlines))
        return RateConversationRequest(score: score, comment: comment.isEmpty ? nil : String(comment.prefix(maxRatingComment)))
    }
}
