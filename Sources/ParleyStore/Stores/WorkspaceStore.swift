import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// What agents work with beside conversations: saved replies, search, presence, and what the widget
/// reports about a consumer's visit.
public protocol WorkspaceStore: Sendable {
    /// Fails with a unique violation (`isUniqueViolation`) when the brand has the shortcut.
    func insertSavedReply(_ reply: SavedReplyDTO, brandId: BrandID, createdBy: AgentID) async throws
    /// Fails with a unique violation when another reply of the brand has the new shortcut.
    func updateSavedReply(_ reply: SavedReplyDTO, brandId: BrandID) async throws
    func deleteSavedReply(brandId: BrandID, id: SavedReplyID) async throws -> Bool
    func savedReply(brandId: BrandID, id: SavedReplyID) async throws -> SavedReplyDTO?
    func savedReplies(brandId: BrandID) async throws -> [SavedReplyDTO]
    func savedReplyCount(brandId: BrandID) async throws -> Int

    /// Conversations of the brand whose messages' text holds every term (as a word prefix), newest
    /// match first, with that match; then conversations whose customer's name or email contains the
    /// whole query. Full-text search is SQLite FTS5 or PostgreSQL's text search, behind this one method.
    func search(brandId: BrandID, terms: [String], phrase: String, limit: Int) async throws -> [SearchMatch]
    /// SQLite: adds up to `limit` messages written since the last call to the full-text index and
    /// returns how many rows it went through (fewer than `limit`: caught up). PostgreSQL indexes as
    /// it writes and returns 0.
    func indexForSearch(limit: Int) async throws -> Int
    /// SQLite: whether messages were written since the full-text index last caught up (a read: the
    /// indexer looks with it before it takes the writer). PostgreSQL: never.
    func searchIndexIsBehind() async throws -> Bool

    func setPresence(brandId: BrandID, agentId: AgentID, _ presence: AgentPresence, automatic: Bool, at: Date) async throws
    /// Every agent of the brand who can sign in (or only `agentId`): their chosen presence and open
    /// conversations.
    func presence(brandId: BrandID, agentId: AgentID?) async throws -> [StoredPresence]
    /// The brand's agents who can sign in and chose online (no counting: the widget asks on every load).
    func agentsChoosingOnline(brandId: BrandID) async throws -> Set<AgentID>

    /// The page the widget reported, the browser, and when.
    func recordVisit(brandId: BrandID, consumerId: ConsumerID, pageUrl: String, pageTitle: String?, browser: String?, at: Date) async throws
}

/// A search result before it is joined with names.
public struct SearchMatch: Sendable {
    public var conversation: ConversationDTO
    public var message: MessageDTO?
}

public struct StoredPresence: Sendable, Hashable {
    public var agentId: AgentID
    public var name: String
    public var presence: AgentPresence
    public var automatic: Bool
    public var since: Date
    public var openConversations: Int
}

extension SQLRepository: WorkspaceStore {
    public func insertSavedReply(_ reply: SavedReplyDTO, brandId: BrandID, createdBy: AgentID) async throws {
        try await db.insert(SavedReplyRow(reply, brandId: brandId, createdBy: createdBy))
    }

    public func updateSavedReply(_ reply: SavedReplyDTO, brandId: BrandID) async throws {
        try await db.raw(
            """
            UPDATE saved_replies SET shortcut = \(bind: reply.shortcut), body = \(bind: reply.text),
                updated_at = \(bind: StoredTime.millis(reply.updatedAt))
            WHERE id = \(bind: reply.id) AND brand_id = \(bind: brandId)
            """
        ).run()
    }

    public func deleteSavedReply(brandId: BrandID, id: SavedReplyID) async throws -> Bool {
        let row = try await db.raw("DELETE FROM saved_replies WHERE id = \(bind: id) AND brand_id = \(bind: brandId) RETURNING id").first()
        return row != nil
    }

    public func savedReply(brandId: BrandID, id: SavedReplyID) async throws -> SavedReplyDTO? {
        try await db.raw("SELECT * FROM saved_replies WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first(SavedReplyRow.self)?.dto
    }

    public func savedReplies(brandId: BrandID) async throws -> [SavedReplyDTO] {
        try await db.raw("SELECT * FROM saved_replies WHERE brand_id = \(bind: brandId) ORDER BY shortcut").all(SavedReplyRow.self).map(\.dto)
    }

    public func savedReplyCount(brandId: BrandID) async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM saved_replies WHERE brand_id = \(bind: brandId)").first()?.decode(column: "n", as: Int.self) ?? 0
    }

    public func search(brandId: BrandID, terms: [String], phrase: String, limit: Int) async throws -> [SearchMatch] {
        var matches: [SearchMatch] = []
        var seen = Set<ConversationID>()
        if !terms.isEmpty {
            // Terms are letters and digits only (the service strips the rest), so they cannot carry
            // query syntax; they are still bound, never spliced.
            // Messages by their text, and voice notes by what was said (the hit shows the
            // transcript's words); one query expression for both.
            let (query, spoken): (SQLQueryString, SQLQueryString)
            switch flavor {
            case .sqlite:
                let expression = terms.map { "\"\($0)\"*" }.joined(separator: " ")
                query = """
                    SELECT m.* FROM message_search s JOIN messages m ON m.rowid = s.rowid
                    WHERE message_search MATCH \(bind: expression) AND m.brand_id = \(bind: brandId)
                    ORDER BY m.created_at DESC LIMIT \(bind: limit * 4)
                    """
                spoken = """
                    SELECT m.*, v.transcript_text AS transcript FROM transcript_search t
                    JOIN voice_media v ON v.message_id = t.message_id JOIN messages m ON m.id = v.message_id
                    WHERE transcript_search MATCH \(bind: expression) AND v.brand_id = \(bind: brandId)
                    ORDER BY m.created_at DESC LIMIT \(bind: limit * 4)
                    """
            case .postgres:
                let expression = terms.map { "\($0):*" }.joined(separator: " & ")
                query = """
                    SELECT * FROM messages
                    WHERE kind = 'text' AND to_tsvector('simple', body) @@ to_tsquery('simple', \(bind: expression))
                        AND brand_id = \(bind: brandId)
                    ORDER BY created_at DESC LIMIT \(bind: limit * 4)
                    """
                spoken = """
                    SELECT m.*, v.transcript_text AS transcript FROM voice_media v JOIN messages m ON m.id = v.message_id
                    WHERE v.transcript_text <> '' AND to_tsvector('simple', v.transcript_text) @@ to_tsquery('simple', \(bind: expression))
                        AND v.brand_id = \(bind: brandId)
                    ORDER BY m.created_at DESC LIMIT \(bind: limit * 4)
                    """
            }
            var found = try await db.raw(query).all(MessageRow.self).map { try $0.dto(voice: nil) }
            for row in try await db.raw(spoken).all() {
                var message = try row.decode(MessageRow.self).dto(voice: nil)
                message.text = try row.decode(column: "transcript", as: String.self)
                found.append(message)
            }
            found.sort { $0.createdAt > $1.createdAt }
            for message in found {
                guard matches.count < limit, seen.insert(message.conversationId).inserted,
                    let conversation = try await conversation(brandId: brandId, id: message.conversationId, lock: false)
                else { continue }
                matches.append(SearchMatch(conversation: conversation, message: message))
            }
        }
        if matches.count < limit, !phrase.isEmpty {
            let pattern = "%" + phrase.lowercased().replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_") + "%"
            let rows = try await db.raw(
                """
                SELECT c.* FROM conversations c JOIN consumers p ON p.id = c.consumer_id
                WHERE c.brand_id = \(bind: brandId)
                    AND (LOWER(p.display_name) LIKE \(bind: pattern) ESCAPE '\\' OR LOWER(p.email) LIKE \(bind: pattern) ESCAPE '\\')
                ORDER BY c.updated_at DESC LIMIT \(bind: limit)
                """
            ).all(ConversationRow.self)
            for row in rows where matches.count < limit && seen.insert(row.id).inserted {
                matches.append(SearchMatch(conversation: row.dto, message: nil))
            }
        }
        return matches
    }

    public func searchIndexIsBehind() async throws -> Bool {
        guard flavor == .sqlite else { return false }
        // Both sides are one b-tree lookup: the last rowid of `messages` and the state's one row.
        let row = try await db.raw(
            """
            SELECT (SELECT COALESCE(MAX(rowid), 0) FROM messages)
                > COALESCE((SELECT indexed_up_to FROM message_search_state WHERE id = 1), 0) AS behind
            """
        ).first()
        return try row?.decode(column: "behind", as: Int.self) == 1
    }

    public func indexForSearch(limit: Int) async throws -> Int {
        guard flavor == .sqlite else { return 0 }
        let watermark = try await db.raw("SELECT indexed_up_to FROM message_search_state WHERE id = 1").first()?
            .decode(column: "indexed_up_to", as: Int64.self) ?? 0
        let rows = try await db.raw(
            "SELECT rowid AS position, kind FROM messages WHERE rowid > \(bind: watermark) ORDER BY rowid LIMIT \(bind: limit)"
        ).all()
        guard let last = try rows.last?.decode(column: "position", as: Int64.self) else { return 0 }
        try await db.raw(
            """
            INSERT INTO message_search (rowid, body)
            SELECT rowid, body FROM messages WHERE rowid > \(bind: watermark) AND rowid <= \(bind: last) AND kind = 'text'
            """
        ).run()
        try await db.raw("UPDATE message_search_state SET indexed_up_to = \(bind: last) WHERE id = 1").run()
        return rows.count
    }

    public func setPresence(brandId: BrandID, agentId: AgentID, _ presence: AgentPresence, automatic: Bool, at: Date) async throws {
        try await db.raw(
            """
            UPDATE agents SET presence = \(bind: presence.rawValue), presence_automatic = \(bind: automatic ? 1 : 0),
                presence_at = \(bind: StoredTime.millis(at))
            WHERE id = \(bind: agentId) AND brand_id = \(bind: brandId)
            """
        ).run()
    }

    public func presence(brandId: BrandID, agentId: AgentID?) async throws -> [StoredPresence] {
        let only: SQLQueryString = agentId.map { " AND a.id = \(bind: $0)" } ?? ""
        let rows = try await db.raw(
            """
            SELECT a.id, a.name, a.presence, a.presence_automatic, a.presence_at, a.created_at,
                (SELECT COUNT(*) FROM conversations c
                 WHERE c.brand_id = a.brand_id AND c.assignee_id = a.id AND c.state <> 'resolved') AS open_conversations
            FROM agents a
            WHERE a.brand_id = \(bind: brandId) AND a.disabled_at IS NULL AND a.deleted_at IS NULL\(only)
            ORDER BY a.name, a.id
            """
        ).all()
        return try rows.map { row in
            let raw = try row.decode(column: "presence", as: String.self)
            guard let presence = AgentPresence(rawValue: raw) else { throw StoreError.corrupt("an agent's presence is '\(raw)'") }
            let since = max(try row.decode(column: "presence_at", as: Int64.self), try row.decode(column: "created_at", as: Int64.self))
            return StoredPresence(
                agentId: try row.decode(column: "id", as: AgentID.self), name: try row.decode(column: "name", as: String.self),
                presence: presence, automatic: try row.decode(column: "presence_automatic", as: Int.self) != 0,
                since: StoredTime.date(since), openConversations: try row.decode(column: "open_conversations", as: Int.self))
        }
    }

    public func agentsChoosingOnline(brandId: BrandID) async throws -> Set<AgentID> {
        let rows = try await db.raw(
            """
            SELECT id FROM agents
            WHERE brand_id = \(bind: brandId) AND presence = \(bind: AgentPresence.online.rawValue) AND disabled_at IS NULL AND deleted_at IS NULL
            """
        ).all()
        return Set(try rows.map { try $0.decode(column: "id", as: AgentID.self) })
    }

    public func recordVisit(
        brandId: BrandID, consumerId: ConsumerID, pageUrl: String, pageTitle: String?, browser: String?, at: Date
    ) async throws {
        try await db.raw(
            """
            UPDATE consumers SET last_page_url = \(bind: pageUrl), last_page_title = \(bind: pageTitle),
                last_browser = \(bind: browser), last_seen_at = \(bind: StoredTime.millis(at))
            WHERE id = \(bind: consumerId) AND brand_id = \(bind: brandId)
            """
        ).run()
    }
}

struct SavedReplyRow: TableRow {
    static let table = "saved_replies"
    var id: SavedReplyID
    var brandId: BrandID
    var shortcut: String
    var body: String
    var createdBy: AgentID
    var createdAt: Int64
    var updatedAt: Int64

    init(_ reply: SavedReplyDTO, brandId: BrandID, createdBy: AgentID) {
        (id, self.brandId, shortcut, body, self.createdBy) = (reply.id, brandId, reply.shortcut, reply.text, createdBy)
        createdAt = StoredTime.millis(reply.createdAt)
        updatedAt = StoredTime.millis(reply.updatedAt)
    }

    var dto: SavedReplyDTO {
        SavedReplyDTO(id: id, shortcut: shortcut, text: body, createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt))
    }
}
