import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit
import Testing

@testable import ParleyStore

/// The conversations and messages rows are mapped to columns by hand (`MappedRow`, the send path's
/// cost). These tests hold the hand mapping to the Codable one the other tables use, so that a
/// column added to the struct and forgotten in the mapping fails here, and check that an update
/// writes each changed column and keeps the others.
@Suite("Row mapping")
struct RowMappingTests {
    /// A conversation with every optional column set, at millisecond times (what the table keeps).
    static func full(_ fixture: Fixture) -> ConversationDTO {
        let now = Date(timeIntervalSince1970: 1_790_000_000.123)
        var conversation = fixture.conversation(state: .resolved, updatedAt: now)
        conversation.assigneeId = fixture.agent.id
        conversation.lastSeq = 7
        conversation.lastMessagePreview = "Thanks!"
        conversation.lastMessageKind = .voice
        conversation.lastMessageAt = now
        conversation.lastConsumerMessageAt = now.addingTimeInterval(-60)
        conversation.replyWindowEndsAt = now.addingTimeInterval(86_400)
        conversation.previousConversationId = ConversationID.make()
        conversation.survey = .answered
        conversation.rating = RatingDTO(score: 4, comment: "quick", agentId: fixture.agent.id, createdAt: now)
        conversation.closeWarnedAt = now.addingTimeInterval(-30)
        conversation.firstReplyAt = now.addingTimeInterval(-50)
        conversation.firstReplyBy = fixture.agent.id
        return conversation
    }

    /// `full`'s conversation and a message in it with every column set, stored.
    static func stored(in store: Store) async throws -> (Fixture, ConversationDTO, MessageDTO) {
        let fixture = try await Fixture.make(in: store)
        let conversation = Self.full(fixture)
        var draft = fixture.message(in: conversation, seq: 7, from: .agent)
        draft.senderName = "Sam"
        draft.createdAt = Date(timeIntervalSince1970: 1_790_000_001.456)
        let message = draft
        try await store.write { repo in
            try await repo.insertConversation(conversation)
            try await repo.insertMessage(message, brandId: fixture.brand.id)
        }
        return (fixture, conversation, message)
    }

    @Test("the hand mappings name the same columns as the Codable rows, in order")
    func sameColumns() async throws {
        let fixture = Fixture(
            brand: BrandDTO(id: BrandID.make(), name: "Acme", createdAt: Date()),
            app: AppDTO(id: AppID.make(), brandId: BrandID.make(), name: "web", channel: .web, createdAt: Date()),
            agent: AgentDTO(id: AgentID.make(), brandId: BrandID.make(), email: "a@b.test", name: "A", role: .agent, permissions: [], createdAt: Date()),
            consumer: ConsumerDTO(id: ConsumerID.make(), brandId: BrandID.make(), appId: AppID.make(), externalId: nil, displayName: "V", anonymous: true, createdAt: Date()))
        let conversation = ConversationRow(Self.full(fixture))
        #expect(try RowCoding.encoder.encode(conversation).map(\.0) == ConversationRow.columns)
        var message = fixture.message(in: Self.full(fixture), seq: 3, from: .agent)
        message.senderName = "Sam"
        #expect(try RowCoding.encoder.encode(MessageRow(message, brandId: fixture.brand.id)).map(\.0) == MessageRow.columns)
    }

    @Test("rows written by hand read back the same by hand and by Codable", arguments: Backend.available)
    func roundTrip(backend: Backend) async throws {
        try await backend.withStore { store in
            let (_, conversation, message) = try await Self.stored(in: store)
            let (mapped, codable, mappedMessage, codableMessage) = try await store.database.read { db in
                let row = try #require(try await db.raw("SELECT * FROM conversations WHERE id = \(bind: conversation.id)").first())
                let messageRow = try #require(try await db.raw("SELECT * FROM messages WHERE id = \(bind: message.id)").first())
                return (
                    try ConversationRow(mapping: row).dto, try row.decode(model: ConversationRow.self, with: RowCoding.decoder).dto,
                    try MessageRow(mapping: messageRow).dto(voice: nil), try messageRow.decode(model: MessageRow.self, with: RowCoding.decoder).dto(voice: nil))
            }
            #expect(mapped == conversation)
            #expect(codable == conversation)
            #expect(mappedMessage == message)
            #expect(codableMessage == message)
        }
    }

    @Test("a row that starts with the mapped columns reads by position on SQLite, any other by name; both read the same", arguments: Backend.available)
    func positionalAndByName(backend: Backend) async throws {
        try await backend.withStore { store in
            let (fixture, conversation, message) = try await Self.stored(in: store)
            let reversed = ConversationRow.columns.reversed().joined(separator: ", ")
            let messageColumns = MessageRow.columns.joined(separator: ", ")
            let (inOrder, outOfOrder, messageRow) = try await store.database.read { db in
                (
                    try #require(try await db.raw("SELECT \(unsafeRaw: ConversationRow.selectList), 1 AS extra FROM conversations WHERE id = \(bind: conversation.id)").first()),
                    try #require(try await db.raw("SELECT \(unsafeRaw: reversed) FROM conversations WHERE id = \(bind: conversation.id)").first()),
                    try #require(try await db.raw("SELECT \(unsafeRaw: messageColumns) FROM messages WHERE id = \(bind: message.id)").first())
                )
            }
            #expect(ColumnCursor(inOrder, columns: ConversationRow.columns).isPositional == (backend == .sqlite))
            #expect(ColumnCursor(messageRow, columns: MessageRow.columns).isPositional == (backend == .sqlite))
            #expect(!ColumnCursor(outOfOrder, columns: ConversationRow.columns).isPositional)
            #expect(try inOrder.decode(ConversationRow.self).dto == conversation)
            #expect(try outOfOrder.decode(ConversationRow.self).dto == conversation)
            #expect(try messageRow.decode(MessageRow.self).dto(voice: nil) == message)
            // The send path's read: the conversation, then the brand's card masking after its columns.
            let read = try await store.write { repo in try await repo.conversationAndCardMasking(brandId: fixture.brand.id, id: conversation.id, lock: true) }
            #expect(read?.0 == conversation)
            #expect(read?.1 == BrandSettingsDTO().cardMasking)
        }
    }

    @Test("a stored value the mapping does not know is a corrupt row, read by position or by name", arguments: Backend.available)
    func unknownValueIsCorrupt(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(conversation) }
            try await store.database.write { db in try await db.raw("UPDATE conversations SET state = 'misplaced' WHERE id = \(bind: conversation.id)").run() }
            let (brandId, id) = (fixture.brand.id, conversation.id)
            // The send path's read (by position on SQLite), locked and not, and `SELECT *` (by name).
            let reads: [(String, @Sendable (any Repository) async throws -> ConversationDTO?)] = [
                ("locked", { try await $0.conversationAndCardMasking(brandId: brandId, id: id, lock: true)?.0 }),
                ("unlocked", { try await $0.conversationAndCardMasking(brandId: brandId, id: id, lock: false)?.0 }),
                ("SELECT *", { try await $0.conversation(brandId: brandId, id: id, lock: false) }),
            ]
            for (name, read) in reads {
                let error = await #expect(throws: StoreError.self, "\(name)") { try await store.write(read) }
                #expect(error?.description.contains("column state holds 'misplaced'") == true, "\(name)")
            }
        }
    }

    @Test("an update writes every changed column and leaves the others", arguments: Backend.available)
    func updateWritesChanges(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let original = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(original) }
            let later = Date(timeIntervalSince1970: 1_790_000_100.5)
            // One change at a time, from nil to a value and back, each read back whole.
            let changes: [(String, (inout ConversationDTO) -> Void)] = [
                ("state", { $0.state = .reopened }), ("assignee", { $0.assigneeId = fixture.agent.id }), ("seq", { $0.lastSeq = 12 }),
                ("preview", { $0.lastMessagePreview = "Hi" }), ("kind", { $0.lastMessageKind = .attachment }),
                ("message time", { $0.lastMessageAt = later }), ("updated", { $0.updatedAt = later }),
                ("consumer time", { $0.lastConsumerMessageAt = later }), ("window", { $0.replyWindowEndsAt = later }),
                ("survey", { $0.survey = .offered }), ("rating", { $0.rating = RatingDTO(score: 5, comment: nil, agentId: nil, createdAt: later) }),
                ("warned", { $0.closeWarnedAt = later }), ("first reply", { $0.firstReplyAt = later; $0.firstReplyBy = fixture.agent.id }),
                ("assignee cleared", { $0.assigneeId = nil }), ("preview cleared", { $0.lastMessagePreview = nil }), ("rating cleared", { $0.rating = nil }),
            ]
            var expected = original
            for (name, change) in changes {
                let before = expected
                change(&expected)
                let written = expected
                try await store.write { repo in try await repo.updateConversation(written, from: before) }
                let read = try await store.read { repo in try await repo.conversation(brandId: fixture.brand.id, id: original.id, lock: false) }
                #expect(read == written, "after changing \(name)")
            }
        }
    }
}
