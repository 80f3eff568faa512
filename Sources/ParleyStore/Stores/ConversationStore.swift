import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Conversations, their messages and their sequenced events. Only `ConversationAppend` (in the
/// server) writes a conversation's log; this is where it is kept.
public protocol ConversationStore: Sendable {
    func insertConversation(_ conversation: ConversationDTO) async throws
    /// `lock` takes the row lock for the rest of the transaction (PostgreSQL; SQLite writers are serial).
    func conversation(brandId: BrandID, id: ConversationID, lock: Bool) async throws -> ConversationDTO?
    /// The conversation (locked for the transaction when `lock`) with its brand's card masking, in
    /// one statement: what a customer's text needs, where `brandSettings` would be a second.
    func conversationAndCardMasking(brandId: BrandID, id: ConversationID, lock: Bool) async throws -> (ConversationDTO, CardMasking)?
    func latestConversation(consumerId: ConsumerID, appId: AppID, channel: Channel, lock: Bool) async throws -> ConversationDTO?
    /// How many of a consumer's conversations in an app are not resolved.
    func openConversationCount(consumerId: ConsumerID, appId: AppID) async throws -> Int
    /// Writes the columns where `conversation` differs from `previous` (the row as this transaction read it).
    func updateConversation(_ conversation: ConversationDTO, from previous: ConversationDTO) async throws
    /// `updateConversation` and `insertMessage` in one: one statement on PostgreSQL (a data-modifying
    /// WITH), where they were two round trips; two statements on SQLite, where a statement is a call.
    func updateConversation(_ conversation: ConversationDTO, from previous: ConversationDTO, inserting message: MessageDTO) async throws
    /// The same, only if the conversation's `last_seq` is still `previous`'s: false (and nothing
    /// written) when another writer logged an entry since `previous` was read. One statement on
    /// PostgreSQL, so that it can run without a transaction around it (`Store.alone`).
    func appendMessage(_ message: MessageDTO, to conversation: ConversationDTO, from previous: ConversationDTO) async throws -> Bool
    /// Sets every conversation's reply window in an app to `hours` after the customer's last
    /// message (a connection's window changed); returns how many changed.
    func setReplyWindows(appId: AppID, hours: Int) async throws
    func conversations(brandId: BrandID, filter: ConversationFilter) async throws -> [ConversationDTO]
    func conversations(consumerId: ConsumerID, brandId: BrandID, limit: Int) async throws -> [ConversationDTO]

    func insertMessage(_ message: MessageDTO, brandId: BrandID) async throws
    func message(senderId: String, clientMessageId: String) async throws -> MessageDTO?
    /// A message of the brand by id (any conversation of the brand), with its voice note if it has one.
    func message(brandId: BrandID, id: MessageID) async throws -> MessageDTO?
    func messages(conversationId: ConversationID, afterSeq: Int64, limit: Int) async throws -> [MessageDTO]
    /// Per conversation, how many messages from `senderKind` are not read yet (absent: none).
    func unreadCounts(conversationIds: [ConversationID], senderKind: ParticipantKind) async throws -> [ConversationID: Int]
    /// The `limit` messages just before `beforeSeq`, in sequence order (reading a conversation backwards).
    func messages(conversationId: ConversationID, beforeSeq: Int64, limit: Int) async throws -> [MessageDTO]
    /// Raises the delivery state of every message sent by `senderKind` with `seq <= upToSeq` to `state`.
    /// Returns how many messages changed.
    func raiseDeliveryState(
        conversationId: ConversationID, senderKind: ParticipantKind, upToSeq: Int64, to state: DeliveryState, at: Date
    ) async throws -> Int
    func insertEvent(_ event: ConversationEventDTO, brandId: BrandID) async throws
    /// Every message of several conversations (a transcript export's batch), in conversation and sequence order.
    func messages(conversationIds: [ConversationID]) async throws -> [MessageDTO]
    /// Every event of several conversations of these kinds, in conversation and sequence order.
    func events(conversationIds: [ConversationID], kinds: [ConversationEventDTO.Kind]) async throws -> [ConversationEventDTO]
    /// The brand's conversations begun in `[from, to)`, oldest first, after `after` (a page).
    func conversationsBegun(brandId: BrandID, from: Date, to: Date, after: (Date, ConversationID)?, limit: Int) async throws -> [ConversationDTO]
    /// A conversation's events after `afterSeq`; private notes only when `includeNotes` (agents).
    func events(conversationId: ConversationID, afterSeq: Int64, limit: Int, includeNotes: Bool) async throws -> [ConversationEventDTO]
    /// The note an author already stored with this client id (a retry), if any.
    func note(brandId: BrandID, actorId: String, clientNoteId: String) async throws -> ConversationEventDTO?
}

extension SQLRepository: ConversationStore {
    public func insertConversation(_ conversation: ConversationDTO) async throws {
        try await db.insert(ConversationRow(conversation))
    }

    public func conversation(brandId: BrandID, id: ConversationID, lock: Bool) async throws -> ConversationDTO? {
        try await db.raw("SELECT * FROM conversations WHERE id = \(bind: id) AND brand_id = \(bind: brandId)\(lockClause(lock))")
            .first(ConversationRow.self)?.dto
    }

    public func conversationAndCardMasking(brandId: BrandID, id: ConversationID, lock: Bool) async throws -> (ConversationDTO, CardMasking)? {
        // Prepared, with its columns named: a column added by a later migration while this node
        // runs changes nothing the prepared statement returns.
        let row = try await db.prepared(
            DirectStatement(
                lock && flavor == .postgres ? Self.conversationAndCardMaskingLocked : Self.conversationAndCardMaskingText,
                [.text(id.rawValue), .text(brandId.rawValue)])
        ).first()
        guard let row else { return nil }
        var columns = ColumnCursor(row, columns: Self.conversationAndCardMaskingColumns)
        let conversation = try ConversationRow.decode(&columns)
        // A brand that never saved its settings has the defaults (as `brandSettings` answers).
        let masking = try columns.optionalValue(as: CardMasking.self) ?? BrandSettingsDTO().cardMasking
        return (conversation.dto, masking)
    }

    public func latestConversation(consumerId: ConsumerID, appId: AppID, channel: Channel, lock: Bool) async throws -> ConversationDTO? {
        try await db.raw(
            """
            SELECT * FROM conversations
            WHERE consumer_id = \(bind: consumerId) AND app_id = \(bind: appId) AND channel = \(bind: channel.rawValue)
            ORDER BY CASE WHEN state = 'resolved' THEN 1 ELSE 0 END, updated_at DESC, id DESC LIMIT 1\(lockClause(lock))
            """
        ).first(ConversationRow.self)?.dto
    }

    public func openConversationCount(consumerId: ConsumerID, appId: AppID) async throws -> Int {
        let row = try await db.raw(
            """
            SELECT COUNT(*) AS n FROM conversations
            WHERE consumer_id = \(bind: consumerId) AND app_id = \(bind: appId) AND state <> \(bind: ConversationState.resolved.rawValue)
            """
        ).first()
        return try row?.decode(column: "n", as: Int.self) ?? 0
    }

    public func conversationsBegun(brandId: BrandID, from: Date, to: Date, after: (Date, ConversationID)?, limit: Int) async throws -> [ConversationDTO] {
        let (start, end) = (StoredTime.millis(from), StoredTime.millis(to))
        guard let (at, id) = after else {
            return try await db.raw(
                """
                SELECT * FROM conversations WHERE brand_id = \(bind: brandId) AND created_at >= \(bind: start) AND created_at < \(bind: end)
                ORDER BY created_at, id LIMIT \(bind: limit)
                """
            ).all(ConversationRow.self).map(\.dto)
        }
        let last = StoredTime.millis(at)
        return try await db.raw(
            """
            SELECT * FROM conversations WHERE brand_id = \(bind: brandId) AND created_at < \(bind: end)
                AND (created_at > \(bind: last) OR (created_at = \(bind: last) AND id > \(bind: id)))
            ORDER BY created_at, id LIMIT \(bind: limit)
            """
        ).all(ConversationRow.self).map(\.dto)
    }

    public func updateConversation(_ conversation: ConversationDTO, from previous: ConversationDTO) async throws {
        guard let update = Self.conversationUpdate(conversation, from: previous) else { return }
        try await db.run(update)
    }

    public func updateConversation(_ conversation: ConversationDTO, from previous: ConversationDTO, inserting message: MessageDTO) async throws {
        let insert = RowStatements.directInsert(MessageRow(message, brandId: conversation.brandId))
        guard let update = Self.conversationUpdate(conversation, from: previous) else { return try await db.run(insert) }
        switch flavor {
        case .postgres:
            // A data-modifying statement in WITH runs to completion whether or not the INSERT reads it.
            try await db.run(DirectStatement("WITH updated AS (" + update.sql + ") " + insert.sql, update.values + insert.values))
        case .sqlite:
            try await db.run(update)
            try await db.run(insert)
        }
    }

    /// The conversation's changed columns, `WHERE id = ? AND brand_id = ?` (and `extra`, with its values).
    static func conversationUpdate(
        _ conversation: ConversationDTO, from previous: ConversationDTO, and extra: String = "", _ extraValues: [ColumnValue] = []
    ) -> DirectStatement? {
        RowStatements.directUpdate(
            ConversationRow(conversation), from: ConversationRow(previous), where: "id = ? AND brand_id = ?" + extra,
            [.text(conversation.id.rawValue), .text(conversation.brandId.rawValue)] + extraValues)
    }

    static let conversationAndCardMaskingText = """
        SELECT \(ConversationRow.selectList),
        (SELECT card_masking FROM brand_settings WHERE brand_settings.brand_id = conversations.brand_id) AS brand_card_masking
        FROM conversations WHERE id = ? AND brand_id = ?
        """
    static let conversationAndCardMaskingLocked = conversationAndCardMaskingText + " FOR UPDATE"
    static let conversationAndCardMaskingColumns = ConversationRow.columns + ["brand_card_masking"]

    public func appendMessage(_ message: MessageDTO, to conversation: ConversationDTO, from previous: ConversationDTO) async throws -> Bool {
        guard let update = Self.conversationUpdate(conversation, from: previous, and: " AND last_seq = ? RETURNING id", [.integer(previous.lastSeq)])
        else {
            return false  // a message always moves last_seq
        }
        let row = MessageRow(message, brandId: conversation.brandId)
        switch flavor {
        case .postgres:
            // The INSERT takes its row from the UPDATE's: no row updated, nothing inserted.
            let insert = try RowStatements.insert(row, selectingFrom: "updated")
            let with: SQLQueryString = "WITH updated AS (\(update)) "
            return try await db.prepared(with + insert + " RETURNING id").first() != nil
        case .sqlite:
            guard try await db.returnsRow(update) else { return false }
            try await db.run(RowStatements.directInsert(row))
            return true
        }
    }

    public func setReplyWindows(appId: AppID, hours: Int) async throws {
        try await db.raw(
            """
            UPDATE conversations SET reply_window_ends_at = last_consumer_message_at + \(bind: Int64(hours) * 3_600_000)
            WHERE app_id = \(bind: appId) AND last_consumer_message_at IS NOT NULL
            """
        ).run()
    }

    public func conversations(brandId: BrandID, filter: ConversationFilter) async throws -> [ConversationDTO] {
        var query = SQLQueryString("SELECT * FROM conversations WHERE brand_id = \(bind: brandId)")
        if !filter.states.isEmpty {
            query.appendInterpolation(unsafeRaw: " AND state IN (")
            for (index, state) in filter.states.enumerated() {
                if index > 0 { query.appendInterpolation(unsafeRaw: ", ") }
                query.appendInterpolation(bind: state.rawValue)
            }
            query.appendInterpolation(unsafeRaw: ")")
        }
        switch filter.assignee {
        case .any: break
        case .unassigned: query.appendInterpolation(unsafeRaw: " AND assignee_id IS NULL")
        case .agent(let id):
            query.appendInterpolation(unsafeRaw: " AND assignee_id = ")
            query.appendInterpolation(bind: id)
        }
        if let channel = filter.channel {
            query.appendInterpolation(unsafeRaw: " AND channel = ")
            query.appendInterpolation(bind: channel.rawValue)
        }
        if let consumerId = filter.consumerId {
            query.appendInterpolation(unsafeRaw: " AND consumer_id = ")
            query.appendInterpolation(bind: consumerId)
        }
        if let since = filter.activeSince {
            query.appendInterpolation(unsafeRaw: " AND updated_at >= ")
            query.appendInterpolation(bind: StoredTime.millis(since))
        }
        if let before = filter.before {
            query.appendInterpolation(unsafeRaw: " AND (updated_at < ")
            query.appendInterpolation(bind: before.updatedAt)
            query.appendInterpolation(unsafeRaw: " OR (updated_at = ")
            query.appendInterpolation(bind: before.updatedAt)
            query.appendInterpolation(unsafeRaw: " AND id < ")
            query.appendInterpolation(bind: before.id)
            query.appendInterpolation(unsafeRaw: "))")
        }
        query.appendInterpolation(unsafeRaw: " ORDER BY updated_at DESC, id DESC LIMIT ")
        query.appendInterpolation(bind: filter.limit)
        return try await db.raw(query).all(ConversationRow.self).map(\.dto)
    }

    public func conversations(consumerId: ConsumerID, brandId: BrandID, limit: Int) async throws -> [ConversationDTO] {
        try await db.prepared(
            DirectStatement(
                Self.consumerConversationsText(flavor), [.text(consumerId.rawValue), .text(brandId.rawValue), .integer(Int64(limit))])
        ).all(ConversationRow.self).map(\.dto)
    }

    /// A consumer's conversations, newest first (`?`: the consumer, the brand, the limit). SQLite,
    /// left to itself, took `conversations_by_brand` because it gives the order, and walked the
    /// brand's conversations newest first until it had the consumer's: all of them when the consumer
    /// has fewer than the limit (a records export or erasure in a brand of 200,000 conversations
    /// read the whole index). The consumer's own entries are a few rows to sort.
    static func consumerConversationsText(_ flavor: DatabaseFlavor) -> String {
        let index = flavor == .sqlite ? " INDEXED BY conversations_by_consumer" : ""
        // Named columns, as every prepared statement here: a column a later migration adds while this
        // node runs changes nothing it returns.
        return "SELECT \(ConversationRow.selectList) FROM conversations\(index) WHERE consumer_id = ? AND brand_id = ? ORDER BY updated_at DESC, id DESC LIMIT ?"
    }

    public func insertMessage(_ message: MessageDTO, brandId: BrandID) async throws {
        try await db.run(RowStatements.directInsert(MessageRow(message, brandId: brandId)))
    }

    /// Runs on every send (the idempotency check), and almost always finds nothing: a plain indexed
    /// lookup of the id first.
    public func message(senderId: String, clientMessageId: String) async throws -> MessageDTO? {
        guard let row = try await db.prepared(
            DirectStatement("SELECT id, brand_id FROM messages WHERE sender_id = ? AND client_message_id = ?", [.text(senderId), .text(clientMessageId)])
        ).first() else { return nil }
        return try await message(brandId: row.decode(column: "brand_id", as: BrandID.self), id: row.decode(column: "id", as: MessageID.self))
    }

    public func message(brandId: BrandID, id: MessageID) async throws -> MessageDTO? {
        let rows = try await db.raw("SELECT * FROM messages WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").all(MessageRow.self)
        return try await withVoice(rows).first
    }

    public func messages(conversationId: ConversationID, afterSeq: Int64, limit: Int) async throws -> [MessageDTO] {
        let rows = try await db.raw(
            "SELECT * FROM messages WHERE conversation_id = \(bind: conversationId) AND seq > \(bind: afterSeq) ORDER BY seq LIMIT \(bind: limit)"
        ).all(MessageRow.self)
        return try await withVoice(rows)
    }

    public func unreadCounts(conversationIds: [ConversationID], senderKind: ParticipantKind) async throws -> [ConversationID: Int] {
        guard !conversationIds.isEmpty else { return [:] }
        struct Count: Decodable {
            var conversation_id: String
            var unread: Int
        }
        let list = SQLList(conversationIds.map { SQLBind($0.rawValue) })
        let rows = try await db.raw(
            """
            SELECT conversation_id, COUNT(*) AS unread FROM messages
            WHERE conversation_id IN (\(list)) AND sender_kind = \(bind: senderKind.rawValue) AND delivery_state < \(bind: DeliveryState.read.rank)
            GROUP BY conversation_id
            """
        ).all(decoding: Count.self)
        return Dictionary(rows.map { (ConversationID(rawValue: $0.conversation_id), $0.unread) }, uniquingKeysWith: { first, _ in first })
    }

    public func messages(conversationId: ConversationID, beforeSeq: Int64, limit: Int) async throws -> [MessageDTO] {
        let rows = try await db.raw(
            "SELECT * FROM messages WHERE conversation_id = \(bind: conversationId) AND seq < \(bind: beforeSeq) ORDER BY seq DESC LIMIT \(bind: limit)"
        ).all(MessageRow.self)
        return try await withVoice(rows.reversed())
    }

    public func messages(conversationIds: [ConversationID]) async throws -> [MessageDTO] {
        guard !conversationIds.isEmpty else { return [] }
        let list = SQLList(conversationIds.map { SQLBind($0.rawValue) })
        let rows = try await db.raw("SELECT * FROM messages WHERE conversation_id IN (\(list)) ORDER BY conversation_id, seq").all(MessageRow.self)
        return try await withVoice(rows)
    }

    public func events(conversationIds: [ConversationID], kinds: [ConversationEventDTO.Kind]) async throws -> [ConversationEventDTO] {
        guard !conversationIds.isEmpty, !kinds.isEmpty else { return [] }
        let list = SQLList(conversationIds.map { SQLBind($0.rawValue) })
        let kindList = SQLList(kinds.map { SQLBind($0.rawValue) })
        return try await db.raw(
            "SELECT * FROM conversation_events WHERE conversation_id IN (\(list)) AND kind IN (\(kindList)) ORDER BY conversation_id, seq"
        ).all(EventRow.self).map(\.dto)
    }

    /// The messages with their voice notes, read in one more query when any of them is a voice note.
    private func withVoice(_ rows: [MessageRow]) async throws -> [MessageDTO] {
        let voiceIds = rows.filter { $0.kind == .voice }.map(\.id)
        var voices: [MessageID: VoiceDTO] = [:]
        if !voiceIds.isEmpty {
            for voice in try await db.select().column("*").from(VoiceRow.table).where("message_id", .in, voiceIds).all(VoiceRow.self) {
                voices[voice.messageId] = voice.record.dto
            }
        }
        let attachments = try await attachments(of: rows.filter { $0.kind == .attachment }.map(\.id))
        // The brand's messages (agents' and automatic) may have gone out through a messaging channel.
        let deliveries = try await channelDeliveries(messageIds: rows.filter { $0.senderKind != .consumer }.map(\.id))
        return try rows.map { row in
            var message = try row.dto(voice: voices[row.id])
            message.attachment = attachments[row.id]
            message.channelDelivery = deliveries[row.id]?.dto
            return message
        }
    }

    public func raiseDeliveryState(
        conversationId: ConversationID, senderKind: ParticipantKind, upToSeq: Int64, to state: DeliveryState, at: Date
    ) async throws -> Int {
        let now = StoredTime.millis(at)
        let readAt: SQLQueryString = state == .read ? "\(bind: now)" : "read_at"
        // The brand's automatic messages (sender `system`) are read by the consumer like the agents' are.
        let also = senderKind == .agent ? ParticipantKind.system.rawValue : senderKind.rawValue
        let rows = try await db.raw(
            """
            UPDATE messages SET delivery_state = \(bind: state.rank), delivered_at = COALESCE(delivered_at, \(bind: now)),
                read_at = \(readAt)
            WHERE conversation_id = \(bind: conversationId) AND sender_kind IN (\(bind: senderKind.rawValue), \(bind: also))
                AND seq <= \(bind: upToSeq) AND delivery_state < \(bind: state.rank)
            RETURNING seq
            """
        ).all()
        return rows.count
    }

    public func insertEvent(_ event: ConversationEventDTO, brandId: BrandID) async throws {
        try await db.insert(EventRow(event, brandId: brandId))
    }

    public func events(conversationId: ConversationID, afterSeq: Int64, limit: Int, includeNotes: Bool) async throws -> [ConversationEventDTO] {
        // Agents only: private notes, channel delivery changes and co-browse records.
        let notes: SQLQueryString = includeNotes
            ? ""
            : """
             AND kind NOT IN (\(bind: ConversationEventDTO.Kind.note.rawValue), \(bind: ConversationEventDTO.Kind.delivery.rawValue), \
            \(bind: ConversationEventDTO.Kind.cobrowse.rawValue))
            """
        return try await db.raw(
            """
            SELECT * FROM conversation_events WHERE conversation_id = \(bind: conversationId) AND seq > \(bind: afterSeq)\(notes)
            ORDER BY seq LIMIT \(bind: limit)
            """
        ).all(EventRow.self).map(\.dto)
    }

    public func note(brandId: BrandID, actorId: String, clientNoteId: String) async throws -> ConversationEventDTO? {
        try await db.raw(
            """
            SELECT * FROM conversation_events WHERE actor_id = \(bind: actorId) AND client_id = \(bind: clientNoteId)
                AND brand_id = \(bind: brandId) AND kind = \(bind: ConversationEventDTO.Kind.note.rawValue)
            """
        ).first(EventRow.self)?.dto
    }
}

// MARK: - Rows

struct ConversationRow: MappedRow {
    static let table = "conversations"
    var id: ConversationID
    var brandId: BrandID
    var appId: AppID
    var consumerId: ConsumerID
    var channel: Channel
    var state: ConversationState
    var assigneeId: AgentID?
    var lastSeq: Int64
    var lastMessagePreview: String?
    var lastMessageKind: MessageKind?
    var lastMessageAt: Int64?
    var createdAt: Int64
    var updatedAt: Int64
    var lastConsumerMessageAt: Int64?
    var replyWindowEndsAt: Int64?
    var previousConversationId: ConversationID?
    var survey: SurveyState?
    var ratingScore: Int?
    var ratingComment: String?
    var ratingAgentId: AgentID?
    var ratedAt: Int64?
    var closeWarnedAt: Int64?
    var firstReplyAt: Int64?
    var firstReplyBy: AgentID?

    init(_ c: ConversationDTO) {
        (firstReplyAt, firstReplyBy) = (c.firstReplyAt.map(StoredTime.millis), c.firstReplyBy)
        (previousConversationId, survey, closeWarnedAt) = (c.previousConversationId, c.survey, c.closeWarnedAt.map(StoredTime.millis))
        (ratingScore, ratingComment, ratingAgentId, ratedAt) = (c.rating?.score, c.rating?.comment, c.rating?.agentId, c.rating.map { StoredTime.millis($0.createdAt) })
        lastConsumerMessageAt = c.lastConsumerMessageAt.map(StoredTime.millis)
        replyWindowEndsAt = c.replyWindowEndsAt.map(StoredTime.millis)
        (id, brandId, appId, consumerId, channel, state) = (c.id, c.brandId, c.appId, c.consumerId, c.channel, c.state)
        (assigneeId, lastSeq, lastMessagePreview, lastMessageKind) = (c.assigneeId, c.lastSeq, c.lastMessagePreview, c.lastMessageKind)
        lastMessageAt = c.lastMessageAt.map(StoredTime.millis)
        createdAt = StoredTime.millis(c.createdAt)
        updatedAt = StoredTime.millis(c.updatedAt)
    }

    /// The columns, for a SELECT: `conversations.id, conversations.brand_id, ...`.
    static let selectList = columns.map { "conversations.\($0)" }.joined(separator: ", ")

    static let columns = [
        "id", "brand_id", "app_id", "consumer_id", "channel", "state", "assignee_id", "last_seq", "last_message_preview",
        "last_message_kind", "last_message_at", "created_at", "updated_at", "last_consumer_message_at", "reply_window_ends_at",
        "previous_conversation_id", "survey", "rating_score", "rating_comment", "rating_agent_id", "rated_at", "close_warned_at",
        "first_reply_at", "first_reply_by",
    ]

    var values: [ColumnValue] {
        [
            .text(id.rawValue), .text(brandId.rawValue), .text(appId.rawValue), .text(consumerId.rawValue), .text(channel.rawValue),
            .text(state.rawValue), ColumnValue(assigneeId), .integer(lastSeq), ColumnValue(lastMessagePreview), ColumnValue(lastMessageKind),
            ColumnValue(lastMessageAt), .integer(createdAt), .integer(updatedAt), ColumnValue(lastConsumerMessageAt),
            ColumnValue(replyWindowEndsAt), ColumnValue(previousConversationId), ColumnValue(survey), ColumnValue(ratingScore),
            ColumnValue(ratingComment), ColumnValue(ratingAgentId), ColumnValue(ratedAt), ColumnValue(closeWarnedAt),
            ColumnValue(firstReplyAt), ColumnValue(firstReplyBy),
        ]
    }

    init(reading row: inout ColumnCursor) throws {
        (id, brandId, appId, consumerId) = (try row.value(), try row.value(), try row.value(), try row.value())
        (channel, state, assigneeId) = (try row.value(), try row.value(), try row.optionalValue())
        (lastSeq, lastMessagePreview, lastMessageKind) = (try row.int64(), try row.optionalText(), try row.optionalValue())
        (lastMessageAt, createdAt, updatedAt) = (try row.optionalInt64(), try row.int64(), try row.int64())
        (lastConsumerMessageAt, replyWindowEndsAt) = (try row.optionalInt64(), try row.optionalInt64())
        (previousConversationId, survey) = (try row.optionalValue(), try row.optionalValue())
        (ratingScore, ratingComment, ratingAgentId) = (try row.optionalInt(), try row.optionalText(), try row.optionalValue())
        (ratedAt, closeWarnedAt) = (try row.optionalInt64(), try row.optionalInt64())
        (firstReplyAt, firstReplyBy) = (try row.optionalInt64(), try row.optionalValue())
    }

    var dto: ConversationDTO {
        var conversation = ConversationDTO(
            id: id, brandId: brandId, appId: appId, consumerId: consumerId, channel: channel, state: state, assigneeId: assigneeId,
            lastSeq: lastSeq, lastMessagePreview: lastMessagePreview, lastMessageKind: lastMessageKind, lastMessageAt: lastMessageAt.map(StoredTime.date),
            createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt))
        conversation.lastConsumerMessageAt = lastConsumerMessageAt.map(StoredTime.date)
        conversation.replyWindowEndsAt = replyWindowEndsAt.map(StoredTime.date)
        (conversation.previousConversationId, conversation.survey) = (previousConversationId, survey)
        conversation.closeWarnedAt = closeWarnedAt.map(StoredTime.date)
        (conversation.firstReplyAt, conversation.firstReplyBy) = (firstReplyAt.map(StoredTime.date), firstReplyBy)
        if let ratingScore, let ratedAt {
            conversation.rating = RatingDTO(score: ratingScore, comment: ratingComment, agentId: ratingAgentId, createdAt: StoredTime.date(ratedAt))
        }
        return conversation
    }
}

struct MessageRow: MappedRow {
    static let table = "messages"
    var id: MessageID
    var brandId: BrandID
    var conversationId: ConversationID
    var seq: Int64
    var senderKind: ParticipantKind
    var senderId: String
    var clientMessageId: String
    var kind: MessageKind
    var body: String
    /// `DeliveryState.rank`, so that raising it is a comparison in SQL.
    var deliveryState: Int
    var deliveredAt: Int64?
    var readAt: Int64?
    var createdAt: Int64
    var senderName: String?

    init(_ m: MessageDTO, brandId: BrandID) {
        senderName = m.senderName
        (id, self.brandId, conversationId, seq, senderKind, senderId) = (m.id, brandId, m.conversationId, m.seq, m.senderKind, m.senderId)
        (clientMessageId, kind, body, deliveryState) = (m.clientMessageId, m.kind, m.text, m.deliveryState.rank)
        createdAt = StoredTime.millis(m.createdAt)
    }

    static let columns = [
        "id", "brand_id", "conversation_id", "seq", "sender_kind", "sender_id", "client_message_id", "kind", "body", "delivery_state",
        "delivered_at", "read_at", "created_at", "sender_name",
    ]

    var values: [ColumnValue] {
        [
            .text(id.rawValue), .text(brandId.rawValue), .text(conversationId.rawValue), .integer(seq), .text(senderKind.rawValue),
            .text(senderId), .text(clientMessageId), .text(kind.rawValue), .text(body), .integer(Int64(deliveryState)),
            ColumnValue(deliveredAt), ColumnValue(readAt), .integer(createdAt), ColumnValue(senderName),
        ]
    }

    init(reading row: inout ColumnCursor) throws {
        (id, brandId, conversationId, seq) = (try row.value(), try row.value(), try row.value(), try row.int64())
        (senderKind, senderId, clientMessageId) = (try row.value(), try row.text(), try row.text())
        (kind, body, deliveryState) = (try row.value(), try row.text(), Int(try row.int64()))
        (deliveredAt, readAt, createdAt, senderName) = (try row.optionalInt64(), try row.optionalInt64(), try row.int64(), try row.optionalText())
    }

    func dto(voice: VoiceDTO?) throws -> MessageDTO {
        guard let state = DeliveryState(rank: deliveryState) else { throw StoreError.corrupt("message \(id) has delivery state \(deliveryState)") }
        return MessageDTO(
            id: id, conversationId: conversationId, seq: seq, senderKind: senderKind, senderId: senderId, clientMessageId: clientMessageId,
            kind: kind, text: body, deliveryState: state, createdAt: StoredTime.date(createdAt), voice: voice, senderName: senderName)
    }
}

struct EventRow: TableRow {
    static let table = "conversation_events"
    var conversationId: ConversationID
    var seq: Int64
    var brandId: BrandID
    var kind: ConversationEventDTO.Kind
    var actorKind: ParticipantKind
    var actorId: String
    var upToSeq: Int64?
    var deliveryState: DeliveryState?
    var state: ConversationState?
    var assigneeId: AgentID?
    var messageId: MessageID?
    var callId: CallID?
    var cobrowseId: CobrowseID?
    /// A note's text.
    var body: String?
    /// The id a note's author chose.
    var clientId: String?
    /// A rating's score (its comment is the body).
    var score: Int?
    var createdAt: Int64

    init(_ e: ConversationEventDTO, brandId: BrandID) {
        (body, clientId) = (e.text, e.clientNoteId)
        if let rating = e.rating { (score, body, clientId) = (rating.score, rating.comment, rating.agentId?.rawValue) }
        (conversationId, seq, self.brandId, kind, actorKind, actorId) = (e.conversationId, e.seq, brandId, e.kind, e.actorKind, e.actorId)
        (upToSeq, deliveryState, state, assigneeId, messageId, callId) = (e.upToSeq, e.deliveryState, e.state, e.assigneeId, e.messageId, e.callId)
        cobrowseId = e.cobrowseId ?? e.cobrowse?.id
        createdAt = StoredTime.millis(e.createdAt)
    }

    var dto: ConversationEventDTO {
        var event = ConversationEventDTO(
            conversationId: conversationId, seq: seq, kind: kind, actorKind: actorKind, actorId: actorId, upToSeq: upToSeq,
            deliveryState: deliveryState, state: state, assigneeId: assigneeId, messageId: messageId, callId: callId,
            text: body, clientNoteId: clientId, createdAt: StoredTime.date(createdAt))
        event.cobrowseId = cobrowseId
        if kind == .rated, let score {
            // A rating keeps its comment in the body and the rated agent in the client id column.
            event.rating = RatingDTO(score: score, comment: body, agentId: clientId.map(AgentID.init(rawValue:)), createdAt: event.createdAt)
            (event.text, event.clientNoteId) = (nil, nil)
        }
        return event
    }
}
