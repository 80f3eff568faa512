import Foundation

/// How long a brand keeps conversations and how far back customers see theirs: `GET` and
/// `PATCH /v1/records`.
public struct RecordsSettingsDTO: Codable, Sendable, Hashable {
    /// Messages, events, voice notes and files older than this many months are deleted (1-120).
    public var retentionMonths: Int
    /// Customers load their conversations of this many months back (1-120).
    public var historyMonths: Int
    /// Which of their conversations customers see in their history.
    public var historyStates: [ConversationState]

    public static let `default` = RecordsSettingsDTO(retentionMonths: 13, historyMonths: 13, historyStates: ConversationState.allCases)

    public init(retentionMonths: Int, historyMonths: Int, historyStates: [ConversationState]) {
        (self.retentionMonths, self.historyMonths, self.historyStates) = (retentionMonths, historyMonths, historyStates)
    }
}

public struct UpdateRecordsRequest: Codable, Sendable, Hashable {
    public var retentionMonths: Int?
    public var historyMonths: Int?
    public var historyStates: [ConversationState]?
    public init(retentionMonths: Int? = nil, historyMonths: Int? = nil, historyStates: [ConversationState]? = nil) {
        (self.retentionMonths, self.historyMonths, self.historyStates) = (retentionMonths, historyMonths, historyStates)
    }
}

/// A conversation, or everything of one customer, kept past the retention period (and never erased)
/// until the hold is lifted.
public struct LegalHoldDTO: Codable, Sendable, Hashable {
    public var id: LegalHoldID
    public var conversationId: ConversationID?
    public var consumerId: ConsumerID?
    public var reason: String
    public var createdBy: AgentID
    public var createdAt: Date
    public init(id: LegalHoldID, conversationId: ConversationID?, consumerId: ConsumerID?, reason: String, createdBy: AgentID, createdAt: Date) {
        (self.id, self.conversationId, self.consumerId, self.reason, self.createdBy, self.createdAt) =
            (id, conversationId, consumerId, reason, createdBy, createdAt)
    }
}

/// `POST /v1/legal-holds`: a conversation or a customer (one of the two), and why.
public struct CreateLegalHoldRequest: Codable, Sendable, Hashable {
    public var conversationId: ConversationID?
    public var consumerId: ConsumerID?
    public var reason: String
    public init(conversationId: ConversationID? = nil, consumerId: ConsumerID? = nil, reason: String) {
        (self.conversationId, self.consumerId, self.reason) = (conversationId, consumerId, reason)
    }
}

/// What retention or an erasure removed, for the audit log: counts, never content.
public struct PurgeDTO: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        /// The brand's retention period passed.
        case retention
        /// An admin erased a customer's data on request (GDPR article 17).
        case erasure
    }
    public var id: PurgeID
    public var kind: Kind
    /// Retention: what was older than this went.
    public var cutoff: Date?
    /// Erasure: the customer erased (their id; nothing else about them is kept).
    public var subject: String?
    /// `retention`, or the admin who erased.
    public var actor: String
    public var conversations: Int
    public var messages: Int
    public var events: Int
    public var voiceNotes: Int
    public var attachments: Int
    /// Media files removed from storage (originals, renditions, thumbnails).
    public var files: Int
    public var startedAt: Date
    public var finishedAt: Date

    public init(
        id: PurgeID, kind: Kind, cutoff: Date?, subject: String?, actor: String, conversations: Int, messages: Int, events: Int, voiceNotes: Int,
        attachments: Int, files: Int, startedAt: Date, finishedAt: Date
    ) {
        (self.id, self.kind, self.cutoff, self.subject, self.actor) = (id, kind, cutoff, subject, actor)
        (self.conversations, self.messages, self.events, self.voiceNotes, self.attachments, self.files) = (conversations, messages, events, voiceNotes, attachments, files)
        (self.startedAt, self.finishedAt) = (startedAt, finishedAt)
    }
}

/// `GET /v1/consumers/{id}/export` (GDPR article 15): everything Parley keeps about one customer.
public struct ConsumerExportDTO: Codable, Sendable, Hashable {
    public var consumer: ConsumerDTO
    public var conversations: [ConversationDTO]
    public var messages: [MessageDTO]
    public var activity: [ActivityEventDTO]
    public var pushRegistrations: Int
    public var exportedAt: Date
    public init(consumer: ConsumerDTO, conversations: [ConversationDTO], messages: [MessageDTO], activity: [ActivityEventDTO], pushRegistrations: Int, exportedAt: Date) {
        (self.consumer, self.conversations, self.messages, self.activity, self.pushRegistrations, self.exportedAt) =
            (consumer, conversations, messages, activity, pushRegistrations, exportedAt)
    }
}
