import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// A conversation waiting for an agent.
public struct QueuedConversation: Sendable, Hashable {
    public var conversationId: ConversationID
    public var consumerId: ConsumerID
    public var teamId: TeamID?
    public var priority: Int
    public var queuedAt: Date
}

public protocol RoutingStore: Sendable {
    /// Serializes routing decisions for one brand until the transaction ends (PostgreSQL's advisory
    /// lock; SQLite has one writer anyway): two nodes never give one agent more than their room.
    func lockRouting(brandId: BrandID) async throws
    func routingSettings(brandId: BrandID) async throws -> RoutingSettingsDTO
    func saveRoutingSettings(_ settings: RoutingSettingsDTO, brandId: BrandID) async throws

    func insertTeam(_ team: TeamDTO, brandId: BrandID) async throws
    /// Replaces the team's name, members and apps.
    func updateTeam(_ team: TeamDTO, brandId: BrandID) async throws
    func deleteTeam(brandId: BrandID, id: TeamID) async throws -> Bool
    func teams(brandId: BrandID) async throws -> [TeamDTO]
    func appTeam(appId: AppID) async throws -> TeamID?

    /// The agent's own limit (nil: the brand's).
    func setAgentCapacity(brandId: BrandID, agentId: AgentID, _ maxConversations: Int?) async throws
    func agentCapacities(brandId: BrandID) async throws -> [AgentID: Int]

    func enqueue(_ conversationId: ConversationID, brandId: BrandID, teamId: TeamID?, priority: Int, at: Date) async throws
    /// Takes the conversation out of the queue; with `assignedAt`, records how long it waited.
    func dequeue(_ conversationId: ConversationID, assignedAt: Date?) async throws
    /// Oldest first within a priority, the highest priority first.
    func queued(brandId: BrandID, limit: Int) async throws -> [QueuedConversation]
    func queueEntry(_ conversationId: ConversationID) async throws -> QueuedConversation?
    /// Changes a waiting conversation's priority; false when it is not waiting.
    func setQueuePriority(_ conversationId: ConversationID, brandId: BrandID, priority: Int) async throws -> Bool
    /// Waiting conversations of the same team ahead of this one, plus one.
    func queuePosition(of entry: QueuedConversation, brandId: BrandID) async throws -> Int
    /// How long the team's last assigned conversations waited, in seconds.
    func recentWaits(brandId: BrandID, teamId: TeamID?, limit: Int) async throws -> [TimeInterval]
    /// Conversations assigned to the agent and not resolved.
    func openAssigned(brandId: BrandID, agentId: AgentID) async throws -> [ConversationID]
}

extension SQLRepository: RoutingStore {
    public func lockRouting(brandId: BrandID) async throws {
        guard flavor == .postgres else { return }
        try await db.raw("SELECT pg_advisory_xact_lock(hashtext(\(bind: "routing:" + brandId.rawValue)))").run()
    }

    public func routingSettings(brandId: BrandID) async throws -> RoutingSettingsDTO {
        guard let row = try await db.raw("SELECT * FROM routing_settings WHERE brand_id = \(bind: brandId)").first() else { return .default }
        guard let mode = RoutingMode(rawValue: try row.decode(column: "mode", as: String.self)) else { throw StoreError.corrupt("routing mode") }
        return RoutingSettingsDTO(
            mode: mode, maxConversations: try row.decode(column: "max_conversations", as: Int.self),
            requeueGraceSeconds: try row.decode(column: "requeue_grace_seconds", as: Int.self))
    }

    public func saveRoutingSettings(_ settings: RoutingSettingsDTO, brandId: BrandID) async throws {
        try await db.raw("DELETE FROM routing_settings WHERE brand_id = \(bind: brandId)").run()
        try await db.raw(
            """
            INSERT INTO routing_settings (brand_id, mode, max_conversations, requeue_grace_seconds)
            VALUES (\(bind: brandId), \(bind: settings.mode.rawValue), \(bind: settings.maxConversations), \(bind: settings.requeueGraceSeconds))
            """
        ).run()
    }

    public func insertTeam(_ team: TeamDTO, brandId: BrandID) async throws {
        try await db.raw(
            "INSERT INTO teams (id, brand_id, name, created_at) VALUES (\(bind: team.id), \(bind: brandId), \(bind: team.name), \(bind: StoredTime.millis(team.createdAt)))"
        ).run()
        try await replaceMembersAndApps(team, brandId: brandId)
    }

    public func updateTeam(_ team: TeamDTO, brandId: BrandID) async throws {
        try await db.raw("UPDATE teams SET name = \(bind: team.name) WHERE id = \(bind: team.id) AND brand_id = \(bind: brandId)").run()
        try await replaceMembersAndApps(team, brandId: brandId)
    }

    private func replaceMembersAndApps(_ team: TeamDTO, brandId: BrandID) async throws {
        try await db.raw("DELETE FROM team_members WHERE team_id = \(bind: team.id)").run()
        for agent in Set(team.memberIds) {
            try await db.raw("INSERT INTO team_members (team_id, agent_id) VALUES (\(bind: team.id), \(bind: agent))").run()
        }
        try await db.raw("DELETE FROM app_teams WHERE team_id = \(bind: team.id)").run()
        for app in Set(team.appIds) {
            // An app routes to one team: naming it here moves it from another.
            try await db.raw("DELETE FROM app_teams WHERE app_id = \(bind: app)").run()
            try await db.raw("INSERT INTO app_teams (app_id, brand_id, team_id) VALUES (\(bind: app), \(bind: brandId), \(bind: team.id))").run()
        }
    }

    public func deleteTeam(brandId: BrandID, id: TeamID) async throws -> Bool {
        guard try await db.raw("DELETE FROM teams WHERE id = \(bind: id) AND brand_id = \(bind: brandId) RETURNING id").first() != nil else { return false }
        try await db.raw("DELETE FROM team_members WHERE team_id = \(bind: id)").run()
        try await db.raw("DELETE FROM app_teams WHERE team_id = \(bind: id)").run()
        // What waited for the team now waits for anyone.
        try await db.raw("UPDATE conversation_queue SET team_id = NULL WHERE team_id = \(bind: id)").run()
        return true
    }

    public func teams(brandId: BrandID) async throws -> [TeamDTO] {
        let rows = try await db.raw("SELECT id, name, created_at FROM teams WHERE brand_id = \(bind: brandId) ORDER BY name, id").all()
        var teams = try rows.map { row in
            TeamDTO(
                id: TeamID(rawValue: try row.decode(column: "id", as: String.self)), name: try row.decode(column: "name", as: String.self),
                memberIds: [], appIds: [], createdAt: StoredTime.date(try row.decode(column: "created_at", as: Int64.self)))
        }
        guard !teams.isEmpty else { return [] }
        let members = try await db.raw(
            "SELECT m.team_id, m.agent_id FROM team_members m JOIN teams t ON t.id = m.team_id WHERE t.brand_id = \(bind: brandId) ORDER BY m.agent_id"
        ).all()
        let apps = try await db.raw("SELECT team_id, app_id FROM app_teams WHERE brand_id = \(bind: brandId) ORDER BY app_id").all()
        for index in teams.indices {
            let id = teams[index].id.rawValue
            teams[index].memberIds = try members.filter { try $0.decode(column: "team_id", as: String.self) == id }
                .map { AgentID(rawValue: try $0.decode(column: "agent_id", as: String.self)) }
            teams[index].appIds = try apps.filter { try $0.decode(column: "team_id", as: String.self) == id }
                .map { AppID(rawValue: try $0.decode(column: "app_id", as: String.self)) }
        }
        return teams
    }

    public func appTeam(appId: AppID) async throws -> TeamID? {
        try await db.raw("SELECT team_id FROM app_teams WHERE app_id = \(bind: appId)").first()
            .map { TeamID(rawValue: try $0.decode(column: "team_id", as: String.self)) }
    }

    public func setAgentCapacity(brandId: BrandID, agentId: AgentID, _ maxConversations: Int?) async throws {
        try await db.raw("DELETE FROM agent_capacity WHERE agent_id = \(bind: agentId)").run()
        if let maxConversations {
            try await db.raw(
                "INSERT INTO agent_capacity (agent_id, brand_id, max_conversations) VALUES (\(bind: agentId), \(bind: brandId), \(bind: maxConversations))"
            ).run()
        }
    }

    public func agentCapacities(brandId: BrandID) async throws -> [AgentID: Int] {
        var capacities: [AgentID: Int] = [:]
        for row in try await db.raw("SELECT agent_id, max_conversations FROM agent_capacity WHERE brand_id = \(bind: brandId)").all() {
            capacities[AgentID(rawValue: try row.decode(column: "agent_id", as: String.self))] = try row.decode(column: "max_conversations", as: Int.self)
        }
        return capacities
    }

    public func enqueue(_ conversationId: ConversationID, brandId: BrandID, teamId: TeamID?, priority: Int, at date: Date) async throws {
        try await db.raw(
            """
            INSERT INTO conversation_queue (conversation_id, brand_id, team_id, priority, queued_at)
            VALUES (\(bind: conversationId), \(bind: brandId), \(bind: teamId), \(bind: priority), \(bind: StoredTime.millis(date)))
            ON CONFLICT (conversation_id) DO NOTHING
            """
        ).run()
    }

    public func dequeue(_ conversationId: ConversationID, assignedAt: Date?) async throws {
        guard let entry = try await db.raw(
            "DELETE FROM conversation_queue WHERE conversation_id = \(bind: conversationId) RETURNING brand_id, team_id, queued_at"
        ).first() else { return }
        guard let assignedAt else { return }
        try await db.raw(
            """
            INSERT INTO routing_waits (conversation_id, brand_id, team_id, queued_at, assigned_at)
            VALUES (\(bind: conversationId), \(bind: try entry.decode(column: "brand_id", as: String.self)),
                \(bind: try entry.decode(column: "team_id", as: String?.self)), \(bind: try entry.decode(column: "queued_at", as: Int64.self)),
                \(bind: StoredTime.millis(assignedAt)))
            """
        ).run()
    }

    public func queued(brandId: BrandID, limit: Int) async throws -> [QueuedConversation] {
        try await db.raw(
            """
            SELECT q.*, c.consumer_id FROM conversation_queue q JOIN conversations c ON c.id = q.conversation_id
            WHERE q.brand_id = \(bind: brandId)
            ORDER BY q.priority DESC, q.queued_at, q.conversation_id LIMIT \(bind: limit)
            """
        ).all().map(Self.queuedConversation)
    }

    public func queueEntry(_ conversationId: ConversationID) async throws -> QueuedConversation? {
        try await db.raw(
            "SELECT q.*, c.consumer_id FROM conversation_queue q JOIN conversations c ON c.id = q.conversation_id WHERE q.conversation_id = \(bind: conversationId)"
        ).first().map(Self.queuedConversation)
    }

    public func setQueuePriority(_ conversationId: ConversationID, brandId: BrandID, priority: Int) async throws -> Bool {
        !(try await db.raw(
            """
            UPDATE conversation_queue SET priority = \(bind: priority) WHERE conversation_id = \(bind: conversationId) AND brand_id = \(bind: brandId)
            RETURNING conversation_id
            """
        ).all()).isEmpty
    }

    public func queuePosition(of entry: QueuedConversation, brandId: BrandID) async throws -> Int {
        let team: SQLQueryString = entry.teamId.map { "team_id = \(bind: $0)" } ?? "team_id IS NULL"
        let at = StoredTime.millis(entry.queuedAt)
        let ahead = try await db.raw(
            """
            SELECT COUNT(*) AS n FROM conversation_queue WHERE brand_id = \(bind: brandId) AND \(team)
                AND (priority > \(bind: entry.priority) OR (priority = \(bind: entry.priority)
                    AND (queued_at < \(bind: at) OR (queued_at = \(bind: at) AND conversation_id < \(bind: entry.conversationId)))))
            """
        ).first()?.decode(column: "n", as: Int.self) ?? 0
        return ahead + 1
    }

    public func recentWaits(brandId: BrandID, teamId: TeamID?, limit: Int) async throws -> [TimeInterval] {
        let team: SQLQueryString = teamId.map { "team_id = \(bind: $0)" } ?? "team_id IS NULL"
        return try await db.raw(
            """
            SELECT assigned_at - queued_at AS waited FROM routing_waits WHERE brand_id = \(bind: brandId) AND \(team)
            ORDER BY assigned_at DESC LIMIT \(bind: limit)
            """
        ).all().map { Double(try $0.decode(column: "waited", as: Int64.self)) / 1000 }
    }

    public func openAssigned(brandId: BrandID, agentId: AgentID) async throws -> [ConversationID] {
        try await db.raw(
            """
            SELECT id FROM conversations WHERE brand_id = \(bind: brandId) AND assignee_id = \(bind: agentId) AND state <> 'resolved'
            ORDER BY updated_at
            """
        ).all().map { ConversationID(rawValue: try $0.decode(column: "id", as: String.self)) }
    }

    private static func queuedConversation(_ row: any SQLRow) throws -> QueuedConversation {
        QueuedConversation(
            conversationId: ConversationID(rawValue: try row.decode(column: "conversation_id", as: String.self)),
            consumerId: ConsumerID(rawValue: try row.decode(column: "consumer_id", as: String.self)),
            teamId: try row.decode(column: "team_id", as: String?.self).map(TeamID.init(rawValue:)),
            priority: try row.decode(column: "priority", as: Int.self),
            queuedAt: StoredTime.date(try row.decode(column: "queued_at", as: Int64.self)))
    }
}
