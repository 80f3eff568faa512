import Foundation

/// A property value of an activity event: text, a number or a yes/no.
public enum ActivityValue: Codable, Sendable, Hashable {
    case string(String)
    case number(Double)
    case bool(Bool)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        }
    }

    /// The value as a number, when it is one (or text that reads as one).
    public var number: Double? {
        switch self {
        case .number(let value): value
        case .string(let value): Double(value)
        case .bool: nil
        }
    }

    /// The value as the text rules compare it with.
    public var text: String {
        switch self {
        case .string(let value): value
        case .number(let value): value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case .bool(let value): value ? "true" : "false"
        }
    }
}

/// Something the consumer did in the brand's app ("screen_view", "cart_value", or the brand's own),
/// reported by ParleyKit: agents see a consumer's recent events, and engagement rules act on them.
public struct ActivityEventInput: Codable, Sendable, Hashable {
    /// The device's id for the event: a retried batch stores each event once.
    public var clientEventId: String
    /// 1-64 characters: letters, digits, `_`, `.`, `-` and `:`.
    public var name: String
    /// At most 20, keys of 1-64 characters, text values of at most 256.
    public var properties: [String: ActivityValue]
    /// When it happened on the device (a time in the future is taken as now).
    public var occurredAt: Date

    public init(clientEventId: String, name: String, properties: [String: ActivityValue] = [:], occurredAt: Date) {
        (self.clientEventId, self.name, self.properties, self.occurredAt) = (clientEventId, name, properties, occurredAt)
    }

    // The shape of an event, checked by the server (ParleyDomain's `ActivityRules`) and by ParleyKit
    // before an event is queued on the device, from these one set of limits.
    public static let maxNameLength = 64
    public static let maxProperties = 20
    public static let maxStringValueLength = 256

    /// An event or property name: 1-64 characters of ASCII letters, digits, `_`, `.`, `-` and `:`.
    public static func isValidName(_ name: String) -> Bool {
        (1...maxNameLength).contains(name.utf8.count)
            && name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || [95, 46, 45, 58].contains($0) }
    }

    /// What is wrong with the event's name or properties, in a sentence, or nil.
    public static func problem(name: String, properties: [String: ActivityValue]) -> (field: String, message: String)? {
        if !isValidName(name) {
            return ("name", "'name' is 1-\(maxNameLength) characters of letters, digits, '_', '.', '-' and ':' (say, 'screen_view').")
        }
        if properties.count > maxProperties { return ("properties", "An event has at most \(maxProperties) properties.") }
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            if !isValidName(key) { return ("properties", "A property's name is 1-\(maxNameLength) characters of letters, digits, '_', '.', '-' and ':' ('\(key)').") }
            switch value {
            case .string(let text) where text.count > maxStringValueLength:
                return ("properties", "A property's text is at most \(maxStringValueLength) characters ('\(key)').")
            case .number(let number) where !number.isFinite:
                return ("properties", "A property's number must be finite ('\(key)').")
            default: continue
            }
        }
        return nil
    }
}

/// `POST /v1/consumer/activity`: a batch of at most 50 events.
public struct ReportActivityRequest: Codable, Sendable, Hashable {
    public var events: [ActivityEventInput]
    public init(events: [ActivityEventInput]) { self.events = events }
}

public struct ReportActivityResponse: Codable, Sendable, Hashable {
    /// Events stored by this request (a retried event is stored once and not counted again).
    public var accepted: Int
    /// Prompts the brand's rules want the app to show, for events of this batch.
    public var prompts: [EngagementPromptDTO]
    public init(accepted: Int, prompts: [EngagementPromptDTO]) {
        (self.accepted, self.prompts) = (accepted, prompts)
    }
}

/// A consumer's event as agents see it.
public struct ActivityEventDTO: Codable, Sendable, Hashable {
    public var id: String
    public var appId: AppID
    public var name: String
    public var properties: [String: ActivityValue]
    public var occurredAt: Date
    public init(id: String, appId: AppID, name: String, properties: [String: ActivityValue], occurredAt: Date) {
        (self.id, self.appId, self.name, self.properties, self.occurredAt) = (id, appId, name, properties, occurredAt)
    }
}

/// What a rule does when an event matches it.
public enum EngagementAction: String, Codable, Sendable, Hashable, CaseIterable {
    /// A message from the brand appears in the consumer's conversation (agents see it too).
    case message
    /// The app is asked to show a prompt (ParleyKit's `.prompt` event); nothing is written.
    case prompt
}

/// How a rule compares the event's property with its value.
public enum EngagementComparison: String, Codable, Sendable, Hashable, CaseIterable {
    /// The property has exactly this value (as text).
    case equals
    /// The property is a number at least this large.
    case atLeast = "at_least"
}

/// A brand's engagement rule: when a consumer's event is named `event` (and, optionally, its
/// `property` compares with `value`), do `action` with `text`, at most once per consumer per
/// `cooldownHours`.
public struct EngagementRuleDTO: Codable, Sendable, Hashable {
    public var id: EngagementRuleID
    public var name: String
    /// Only this app's consumers (nil: every app of the brand).
    public var appId: AppID?
    public var event: String
    public var property: String?
    public var comparison: EngagementComparison?
    public var value: String?
    public var action: EngagementAction
    public var text: String
    public var cooldownHours: Int
    public var enabled: Bool
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: EngagementRuleID, name: String, appId: AppID?, event: String, property: String?, comparison: EngagementComparison?,
        value: String?, action: EngagementAction, text: String, cooldownHours: Int, enabled: Bool, createdAt: Date, updatedAt: Date
    ) {
        (self.id, self.name, self.appId, self.event, self.property, self.comparison, self.value) =
            (id, name, appId, event, property, comparison, value)
        (self.action, self.text, self.cooldownHours, self.enabled, self.createdAt, self.updatedAt) =
            (action, text, cooldownHours, enabled, createdAt, updatedAt)
    }
}

/// `POST /v1/engagement-rules` (every field but the optional ones) and `PATCH /v1/engagement-rules/{id}`.
public struct SaveEngagementRuleRequest: Codable, Sendable, Hashable {
    public var name: String?
    public var appId: AppID?
    public var event: String?
    public var property: String?
    public var comparison: EngagementComparison?
    public var value: String?
    public var action: EngagementAction?
    public var text: String?
    public var cooldownHours: Int?
    public var enabled: Bool?

    public init(
        name: String? = nil, appId: AppID? = nil, event: String? = nil, property: String? = nil, comparison: EngagementComparison? = nil,
        value: String? = nil, action: EngagementAction? = nil, text: String? = nil, cooldownHours: Int? = nil, enabled: Bool? = nil
    ) {
        (self.name, self.appId, self.event, self.property, self.comparison, self.value) = (name, appId, event, property, comparison, value)
        (self.action, self.text, self.cooldownHours, self.enabled) = (action, text, cooldownHours, enabled)
    }
}

/// A prompt for the app to show (its own UI), because an event matched a brand's rule.
public struct EngagementPromptDTO: Codable, Sendable, Hashable {
    public var ruleId: EngagementRuleID
    public var text: String
    /// The event that matched.
    public var clientEventId: String
    public var occurredAt: Date
    public init(ruleId: EngagementRuleID, text: String, clientEventId: String, occurredAt: Date) {
        (self.ruleId, self.text, self.clientEventId, self.occurredAt) = (ruleId, text, clientEventId, occurredAt)
    }
}
