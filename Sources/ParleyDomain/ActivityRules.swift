import Foundation
import ParleyAPI

/// What a consumer's app may report (ParleyKit's `report`), and how a brand's engagement rules match it.
public enum ActivityRules {
    /// Events in one `POST /v1/consumer/activity`.
    public static let maxBatch = 50
    public static let maxStringValueLength = ActivityEventInput.maxStringValueLength
    /// A consumer's most recent events kept; older ones are deleted as new ones arrive.
    public static let keptPerConsumer = 200
    /// Events older than this are refused: a device that was offline for longer sends stale news.
    public static let maxAge: TimeInterval = 30 * 24 * 3600

    public static let maxRulesPerBrand = 100
    public static let maxRuleNameLength = 80
    public static let maxRuleTextLength = 1000
    public static let cooldownRange = 1...8760

    public static func validateName(_ name: String, field: String) throws(ParleyError) {
        guard ActivityEventInput.isValidName(name) else {
            throw .invalidField(field, "'\(field)' is 1-\(ActivityEventInput.maxNameLength) characters of letters, digits, '_', '.', '-' and ':' (say, 'screen_view').")
        }
    }

    /// Checks one event; returns its time as stored (a time ahead of the server's clock becomes now).
    public static func validate(_ event: ActivityEventInput, now: Date) throws(ParleyError) -> Date {
        try MessageRules.validateClientMessageId(event.clientEventId, field: "clientEventId")
        if let problem = ActivityEventInput.problem(name: event.name, properties: event.properties) {
            throw .invalidField(problem.field, problem.message)
        }
        if event.occurredAt < now.addingTimeInterval(-maxAge) {
            throw ParleyError(.unprocessable, code: .eventTooOld, message: "Events older than 30 days are not accepted.", field: "occurredAt")
        }
        return min(event.occurredAt, now)
    }

    public static func validateBatch(_ events: [ActivityEventInput]) throws(ParleyError) {
        if events.isEmpty { throw .invalidField("events", "'events' needs at least one event.") }
        if events.count > maxBatch {
            throw ParleyError(.payloadTooLarge, code: .tooManyEvents, message: "A batch has at most \(maxBatch) events.", field: "events")
        }
    }

    /// A rule as it will be stored: every field checked, a comparison only with its property and value.
    public static func validate(_ rule: EngagementRuleDTO) throws(ParleyError) {
        let name = rule.name.trimmingWhitespace
        if name.isEmpty || name.count > maxRuleNameLength {
            throw .invalidField("name", "'name' is 1-\(maxRuleNameLength) characters.")
        }
        try validateName(rule.event, field: "event")
        if let property = rule.property { try validateName(property, field: "property") }
        switch (rule.property, rule.comparison, rule.value) {
        case (nil, nil, nil):
            break
        case (.some, .some(.equals), .some(let value)):
            if value.count > maxStringValueLength { throw .invalidField("value", "'value' is at most \(maxStringValueLength) characters.") }
        case (.some, .some(.atLeast), .some(let value)):
            guard let number = Double(value), number.isFinite else { throw .invalidField("value", "'at_least' compares with a number.") }
        default:
            throw .invalidField("comparison", "A condition needs 'property', 'comparison' and 'value' together (or none of them).")
        }
        if rule.text.trimmingWhitespace.isEmpty || rule.text.count > maxRuleTextLength {
            throw .invalidField("text", "'text' is 1-\(maxRuleTextLength) characters.")
        }
        if !cooldownRange.contains(rule.cooldownHours) {
            throw .invalidField("cooldownHours", "'cooldownHours' is \(cooldownRange.lowerBound)-\(cooldownRange.upperBound).")
        }
    }

    /// Whether `rule` acts on an event named `name` with `properties` from an app.
    public static func matches(_ rule: EngagementRuleDTO, name: String, properties: [String: ActivityValue], appId: AppID) -> Bool {
        guard rule.enabled, rule.event == name, rule.appId == nil || rule.appId == appId else { return false }
        guard let property = rule.property, let comparison = rule.comparison, let expected = rule.value else { return true }
        guard let actual = properties[property] else { return false }
        switch comparison {
        case .equals:
            return actual.text == expected
        case .atLeast:
            guard let number = actual.number, let threshold = Double(expected) else { return false }
            return number >= threshold
        }
    }
}
