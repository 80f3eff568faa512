import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Co-browse sessions: one row per offer, written as it is answered, moves between pages and ends.
/// Nothing of the page is stored.
public protocol CobrowseStore: Sendable {
    func insertCobrowse(_ session: CobrowseSessionRecord) async throws
    /// Writes the session as it is now, only over the version it was read at (`previousVersion`):
    /// false when another node changed it first (nothing written).
    func updateCobrowse(_ session: CobrowseSessionRecord, previousVersion: Int) async throws -> Bool
    func cobrowse(brandId: BrandID, id: CobrowseID) async throws -> CobrowseSessionRecord?
    /// The conversation's session that is not over, if any.
    func liveCobrowse(conversationId: ConversationID) async throws -> CobrowseSessionRecord?
    /// The consumer's sessions that are not over (a page of theirs that connects learns of them).
    func liveCobrowses(brandId: BrandID, consumerId: ConsumerID) async throws -> [CobrowseSessionRecord]
    /// Sessions that are not over, of every brand (a node that starts, or a sweep).
    func liveCobrowses(limit: Int) async throws -> [CobrowseSessionRecord]
    /// Records the sequence number of the session's entry in the conversation's log.
    func setCobrowseEventSeq(id: CobrowseID, seq: Int64) async throws
}

/// A session with what the server needs to route it: the brand, the customer, the two connections.
public struct CobrowseSessionRecord: Sendable, Codable, Hashable {
    public var session: CobrowseSessionDTO
    public var brandId: BrandID
    public var consumerId: ConsumerID
    /// The agent's workspace connection that offered it: the page goes there only.
    public var agentConnection: ConnectionID
    /// The customer's connection whose page is shared (nil until accepted).
    public var consumerConnection: ConnectionID?
    /// The nodes those connections are on (several nodes: a node that goes away takes them with it).
    public var agentNode: String?
    public var consumerNode: String?

    public init(
        session: CobrowseSessionDTO, brandId: BrandID, consumerId: ConsumerID, agentConnection: ConnectionID, consumerConnection: ConnectionID? = nil,
        agentNode: String? = nil, consumerNode: String? = nil
    ) {
        self.agentNode = agentNode
        self.consumerNode = consumerNode
        self.session = session
        self.brandId = brandId
        self.consumerId = consumerId
        self.agentConnection = agentConnection
        self.consumerConnection = consumerConnection
    }
}

extension SQLRepository: CobrowseStore {
    public func insertCobrowse(_ session: CobrowseSessionRecord) async throws {
        try await db.insert(CobrowseRow(session))
    }

    public func updateCobrowse(_ session: CobrowseSessionRecord, previousVersion: Int) async throws -> Bool {
        let rows = try await db.update(
            CobrowseRow(session),
            where: "id = \(bind: session.session.id) AND brand_id = \(bind: session.brandId) AND version = \(bind: previousVersion)",
            suffix: " RETURNING id"
        ).all()
        return !rows.isEmpty
    }

    public func cobrowse(brandId: BrandID, id: CobrowseID) async throws -> CobrowseSessionRecord? {
        try await db.raw("SELECT * FROM cobrowse_sessions WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first(CobrowseRow.self)?.record
    }

    public func liveCobrowse(conversationId: ConversationID) async throws -> CobrowseSessionRecord? {
        try await db.raw(
            "SELECT * FROM cobrowse_sessions WHERE conversation_id = \(bind: conversationId) AND ended_at IS NULL ORDER BY offered_at DESC LIMIT 1"
        ).first(CobrowseRow.self)?.record
    }

    public func liveCobrowses(brandId: BrandID, consumerId: ConsumerID) async throws -> [CobrowseSessionRecord] {
        try await db.raw(
            """
            SELECT * FROM cobrowse_sessions WHERE brand_id = \(bind: brandId) AND consumer_id = \(bind: consumerId) AND ended_at IS NULL
            ORDER BY offered_at LIMIT 10
            """
        ).all(CobrowseRow.self).map(\.record)
    }

    public func liveCobrowses(limit: Int) async throws -> [CobrowseSessionRecord] {
        try await db.raw("SELECT * FROM cobrowse_sessions WHERE ended_at IS NULL ORDER BY offered_at LIMIT \(bind: limit)")
            .all(CobrowseRow.self).map(\.record)
    }

    public func setCobrowseEventSeq(id: CobrowseID, seq: Int64) async throws {
        try await db.raw("UPDATE cobrowse_sessions SET event_seq = \(bind: seq) WHERE id = \(bind: id)").run()
    }
}

struct CobrowseRow: TableRow {
    static let table = "cobrowse_sessions"
    var id: CobrowseID
    var brandId: BrandID
    var conversationId: ConversationID
    var consumerId: ConsumerID
    var agentId: AgentID
    var agentName: String
    var state: CobrowseState
    var version: Int
    var agentConnection: ConnectionID
    var consumerConnection: ConnectionID?
    var consumerConnected: Int
    var origin: String?
    var offeredAt: Int64
    var startedAt: Int64?
    var endedAt: Int64?
    var endReason: CobrowseEndReason?
    var control: CobrowseControl
    var controlGrantedAt: Int64?
    var agentNode: String?
    var consumerNode: String?

    init(_ record: CobrowseSessionRecord) {
        (agentNode, consumerNode) = (record.agentNode, record.consumerNode)
        let s = record.session
        (id, brandId, conversationId, consumerId) = (s.id, record.brandId, s.conversationId, record.consumerId)
        (agentId, agentName, state, version) = (s.agentId, s.agentName, s.state, s.version)
        (agentConnection, consumerConnection, consumerConnected, origin) =
            (record.agentConnection, record.consumerConnection, s.consumerConnected ? 1 : 0, s.origin)
        offeredAt = StoredTime.millis(s.offeredAt)
        startedAt = s.startedAt.map(StoredTime.millis)
        endedAt = s.endedAt.map(StoredTime.millis)
        endReason = s.endReason
        control = s.control
        controlGrantedAt = s.controlGrantedAt.map(StoredTime.millis)
    }

    /// The brand's mask selectors are not part of the record: the service adds the current ones.
    var record: CobrowseSessionRecord {
        CobrowseSessionRecord(
            session: CobrowseSessionDTO(
                id: id, conversationId: conversationId, state: state, version: version, agentId: agentId, agentName: agentName,
                offeredAt: StoredTime.date(offeredAt), startedAt: startedAt.map(StoredTime.date), endedAt: endedAt.map(StoredTime.date),
                endReason: endReason, consumerConnected: consumerConnected != 0, origin: origin, control: control,
                controlGrantedAt: controlGrantedAt.map(StoredTime.date)),
            brandId: brandId, consumerId: consumerId, agentConnection: agentConnection, consumerConnection: consumerConnection,
            agentNode: agentNode, consumerNode: consumerNode)
    }
}
