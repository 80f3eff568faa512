import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Brands, apps and their keys, brand settings, agents, consumers and sessions.
public protocol IdentityStore: Sendable {
    func insertBrand(_ brand: BrandDTO) async throws
    func brand(id: BrandID) async throws -> BrandDTO?
    func brandCount() async throws -> Int
    /// Every brand, oldest first, with how many agents each has (not deleted): for the operator.
    func brands(limit: Int) async throws -> [(brand: BrandDTO, agents: Int)]
    func insertApp(_ app: AppDTO) async throws
    /// Apps are looked up by their public id without a brand: the widget only knows the app id.
    func app(id: AppID) async throws -> AppDTO?
    func apps(brandId: BrandID) async throws -> [AppDTO]
    /// Fails with a unique violation (`isUniqueViolation`) when the app already has a key with this kid.
    func insertAppKey(_ key: AppKeyRecord) async throws
    func appKeys(appId: AppID) async throws -> [AppKeyRecord]

    func brandSettings(brandId: BrandID) async throws -> BrandSettingsDTO
    func saveBrandSettings(_ settings: BrandSettingsDTO, brandId: BrandID, at: Date) async throws

    /// Fails with a unique violation (`isUniqueViolation`) when an agent (of any brand) has the email.
    func insertAgent(_ record: AgentRecord) async throws
    func updateAgent(_ record: AgentRecord) async throws
    func agent(brandId: BrandID, id: AgentID) async throws -> AgentRecord?
    func agent(email: String) async throws -> AgentRecord?
    func agents(brandId: BrandID) async throws -> [AgentDTO]

    func insertConsumer(_ consumer: ConsumerDTO) async throws
    func updateConsumer(_ consumer: ConsumerDTO) async throws
    func consumer(brandId: BrandID, id: ConsumerID) async throws -> ConsumerDTO?
    func consumer(brandId: BrandID, externalId: String) async throws -> ConsumerDTO?
    /// Several of the brand's consumers at once (the ones that exist).
    func consumers(brandId: BrandID, ids: [ConsumerID]) async throws -> [ConsumerDTO]
    /// Holds the consumer's row until the transaction ends (PostgreSQL; SQLite's writers are serial),
    /// so that two first messages of one consumer cannot each open a conversation.
    func lockConsumer(brandId: BrandID, id: ConsumerID) async throws

    func insertSession(_ session: SessionRecord) async throws
    func session(tokenHash: String) async throws -> SessionRecord?
    func revokeSession(tokenHash: String, at: Date) async throws
    /// Revokes every session of one subject except the one with `tokenHash` (nil: all of them).
    func revokeSessions(subjectId: String, except tokenHash: String?, at: Date) async throws
    /// The token hashes of sessions revoked at or after `since` (another process may have revoked
    /// them: `parley admin`, another node), for ending their open connections.
    func sessionsRevoked(since: Date, limit: Int) async throws -> [String]
}

extension SQLRepository: IdentityStore {
    public func insertBrand(_ brand: BrandDTO) async throws {
        try await db.insert(BrandRow(brand))
    }

    public func brand(id: BrandID) async throws -> BrandDTO? {
        try await db.raw("SELECT * FROM brands WHERE id = \(bind: id)").first(BrandRow.self)?.dto
    }

    public func brandCount() async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM brands").first()?.decode(column: "n", as: Int.self) ?? 0
    }

    public func brands(limit: Int) async throws -> [(brand: BrandDTO, agents: Int)] {
        try await db.raw(
            """
            SELECT b.*, (SELECT COUNT(*) FROM agents a WHERE a.brand_id = b.id AND a.deleted_at IS NULL) AS agent_count
            FROM brands b ORDER BY b.created_at, b.id LIMIT \(bind: limit)
            """
        ).all().map { row in (try row.decode(BrandRow.self).dto, try row.decode(column: "agent_count", as: Int.self)) }
    }

    public func sessionsRevoked(since: Date, limit: Int) async throws -> [String] {
        try await db.raw(
            "SELECT token_hash FROM sessions WHERE revoked_at >= \(bind: StoredTime.millis(since)) ORDER BY revoked_at LIMIT \(bind: limit)"
        ).all().map { try $0.decode(column: "token_hash", as: String.self) }
    }

    public func insertApp(_ app: AppDTO) async throws {
        try await db.insert(AppRow(app))
    }

    public func app(id: AppID) async throws -> AppDTO? {
        try await db.raw("SELECT * FROM apps WHERE id = \(bind: id)").first(AppRow.self)?.dto
    }

    public func apps(brandId: BrandID) async throws -> [AppDTO] {
        try await db.raw("SELECT * FROM apps WHERE brand_id = \(bind: brandId) ORDER BY created_at, id").all(AppRow.self).map(\.dto)
    }

    /// The table's unique key decides, not a look-up first: two writers at once cannot both pass.
    public func insertAppKey(_ key: AppKeyRecord) async throws {
        try await db.insert(AppKeyRow(key))
    }

    public func appKeys(appId: AppID) async throws -> [AppKeyRecord] {
        try await db.raw("SELECT * FROM app_keys WHERE app_id = \(bind: appId) ORDER BY created_at, kid").all(AppKeyRow.self).map(\.record)
    }

    public func brandSettings(brandId: BrandID) async throws -> BrandSettingsDTO {
        try await db.raw("SELECT * FROM brand_settings WHERE brand_id = \(bind: brandId)").first(BrandSettingsRow.self)?.dto
            ?? BrandSettingsDTO()
    }

    public func saveBrandSettings(_ settings: BrandSettingsDTO, brandId: BrandID, at: Date) async throws {
        let row = BrandSettingsRow(settings, brandId: brandId, at: at)
        try await db.insert(into: BrandSettingsRow.table).model(row, with: RowCoding.encoder)
            .onConflict(with: ["brand_id"]) { try $0.set(excludedContentOf: row, with: RowCoding.encoder) }
            .run()
    }

    public func insertAgent(_ record: AgentRecord) async throws {
        try await db.insert(AgentRow(record))
    }

    public func updateAgent(_ record: AgentRecord) async throws {
        try await db.update(AgentRow(record), where: "id = \(bind: record.agent.id) AND brand_id = \(bind: record.agent.brandId)").run()
    }

    public func agent(brandId: BrandID, id: AgentID) async throws -> AgentRecord? {
        try await db.raw("SELECT * FROM agents WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first(AgentRow.self)?.record
    }

    public func agent(email: String) async throws -> AgentRecord? {
        try await db.raw("SELECT * FROM agents WHERE email = \(bind: email)").first(AgentRow.self)?.record
    }

    public func agents(brandId: BrandID) async throws -> [AgentDTO] {
        try await db.raw("SELECT * FROM agents WHERE brand_id = \(bind: brandId) AND deleted_at IS NULL ORDER BY name, id")
            .all(AgentRow.self).map { try $0.record.agent }
    }

    public func insertConsumer(_ consumer: ConsumerDTO) async throws {
        try await db.insert(ConsumerRow(consumer))
    }

    public func updateConsumer(_ consumer: ConsumerDTO) async throws {
        try await db.update(ConsumerRow(consumer), where: "id = \(bind: consumer.id) AND brand_id = \(bind: consumer.brandId)").run()
    }

    public func consumer(brandId: BrandID, id: ConsumerID) async throws -> ConsumerDTO? {
        try await db.raw("SELECT * FROM consumers WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first(ConsumerRow.self)?.dto
    }

    public func consumers(brandId: BrandID, ids: [ConsumerID]) async throws -> [ConsumerDTO] {
        guard !ids.isEmpty else { return [] }
        let list = SQLList(ids.map { SQLBind($0.rawValue) })
        return try await db.raw("SELECT * FROM consumers WHERE brand_id = \(bind: brandId) AND id IN (\(list))").all(ConsumerRow.self).map(\.dto)
    }

    public func consumer(brandId: BrandID, externalId: String) async throws -> ConsumerDTO? {
        try await db.raw("SELECT * FROM consumers WHERE brand_id = \(bind: brandId) AND external_id = \(bind: externalId)")
            .first(ConsumerRow.self)?.dto
    }

    public func lockConsumer(brandId: BrandID, id: ConsumerID) async throws {
        guard flavor == .postgres else { return }  // SQLite's writers are serial
        _ = try await db.raw("SELECT id FROM consumers WHERE id = \(bind: id) AND brand_id = \(bind: brandId) FOR UPDATE").first()
    }

    public func insertSession(_ session: SessionRecord) async throws {
        try await db.insert(SessionRow(session))
    }

    public func session(tokenHash: String) async throws -> SessionRecord? {
        try await db.raw("SELECT * FROM sessions WHERE token_hash = \(bind: tokenHash)").first(SessionRow.self)?.record
    }

    public func revokeSessions(subjectId: String, except tokenHash: String?, at: Date) async throws {
        try await db.raw(
            """
            UPDATE sessions SET revoked_at = \(bind: StoredTime.millis(at))
            WHERE subject_id = \(bind: subjectId) AND revoked_at IS NULL AND token_hash <> \(bind: tokenHash ?? "")
            """
        ).run()
    }

    public func revokeSession(tokenHash: String, at: Date) async throws {
        try await db.raw(
            "UPDATE sessions SET revoked_at = \(bind: StoredTime.millis(at)) WHERE token_hash = \(bind: tokenHash) AND revoked_at IS NULL"
        ).run()
    }
}

// MARK: - Rows

struct BrandRow: TableRow {
    static let table = "brands"
    var id: BrandID
    var name: String
    var createdAt: Int64

    init(_ brand: BrandDTO) {
        (id, name, createdAt) = (brand.id, brand.name, StoredTime.millis(brand.createdAt))
    }

    var dto: BrandDTO { BrandDTO(id: id, name: name, createdAt: StoredTime.date(createdAt)) }
}

struct AppRow: TableRow {
    static let table = "apps"
    var id: AppID
    var brandId: BrandID
    var name: String
    var channel: Channel
    var createdAt: Int64

    init(_ app: AppDTO) {
        (id, brandId, name, channel, createdAt) = (app.id, app.brandId, app.name, app.channel, StoredTime.millis(app.createdAt))
    }

    var dto: AppDTO { AppDTO(id: id, brandId: brandId, name: name, channel: channel, createdAt: StoredTime.date(createdAt)) }
}

struct AppKeyRow: TableRow {
    static let table = "app_keys"
    var appId: AppID
    var kid: String
    var brandId: BrandID
    var algorithm: String
    var keyMaterial: String
    var createdAt: Int64

    init(_ key: AppKeyRecord) {
        (appId, kid, brandId, algorithm, keyMaterial) = (key.appId, key.kid, key.brandId, key.algorithm, key.keyMaterial)
        createdAt = StoredTime.millis(key.createdAt)
    }

    var record: AppKeyRecord {
        AppKeyRecord(kid: kid, appId: appId, brandId: brandId, algorithm: algorithm, keyMaterial: keyMaterial, createdAt: StoredTime.date(createdAt))
    }
}

struct BrandSettingsRow: TableRow {
    static let table = "brand_settings"
    var brandId: BrandID
    var voiceMaxSeconds: Int
    var voiceFromConsumers: Int
    var voiceFromAgents: Int
    var scanFailurePolicy: ScanFailurePolicy
    var cardMasking: CardMasking
    var openConversationsPerConsumer: Int
    var autoAwayMinutes: Int
    /// Comma-separated claim names.
    var exposedClaims: String
    var widgetColor: String
    var availableText: String
    var awayText: String
    /// Comma-separated groups.
    var attachmentGroups: String
    var attachmentMaxMegabytes: Int
    /// Space-separated origins.
    var previewOrigins: String
    /// Bumped with every new logo (its URL changes, so caches keep each one forever); 0: none.
    var logoVersion: Int
    var pushPreview: PushPreview
    var voiceMinSeconds: Int
    var cobrowseEnabled: Int
    /// Space-separated origins.
    var cobrowseOrigins: String
    /// One selector a line.
    var cobrowseMaskSelectors: String
    var screenShareFromConsumers: Int
    var transcription: Int
    var transcriptionLanguage: String
    var updatedAt: Int64

    init(_ settings: BrandSettingsDTO, brandId: BrandID, at: Date) {
        pushPreview = settings.pushPreview
        voiceMinSeconds = settings.voiceMinSeconds
        cobrowseEnabled = settings.cobrowseEnabled ? 1 : 0
        cobrowseOrigins = settings.cobrowseOrigins.joined(separator: " ")
        cobrowseMaskSelectors = settings.cobrowseMaskSelectors.joined(separator: "\n")
        screenShareFromConsumers = settings.screenShareFromConsumers ? 1 : 0
        transcription = settings.transcription ? 1 : 0
        transcriptionLanguage = settings.transcriptionLanguage
        self.brandId = brandId
        voiceMaxSeconds = settings.voiceMaxSeconds
        voiceFromConsumers = settings.voiceFromConsumers ? 1 : 0
        voiceFromAgents = settings.voiceFromAgents ? 1 : 0
        scanFailurePolicy = settings.scanFailurePolicy
        cardMasking = settings.cardMasking
        openConversationsPerConsumer = settings.openConversationsPerConsumer
        autoAwayMinutes = settings.autoAwayMinutes
        exposedClaims = settings.exposedClaims.joined(separator: ",")
        widgetColor = settings.widgetColor
        availableText = settings.availableText
        awayText = settings.awayText
        attachmentGroups = settings.attachmentGroups.map(\.rawValue).joined(separator: ",")
        attachmentMaxMegabytes = settings.attachmentMaxMegabytes
        previewOrigins = settings.previewOrigins.joined(separator: " ")
        logoVersion = MediaPaths.logoVersion(of: settings.logoUrl)
        updatedAt = StoredTime.millis(at)
    }

    var dto: BrandSettingsDTO {
        var settings = BrandSettingsDTO(
            voiceMaxSeconds: voiceMaxSeconds, voiceFromConsumers: voiceFromConsumers != 0, voiceFromAgents: voiceFromAgents != 0,
            scanFailurePolicy: scanFailurePolicy, cardMasking: cardMasking, openConversationsPerConsumer: openConversationsPerConsumer,
            autoAwayMinutes: autoAwayMinutes, exposedClaims: exposedClaims.split(separator: ",").map(String.init),
            widgetColor: widgetColor, availableText: availableText, awayText: awayText,
            attachmentGroups: attachmentGroups.split(separator: ",").compactMap { AttachmentGroup(rawValue: String($0)) },
            attachmentMaxMegabytes: attachmentMaxMegabytes, previewOrigins: previewOrigins.split(separator: " ").map(String.init),
            logoUrl: logoVersion > 0 ? MediaPaths.logo(brandId: brandId, version: logoVersion) : nil)
        settings.pushPreview = pushPreview
        settings.voiceMinSeconds = voiceMinSeconds
        settings.cobrowseEnabled = cobrowseEnabled != 0
        settings.cobrowseOrigins = cobrowseOrigins.split(separator: " ").map(String.init)
        settings.cobrowseMaskSelectors = cobrowseMaskSelectors.split(separator: "\n").map(String.init)
        settings.screenShareFromConsumers = screenShareFromConsumers != 0
        settings.transcription = transcription != 0
        settings.transcriptionLanguage = transcriptionLanguage
        return settings
    }
}

struct AgentRow: TableRow {
    static let table = "agents"
    var id: AgentID
    var brandId: BrandID
    var email: String
    var name: String
    var passwordHash: String
    var role: AgentRole
    /// Comma-separated, sorted.
    var permissions: String
    var createdAt: Int64
    var disabledAt: Int64?
    var deletedAt: Int64?

    init(_ record: AgentRecord) {
        let agent = record.agent
        (id, brandId, email, name, role) = (agent.id, agent.brandId, agent.email, agent.name, agent.role)
        passwordHash = record.passwordHash
        permissions = agent.permissions.map(\.rawValue).sorted().joined(separator: ",")
        createdAt = StoredTime.millis(agent.createdAt)
        disabledAt = record.disabledAt.map(StoredTime.millis)
        deletedAt = record.deletedAt.map(StoredTime.millis)
    }

    var record: AgentRecord {
        get throws {
            let permissions = try permissions.split(separator: ",").map { name in
                guard let permission = AgentPermission(rawValue: String(name)) else {
                    throw StoreError.corrupt("agent \(id) has an unknown permission '\(name)'")
                }
                return permission
            }
            return AgentRecord(
                agent: AgentDTO(
                    id: id, brandId: brandId, email: email, name: name, role: role, permissions: permissions,
                    createdAt: StoredTime.date(createdAt), disabled: disabledAt != nil),
                passwordHash: passwordHash, disabledAt: disabledAt.map(StoredTime.date), deletedAt: deletedAt.map(StoredTime.date))
        }
    }
}

struct ConsumerRow: TableRow {
    static let table = "consumers"
    var id: ConsumerID
    var brandId: BrandID
    var appId: AppID
    var externalId: String?
    var displayName: String
    var createdAt: Int64
    var email: String?
    var phone: String?
    /// JSON object of strings.
    var attributes: String?
    var lastPageUrl: String?
    var lastPageTitle: String?
    var lastBrowser: String?
    var lastSeenAt: Int64?
    var language: String?

    init(_ consumer: ConsumerDTO) {
        language = consumer.language
        (id, brandId, appId, externalId, displayName) = (consumer.id, consumer.brandId, consumer.appId, consumer.externalId, consumer.displayName)
        createdAt = StoredTime.millis(consumer.createdAt)
        (email, phone) = (consumer.email, consumer.phone)
        attributes = consumer.attributes.flatMap { try? JSONEncoder.sorted.encode($0) }.map { String(decoding: $0, as: UTF8.self) }
        (lastPageUrl, lastPageTitle, lastBrowser) = (consumer.lastPageUrl, consumer.lastPageTitle, consumer.lastBrowser)
        lastSeenAt = consumer.lastSeenAt.map(StoredTime.millis)
    }

    var dto: ConsumerDTO {
        var consumer = ConsumerDTO(
            id: id, brandId: brandId, appId: appId, externalId: externalId, displayName: displayName, anonymous: externalId == nil,
            createdAt: StoredTime.date(createdAt), email: email, phone: phone,
            attributes: attributes.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) },
            lastPageUrl: lastPageUrl, lastPageTitle: lastPageTitle, lastBrowser: lastBrowser, lastSeenAt: lastSeenAt.map(StoredTime.date))
        consumer.language = language
        return consumer
    }
}

struct SessionRow: TableRow {
    static let table = "sessions"
    var tokenHash: String
    var brandId: BrandID
    var subjectKind: ParticipantKind
    var subjectId: String
    var appId: AppID?
    var createdAt: Int64
    var expiresAt: Int64
    var revokedAt: Int64?

    init(_ session: SessionRecord) {
        (tokenHash, brandId, subjectKind, subjectId, appId) = (session.tokenHash, session.brandId, session.subjectKind, session.subjectId, session.appId)
        createdAt = StoredTime.millis(session.createdAt)
        expiresAt = StoredTime.millis(session.expiresAt)
        revokedAt = session.revokedAt.map(StoredTime.millis)
    }

    var record: SessionRecord {
        SessionRecord(
            tokenHash: tokenHash, brandId: brandId, subjectKind: subjectKind, subjectId: subjectId, appId: appId,
            createdAt: StoredTime.date(createdAt), expiresAt: StoredTime.date(expiresAt), revokedAt: revokedAt.map(StoredTime.date))
    }
}

extension JSONEncoder {
    /// Keys in order, so that one value is always stored as the same text.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}
