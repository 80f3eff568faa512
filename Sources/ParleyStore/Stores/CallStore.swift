import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Voice and video calls: one row per call, written as it rings, connects and ends.
public protocol CallStore: Sendable {
    /// `node`: the node that holds the live call (several nodes), where other nodes forward its frames.
    func insertCall(_ call: CallDTO, brandId: BrandID, node: String?) async throws
    /// Writes the call as it is now, unless the stored record has already ended (a late write after
    /// the end must not undo it). Returns whether a row changed.
    @discardableResult
    func updateCall(_ call: CallDTO, brandId: BrandID) async throws -> Bool
    func call(brandId: BrandID, id: CallID) async throws -> CallDTO?
    /// The call with the node that holds it while it is live.
    func callAndNode(brandId: BrandID, id: CallID) async throws -> (call: CallDTO, node: String?)?
    /// The consumer's calls ringing now, with the node that holds each.
    func ringingCalls(brandId: BrandID, consumerId: ConsumerID) async throws -> [(call: CallDTO, node: String?)]
    /// A conversation's calls, newest first.
    func calls(conversationId: ConversationID, brandId: BrandID, limit: Int) async throws -> [CallDTO]
    /// Calls without an end, e.g. left by a crash. Includes the brand id of each.
    func unfinishedCalls(limit: Int) async throws -> [(brandId: BrandID, call: CallDTO, node: String?)]
}

extension CallStore {
    public func insertCall(_ call: CallDTO, brandId: BrandID) async throws {
        try await insertCall(call, brandId: brandId, node: nil)
    }
}

extension SQLRepository: CallStore {
    public func insertCall(_ call: CallDTO, brandId: BrandID, node: String?) async throws {
        try await db.insert(CallRow(call, brandId: brandId))
        if let node {
            // Apart from `CallRow`: the row's updates write every column, and only the node that holds
            // the call sets this one.
            try await db.raw("UPDATE calls SET node = \(bind: node) WHERE id = \(bind: call.id)").run()
        }
    }

    @discardableResult
    public func updateCall(_ call: CallDTO, brandId: BrandID) async throws -> Bool {
        let rows = try await db.update(
            CallRow(call, brandId: brandId), where: "id = \(bind: call.id) AND brand_id = \(bind: brandId) AND ended_at IS NULL",
            suffix: " RETURNING id"
        ).all()
        return !rows.isEmpty
    }

    public func call(brandId: BrandID, id: CallID) async throws -> CallDTO? {
        try await db.raw("SELECT * FROM calls WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first(CallRow.self)?.dto
    }

    public func calls(conversationId: ConversationID, brandId: BrandID, limit: Int) async throws -> [CallDTO] {
        try await db.raw(
            """
            SELECT * FROM calls WHERE conversation_id = \(bind: conversationId) AND brand_id = \(bind: brandId)
            ORDER BY invited_at DESC, id LIMIT \(bind: limit)
            """
        ).all(CallRow.self).map(\.dto)
    }

    public func callAndNode(brandId: BrandID, id: CallID) async throws -> (call: CallDTO, node: String?)? {
        guard let row = try await db.raw("SELECT * FROM calls WHERE id = \(bind: id) AND brand_id = \(bind: brandId)").first() else {
            return nil
        }
        return (try row.decode(CallRow.self).dto, try row.decodeNil(column: "node") ? nil : row.decode(column: "node", as: String.self))
    }

    public func ringingCalls(brandId: BrandID, consumerId: ConsumerID) async throws -> [(call: CallDTO, node: String?)] {
        let rows = try await db.raw(
            """
            SELECT calls.* FROM calls JOIN conversations ON conversations.id = calls.conversation_id
            WHERE calls.brand_id = \(bind: brandId) AND conversations.brand_id = \(bind: brandId)
              AND conversations.consumer_id = \(bind: consumerId) AND calls.state = 'ringing' AND calls.ended_at IS NULL
            ORDER BY calls.invited_at LIMIT 10
            """
        ).all()
        return try rows.map { row in
            (try row.decode(CallRow.self).dto, try row.decodeNil(column: "node") ? nil : row.decode(column: "node", as: String.self))
        }
    }

    public func unfinishedCalls(limit: Int) async throws -> [(brandId: BrandID, call: CallDTO, node: String?)] {
        try await db.raw("SELECT * FROM calls WHERE ended_at IS NULL ORDER BY invited_at LIMIT \(bind: limit)").all().map { row in
            let stored = try row.decode(CallRow.self)
            return (stored.brandId, stored.dto, try row.decodeNil(column: "node") ? nil : row.decode(column: "node", as: String.self))
        }
    }
}

struct CallRow: TableRow {
    static let table = "calls"
    var id: CallID
    var brandId: BrandID
    var conversationId: ConversationID
    var media: CallMedia
    var state: CallState
    var invitedBy: String
    var inviterName: String
    var answeredBy: String?
    var invitedAt: Int64
    var answeredAt: Int64?
    var connectedAt: Int64?
    var endedAt: Int64?
    var outcome: CallOutcome?
    var endReason: CallEndReason?
    var endedBy: ParticipantKind?
    var durationSeconds: Int?
    /// The sequence number of the call's entry in the conversation's log, once it has ended.
    var eventSeq: Int64?

    init(_ c: CallDTO, brandId: BrandID) {
        (id, self.brandId, conversationId, media, state) = (c.id, brandId, c.conversationId, c.media, c.state)
        (invitedBy, inviterName, answeredBy) = (c.invitedBy, c.inviterName, c.answeredBy)
        invitedAt = StoredTime.millis(c.invitedAt)
        answeredAt = c.answeredAt.map(StoredTime.millis)
        connectedAt = c.connectedAt.map(StoredTime.millis)
        endedAt = c.endedAt.map(StoredTime.millis)
        (outcome, endReason, endedBy, durationSeconds, eventSeq) = (c.outcome, c.endReason, c.endedBy, c.durationSeconds, c.seq)
    }

    var dto: CallDTO {
        CallDTO(
            id: id, conversationId: conversationId, media: media, state: state, version: 0, invitedBy: invitedBy,
            inviterName: inviterName, answeredBy: answeredBy, invitedAt: StoredTime.date(invitedAt),
            answeredAt: answeredAt.map(StoredTime.date), connectedAt: connectedAt.map(StoredTime.date),
            endedAt: endedAt.map(StoredTime.date), outcome: outcome, endReason: endReason, endedBy: endedBy,
            durationSeconds: durationSeconds, seq: eventSeq)
    }
}
