import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// The one SQL implementation of `Repository`, for SQLite and PostgreSQL.
public struct SQLRepository: Repository {
    let db: any SQLDatabase
    let flavor: DatabaseFlavor

    public init(db: any SQLDatabase, flavor: DatabaseFlavor) {
        self.db = db
        self.flavor = flavor
    }

    /// `FOR UPDATE` where the engine has row locks.
    private func lockClause(_ lock: Bool) -> SQLQueryString {
        lock && flavor == .postgres ? " FOR UPDATE" : ""
    }

    // MARK: Brands and apps

    public func insertBrand(_ brand: BrandDTO) async throws {
        try await db.raw(
            "INSERT INTO brands (id, name, created_at) VALUES (\(bind: brand.id), \(bind: brand.name), \(bind: Clock.millis(brand.createdAt)))"
        ).run()
    }

    public func brand(id: String) async throws -> BrandDTO? {
        try await db.raw("SELECT * FROM brands WHERE id = \(bind: id)").first().map(Self.brand(from:))
    }

    public func brandCount() async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM brands").first()?.decode(column: "n", as: Int.self) ?? 0
    }

    public func insertApp(_ app: AppDTO) async throws {
        try await db.raw(
            """
            INSERT INTO apps (id, brand_id, name, channel, created_at)
            VALUES (\(bind: app.id), \(bind: app.brandId), \(bind: app.name), \(bind: app.channel.rawValue), \(bind: Clock.millis(app.createdAt)))
            """
        ).run()
    }

    public func app(id: String) async throws -> AppDTO? {
        try await db.raw("SELECT * FROM apps WHERE id = \(bind: id)").first().map(Self.app(from:))
    }

    public func apps(brandId: String) async throws -> [AppDTO] {
        try await db.raw("SELECT * FROM apps WHERE brand_id = \(bind: brandId) ORDER BY created_at, id").all().map(Self.app(from:))
    }

    public func insertAppKey(_ key: AppKeyRecord) async throws {
        let existing = try await db.raw(
            "SELECT kid FROM app_keys WHERE app_id = \(bind: key.appId) AND kid = \(bind: key.kid)"
        ).first()
        if existing != nil {
            throw ParleyError(.conflict, code: "key_exists", message: "The app already has a key with kid '\(key.kid)'.", field: "kid")
        }
        try await db.raw(
            """
            INSERT INTO app_keys (app_id, kid, brand_id, algorithm, key_material, created_at)
            VALUES (\(bind: key.appId), \(bind: key.kid), \(bind: key.brandId), \(bind: key.algorithm), \(bind: key.keyMaterial), \(bind: Clock.millis(key.createdAt)))
            """
        ).run()
    }

    public func appKeys(appId: String) async throws -> [AppKeyRecord] {
        try await db.raw("SELECT * FROM app_keys WHERE app_id = \(bind: appId) ORDER BY created_at, kid").all().map { row in
            AppKeyRecord(
                kid: try row.decode(column: "kid", as: String.self),
                appId: try row.decode(column: "app_id", as: String.self),
                brandId: try row.decode(column: "brand_id", as: String.self),
                algorithm: try row.decode(column: "algorithm", as: String.self),
                keyMaterial: try row.decode(column: "key_material", as: String.self),
                createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)))
        }
    }

    public func brandSettings(brandId: String) async throws -> BrandSettingsDTO {
        guard let row = try await db.raw("SELECT * FROM brand_settings WHERE brand_id = \(bind: brandId)").first() else {
            return BrandSettingsDTO()
        }
        return BrandSettingsDTO(
            voiceMaxSeconds: try row.decode(column: "voice_max_seconds", as: Int.self),
            voiceFromConsumers: try row.decode(column: "voice_from_consumers", as: Int.self) != 0,
            voiceFromAgents: try row.decode(column: "voice_from_agents", as: Int.self) != 0,
            scanFailurePolicy: ScanFailurePolicy(rawValue: try row.decode(column: "scan_failure_policy", as: String.self)) ?? .closed,
            cardMasking: CardMasking(rawValue: try row.decode(column: "card_masking", as: String.self)) ?? .off,
            openConversationsPerConsumer: try row.decode(column: "open_conversations_per_consumer", as: Int.self))
    }

    public func saveBrandSettings(_ settings: BrandSettingsDTO, brandId: String) async throws {
        try await db.raw(
            """
            INSERT INTO brand_settings (brand_id, voice_max_seconds, voice_from_consumers, voice_from_agents, scan_failure_policy,
                card_masking, open_conversations_per_consumer, updated_at)
            VALUES (\(bind: brandId), \(bind: settings.voiceMaxSeconds), \(bind: settings.voiceFromConsumers ? 1 : 0),
                    \(bind: settings.voiceFromAgents ? 1 : 0), \(bind: settings.scanFailurePolicy.rawValue),
                    \(bind: settings.cardMasking.rawValue), \(bind: settings.openConversationsPerConsumer), \(bind: Clock.nowMillis()))
            ON CONFLICT (brand_id) DO UPDATE SET voice_max_seconds = excluded.voice_max_seconds,
                voice_from_consumers = excluded.voice_from_consumers, voice_from_agents = excluded.voice_from_agents,
                scan_failure_policy = excluded.scan_failure_policy, card_masking = excluded.card_masking,
                open_conversations_per_consumer = excluded.open_conversations_per_consumer, updated_at = excluded.updated_at
            """
        ).run()
    }

    // MARK: Agents

    public func insertAgent(_ record: AgentRecord) async throws {
        if try await agent(email: record.agent.email) != nil {
            throw ParleyError(.conflict, code: "email_taken", message: "An agent with this email already exists.", field: "email")
        }
        let a = record.agent
        try await db.raw(
            """
            INSERT INTO agents (id, brand_id, email, name, password_hash, role, permissions, created_at)
            VALUES (\(bind: a.id), \(bind: a.brandId), \(bind: a.email), \(bind: a.name), \(bind: record.passwordHash),
                    \(bind: a.role.rawValue), \(bind: Self.encode(a.permissions)), \(bind: Clock.millis(a.createdAt)))
            """
        ).run()
    }

    public func updateAgent(_ record: AgentRecord) async throws {
        let a = record.agent
        try await db.raw(
            """
            UPDATE agents SET name = \(bind: a.name), email = \(bind: a.email), password_hash = \(bind: record.passwordHash),
                role = \(bind: a.role.rawValue), permissions = \(bind: Self.encode(a.permissions)),
                disabled_at = \(bind: record.disabledAt.map(Clock.millis)), deleted_at = \(bind: record.deletedAt.map(Clock.millis))
            WHERE id = \(bind: a.id) AND brand_id = \(bind: a.brandId)
            """
        ).run()
    }

    public func agent(brandId: String, id: String) async throws -> AgentRecord? {
        try await db.raw("SELECT * FROM agents WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first().map(Self.agentRecord(from:))
    }

    public func agent(email: String) async throws -> AgentRecord? {
        try await db.raw("SELECT * FROM agents WHERE email = \(bind: email)").first().map(Self.agentRecord(from:))
    }

    public func agents(brandId: String) async throws -> [AgentDTO] {
        try await db.raw("SELECT * FROM agents WHERE brand_id = \(bind: brandId) AND deleted_at IS NULL ORDER BY name, id").all().map { try Self.agentRecord(from: $0).agent }
    }

    // MARK: Consumers

    public func insertConsumer(_ c: ConsumerDTO) async throws {
        try await db.raw(
            """
            INSERT INTO consumers (id, brand_id, app_id, external_id, display_name, created_at)
            VALUES (\(bind: c.id), \(bind: c.brandId), \(bind: c.appId), \(bind: c.externalId), \(bind: c.displayName), \(bind: Clock.millis(c.createdAt)))
            """
        ).run()
    }

    public func updateConsumer(_ c: ConsumerDTO) async throws {
        try await db.raw(
            "UPDATE consumers SET display_name = \(bind: c.displayName) WHERE id = \(bind: c.id) AND brand_id = \(bind: c.brandId)"
        ).run()
    }

    public func consumer(brandId: String, id: String) async throws -> ConsumerDTO? {
        try await db.raw("SELECT * FROM consumers WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first().map(Self.consumer(from:))
    }

    public func lockConsumer(brandId: String, id: String) async throws {
        guard flavor == .postgres else { return }  // SQLite's writers are serial
        _ = try await db.raw("SELECT id FROM consumers WHERE id = \(bind: id) AND brand_id = \(bind: brandId) FOR UPDATE").first()
    }

    public func consumer(brandId: String, externalId: String) async throws -> ConsumerDTO? {
        try await db.raw(
            "SELECT * FROM consumers WHERE brand_id = \(bind: brandId) AND external_id = \(bind: externalId)"
        ).first().map(Self.consumer(from:))
    }

    // MARK: Sessions

    public func insertSession(_ s: SessionRecord) async throws {
        try await db.raw(
            """
            INSERT INTO sessions (token_hash, brand_id, subject_kind, subject_id, app_id, created_at, expires_at)
            VALUES (\(bind: s.tokenHash), \(bind: s.brandId), \(bind: s.subjectKind.rawValue), \(bind: s.subjectId), \(bind: s.appId),
                    \(bind: Clock.millis(s.createdAt)), \(bind: Clock.millis(s.expiresAt)))
            """
        ).run()
    }

    public func session(tokenHash: String) async throws -> SessionRecord? {
        guard let row = try await db.raw("SELECT * FROM sessions WHERE token_hash = \(bind: tokenHash)").first() else { return nil }
        guard let kind = ParticipantKind(rawValue: try row.decode(column: "subject_kind", as: String.self)) else {
            throw StoreError.corrupt("session with an unknown subject kind")
        }
        return SessionRecord(
            tokenHash: try row.decode(column: "token_hash", as: String.self),
            brandId: try row.decode(column: "brand_id", as: String.self),
            subjectKind: kind,
            subjectId: try row.decode(column: "subject_id", as: String.self),
            appId: try row.decode(column: "app_id", as: String?.self),
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)),
            expiresAt: Clock.date(try row.decode(column: "expires_at", as: Int64.self)),
            revokedAt: try row.decode(column: "revoked_at", as: Int64?.self).map(Clock.date))
    }

    public func revokeSessions(subjectId: String, except tokenHash: String?, at: Date) async throws {
        try await db.raw(
            """
            UPDATE sessions SET revoked_at = \(bind: Clock.millis(at))
            WHERE subject_id = \(bind: subjectId) AND revoked_at IS NULL AND token_hash <> \(bind: tokenHash ?? "")
            """
        ).run()
    }

    public func revokeSession(tokenHash: String, at: Date) async throws {
        try await db.raw(
            "UPDATE sessions SET revoked_at = \(bind: Clock.millis(at)) WHERE token_hash = \(bind: tokenHash) AND revoked_at IS NULL"
        ).run()
    }

    // MARK: Conversations

    public func insertConversation(_ c: ConversationDTO) async throws {
        try await db.raw(
            """
            INSERT INTO conversations (id, brand_id, app_id, consumer_id, channel, state, assignee_id, last_seq,
                last_message_preview, last_message_at, created_at, updated_at)
            VALUES (\(bind: c.id), \(bind: c.brandId), \(bind: c.appId), \(bind: c.consumerId), \(bind: c.channel.rawValue),
                \(bind: c.state.rawValue), \(bind: c.assigneeId), \(bind: c.lastSeq), \(bind: c.lastMessagePreview),
                \(bind: c.lastMessageAt.map(Clock.millis)), \(bind: Clock.millis(c.createdAt)), \(bind: Clock.millis(c.updatedAt)))
            """
        ).run()
    }

    public func conversation(brandId: String, id: String, lock: Bool) async throws -> ConversationDTO? {
        try await db.raw(
            "SELECT * FROM conversations WHERE id = \(bind: id) AND brand_id = \(bind: brandId)\(lockClause(lock))"
        ).first().map(Self.conversation(from:))
    }

    public func latestConversation(consumerId: String, appId: String, channel: Channel, lock: Bool) async throws -> ConversationDTO? {
        try await db.raw(
            """
            SELECT * FROM conversations
            WHERE consumer_id = \(bind: consumerId) AND app_id = \(bind: appId) AND channel = \(bind: channel.rawValue)
            ORDER BY updated_at DESC, id DESC LIMIT 1\(lockClause(lock))
            """
        ).first().map(Self.conversation(from:))
    }

    public func openConversationCount(consumerId: String, appId: String) async throws -> Int {
        let row = try await db.raw(
            """
            SELECT COUNT(*) AS n FROM conversations
            WHERE consumer_id = \(bind: consumerId) AND app_id = \(bind: appId) AND state <> \(bind: ConversationState.resolved.rawValue)
            """
        ).first()
        return try row?.decode(column: "n", as: Int.self) ?? 0
    }

    public func updateConversation(_ c: ConversationDTO) async throws {
        try await db.raw(
            """
            UPDATE conversations SET state = \(bind: c.state.rawValue), assignee_id = \(bind: c.assigneeId), last_seq = \(bind: c.lastSeq),
                last_message_preview = \(bind: c.lastMessagePreview), last_message_at = \(bind: c.lastMessageAt.map(Clock.millis)),
                updated_at = \(bind: Clock.millis(c.updatedAt))
            WHERE id = \(bind: c.id) AND brand_id = \(bind: c.brandId)
            """
        ).run()
    }

    public func conversations(brandId: String, filter: ConversationFilter) async throws -> [ConversationDTO] {
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
        return try await db.raw(query).all().map(Self.conversation(from:))
    }

    public func conversations(consumerId: String, brandId: String, limit: Int) async throws -> [ConversationDTO] {
        try await db.raw(
            """
            SELECT * FROM conversations WHERE consumer_id = \(bind: consumerId) AND brand_id = \(bind: brandId)
            ORDER BY updated_at DESC, id DESC LIMIT \(bind: limit)
            """
        ).all().map(Self.conversation(from:))
    }

    // MARK: Messages and events

    public func insertMessage(_ m: MessageDTO, brandId: String) async throws {
        try await db.raw(
            """
            INSERT INTO messages (id, brand_id, conversation_id, seq, sender_kind, sender_id, client_message_id, kind, body,
                delivery_state, created_at)
            VALUES (\(bind: m.id), \(bind: brandId), \(bind: m.conversationId), \(bind: m.seq), \(bind: m.senderKind.rawValue),
                \(bind: m.senderId), \(bind: m.clientMessageId), \(bind: m.kind.rawValue), \(bind: m.text),
                \(bind: m.deliveryState.rank), \(bind: Clock.millis(m.createdAt)))
            """
        ).run()
    }

    /// Messages with their voice media, if any, in one query.
    private static let messageColumns: SQLQueryString = """
        SELECT m.*, v.container AS v_container, v.original_key AS v_original_key, v.original_bytes AS v_original_bytes,
            v.duration_ms AS v_duration_ms, v.waveform AS v_waveform, v.state AS v_state, v.failure_reason AS v_failure_reason,
            v.opus_key AS v_opus_key, v.opus_bytes AS v_opus_bytes, v.aac_key AS v_aac_key, v.aac_bytes AS v_aac_bytes,
            v.created_at AS v_created_at, v.updated_at AS v_updated_at, v.scan_state AS v_scan_state,
            v.scan_detail AS v_scan_detail, v.scan_attempts AS v_scan_attempts, v.scan_next_at AS v_scan_next_at
        FROM messages m LEFT JOIN voice_media v ON v.message_id = m.id
        """

    /// Runs on every send (the idempotency check), and almost always finds nothing: a plain indexed
    /// lookup first. (SQLite re-prepares the joined query on every run when its WHERE names the
    /// sender, which cost more than the rest of a send.)
    public func message(senderId: String, clientMessageId: String) async throws -> MessageDTO? {
        guard let row = try await db.raw(
            "SELECT id FROM messages WHERE sender_id = \(bind: senderId) AND client_message_id = \(bind: clientMessageId)"
        ).first() else { return nil }
        let id = try row.decode(column: "id", as: String.self)
        return try await db.raw("\(Self.messageColumns) WHERE m.id = \(bind: id)").first().map(Self.message(from:))
    }

    public func message(brandId: String, id: String) async throws -> MessageDTO? {
        try await db.raw("\(Self.messageColumns) WHERE m.id = \(bind: id) AND m.brand_id = \(bind: brandId)").first().map(Self.message(from:))
    }

    public func messages(conversationId: String, afterSeq: Int64, limit: Int) async throws -> [MessageDTO] {
        try await db.raw(
            """
            \(Self.messageColumns) WHERE m.conversation_id = \(bind: conversationId) AND m.seq > \(bind: afterSeq)
            ORDER BY m.seq LIMIT \(bind: limit)
            """
        ).all().map(Self.message(from:))
    }

    public func raiseDeliveryState(
        conversationId: String, senderKind: ParticipantKind, upToSeq: Int64, to state: DeliveryState, at: Date
    ) async throws -> Int {
        let now = Clock.millis(at)
        let readAt: SQLQueryString = state == .read ? "\(bind: now)" : "read_at"
        let rows = try await db.raw(
            """
            UPDATE messages SET delivery_state = \(bind: state.rank), delivered_at = COALESCE(delivered_at, \(bind: now)),
                read_at = \(readAt)
            WHERE conversation_id = \(bind: conversationId) AND sender_kind = \(bind: senderKind.rawValue)
                AND seq <= \(bind: upToSeq) AND delivery_state < \(bind: state.rank)
            RETURNING seq
            """
        ).all()
        return rows.count
    }

    public func insertEvent(_ e: ConversationEventDTO, brandId: String) async throws {
        try await db.raw(
            """
            INSERT INTO conversation_events (conversation_id, seq, brand_id, kind, actor_kind, actor_id, up_to_seq, delivery_state,
                state, assignee_id, message_id, call_id, created_at)
            VALUES (\(bind: e.conversationId), \(bind: e.seq), \(bind: brandId), \(bind: e.kind.rawValue), \(bind: e.actorKind.rawValue),
                \(bind: e.actorId), \(bind: e.upToSeq), \(bind: e.deliveryState?.rawValue), \(bind: e.state?.rawValue),
                \(bind: e.assigneeId), \(bind: e.messageId), \(bind: e.callId), \(bind: Clock.millis(e.createdAt)))
            """
        ).run()
    }

    public func events(conversationId: String, afterSeq: Int64, limit: Int) async throws -> [ConversationEventDTO] {
        try await db.raw(
            """
            SELECT * FROM conversation_events WHERE conversation_id = \(bind: conversationId) AND seq > \(bind: afterSeq)
            ORDER BY seq LIMIT \(bind: limit)
            """
        ).all().map(Self.event(from:))
    }

    // MARK: Calls

    public func insertCall(_ c: CallDTO, brandId: String) async throws {
        try await db.raw(
            """
            INSERT INTO calls (id, brand_id, conversation_id, media, state, invited_by, inviter_name, answered_by, invited_at,
                answered_at, connected_at, ended_at, outcome, end_reason, ended_by, duration_seconds, event_seq)
            VALUES (\(bind: c.id), \(bind: brandId), \(bind: c.conversationId), \(bind: c.media.rawValue), \(bind: c.state.rawValue),
                \(bind: c.invitedBy), \(bind: c.inviterName), \(bind: c.answeredBy), \(bind: Clock.millis(c.invitedAt)),
                \(bind: c.answeredAt.map(Clock.millis)), \(bind: c.connectedAt.map(Clock.millis)), \(bind: c.endedAt.map(Clock.millis)),
                \(bind: c.outcome?.rawValue), \(bind: c.endReason?.rawValue), \(bind: c.endedBy?.rawValue), \(bind: c.durationSeconds),
                \(bind: c.seq))
            """
        ).run()
    }

    @discardableResult
    public func updateCall(_ c: CallDTO, brandId: String) async throws -> Bool {
        let rows = try await db.raw(
            """
            UPDATE calls SET media = \(bind: c.media.rawValue), state = \(bind: c.state.rawValue), answered_by = \(bind: c.answeredBy),
                answered_at = \(bind: c.answeredAt.map(Clock.millis)), connected_at = \(bind: c.connectedAt.map(Clock.millis)),
                ended_at = \(bind: c.endedAt.map(Clock.millis)), outcome = \(bind: c.outcome?.rawValue),
                end_reason = \(bind: c.endReason?.rawValue), ended_by = \(bind: c.endedBy?.rawValue),
                duration_seconds = \(bind: c.durationSeconds), event_seq = \(bind: c.seq)
            WHERE id = \(bind: c.id) AND brand_id = \(bind: brandId) AND ended_at IS NULL
            RETURNING id
            """
        ).all()
        return !rows.isEmpty
    }

    public func call(brandId: String, id: String) async throws -> CallDTO? {
        try await db.raw("SELECT * FROM calls WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first().map(Self.call(from:))
    }

    public func calls(conversationId: String, brandId: String, limit: Int) async throws -> [CallDTO] {
        try await db.raw(
            """
            SELECT * FROM calls WHERE conversation_id = \(bind: conversationId) AND brand_id = \(bind: brandId)
            ORDER BY invited_at DESC, id LIMIT \(bind: limit)
            """
        ).all().map(Self.call(from:))
    }

    public func unfinishedCalls(limit: Int) async throws -> [(brandId: String, call: CallDTO)] {
        try await db.raw("SELECT * FROM calls WHERE ended_at IS NULL ORDER BY invited_at LIMIT \(bind: limit)").all().map { row in
            (try row.decode(column: "brand_id", as: String.self), try Self.call(from: row))
        }
    }

    // MARK: Voice

    public func insertVoice(_ v: VoiceRecord) async throws {
        try await db.raw(
            """
            INSERT INTO voice_media (message_id, brand_id, container, original_key, original_bytes, duration_ms, waveform, state,
                failure_reason, opus_key, opus_bytes, aac_key, aac_bytes, scan_state, scan_detail, scan_attempts, scan_next_at,
                created_at, updated_at)
            VALUES (\(bind: v.messageId), \(bind: v.brandId), \(bind: v.container), \(bind: v.originalKey), \(bind: v.originalBytes),
                \(bind: v.durationMs), \(bind: Self.hex(v.waveform)), \(bind: v.state.rawValue), \(bind: v.failureReason),
                \(bind: v.opusKey), \(bind: v.opusBytes), \(bind: v.aacKey), \(bind: v.aacBytes), \(bind: v.scan.rawValue),
                \(bind: v.scanDetail), \(bind: v.scanAttempts), \(bind: v.scanNextAt.map(Clock.millis)),
                \(bind: Clock.millis(v.createdAt)), \(bind: Clock.millis(v.updatedAt)))
            """
        ).run()
    }

    public func updateVoice(_ v: VoiceRecord) async throws {
        try await db.raw(
            """
            UPDATE voice_media SET state = \(bind: v.state.rawValue), failure_reason = \(bind: v.failureReason),
                opus_key = \(bind: v.opusKey), opus_bytes = \(bind: v.opusBytes), aac_key = \(bind: v.aacKey),
                aac_bytes = \(bind: v.aacBytes), original_key = \(bind: v.originalKey), scan_state = \(bind: v.scan.rawValue),
                scan_detail = \(bind: v.scanDetail), scan_attempts = \(bind: v.scanAttempts),
                scan_next_at = \(bind: v.scanNextAt.map(Clock.millis)), updated_at = \(bind: Clock.millis(v.updatedAt))
            WHERE message_id = \(bind: v.messageId) AND brand_id = \(bind: v.brandId)
            """
        ).run()
    }

    public func voice(messageId: String, brandId: String) async throws -> VoiceRecord? {
        try await db.raw(
            "SELECT * FROM voice_media WHERE message_id = \(bind: messageId) AND brand_id = \(bind: brandId)"
        ).first().map { try Self.voice(from: $0, prefix: "") }
    }

    public func voicesProcessing(limit: Int) async throws -> [VoiceRecord] {
        try await db.raw(
            """
            SELECT * FROM voice_media WHERE state = \(bind: VoiceState.processing.rawValue)
                AND scan_state IN (\(bind: MalwareScanState.clean.rawValue), \(bind: MalwareScanState.unscanned.rawValue))
            ORDER BY created_at LIMIT \(bind: limit)
            """
        ).all().map { try Self.voice(from: $0, prefix: "") }
    }

    public func voicesAwaitingScan(dueBy: Date, limit: Int) async throws -> [VoiceRecord] {
        try await db.raw(
            """
            SELECT * FROM voice_media WHERE scan_state = \(bind: MalwareScanState.pending.rawValue)
                AND scan_next_at <= \(bind: Clock.millis(dueBy))
            ORDER BY scan_next_at LIMIT \(bind: limit)
            """
        ).all().map { try Self.voice(from: $0, prefix: "") }
    }
}

// MARK: - Row decoding

extension SQLRepository {
    static func encode(_ permissions: [AgentPermission]) -> String {
        permissions.map(\.rawValue).sorted().joined(separator: ",")
    }

    static func decodeEnum<E: RawRepresentable>(_ row: any SQLRow, _ column: String, as: E.Type) throws -> E where E.RawValue == String {
        let raw = try row.decode(column: column, as: String.self)
        guard let value = E(rawValue: raw) else { throw StoreError.corrupt("'\(raw)' in column \(column)") }
        return value
    }

    static func brand(from row: any SQLRow) throws -> BrandDTO {
        BrandDTO(
            id: try row.decode(column: "id", as: String.self),
            name: try row.decode(column: "name", as: String.self),
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)))
    }

    static func app(from row: any SQLRow) throws -> AppDTO {
        AppDTO(
            id: try row.decode(column: "id", as: String.self),
            brandId: try row.decode(column: "brand_id", as: String.self),
            name: try row.decode(column: "name", as: String.self),
            channel: try decodeEnum(row, "channel", as: Channel.self),
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)))
    }

    static func agentRecord(from row: any SQLRow) throws -> AgentRecord {
        let permissions = try row.decode(column: "permissions", as: String.self)
            .split(separator: ",").compactMap { AgentPermission(rawValue: String($0)) }
        return AgentRecord(
            agent: AgentDTO(
                id: try row.decode(column: "id", as: String.self),
                brandId: try row.decode(column: "brand_id", as: String.self),
                email: try row.decode(column: "email", as: String.self),
                name: try row.decode(column: "name", as: String.self),
                role: try decodeEnum(row, "role", as: AgentRole.self),
                permissions: permissions,
                createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)),
                disabled: try row.decodeNil(column: "disabled_at") == false),
            passwordHash: try row.decode(column: "password_hash", as: String.self),
            disabledAt: try row.decode(column: "disabled_at", as: Int64?.self).map(Clock.date),
            deletedAt: try row.decode(column: "deleted_at", as: Int64?.self).map(Clock.date))
    }

    static func consumer(from row: any SQLRow) throws -> ConsumerDTO {
        let externalId = try row.decode(column: "external_id", as: String?.self)
        return ConsumerDTO(
            id: try row.decode(column: "id", as: String.self),
            brandId: try row.decode(column: "brand_id", as: String.self),
            appId: try row.decode(column: "app_id", as: String.self),
            externalId: externalId,
            displayName: try row.decode(column: "display_name", as: String.self),
            anonymous: externalId == nil,
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)))
    }

    static func conversation(from row: any SQLRow) throws -> ConversationDTO {
        ConversationDTO(
            id: try row.decode(column: "id", as: String.self),
            brandId: try row.decode(column: "brand_id", as: String.self),
            appId: try row.decode(column: "app_id", as: String.self),
            consumerId: try row.decode(column: "consumer_id", as: String.self),
            channel: try decodeEnum(row, "channel", as: Channel.self),
            state: try decodeEnum(row, "state", as: ConversationState.self),
            assigneeId: try row.decode(column: "assignee_id", as: String?.self),
            lastSeq: try row.decode(column: "last_seq", as: Int64.self),
            lastMessagePreview: try row.decode(column: "last_message_preview", as: String?.self),
            lastMessageAt: try row.decode(column: "last_message_at", as: Int64?.self).map(Clock.date),
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)),
            updatedAt: Clock.date(try row.decode(column: "updated_at", as: Int64.self)))
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func bytes(fromHex hex: String) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(hex.utf8.count / 2)
        var index = hex.startIndex
        while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), index != hex.endIndex {
            if let byte = UInt8(hex[index..<next], radix: 16) { result.append(byte) }
            index = next
        }
        return result
    }

    /// A voice row, read from its own table (`prefix` "") or from the message join (`prefix` "v_").
    static func voice(from row: any SQLRow, prefix: String, messageId: String? = nil, brandId: String? = nil) throws -> VoiceRecord {
        func column(_ name: String) -> String { prefix + name }
        guard let state = VoiceState(rawValue: try row.decode(column: column("state"), as: String.self)) else {
            throw StoreError.corrupt("voice state")
        }
        return VoiceRecord(
            messageId: try messageId ?? row.decode(column: "message_id", as: String.self),
            brandId: try brandId ?? row.decode(column: "brand_id", as: String.self),
            container: try row.decode(column: column("container"), as: String.self),
            originalKey: try row.decode(column: column("original_key"), as: String.self),
            originalBytes: try row.decode(column: column("original_bytes"), as: Int.self),
            durationMs: try row.decode(column: column("duration_ms"), as: Int.self),
            waveform: bytes(fromHex: try row.decode(column: column("waveform"), as: String.self)),
            state: state,
            failureReason: try row.decode(column: column("failure_reason"), as: String?.self),
            opusKey: try row.decode(column: column("opus_key"), as: String?.self),
            opusBytes: try row.decode(column: column("opus_bytes"), as: Int?.self),
            aacKey: try row.decode(column: column("aac_key"), as: String?.self),
            aacBytes: try row.decode(column: column("aac_bytes"), as: Int?.self),
            scan: MalwareScanState(rawValue: try row.decode(column: column("scan_state"), as: String.self)) ?? .clean,
            scanDetail: try row.decode(column: column("scan_detail"), as: String?.self),
            scanAttempts: try row.decode(column: column("scan_attempts"), as: Int.self),
            scanNextAt: try row.decode(column: column("scan_next_at"), as: Int64?.self).map(Clock.date),
            createdAt: Clock.date(try row.decode(column: column("created_at"), as: Int64.self)),
            updatedAt: Clock.date(try row.decode(column: column("updated_at"), as: Int64.self)))
    }

    static func message(from row: any SQLRow) throws -> MessageDTO {
        let rank = try row.decode(column: "delivery_state", as: Int.self)
        guard let deliveryState = DeliveryState(rank: rank) else { throw StoreError.corrupt("delivery state \(rank)") }
        let id = try row.decode(column: "id", as: String.self)
        var voice: VoiceDTO?
        if row.contains(column: "v_state"), try row.decode(column: "v_state", as: String?.self) != nil {
            let brandId = try row.decode(column: "brand_id", as: String.self)
            voice = try Self.voice(from: row, prefix: "v_", messageId: id, brandId: brandId).dto
        }
        return MessageDTO(
            id: try row.decode(column: "id", as: String.self),
            conversationId: try row.decode(column: "conversation_id", as: String.self),
            seq: try row.decode(column: "seq", as: Int64.self),
            senderKind: try decodeEnum(row, "sender_kind", as: ParticipantKind.self),
            senderId: try row.decode(column: "sender_id", as: String.self),
            clientMessageId: try row.decode(column: "client_message_id", as: String.self),
            kind: try decodeEnum(row, "kind", as: MessageKind.self),
            text: try row.decode(column: "body", as: String.self),
            deliveryState: deliveryState,
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)),
            voice: voice)
    }

    static func call(from row: any SQLRow) throws -> CallDTO {
        func date(_ column: String) throws -> Date? { try row.decode(column: column, as: Int64?.self).map(Clock.date) }
        return CallDTO(
            id: try row.decode(column: "id", as: String.self),
            conversationId: try row.decode(column: "conversation_id", as: String.self),
            media: try decodeEnum(row, "media", as: CallMedia.self),
            state: try decodeEnum(row, "state", as: CallState.self),
            version: 0,
            invitedBy: try row.decode(column: "invited_by", as: String.self),
            inviterName: try row.decode(column: "inviter_name", as: String.self),
            answeredBy: try row.decode(column: "answered_by", as: String?.self),
            invitedAt: Clock.date(try row.decode(column: "invited_at", as: Int64.self)),
            answeredAt: try date("answered_at"),
            connectedAt: try date("connected_at"),
            endedAt: try date("ended_at"),
            outcome: try row.decode(column: "outcome", as: String?.self).flatMap(CallOutcome.init(rawValue:)),
            endReason: try row.decode(column: "end_reason", as: String?.self).flatMap(CallEndReason.init(rawValue:)),
            endedBy: try row.decode(column: "ended_by", as: String?.self).flatMap(ParticipantKind.init(rawValue:)),
            durationSeconds: try row.decode(column: "duration_seconds", as: Int?.self),
            seq: try row.decode(column: "event_seq", as: Int64?.self))
    }

    static func event(from row: any SQLRow) throws -> ConversationEventDTO {
        ConversationEventDTO(
            conversationId: try row.decode(column: "conversation_id", as: String.self),
            seq: try row.decode(column: "seq", as: Int64.self),
            kind: try decodeEnum(row, "kind", as: ConversationEventDTO.Kind.self),
            actorKind: try decodeEnum(row, "actor_kind", as: ParticipantKind.self),
            actorId: try row.decode(column: "actor_id", as: String.self),
            upToSeq: try row.decode(column: "up_to_seq", as: Int64?.self),
            deliveryState: try row.decode(column: "delivery_state", as: String?.self).flatMap(DeliveryState.init(rawValue:)),
            state: try row.decode(column: "state", as: String?.self).flatMap(ConversationState.init(rawValue:)),
            assigneeId: try row.decode(column: "assignee_id", as: String?.self),
            messageId: try row.decode(column: "message_id", as: String?.self),
            callId: try row.decode(column: "call_id", as: String?.self),
            createdAt: Clock.date(try row.decode(column: "created_at", as: Int64.self)))
    }
}
