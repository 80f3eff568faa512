import ParleyAPI

/// An authenticated agent, as the server knows it for one request or connection.
public struct AgentPrincipal: Sendable, Hashable, Codable {
    public var agentId: AgentID
    public var brandId: BrandID
    public var role: AgentRole
    public var permissions: Set<AgentPermission>
    /// The name consumers see on the agent's messages.
    public var name: String

    public init(agentId: AgentID, brandId: BrandID, role: AgentRole, permissions: Set<AgentPermission>, name: String = "") {
        self.name = name
        self.agentId = agentId
        self.brandId = brandId
        self.role = role
        self.permissions = permissions
    }

    public func require(_ role: AgentRole) throws(ParleyError) {
        guard self.role >= role else {
            throw .forbidden("This needs the \(role.rawValue) role; you are \(self.role.rawValue == "agent" ? "an" : "a") \(self.role.rawValue).")
        }
    }

    /// Who may assign a conversation to whom: managers and admins to anyone of the brand,
    /// agents only to themselves (or unassign themselves).
    public func canAssign(to agentId: AgentID?, currentAssignee: AgentID?) -> Bool {
        if role >= .manager { return true }
        if let agentId { return agentId == self.agentId }
        return currentAssignee == self.agentId || currentAssignee == nil
    }
}

/// An authenticated consumer: always bound to one brand and one app.
public struct ConsumerPrincipal: Sendable, Hashable, Codable {
    public var consumerId: ConsumerID
    public var brandId: BrandID
    public var appId: AppID

    public init(consumerId: ConsumerID, brandId: BrandID, appId: AppID) {
        self.consumerId = consumerId
        self.brandId = brandId
        self.appId = appId
    }
}

/// Whoever is making a request. Codable: a call frame forwarded to another node carries it.
public enum Principal: Sendable, Hashable, Codable {
    case agent(AgentPrincipal)
    case consumer(ConsumerPrincipal)

    public var brandId: BrandID {
        switch self {
        case .agent(let agent): agent.brandId
        case .consumer(let consumer): consumer.brandId
        }
    }

    public var isAgent: Bool {
        if case .agent = self { true } else { false }
    }

    public var participant: ParticipantRef {
        switch self {
        case .agent(let agent): ParticipantRef(kind: .agent, id: agent.agentId.rawValue)
        case .consumer(let consumer): ParticipantRef(kind: .consumer, id: consumer.consumerId.rawValue)
        }
    }
}
