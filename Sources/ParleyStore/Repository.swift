import Foundation
import ParleyAPI

/// Everything Parley stores, as one transaction (or one read) sees it.
///
/// Every brand-owned lookup takes the brand id: a row of another brand is simply not found.
/// `SQLRepository` implements it once for SQLite and PostgreSQL; `Store` hands one out per
/// transaction.
public protocol Repository: Sendable {
    // MARK: Brands and apps
    func insertBrand(_ brand: BrandDTO) async throws
    func brand(id: String) async throws -> BrandDTO?
    func brandCount() async throws -> Int
    func insertApp(_ app: AppDTO) async throws
    /// Apps are looked up by their public id without a brand: the widget only knows the app id.
    func app(id: String) async throws -> AppDTO?
    func apps(brandId: String) async throws -> [AppDTO]
    func insertAppKey(_ key: AppKeyRecord) async throws
    func appKeys(appId: String) async throws -> [AppKeyRecord]

    func brandSettings(brandId: String) async throws -> BrandSettingsDTO
    func saveBrandSettings(_ settings: BrandSettingsDTO, brandId: String) async throws

    // MARK: Agents
    func insertAgent(_ record: AgentRecord) async throws
    func updateAgent(_ record: AgentRecord) async throws
    func agent(brandId: String, id: String) async throws -> AgentRecord?
    func agent(email: String) async throws -> AgentRecord?
    func agents(brandId: String) async throws -> [AgentDTO]

    // MARK: Consumers
    func insertConsumer(_ consumer: ConsumerDTO) async throws
    func updateConsumer(_ consumer: ConsumerDTO) async throws
    func consumer(brandId: String, id: String) async throws -> ConsumerDTO?
    func consumer(brandId: String, externalId: String) async throws -> ConsumerDTO?
    /// Holds the consumer's row until the transaction ends (PostgreSQL; SQLite's writers are serial),
    /// so that two first messages of one consumer cannot each open a conversation.
    func lockConsumer(brandId: String, id: String) async throws

    // MARK: Sessions
    func insertSession(_ session: SessionRecord) async throws
    func session(tokenHash: String) async throws -> SessionRecord?
    func revokeSession(tokenHash: String, at: Date) async throws
    /// Revokes every session of one subject except the one with `tokenHash` (nil: all of them).
    func revokeSessions(subjectId: String, except tokenHash: String?, at: Date) async throws

    // MARK: Conversations
    func insertConversation(_ conversation: ConversationDTO) async throws
    /// `lock` takes the row lock for the rest of the transaction (PostgreSQL; SQLite writers are serial).
    func conversation(brandId: String, id: String, lock: Bool) async throws -> ConversationDTO?
    func latestConversation(consumerId: String, appId: String, channel: Channel, lock: Bool) async throws -> ConversationDTO?
    /// How many of a consumer's conversations in an app are not resolved.
    func openConversationCount(consumerId: String, appId: String) async throws -> Int
    func updateConversation(_ conversation: ConversationDTO) async throws
    func conversations(brandId: String, filter: ConversationFilter) async throws -> [ConversationDTO]
    func conversations(consumerId: String, brandId: String, limit: Int) async throws -> [ConversationDTO]

    // MARK: Messages and events
    func insertMessage(_ message: MessageDTO, brandId: String) async throws
    func message(senderId: String, clientMessageId: String) async throws -> MessageDTO?
    /// A message of the brand by id (any conversation of the brand).
    func message(brandId: String, id: String) async throws -> MessageDTO?
    func messages(conversationId: String, afterSeq: Int64, limit: Int) async throws -> [MessageDTO]
    /// Raises the delivery state of every message sent by `senderKind` with `seq <= upToSeq` to `state`.
    /// Returns how many messages changed.
    func raiseDeliveryState(
        conversationId: String, senderKind: ParticipantKind, upToSeq: Int64, to state: DeliveryState, at: Date
    ) async throws -> Int
    func insertEvent(_ event: ConversationEventDTO, brandId: String) async throws
    func events(conversationId: String, afterSeq: Int64, limit: Int) async throws -> [ConversationEventDTO]

    // MARK: Calls
    func insertCall(_ call: CallDTO, brandId: String) async throws
    /// Writes the call as it is now, unless the stored record has already ended (a late write after
    /// the end must not undo it). Returns whether a row changed.
    @discardableResult
    func updateCall(_ call: CallDTO, brandId: String) async throws -> Bool
    func call(brandId: String, id: String) async throws -> CallDTO?
    /// A conversation's calls, newest first.
    func calls(conversationId: String, brandId: String, limit: Int) async throws -> [CallDTO]
    /// Calls without an end, e.g. left by a crash. Includes the brand id of each.
    func unfinishedCalls(limit: Int) async throws -> [(brandId: String, call: CallDTO)]

    // MARK: Voice
    func insertVoice(_ voice: VoiceRecord) async throws
    func updateVoice(_ voice: VoiceRecord) async throws
    func voice(messageId: String, brandId: String) async throws -> VoiceRecord?
    /// Voice notes left in `processing` (e.g. by a crash) whose scan allows renditions, oldest first.
    func voicesProcessing(limit: Int) async throws -> [VoiceRecord]
    /// Voice notes waiting for the malware scanner whose next try is due, soonest first.
    func voicesAwaitingScan(dueBy: Date, limit: Int) async throws -> [VoiceRecord]
}

/// The database plus the repository over it.
public final class Store: Sendable {
    public let database: any DatabaseClient

    public init(database: any DatabaseClient) {
        self.database = database
    }

    public var flavor: DatabaseFlavor { database.flavor }

    /// Runs `body` in one transaction.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any Repository) async throws -> T) async throws -> T {
        let flavor = database.flavor
        return try await database.write { db in try await body(SQLRepository(db: db, flavor: flavor)) }
    }

    /// Runs read-only `body` against committed data.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any Repository) async throws -> T) async throws -> T {
        let flavor = database.flavor
        return try await database.read { db in try await body(SQLRepository(db: db, flavor: flavor)) }
    }

    public func close() async {
        await database.close()
    }
}
