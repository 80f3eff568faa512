import Foundation

/// One span of a business day in the brand's time zone: `opens` to `closes`, "HH:mm", 24-hour.
public struct OpeningHoursDTO: Codable, Sendable, Hashable {
    /// ISO weekday: 1 is Monday, 7 is Sunday.
    public var weekday: Int
    public var opens: String
    public var closes: String
    public init(weekday: Int, opens: String, closes: String) {
        (self.weekday, self.opens, self.closes) = (weekday, opens, closes)
    }
}

/// What happens to a conversation over its life: `GET` and `PATCH /v1/lifecycle`.
public struct LifecycleSettingsDTO: Codable, Sendable, Hashable {
    /// Minutes without a customer message after which an open conversation closes, per channel
    /// (its raw value: `web`, `whatsapp`...). A channel not named never closes on its own.
    public var autoCloseMinutes: [String: Int]
    /// Minutes before an automatic close at which the customer is warned (nil: no warning).
    public var warningMinutes: Int?
    /// Ask for a 1-5 rating when a conversation closes.
    public var survey: Bool
    /// The brand's IANA time zone, for business hours and holidays.
    public var timeZone: String
    /// When agents are in. Empty: always open (no "outside business hours" message).
    public var businessHours: [OpeningHoursDTO]
    /// Days the brand is closed all day, "yyyy-MM-dd" in its time zone.
    public var holidays: [String]
    /// The language of automatic messages when the customer's own has none (BCP 47, like "en").
    public var defaultLanguage: String

    public static let `default` = LifecycleSettingsDTO(
        autoCloseMinutes: [:], warningMinutes: 15, survey: false, timeZone: "UTC", businessHours: [], holidays: [], defaultLanguage: "en")

    public init(
        autoCloseMinutes: [String: Int], warningMinutes: Int?, survey: Bool, timeZone: String, businessHours: [OpeningHoursDTO],
        holidays: [String], defaultLanguage: String
    ) {
        (self.autoCloseMinutes, self.warningMinutes, self.survey, self.timeZone) = (autoCloseMinutes, warningMinutes, survey, timeZone)
        (self.businessHours, self.holidays, self.defaultLanguage) = (businessHours, holidays, defaultLanguage)
    }
}

/// `PATCH /v1/lifecycle`: the fields given replace the brand's. `warningMinutes: 0` turns the warning off.
public struct UpdateLifecycleRequest: Codable, Sendable, Hashable {
    public var autoCloseMinutes: [String: Int]?
    public var warningMinutes: Int?
    public var survey: Bool?
    public var timeZone: String?
    public var businessHours: [OpeningHoursDTO]?
    public var holidays: [String]?
    public var defaultLanguage: String?
    public init(
        autoCloseMinutes: [String: Int]? = nil, warningMinutes: Int? = nil, survey: Bool? = nil, timeZone: String? = nil,
        businessHours: [OpeningHoursDTO]? = nil, holidays: [String]? = nil, defaultLanguage: String? = nil
    ) {
        (self.autoCloseMinutes, self.warningMinutes, self.survey, self.timeZone) = (autoCloseMinutes, warningMinutes, survey, timeZone)
        (self.businessHours, self.holidays, self.defaultLanguage) = (businessHours, holidays, defaultLanguage)
    }
}

/// The brand's automatic messages: system messages Parley writes into conversations, marked as
/// automatic and never counted as agents' replies.
public enum AutomaticMessageKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// After a customer's first message, within business hours.
    case welcome
    /// After a customer's first message, outside business hours or on a holiday.
    case outsideHours = "outside_hours"
    /// An agent took the conversation. `{agent}`.
    case agentJoined = "agent_joined"
    /// A manager passed the conversation on. `{agent}` or `{team}` (whichever it went to).
    case transferred
    /// On messaging channels, where there is no live place in line: `{position}`, `{wait}`.
    case queuePosition = "queue_position"
    /// Before an automatic close: `{minutes}`.
    case closeWarning = "close_warning"
    /// On messaging channels when a conversation closes (the widget and apps show it themselves).
    case closed
    /// On messaging channels, the rating question (answered with a digit, 1-5).
    case survey
    /// On messaging channels, after a rating.
    case surveyThanks = "survey_thanks"
}

/// One automatic message in one language: `GET /v1/automatic-messages` lists every kind in every
/// language the brand wrote, with Parley's English text where it wrote none.
public struct AutomaticMessageDTO: Codable, Sendable, Hashable {
    public var kind: AutomaticMessageKind
    public var language: String
    public var text: String
    /// Off: never sent, in any language.
    public var enabled: Bool
    /// Parley's own text (the brand has not written this one).
    public var isDefault: Bool
    public init(kind: AutomaticMessageKind, language: String, text: String, enabled: Bool, isDefault: Bool) {
        (self.kind, self.language, self.text, self.enabled, self.isDefault) = (kind, language, text, enabled, isDefault)
    }
}

/// `PUT /v1/automatic-messages/{kind}/{language}`: the text in that language and whether the
/// kind is sent at all (`enabled` applies to every language).
public struct SaveAutomaticMessageRequest: Codable, Sendable, Hashable {
    public var text: String?
    public var enabled: Bool?
    public init(text: String? = nil, enabled: Bool? = nil) { (self.text, self.enabled) = (text, enabled) }
}

/// Where a closed conversation's rating question is.
public enum SurveyState: String, Codable, Sendable, Hashable {
    /// Asked, not answered yet.
    case offered
    /// The channel's reply window had closed: not asked.
    case skipped
    case answered
}

/// A customer's rating of a closed conversation, attached to it and to its agent.
public struct RatingDTO: Codable, Sendable, Hashable {
    /// 1 (bad) to 5 (great).
    public var score: Int
    public var comment: String?
    /// The agent the conversation was with when it closed.
    public var agentId: AgentID?
    public var createdAt: Date
    public init(score: Int, comment: String?, agentId: AgentID?, createdAt: Date) {
        (self.score, self.comment, self.agentId, self.createdAt) = (score, comment, agentId, createdAt)
    }
}

/// `POST /v1/consumer/conversations/{id}/rating`.
public struct RateConversationRequest: Codable, Sendable, Hashable {
    public var score: Int
    public var comment: String?
    public init(score: Int, comment: String? = nil) { (self.score, self.comment) = (score, comment) }
}
