import Foundation
import ParleyAPI

/// A conversation as a record: what the transcript exports (TXT, XML, JSON) are written from, one
/// conversation at a time, so that an export of many is streamed and never built in memory.
public enum Transcript {
    public enum Format: String, Sendable, CaseIterable {
        case txt, xml, json

        public var contentType: String {
            switch self {
            case .txt: "text/plain; charset=utf-8"
            case .xml: "application/xml; charset=utf-8"
            case .json: "application/json; charset=utf-8"
            }
        }
    }

    /// The schema the XML follows (docs/transcript.xsd).
    public static let xmlNamespace = "https://parley.chat/schemas/transcript/1"

    public struct Conversation: Sendable, Hashable, Codable {
        public var id: ConversationID
        public var channel: Channel
        public var app: String
        public var state: ConversationState
        public var customer: String
        public var customerId: ConsumerID
        public var anonymous: Bool
        public var createdAt: Date
        public var previousConversationId: ConversationID?
        public var rating: RatingDTO?
        public var entries: [Entry]

        public init(
            id: ConversationID, channel: Channel, app: String, state: ConversationState, customer: String, customerId: ConsumerID, anonymous: Bool,
            createdAt: Date, previousConversationId: ConversationID?, rating: RatingDTO?, entries: [Entry]
        ) {
            (self.id, self.channel, self.app, self.state, self.customer, self.customerId) = (id, channel, app, state, customer, customerId)
            (self.anonymous, self.createdAt, self.previousConversationId, self.rating, self.entries) = (anonymous, createdAt, previousConversationId, rating, entries)
        }
    }

    /// One line of the record: a message, a call, or something that happened (a close, a rating).
    public struct Entry: Sendable, Hashable, Codable {
        public enum Kind: String, Sendable, Codable {
            case text, voice, attachment, call, event
        }
        public var seq: Int64
        public var at: Date
        public var kind: Kind
        /// consumer, agent or system; absent for events.
        public var sender: ParticipantKind?
        public var name: String?
        /// The text as stored (card numbers masked as they were stored); for voice notes
        /// `[audio message 0:42]`, for calls `[video call 12:03, agents: Sam]`.
        public var text: String
        /// Voice notes and files: the original, for readers signed in to the brand.
        public var href: String?
        public var durationSeconds: Int?
        /// A voice note's transcript, when there is one (card numbers masked), and whether the
        /// engine was unsure of it.
        public var spoken: String? = nil
        public var spokenLowConfidence: Bool? = nil

        public init(
            seq: Int64, at: Date, kind: Kind, sender: ParticipantKind?, name: String?, text: String, href: String? = nil, durationSeconds: Int? = nil
        ) {
            (self.seq, self.at, self.kind, self.sender, self.name, self.text, self.href, self.durationSeconds) =
                (seq, at, kind, sender, name, text, href, durationSeconds)
        }
    }

    /// "[video call 12:03, agents: Sam]", "[missed voice call, agents: Sam]".
    public static func callLine(_ call: CallDTO) -> String {
        let agents = call.inviterName.isEmpty ? "" : ", agents: \(call.inviterName)"
        switch call.outcome {
        case .completed?:
            return "[\(call.media.rawValue) call \(VoiceRules.clock(milliseconds: (call.durationSeconds ?? 0) * 1000))\(agents)]"
        case let outcome?:
            return "[\(outcome.rawValue) \(call.media.rawValue) call\(agents)]"
        case nil:
            return "[\(call.media.rawValue) call\(agents)]"
        }
    }

    // MARK: Writing

    /// What comes before the first conversation.
    public static func opening(_ format: Format, generatedAt: Date) -> String {
        switch format {
        case .txt: return ""
        case .xml:
            return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<transcripts xmlns=\"\(xmlNamespace)\" generated=\"\(timestamp(generatedAt))\">\n"
        case .json: return "{\"generatedAt\":\"\(timestamp(generatedAt))\",\"conversations\":["
        }
    }

    /// What comes after the last conversation.
    public static func closing(_ format: Format) -> String {
        switch format {
        case .txt: return ""
        case .xml: return "</transcripts>\n"
        case .json: return "]}\n"
        }
    }

    /// One conversation; `first` says whether another was written before it (JSON's commas).
    public static func write(_ conversation: Conversation, as format: Format, first: Bool) throws -> String {
        switch format {
        case .txt: return (first ? "" : "\n\n") + text(conversation)
        case .xml: return xml(conversation)
        case .json:
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (first ? "" : ",") + String(decoding: try encoder.encode(conversation), as: UTF8.self)
        }
    }

    static func text(_ c: Conversation) -> String {
        var lines = [
            "Conversation \(c.id) · \(c.channel.rawValue) · \(c.app)",
            "Customer: \(c.customer)\(c.anonymous ? " (anonymous visitor)" : "") · \(c.customerId)",
            "Started \(timestamp(c.createdAt)) · \(c.state.rawValue)",
        ]
        if let previous = c.previousConversationId { lines.append("Continues \(previous)") }
        if let rating = c.rating {
            lines.append("Rated \(rating.score)/5" + (rating.comment.map { ": \"\($0)\"" } ?? ""))
        }
        lines.append("")
        for entry in c.entries {
            let who = entry.kind == .event ? "—" : (entry.name ?? entry.sender?.rawValue ?? "") + ":"
            var line = "[\(timestamp(entry.at))] \(who) \(entry.text)"
            if let href = entry.href { line += " <\(href)>" }
            if let spoken = entry.spoken { line += (entry.spokenLowConfidence == true ? " (unclear) " : " ") + "\"\(spoken)\"" }
            lines.append(line)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func xml(_ c: Conversation) -> String {
        var out = "  <conversation id=\"\(escape(c.id.rawValue))\" channel=\"\(c.channel.rawValue)\" app=\"\(escape(c.app))\""
        out += " state=\"\(c.state.rawValue)\" created=\"\(timestamp(c.createdAt))\""
        if let previous = c.previousConversationId { out += " continues=\"\(escape(previous.rawValue))\"" }
        out += ">\n"
        out += "    <customer id=\"\(escape(c.customerId.rawValue))\" anonymous=\"\(c.anonymous)\">\(escape(c.customer))</customer>\n"
        if let rating = c.rating {
            out += "    <rating score=\"\(rating.score)\" at=\"\(timestamp(rating.createdAt))\""
            if let agent = rating.agentId { out += " agent=\"\(escape(agent.rawValue))\"" }
            out += ">\(escape(rating.comment ?? ""))</rating>\n"
        }
        for entry in c.entries {
            out += "    <entry seq=\"\(entry.seq)\" at=\"\(timestamp(entry.at))\" kind=\"\(entry.kind.rawValue)\""
            if let sender = entry.sender { out += " sender=\"\(sender.rawValue)\"" }
            if let name = entry.name { out += " name=\"\(escape(name))\"" }
            if let duration = entry.durationSeconds { out += " duration=\"\(duration)\"" }
            if let href = entry.href { out += " href=\"\(escape(href))\"" }
            if let spoken = entry.spoken { out += " spoken=\"\(escape(spoken))\"" }
            if entry.spokenLowConfidence == true { out += " spokenConfidence=\"low\"" }
            out += ">\(escape(entry.text))</entry>\n"
        }
        return out + "  </conversation>\n"
    }

    /// XML's five escapes, and the characters XML 1.0 cannot carry at all dropped. Written by hand:
    /// Foundation's XML types are not on every platform, and no listed package writes XML.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF { continue }
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
