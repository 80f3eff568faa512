import Foundation
import ParleyAPI

/// Who gets a waiting conversation, and the limits of routing's settings.
public enum RoutingRules {
    public static let capacityRange = 1...100
    public static let graceRange = 0...86_400
    public static let maxTeamsPerBrand = 50
    public static let maxTeamNameLength = 60
    public static let maxTransferNoteLength = 2000
    /// Recent assignments the expected wait is computed from.
    public static let waitSample = 50

    /// An agent routing may offer a conversation to.
    public struct Candidate: Sendable, Hashable {
        public var agentId: AgentID
        public var teams: Set<TeamID>
        public var capacity: Int
        public var load: Int
        public init(agentId: AgentID, teams: Set<TeamID>, capacity: Int, load: Int) {
            (self.agentId, self.teams, self.capacity, self.load) = (agentId, teams, capacity, load)
        }
        public var room: Int { capacity - load }
    }

    /// The agent with the most room among those of `team` (any agent when nil) who have room at all;
    /// on a tie the one with fewer open conversations, then the lowest id (so the choice is stable).
    public static func choose(for team: TeamID?, among candidates: [Candidate]) -> AgentID? {
        candidates
            .filter { $0.room > 0 && (team == nil || $0.teams.contains(team!)) }
            .min { ($1.room, $0.load, $0.agentId.rawValue) < ($0.room, $1.load, $1.agentId.rawValue) }?
            .agentId
    }

    /// What a consumer is told: the median of recent waits, times the place in the queue, in whole
    /// seconds; nil without at least three recent waits.
    /// Waiting conversations' priorities: 0 (normal) to 9 (first).
    public static let priorityRange = 0...9

    public static func expectedWait(position: Int, recentWaits: [TimeInterval]) -> Int? {
        guard recentWaits.count >= 3 else { return nil }
        let sorted = recentWaits.sorted()
        let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        return max(1, Int((median * Double(position)).rounded()))
    }

    public static func validate(_ request: UpdateRoutingRequest) throws(ParleyError) {
        if let value = request.maxConversations, !capacityRange.contains(value) {
            throw .invalidField("maxConversations", "'maxConversations' is \(capacityRange.lowerBound)-\(capacityRange.upperBound).")
        }
        if let value = request.requeueGraceSeconds, !graceRange.contains(value) {
            throw .invalidField("requeueGraceSeconds", "'requeueGraceSeconds' is \(graceRange.lowerBound)-\(graceRange.upperBound).")
        }
    }

    public static func validateCapacity(_ value: Int?) throws(ParleyError) {
        if let value, !capacityRange.contains(value) {
            throw .invalidField("maxConversations", "'maxConversations' is \(capacityRange.lowerBound)-\(capacityRange.upperBound), or null for the brand's.")
        }
    }

    public static func validateTeamName(_ name: String) throws(ParleyError) {
        let trimmed = name.trimmingWhitespace
        if trimmed.isEmpty || trimmed.count > maxTeamNameLength {
            throw .invalidField("name", "'name' is 1-\(maxTeamNameLength) characters.")
        }
    }
}
