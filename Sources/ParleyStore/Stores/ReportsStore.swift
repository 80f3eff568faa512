import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// What a history report is computed from: one row per fact, the smallest the database can hand
/// over (the grouping by day in the brand's time zone, by agent, team or channel, and the
/// percentiles are computed from them).
public enum ReportFacts {
    /// A conversation begun in the period, with its first agent reply (automatic messages are not replies).
    public struct Begun: Sendable, Hashable {
        public var createdAt: Date
        public var channel: Channel
        public var appId: AppID
        public var assigneeId: AgentID?
        public var firstReplyAt: Date?
        public var firstReplyBy: AgentID?
    }

    /// A close in the period: by whom, and how long after the conversation began.
    public struct Resolution: Sendable, Hashable {
        public var at: Date
        public var conversationCreatedAt: Date
        public var channel: Channel
        public var appId: AppID
        /// The agent who resolved it, or (closed on its own) the conversation's agent.
        public var agentId: AgentID?
    }

    public struct Rating: Sendable, Hashable {
        public var at: Date
        public var score: Int
        public var agentId: AgentID?
        public var channel: Channel
        public var appId: AppID
    }

    public struct Voice: Sendable, Hashable {
        public var at: Date
        public var fromCustomer: Bool
        public var durationMs: Int
        /// It has a transcript (ready, with or without words).
        public var transcribed: Bool = false
        /// The agent who sent it, or for a customer's the conversation's agent.
        public var agentId: AgentID?
        public var channel: Channel
        public var appId: AppID
    }

    public struct Call: Sendable, Hashable {
        public var at: Date
        public var agentId: AgentID?
        public var connectedSeconds: Int?
        public var channel: Channel
        public var appId: AppID
    }
}

public protocol ReportsStore: Sendable {
    func begun(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Begun]
    func resolutions(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Resolution]
    func ratings(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Rating]
    func voiceNotes(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Voice]
    func calls(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Call]
    /// Apps and the team each routes to.
    func appTeams(brandId: BrandID) async throws -> [AppID: TeamID]
}

extension SQLRepository: ReportsStore {
    public func begun(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Begun] {
        try await db.raw(
            """
            SELECT created_at, channel, app_id, assignee_id, first_reply_at, first_reply_by FROM conversations
            WHERE brand_id = \(bind: brandId) AND created_at >= \(bind: StoredTime.millis(from)) AND created_at < \(bind: StoredTime.millis(to))
            """
        ).all().map { row in
            ReportFacts.Begun(
                createdAt: StoredTime.date(try row.decode(column: "created_at", as: Int64.self)),
                channel: try Self.channel(row), appId: AppID(rawValue: try row.decode(column: "app_id", as: String.self)),
                assigneeId: try row.decode(column: "assignee_id", as: String?.self).map(AgentID.init(rawValue:)),
                firstReplyAt: try row.decode(column: "first_reply_at", as: Int64?.self).map(StoredTime.date),
                firstReplyBy: try row.decode(column: "first_reply_by", as: String?.self).map(AgentID.init(rawValue:)))
        }
    }

    public func resolutions(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Resolution] {
        try await db.raw(
            """
            SELECT e.created_at, e.actor_kind, e.actor_id, c.created_at AS conversation_created_at, c.channel, c.app_id, c.assignee_id
            FROM conversation_events e JOIN conversations c ON c.id = e.conversation_id
            WHERE e.brand_id = \(bind: brandId) AND e.created_at >= \(bind: StoredTime.millis(from)) AND e.created_at < \(bind: StoredTime.millis(to))
                AND e.kind = \(bind: ConversationEventDTO.Kind.stateChanged.rawValue) AND e.state = \(bind: ConversationState.resolved.rawValue)
            """
        ).all().map { row in
            let byAgent = try row.decode(column: "actor_kind", as: String.self) == ParticipantKind.agent.rawValue
            return ReportFacts.Resolution(
                at: StoredTime.date(try row.decode(column: "created_at", as: Int64.self)),
                conversationCreatedAt: StoredTime.date(try row.decode(column: "conversation_created_at", as: Int64.self)),
                channel: try Self.channel(row), appId: AppID(rawValue: try row.decode(column: "app_id", as: String.self)),
                agentId: byAgent
                    ? AgentID(rawValue: try row.decode(column: "actor_id", as: String.self))
                    : try row.decode(column: "assignee_id", as: String?.self).map(AgentID.init(rawValue:)))
        }
    }

    public func ratings(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Rating] {
        try await db.raw(
            """
            SELECT rated_at, rating_score, rating_agent_id, channel, app_id FROM conversations
            WHERE brand_id = \(bind: brandId) AND rated_at >= \(bind: StoredTime.millis(from)) AND rated_at < \(bind: StoredTime.millis(to))
            """
        ).all().map { row in
            ReportFacts.Rating(
                at: StoredTime.date(try row.decode(column: "rated_at", as: Int64.self)), score: try row.decode(column: "rating_score", as: Int.self),
                agentId: try row.decode(column: "rating_agent_id", as: String?.self).map(AgentID.init(rawValue:)),
                channel: try Self.channel(row), appId: AppID(rawValue: try row.decode(column: "app_id", as: String.self)))
        }
    }

    public func voiceNotes(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Voice] {
        try await db.raw(
            """
            SELECT m.created_at, m.sender_kind, m.sender_id, v.duration_ms, v.transcript_state, c.channel, c.app_id, c.assignee_id
            FROM messages m JOIN voice_media v ON v.message_id = m.id JOIN conversations c ON c.id = m.conversation_id
            WHERE m.brand_id = \(bind: brandId) AND m.created_at >= \(bind: StoredTime.millis(from)) AND m.created_at < \(bind: StoredTime.millis(to))
                AND m.kind = \(bind: MessageKind.voice.rawValue)
            """
        ).all().map { row in
            let fromCustomer = try row.decode(column: "sender_kind", as: String.self) == ParticipantKind.consumer.rawValue
            return ReportFacts.Voice(
                at: StoredTime.date(try row.decode(column: "created_at", as: Int64.self)), fromCustomer: fromCustomer,
                durationMs: try row.decode(column: "duration_ms", as: Int.self),
                transcribed: try row.decode(column: "transcript_state", as: String?.self) == TranscriptState.ready.rawValue,
                agentId: fromCustomer
                    ? try row.decode(column: "assignee_id", as: String?.self).map(AgentID.init(rawValue:))
                    : AgentID(rawValue: try row.decode(column: "sender_id", as: String.self)),
                channel: try Self.channel(row), appId: AppID(rawValue: try row.decode(column: "app_id", as: String.self)))
        }
    }

    public func calls(brandId: BrandID, from: Date, to: Date) async throws -> [ReportFacts.Call] {
        try await db.raw(
            """
            SELECT k.invited_at, k.invited_by, k.duration_seconds, k.connected_at, c.channel, c.app_id
            FROM calls k JOIN conversations c ON c.id = k.conversation_id
            WHERE k.brand_id = \(bind: brandId) AND k.invited_at >= \(bind: StoredTime.millis(from)) AND k.invited_at < \(bind: StoredTime.millis(to))
            """
        ).all().map { row in
            let connected = try row.decode(column: "connected_at", as: Int64?.self) != nil
            return ReportFacts.Call(
                at: StoredTime.date(try row.decode(column: "invited_at", as: Int64.self)),
                agentId: AgentID(rawValue: try row.decode(column: "invited_by", as: String.self)),
                connectedSeconds: connected ? try row.decode(column: "duration_seconds", as: Int?.self) ?? 0 : nil,
                channel: try Self.channel(row), appId: AppID(rawValue: try row.decode(column: "app_id", as: String.self)))
        }
    }

    public func appTeams(brandId: BrandID) async throws -> [AppID: TeamID] {
        var map: [AppID: TeamID] = [:]
        for row in try await db.raw("SELECT app_id, team_id FROM app_teams WHERE brand_id = \(bind: brandId)").all() {
            map[AppID(rawValue: try row.decode(column: "app_id", as: String.self))] = TeamID(rawValue: try row.decode(column: "team_id", as: String.self))
        }
        return map
    }

    private static func channel(_ row: any SQLRow) throws -> Channel {
        let raw = try row.decode(column: "channel", as: String.self)
        guard let channel = Channel(rawValue: raw) else { throw StoreError.corrupt("channel \(raw)") }
        return channel
    }
}
