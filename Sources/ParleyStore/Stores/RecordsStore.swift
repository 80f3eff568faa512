import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// What deleting some of a brand's records removed: rows by kind, and the messages whose media
/// files are to be removed once the deletion has committed.
public struct DeletedRecords: Sendable, Hashable {
    public var conversations = 0
    public var messages = 0
    public var events = 0
    public var voiceNotes = 0
    public var attachments = 0
    /// Messages that had a voice note or a file (their media directories go after the commit).
    public var mediaMessages: [MessageID] = []

    public init() {}

    public static func += (lhs: inout DeletedRecords, rhs: DeletedRecords) {
        lhs.conversations += rhs.conversations
        lhs.messages += rhs.messages
        lhs.events += rhs.events
        lhs.voiceNotes += rhs.voiceNotes
        lhs.attachments += rhs.attachments
        lhs.mediaMessages += rhs.mediaMessages
    }
}

public protocol RecordsStore: Sendable {
    func recordsSettings(brandId: BrandID) async throws -> RecordsSettingsDTO
    func saveRecordsSettings(_ settings: RecordsSettingsDTO, brandId: BrandID) async throws
    func brandIds() async throws -> [BrandID]

    func insertLegalHold(_ hold: LegalHoldDTO, brandId: BrandID) async throws
    func deleteLegalHold(brandId: BrandID, id: LegalHoldID) async throws -> Bool
    func legalHolds(brandId: BrandID) async throws -> [LegalHoldDTO]

    /// Conversations last active before `before`, neither they nor their customer held; a batch.
    func expiredConversations(brandId: BrandID, before: Date, limit: Int) async throws -> [ConversationID]
    /// Messages written before `before` in conversations that are not held (nor their customer); a batch.
    func expiredMessages(brandId: BrandID, before: Date, limit: Int) async throws -> [MessageID]
    /// Events logged before `before` in conversations that are not held; deletes up to `limit`, returns how many.
    func deleteExpiredEvents(brandId: BrandID, before: Date, limit: Int) async throws -> Int
    /// Deletes conversations with everything in them.
    func deleteConversations(_ ids: [ConversationID], brandId: BrandID) async throws -> DeletedRecords
    /// Deletes messages with their voice notes, files and deliveries.
    func deleteMessages(_ ids: [MessageID], brandId: BrandID) async throws -> DeletedRecords
    /// Deletes the customer and what is theirs outside conversations (sessions, devices, activity).
    func deleteConsumer(brandId: BrandID, id: ConsumerID) async throws

    func insertPurge(_ purge: PurgeDTO, brandId: BrandID) async throws
    func purges(brandId: BrandID, limit: Int) async throws -> [PurgeDTO]
}

extension SQLRepository: RecordsStore {
    public func recordsSettings(brandId: BrandID) async throws -> RecordsSettingsDTO {
        guard let row = try await db.raw("SELECT settings FROM records_settings WHERE brand_id = \(bind: brandId)").first() else { return .default }
        return try JSONDecoder().decode(RecordsSettingsDTO.self, from: Data(try row.decode(column: "settings", as: String.self).utf8))
    }

    public func saveRecordsSettings(_ settings: RecordsSettingsDTO, brandId: BrandID) async throws {
        let json = String(decoding: try JSONEncoder.sorted.encode(settings), as: UTF8.self)
        try await db.raw(
            """
            INSERT INTO records_settings (brand_id, settings) VALUES (\(bind: brandId), \(bind: json))
            ON CONFLICT (brand_id) DO UPDATE SET settings = excluded.settings
            """
        ).run()
    }

    public func brandIds() async throws -> [BrandID] {
        try await db.raw("SELECT id FROM brands ORDER BY id").all().map { BrandID(rawValue: try $0.decode(column: "id", as: String.self)) }
    }

    public func insertLegalHold(_ hold: LegalHoldDTO, brandId: BrandID) async throws {
        try await db.raw(
            """
            INSERT INTO legal_holds (id, brand_id, conversation_id, consumer_id, reason, created_by, created_at)
            VALUES (\(bind: hold.id), \(bind: brandId), \(bind: hold.conversationId), \(bind: hold.consumerId), \(bind: hold.reason),
                \(bind: hold.createdBy), \(bind: StoredTime.millis(hold.createdAt)))
            """
        ).run()
    }

    public func deleteLegalHold(brandId: BrandID, id: LegalHoldID) async throws -> Bool {
        !(try await db.raw("DELETE FROM legal_holds WHERE id = \(bind: id) AND brand_id = \(bind: brandId) RETURNING id").all()).isEmpty
    }

    public func legalHolds(brandId: BrandID) async throws -> [LegalHoldDTO] {
        try await db.raw("SELECT * FROM legal_holds WHERE brand_id = \(bind: brandId) ORDER BY created_at DESC, id").all().map { row in
            LegalHoldDTO(
                id: LegalHoldID(rawValue: try row.decode(column: "id", as: String.self)),
                conversationId: try row.decode(column: "conversation_id", as: String?.self).map(ConversationID.init(rawValue:)),
                consumerId: try row.decode(column: "consumer_id", as: String?.self).map(ConsumerID.init(rawValue:)),
                reason: try row.decode(column: "reason", as: String.self),
                createdBy: AgentID(rawValue: try row.decode(column: "created_by", as: String.self)),
                createdAt: StoredTime.date(try row.decode(column: "created_at", as: Int64.self)))
        }
    }

    /// Not held: neither the conversation `c` nor its customer.
    private var notHeld: SQLQueryString {
        """
        NOT EXISTS (SELECT 1 FROM legal_holds h WHERE h.brand_id = c.brand_id AND (h.conversation_id = c.id OR h.consumer_id = c.consumer_id))
        """
    }

    public func expiredConversations(brandId: BrandID, before: Date, limit: Int) async throws -> [ConversationID] {
        try await db.raw(
            """
            SELECT c.id FROM conversations c
            WHERE c.brand_id = \(bind: brandId) AND c.updated_at < \(bind: StoredTime.millis(before)) AND \(notHeld)
            ORDER BY c.updated_at LIMIT \(bind: limit)
            """
        ).all().map { ConversationID(rawValue: try $0.decode(column: "id", as: String.self)) }
    }

    public func expiredMessages(brandId: BrandID, before: Date, limit: Int) async throws -> [MessageID] {
        try await db.raw(
            """
            SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id
            WHERE m.brand_id = \(bind: brandId) AND m.created_at < \(bind: StoredTime.millis(before)) AND \(notHeld)
            ORDER BY m.created_at LIMIT \(bind: limit)
            """
        ).all().map { MessageID(rawValue: try $0.decode(column: "id", as: String.self)) }
    }

    public func deleteExpiredEvents(brandId: BrandID, before: Date, limit: Int) async throws -> Int {
        try await db.raw(
            """
            DELETE FROM conversation_events WHERE brand_id = \(bind: brandId) AND (conversation_id, seq) IN (
                SELECT e.conversation_id, e.seq FROM conversation_events e JOIN conversations c ON c.id = e.conversation_id
                WHERE e.brand_id = \(bind: brandId) AND e.created_at < \(bind: StoredTime.millis(before)) AND \(notHeld)
                LIMIT \(bind: limit))
            RETURNING seq
            """
        ).all().count
    }

    public func deleteConversations(_ ids: [ConversationID], brandId: BrandID) async throws -> DeletedRecords {
        var deleted = DeletedRecords()
        guard !ids.isEmpty else { return deleted }
        let list = SQLList(ids.map { SQLBind($0.rawValue) })
        let messageIds = try await db.raw("SELECT id FROM messages WHERE brand_id = \(bind: brandId) AND conversation_id IN (\(list))").all()
            .map { MessageID(rawValue: try $0.decode(column: "id", as: String.self)) }
        deleted += try await deleteMessages(messageIds, brandId: brandId)
        deleted.events = try await db.raw(
            "DELETE FROM conversation_events WHERE brand_id = \(bind: brandId) AND conversation_id IN (\(list)) RETURNING seq").all().count
        for table in ["calls", "cobrowse_sessions", "conversation_queue", "routing_waits", "channel_deliveries"] {
            try await db.raw("DELETE FROM \(unsafeRaw: table) WHERE conversation_id IN (\(list))").run()
        }
        try await db.raw("DELETE FROM legal_holds WHERE brand_id = \(bind: brandId) AND conversation_id IN (\(list))").run()
        deleted.conversations = try await db.raw("DELETE FROM conversations WHERE brand_id = \(bind: brandId) AND id IN (\(list)) RETURNING id").all().count
        return deleted
    }

    public func deleteMessages(_ ids: [MessageID], brandId: BrandID) async throws -> DeletedRecords {
        var deleted = DeletedRecords()
        guard !ids.isEmpty else { return deleted }
        for chunk in stride(from: 0, to: ids.count, by: 500).map({ Array(ids[$0..<min($0 + 500, ids.count)]) }) {
            let list = SQLList(chunk.map { SQLBind($0.rawValue) })
            let voices = try await db.raw("DELETE FROM voice_media WHERE brand_id = \(bind: brandId) AND message_id IN (\(list)) RETURNING message_id").all()
                .map { MessageID(rawValue: try $0.decode(column: "message_id", as: String.self)) }
            let files = try await db.raw("DELETE FROM attachments WHERE brand_id = \(bind: brandId) AND message_id IN (\(list)) RETURNING message_id").all()
                .map { MessageID(rawValue: try $0.decode(column: "message_id", as: String.self)) }
            try await db.raw("DELETE FROM channel_deliveries WHERE brand_id = \(bind: brandId) AND message_id IN (\(list))").run()
            deleted.messages += try await db.raw("DELETE FROM messages WHERE brand_id = \(bind: brandId) AND id IN (\(list)) RETURNING id").all().count
            deleted.voiceNotes += voices.count
            deleted.attachments += files.count
            deleted.mediaMessages += voices + files
        }
        return deleted
    }

    public func deleteConsumer(brandId: BrandID, id: ConsumerID) async throws {
        try await db.raw("DELETE FROM activity_events WHERE brand_id = \(bind: brandId) AND consumer_id = \(bind: id)").run()
        try await db.raw("DELETE FROM engagement_firings WHERE consumer_id = \(bind: id)").run()
        try await db.raw("DELETE FROM push_registrations WHERE brand_id = \(bind: brandId) AND consumer_id = \(bind: id)").run()
        try await db.raw(
            "DELETE FROM sessions WHERE brand_id = \(bind: brandId) AND subject_kind = \(bind: ParticipantKind.consumer.rawValue) AND subject_id = \(bind: id)"
        ).run()
        try await db.raw("DELETE FROM legal_holds WHERE brand_id = \(bind: brandId) AND consumer_id = \(bind: id)").run()
        try await db.raw("DELETE FROM consumers WHERE brand_id = \(bind: brandId) AND id = \(bind: id)").run()
    }

    public func insertPurge(_ purge: PurgeDTO, brandId: BrandID) async throws {
        try await db.raw(
            """
            INSERT INTO purges (id, brand_id, kind, cutoff, subject, actor, conversations, messages, events, voice_notes, attachments, files,
                started_at, finished_at)
            VALUES (\(bind: purge.id), \(bind: brandId), \(bind: purge.kind.rawValue), \(bind: purge.cutoff.map(StoredTime.millis)), \(bind: purge.subject),
                \(bind: purge.actor), \(bind: purge.conversations), \(bind: purge.messages), \(bind: purge.events), \(bind: purge.voiceNotes),
                \(bind: purge.attachments), \(bind: purge.files), \(bind: StoredTime.millis(purge.startedAt)), \(bind: StoredTime.millis(purge.finishedAt)))
            """
        ).run()
    }

    public func purges(brandId: BrandID, limit: Int) async throws -> [PurgeDTO] {
        try await db.raw("SELECT * FROM purges WHERE brand_id = \(bind: brandId) ORDER BY finished_at DESC, id LIMIT \(bind: limit)").all().map { row in
            PurgeDTO(
                id: PurgeID(rawValue: try row.decode(column: "id", as: String.self)),
                kind: PurgeDTO.Kind(rawValue: try row.decode(column: "kind", as: String.self)) ?? .retention,
                cutoff: try row.decode(column: "cutoff", as: Int64?.self).map(StoredTime.date),
                subject: try row.decode(column: "subject", as: String?.self), actor: try row.decode(column: "actor", as: String.self),
                conversations: try row.decode(column: "conversations", as: Int.self), messages: try row.decode(column: "messages", as: Int.self),
                events: try row.decode(column: "events", as: Int.self), voiceNotes: try row.decode(column: "voice_notes", as: Int.self),
                attachments: try row.decode(column: "attachments", as: Int.self), files: try row.decode(column: "files", as: Int.self),
                startedAt: StoredTime.date(try row.decode(column: "started_at", as: Int64.self)),
                finishedAt: StoredTime.date(try row.decode(column: "finished_at", as: Int64.self)))
        }
    }
}
