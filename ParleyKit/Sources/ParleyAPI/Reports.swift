import Foundation

/// One agent in the live report.
public struct AgentLiveDTO: Codable, Sendable, Hashable {
    public var agentId: AgentID
    public var name: String
    public var presence: AgentPresence
    /// Connected to the workspace now.
    public var connected: Bool
    public var openConversations: Int
    public var maxConversations: Int
    public init(agentId: AgentID, name: String, presence: AgentPresence, connected: Bool, openConversations: Int, maxConversations: Int) {
        (self.agentId, self.name, self.presence, self.connected, self.openConversations, self.maxConversations) =
            (agentId, name, presence, connected, openConversations, maxConversations)
    }
}

/// The contact centre now: `GET /v1/reports/live`, then `report` frames whenever it changes.
/// Managers and admins see every agent; an agent sees themselves.
public struct LiveReportDTO: Codable, Sendable, Hashable {
    /// Conversations waiting for an agent, and how long the oldest has waited.
    public var waiting: Int
    public var oldestWaitSeconds: Int?
    public var online: Int
    public var away: Int
    public var offline: Int
    public var agents: [AgentLiveDTO]
    public var at: Date
    public init(waiting: Int, oldestWaitSeconds: Int?, online: Int, away: Int, offline: Int, agents: [AgentLiveDTO], at: Date) {
        (self.waiting, self.oldestWaitSeconds, self.online, self.away, self.offline, self.agents, self.at) =
            (waiting, oldestWaitSeconds, online, away, offline, agents, at)
    }
}

/// How a history report splits its numbers.
public enum ReportGrouping: String, Codable, Sendable, Hashable, CaseIterable {
    case day, agent, team, channel
}

/// The numbers of one group (a day, an agent, a team, a channel) or of the whole period.
public struct ReportRowDTO: Codable, Sendable, Hashable {
    /// The day ("2026-11-24", in the brand's time zone), the agent's or team's id, the channel.
    public var key: String
    public var label: String
    /// Conversations begun, and resolved (closes by agents or on their own).
    public var newConversations: Int = 0
    public var resolved: Int = 0
    /// From the customer's first message to an agent's first reply, and from the start to the close
    /// (seconds; median and 90th percentile, nearest rank). Automatic messages are not replies.
    public var firstResponseMedianSeconds: Int?
    public var firstResponseP90Seconds: Int?
    public var resolutionMedianSeconds: Int?
    public var resolutionP90Seconds: Int?
    /// Ratings given, their average (1-5), and the share of 4 and 5 (percent).
    public var ratings: Int = 0
    public var csatAverage: Double?
    public var csatPositivePercent: Int?
    /// Voice notes from customers (in) and from agents (out), and their length in seconds.
    public var voiceNotesIn: Int = 0
    public var voiceNotesOut: Int = 0
    public var voiceSecondsIn: Int = 0
    public var voiceSecondsOut: Int = 0
    /// Calls started, and the minutes of those that connected.
    public var calls: Int = 0
    public var callMinutes: Int = 0
    /// Seconds of voice notes (both ways) with a transcript: the transcribed minutes, to the second.
    public var transcribedSeconds: Int = 0

    public init(key: String, label: String) {
        (self.key, self.label) = (key, label)
    }
}

/// `GET /v1/reports`: a period's numbers, per group and in total.
public struct ReportDTO: Codable, Sendable, Hashable {
    public var from: Date
    public var to: Date
    public var groupBy: ReportGrouping
    public var timeZone: String
    public var rows: [ReportRowDTO]
    public var total: ReportRowDTO
    public init(from: Date, to: Date, groupBy: ReportGrouping, timeZone: String, rows: [ReportRowDTO], total: ReportRowDTO) {
        (self.from, self.to, self.groupBy, self.timeZone, self.rows, self.total) = (from, to, groupBy, timeZone, rows, total)
    }
}
