import Foundation

// MARK: - Presence

/// Whether an agent is taking conversations. Agents choose it; `offline` is also what everyone sees
/// while an agent has no live connection, whatever they chose.
public enum AgentPresence: String, Codable, Sendable, Hashable, CaseIterable {
    case online, away, offline
}

/// An agent's presence as the team sees it.
public struct AgentPresenceDTO: Codable, Sendable, Hashable {
    public var agentId: AgentID
    public var name: String
    /// What others see: `chosen`, or `offline` while the agent has no live connection.
    public var presence: AgentPresence
    /// What the agent set.
    public var chosen: AgentPresence
    /// True when `away` was set by the workspace after the brand's idle time, not by the agent.
    public var automatic: Bool
    public var connected: Bool
    /// Conversations assigned to the agent that are not resolved.
    public var openConversations: Int
    public var since: Date

    public init(
        agentId: AgentID, name: String, presence: AgentPresence, chosen: AgentPresence, automatic: Bool, connected: Bool,
        openConversations: Int, since: Date
    ) {
        self.agentId = agentId
        self.name = name
        self.presence = presence
        self.chosen = chosen
        self.automatic = automatic
        self.connected = connected
        self.openConversations = openConversations
        self.since = since
    }
}

/// An agent sets their own presence.
public struct SetPresenceRequest: Codable, Sendable {
    public var presence: AgentPresence
    /// True when the workspace sets `away` after the brand's idle time (it goes back to `online` on
    /// the agent's next activity); false or absent when the agent chose.
    public var automatic: Bool?

    public init(presence: AgentPresence, automatic: Bool? = nil) {
        self.presence = presence
        self.automatic = automatic
    }
}

/// What a consumer may know about an agent: the name they show and their initials.
public struct PublicAgentDTO: Codable, Sendable, Hashable {
    public var id: AgentID
    public var name: String
    /// One or two letters for an avatar where there is no picture.
    public var initials: String

    public init(id: AgentID, name: String, initials: String) {
        self.id = id
        self.name = name
        self.initials = initials
    }
}

// MARK: - Saved replies

/// A brand's saved reply: agents type `/` and its shortcut in the composer to insert its text.
public struct SavedReplyDTO: Codable, Sendable, Hashable {
    public var id: SavedReplyID
    /// 1-32 characters: lower-case letters, digits, `-` and `_`; unique within the brand.
    public var shortcut: String
    public var text: String
    public var createdAt: Date
    public var updatedAt: Date

    public init(id: SavedReplyID, shortcut: String, text: String, createdAt: Date, updatedAt: Date) {
        self.id = id
        self.shortcut = shortcut
        self.text = text
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A new saved reply, or a change to one (absent fields stay as they are).
public struct SaveReplyRequest: Codable, Sendable {
    public var shortcut: String?
    public var text: String?

    public init(shortcut: String? = nil, text: String? = nil) {
        self.shortcut = shortcut
        self.text = text
    }
}

// MARK: - Search

/// One conversation found by a search: by a message's text (`message` is the newest match) or by
/// the customer's name or email (`message` is nil).
public struct SearchHitDTO: Codable, Sendable, Hashable {
    public var conversation: ConversationDTO
    public var consumerName: String
    public var message: MessageDTO?

    public init(conversation: ConversationDTO, consumerName: String, message: MessageDTO?) {
        self.conversation = conversation
        self.consumerName = consumerName
        self.message = message
    }
}

// MARK: - Customer context

/// The widget reports the page the consumer is on; the browser comes from the request's User-Agent.
public struct ConsumerVisitRequest: Codable, Sendable {
    /// An `http` or `https` URL, at most 2,048 characters.
    public var pageUrl: String
    public var pageTitle: String?

    public init(pageUrl: String, pageTitle: String? = nil) {
        self.pageUrl = pageUrl
        self.pageTitle = pageTitle
    }
}
