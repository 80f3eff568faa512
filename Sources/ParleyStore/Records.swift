import Foundation
import ParleyAPI

/// An agent with what only the server may see.
public struct AgentRecord: Sendable, Hashable {
    public var agent: AgentDTO
    public var passwordHash: String
    public init(agent: AgentDTO, passwordHash: String) {
        self.agent = agent
        self.passwordHash = passwordHash
    }
}

/// A sign-in session. Only a hash of the token is stored: a stolen database grants no sessions.
public struct SessionRecord: Sendable, Hashable {
    public var tokenHash: String
    public var brandId: String
    public var subjectKind: ParticipantKind
    public var subjectId: String
    public var appId: String?
    public var createdAt: Date
    public var expiresAt: Date
    public var revokedAt: Date?
    public init(
        tokenHash: String, brandId: String, subjectKind: ParticipantKind, subjectId: String, appId: String?,
        createdAt: Date, expiresAt: Date, revokedAt: Date? = nil
    ) {
        self.tokenHash = tokenHash
        self.brandId = brandId
        self.subjectKind = subjectKind
        self.subjectId = subjectId
        self.appId = appId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }
}

/// A key that verifies consumer JWTs for an app.
public struct AppKeyRecord: Sendable, Hashable {
    public var kid: String
    public var appId: String
    public var brandId: String
    public var algorithm: String
    public var keyMaterial: String
    public var createdAt: Date
    public init(kid: String, appId: String, brandId: String, algorithm: String, keyMaterial: String, createdAt: Date) {
        self.kid = kid
        self.appId = appId
        self.brandId = brandId
        self.algorithm = algorithm
        self.keyMaterial = keyMaterial
        self.createdAt = createdAt
    }

    public var dto: AppKeyDTO { AppKeyDTO(kid: kid, appId: appId, algorithm: algorithm, createdAt: createdAt) }
}

/// Which conversations an agent's list shows. Newest activity first; `before` continues a page.
public struct ConversationFilter: Sendable, Hashable {
    public enum Assignee: Sendable, Hashable {
        case any
        case unassigned
        case agent(String)
    }

    public var states: [ConversationState]
    public var assignee: Assignee
    public var channel: Channel?
    public var limit: Int
    /// Keyset cursor: the `(updatedAt, id)` of the last row of the previous page.
    public var before: (updatedAt: Int64, id: String)?

    public init(
        states: [ConversationState] = [], assignee: Assignee = .any, channel: Channel? = nil, limit: Int = 50,
        before: (updatedAt: Int64, id: String)? = nil
    ) {
        self.states = states
        self.assignee = assignee
        self.channel = channel
        self.limit = limit
        self.before = before
    }

    public static func == (lhs: ConversationFilter, rhs: ConversationFilter) -> Bool {
        lhs.states == rhs.states && lhs.assignee == rhs.assignee && lhs.channel == rhs.channel
            && lhs.limit == rhs.limit && lhs.before?.updatedAt == rhs.before?.updatedAt && lhs.before?.id == rhs.before?.id
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(states)
        hasher.combine(limit)
    }
}
