import Foundation

/// Where a co-browse session is: offered to the customer, running (the agent sees their page), or over.
public enum CobrowseState: String, Codable, Sendable, CaseIterable, Hashable {
    case offered
    case active
    case ended
}

/// Why a co-browse session ended.
public enum CobrowseEndReason: String, Codable, Sendable, CaseIterable, Hashable {
    /// The customer said no to the offer.
    case declined
    /// Nobody answered the offer in time.
    case unanswered
    /// The customer stopped it (the banner's Stop, or the widget).
    case stoppedByConsumer = "stopped_by_consumer"
    /// The agent stopped it (or withdrew the offer).
    case stoppedByAgent = "stopped_by_agent"
    /// The agent's workspace connection closed.
    case agentLeft = "agent_left"
    /// The customer's page stayed away (closed, or no page with the chat came back) too long.
    case consumerLeft = "consumer_left"
    /// The page was larger than the brand's server accepts for one snapshot.
    case pageTooLarge = "page_too_large"
    /// The brand turned co-browse off, or the page's site is not one it allows.
    case notAllowed = "not_allowed"
    /// The server shut down.
    case serverShutdown = "server_shutdown"
}

/// Whether the agent may click and type on the customer's page.
public enum CobrowseControl: String, Codable, Sendable, CaseIterable, Hashable {
    /// The agent sees and points only.
    case none
    /// The agent asked; the customer has not answered.
    case requested
    /// The customer lets the agent click and type (never on masked elements) until either gives it back.
    case granted
}

/// What a `cobrowse.control` frame does. The agent requests and releases; the customer grants,
/// denies, and releases (takes control back).
public enum CobrowseControlAction: String, Codable, Sendable, CaseIterable, Hashable {
    case request
    case grant
    case deny
    case release
}

/// A co-browse session as both sides see it. Nothing of the page is stored: this is the record of
/// who saw a customer's page, when, and how it ended (it goes into the conversation's log, for
/// agents, when the session ends).
public struct CobrowseSessionDTO: Codable, Sendable, Hashable {
    public var id: CobrowseID
    public var conversationId: ConversationID
    public var state: CobrowseState
    /// Increases with every change, so that a client can ignore a state it has already passed.
    public var version: Int
    public var agentId: AgentID
    /// The agent's name, as the customer sees it ("Sam from Demo Brand can see this page").
    public var agentName: String
    public var offeredAt: Date
    /// When the customer accepted.
    public var startedAt: Date?
    public var endedAt: Date?
    public var endReason: CobrowseEndReason?
    /// While active: whether a page of the customer's is sending (false while they move to
    /// another page, or reconnect).
    public var consumerConnected: Bool
    /// The page's site when the customer accepted (`https://shop.example.com`), as the browser reported it.
    public var origin: String?
    /// CSS selectors whose elements the customer's page masks, beyond passwords and card fields
    /// (the brand's setting, for embed.js).
    public var maskSelectors: [String]
    /// Whether the agent may click and type on the page (asked of the customer separately).
    public var control: CobrowseControl
    /// When the customer first let the agent take control (kept in the record: the conversation's
    /// log says the agent had control).
    public var controlGrantedAt: Date?

    public init(
        id: CobrowseID, conversationId: ConversationID, state: CobrowseState, version: Int, agentId: AgentID, agentName: String,
        offeredAt: Date, startedAt: Date? = nil, endedAt: Date? = nil, endReason: CobrowseEndReason? = nil,
        consumerConnected: Bool = false, origin: String? = nil, maskSelectors: [String] = [], control: CobrowseControl = .none,
        controlGrantedAt: Date? = nil
    ) {
        self.control = control
        self.controlGrantedAt = controlGrantedAt
        self.id = id
        self.conversationId = conversationId
        self.state = state
        self.version = version
        self.agentId = agentId
        self.agentName = agentName
        self.offeredAt = offeredAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.endReason = endReason
        self.consumerConnected = consumerConnected
        self.origin = origin
        self.maskSelectors = maskSelectors
    }
}

extension CobrowseSessionDTO {
    private enum CodingKeys: String, CodingKey {
        case id, conversationId, state, version, agentId, agentName, offeredAt, startedAt, endedAt, endReason
        case consumerConnected, origin, maskSelectors, control, controlGrantedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decode(CobrowseID.self, forKey: .id), conversationId: try c.decode(ConversationID.self, forKey: .conversationId),
            state: try c.decode(CobrowseState.self, forKey: .state), version: try c.decode(Int.self, forKey: .version),
            agentId: try c.decode(AgentID.self, forKey: .agentId), agentName: try c.decode(String.self, forKey: .agentName),
            offeredAt: try c.decode(Date.self, forKey: .offeredAt), startedAt: try c.decodeIfPresent(Date.self, forKey: .startedAt),
            endedAt: try c.decodeIfPresent(Date.self, forKey: .endedAt), endReason: try c.decodeIfPresent(CobrowseEndReason.self, forKey: .endReason),
            consumerConnected: try c.decode(Bool.self, forKey: .consumerConnected), origin: try c.decodeIfPresent(String.self, forKey: .origin),
            maskSelectors: try c.decode([String].self, forKey: .maskSelectors),
            // Absent before agent control.
            control: try c.decodeIfPresent(CobrowseControl.self, forKey: .control) ?? .none,
            controlGrantedAt: try c.decodeIfPresent(Date.self, forKey: .controlGrantedAt))
    }
}

/// What a `cobrowse.data` frame carries. The server relays the payload as it is (it never parses
/// a page) and counts its bytes: a snapshot's parts against the snapshot limit, everything else
/// against the per-second budget.
public enum CobrowseDataKind: String, Codable, Sendable, CaseIterable, Hashable {
    /// A part of the whole page (`last` on the final part). Starts over whatever came before.
    case snapshot
    /// Changes since the snapshot: mutations, scroll, viewport size, pointer, focus, values typed.
    case changes
}
