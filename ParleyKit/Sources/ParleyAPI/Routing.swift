import Foundation

/// How new and reopened conversations reach agents.
public enum RoutingMode: String, Codable, Sendable, Hashable, CaseIterable {
    /// Offered to the online agent of the right team with the most room, at once.
    case automatic
    /// They wait in the queue until an agent takes one ("Assign to me").
    case manual
}

/// A brand's routing: `GET` and `PATCH /v1/routing`.
public struct RoutingSettingsDTO: Codable, Sendable, Hashable {
    public var mode: RoutingMode
    /// Conversations one agent has open at once (an agent's own limit overrides it), 1-100.
    public var maxConversations: Int
    /// How long an agent may be away or offline before their open conversations go back to the
    /// queue, 0-86,400 seconds.
    public var requeueGraceSeconds: Int

    public static let `default` = RoutingSettingsDTO(mode: .automatic, maxConversations: 5, requeueGraceSeconds: 120)

    public init(mode: RoutingMode, maxConversations: Int, requeueGraceSeconds: Int) {
        (self.mode, self.maxConversations, self.requeueGraceSeconds) = (mode, maxConversations, requeueGraceSeconds)
    }
}

public struct UpdateRoutingRequest: Codable, Sendable, Hashable {
    public var mode: RoutingMode?
    public var maxConversations: Int?
    public var requeueGraceSeconds: Int?
    public init(mode: RoutingMode? = nil, maxConversations: Int? = nil, requeueGraceSeconds: Int? = nil) {
        (self.mode, self.maxConversations, self.requeueGraceSeconds) = (mode, maxConversations, requeueGraceSeconds)
    }
}

/// A team (a skill): agents who take one kind of conversation. Apps route to a team.
public struct TeamDTO: Codable, Sendable, Hashable {
    public var id: TeamID
    public var name: String
    public var memberIds: [AgentID]
    /// The apps whose conversations go to this team.
    public var appIds: [AppID]
    public var createdAt: Date
    public init(id: TeamID, name: String, memberIds: [AgentID], appIds: [AppID], createdAt: Date) {
        (self.id, self.name, self.memberIds, self.appIds, self.createdAt) = (id, name, memberIds, appIds, createdAt)
    }
}

/// `POST /v1/teams` (a name) and `PUT /v1/teams/{teamId}` (the whole team: name, members, apps).
public struct SaveTeamRequest: Codable, Sendable, Hashable {
    public var name: String?
    public var memberIds: [AgentID]?
    public var appIds: [AppID]?
    public init(name: String? = nil, memberIds: [AgentID]? = nil, appIds: [AppID]? = nil) {
        (self.name, self.memberIds, self.appIds) = (name, memberIds, appIds)
    }
}

/// `PUT /v1/agents/{agentId}/capacity`: the agent's own limit of open conversations (nil: the brand's).
public struct AgentCapacityRequest: Codable, Sendable, Hashable {
    public var maxConversations: Int?
    public init(maxConversations: Int?) { self.maxConversations = maxConversations }
}

/// An agent as routing sees them.
public struct AgentLoadDTO: Codable, Sendable, Hashable {
    public var agentId: AgentID
    public var name: String
    /// Whether routing offers them conversations now (online, connected).
    public var available: Bool
    public var openConversations: Int
    public var maxConversations: Int
    /// Their own limit, when they have one.
    public var ownLimit: Int?
    public var teamIds: [TeamID]
    public init(agentId: AgentID, name: String, available: Bool, openConversations: Int, maxConversations: Int, ownLimit: Int?, teamIds: [TeamID]) {
        (self.agentId, self.name, self.available, self.openConversations, self.maxConversations, self.ownLimit, self.teamIds) =
            (agentId, name, available, openConversations, maxConversations, ownLimit, teamIds)
    }
}

/// `POST /v1/conversations/{id}/transfer` (managers): to an agent, or back to the queue of a team,
/// with a private note for the next agent.
public struct TransferRequest: Codable, Sendable, Hashable {
    public var agentId: AgentID?
    public var teamId: TeamID?
    public var note: String?
    public init(agentId: AgentID? = nil, teamId: TeamID? = nil, note: String? = nil) {
        (self.agentId, self.teamId, self.note) = (agentId, teamId, note)
    }
}

/// Where a waiting conversation is in its queue; also the real-time `queue` frame to its consumer.
public struct QueuePositionDTO: Codable, Sendable, Hashable {
    public var conversationId: ConversationID
    /// 1 for the next to be offered; nil once an agent has it.
    public var position: Int?
    /// From how long the brand's recent conversations waited; nil without enough history.
    public var expectedWaitSeconds: Int?
    public init(conversationId: ConversationID, position: Int?, expectedWaitSeconds: Int?) {
        (self.conversationId, self.position, self.expectedWaitSeconds) = (conversationId, position, expectedWaitSeconds)
    }
}

/// `PUT /v1/conversations/{id}/priority` (managers): a waiting conversation's place among the waiting
/// ones, 0 (normal) to 9 (first); higher priorities are offered first, oldest first within one.
public struct SetPriorityRequest: Codable, Sendable, Hashable {
    public var priority: Int
    public init(priority: Int) { self.priority = priority }
}
