/// A typed identifier: `ConversationID`, `MessageID`... On the wire and in the database it is its
/// string (`cnv_5k2x...`); in code the type says what it names, so a message id cannot be passed
/// where a brand id goes.
///
/// `init?(_:)` checks the shape (prefix and alphabet) and is how ids enter from outside: path
/// parameters (`context.parameters.require("conversationId", as: ConversationID.self)`) and
/// `wellFormed` for ids in bodies. `init(rawValue:)` trusts its input: ids the server made or read
/// back from its own store. A well-formed id of another brand is simply not found.
public struct ID<Tag: IDTag>: RawRepresentable, Hashable, Comparable, Sendable, Codable, LosslessStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// nil unless `text` has the shape of this kind of id.
    public init?(_ text: String) {
        guard Self.isWellFormed(text) else { return nil }
        self.rawValue = text
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// Whether this id (say, one from a request body) has its kind's shape.
    public var isWellFormed: Bool { Self.isWellFormed(rawValue) }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether `id` (say, one from a request body, decoded without a check) has its kind's shape.
    public static func isWellFormed(_ id: Self) -> Bool { isWellFormed(id.rawValue) }

    /// The prefix, `_`, then at most 64 characters in all of digits and lower-case letters.
    public static func isWellFormed(_ text: String) -> Bool {
        // Over the bytes: the server checks every id a message names, and `hasPrefix` compares
        // characters by Unicode's rules, after `prefix + "_"` made a string (0.5% of a message's
        // instructions, bench/instructions.sh). Only ASCII passes either way.
        var text = text
        return text.withUTF8 { bytes in
            var prefix = Tag.prefix
            return prefix.withUTF8 { prefix in
                guard bytes.count <= 64, bytes.count > prefix.count, bytes[prefix.count] == UInt8(ascii: "_"),
                    bytes[..<prefix.count].elementsEqual(prefix)
                else { return false }
                return bytes[(prefix.count + 1)...].allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 122) }
            }
        }
    }
}

/// What an `ID` names, by its prefix.
public protocol IDTag: Sendable {
    static var prefix: String { get }
}

public enum IDTags {
    public enum Brand: IDTag { public static let prefix = "brd" }
    public enum App: IDTag { public static let prefix = "app" }
    public enum Agent: IDTag { public static let prefix = "agt" }
    public enum Consumer: IDTag { public static let prefix = "csm" }
    public enum Conversation: IDTag { public static let prefix = "cnv" }
    public enum Message: IDTag { public static let prefix = "msg" }
    public enum Call: IDTag { public static let prefix = "call" }
    public enum Cobrowse: IDTag { public static let prefix = "cob" }
    public enum Connection: IDTag { public static let prefix = "ws" }
    public enum SavedReply: IDTag { public static let prefix = "rpl" }
    public enum EngagementRule: IDTag { public static let prefix = "eng" }
    public enum Team: IDTag { public static let prefix = "team" }
    public enum LegalHold: IDTag { public static let prefix = "hold" }
    public enum Purge: IDTag { public static let prefix = "purge" }
}

public typealias BrandID = ID<IDTags.Brand>
public typealias AppID = ID<IDTags.App>
public typealias AgentID = ID<IDTags.Agent>
public typealias ConsumerID = ID<IDTags.Consumer>
public typealias ConversationID = ID<IDTags.Conversation>
public typealias MessageID = ID<IDTags.Message>
public typealias CallID = ID<IDTags.Call>
/// A co-browse session: an agent seeing the customer's page, with the customer's yes.
public typealias CobrowseID = ID<IDTags.Cobrowse>
/// A real-time connection (one WebSocket), for binding a call to the device that takes part.
public typealias ConnectionID = ID<IDTags.Connection>
/// A brand's saved reply (canned response).
public typealias SavedReplyID = ID<IDTags.SavedReply>
/// A brand's engagement rule (an event from the app -> an automatic message or a prompt).
public typealias EngagementRuleID = ID<IDTags.EngagementRule>
/// A team (skill) of agents that apps route to.
public typealias TeamID = ID<IDTags.Team>
/// A legal hold: a conversation or a customer kept past the retention period.
public typealias LegalHoldID = ID<IDTags.LegalHold>
/// One entry of the audit log of what retention or an erasure removed.
public typealias PurgeID = ID<IDTags.Purge>
