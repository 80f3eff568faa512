import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit
import Testing

@testable import ParleyStore

/// The statements every message runs are kept prepared on PostgreSQL's connections (`PreparedSQL`):
/// parsed, analysed and planned once per connection instead of on every message.
@Suite struct PreparedStatementTests {
    /// The statements this connection keeps prepared, with how often each has run.
    struct Kept: Decodable {
        var name: String
        var statement: String
        var runs: Int64
    }

    static func kept(_ store: Store) async throws -> [Kept] {
        try await store.database.read { db in
            try await db.raw(
                "SELECT name, statement, generic_plans + custom_plans AS runs FROM pg_prepared_statements ORDER BY name"
            ).all(decoding: Kept.self)
        }
    }

    @Test func messagePathStatementsStayPreparedOnTheirConnection() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await Backend.postgres.withStore(poolSize: 1) { store in
            let fixture = try await Fixture.make(in: store)
            let first = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(first) }
            var conversation = first
            for seq in Int64(1)...6 {
                let current = conversation
                let read = try #require(
                    try await store.read { repo in
                        try await repo.conversationAndCardMasking(brandId: fixture.brand.id, id: current.id, lock: false)
                    })
                #expect(read.0.id == current.id && read.0.lastSeq == seq - 1)
                let message = fixture.message(in: current, seq: seq, from: .consumer, text: "message \(seq)")
                var changed = read.0
                (changed.lastSeq, changed.lastMessagePreview, changed.updatedAt) = (seq, message.text, message.createdAt)
                let (previous, next) = (read.0, changed)
                let written = try await store.alone { repo in try await repo.appendMessage(message, to: next, from: previous) }
                #expect(written)
                conversation = next
            }
            // A stale read writes nothing, through the same prepared statement.
            let stale = fixture.message(in: conversation, seq: 3, from: .consumer)
            var stalePrevious = conversation
            stalePrevious.lastSeq = 2
            let (latest, from) = (conversation, stalePrevious)
            #expect(try await store.alone { repo in try await repo.appendMessage(stale, to: latest, from: from) } == false)

            let kept = try await Self.kept(store)
            let read = try #require(kept.first { $0.statement.contains("brand_card_masking") })
            #expect(read.runs == 6)
            #expect(read.name.hasPrefix("parley_"))
            // The first message moved last_message_at (NULL before): one UPDATE; the five after it another.
            let appends = kept.filter { $0.statement.hasPrefix("WITH updated AS (UPDATE conversations") }
            #expect(appends.map(\.runs).sorted() == [1, 6])
            let messages = try await store.read { repo in try await repo.messages(conversationId: latest.id, afterSeq: 0, limit: 10) }
            #expect(messages.map(\.seq) == [1, 2, 3, 4, 5, 6])
        }
    }

    @Test func unmarkedStatementsAreNotKept() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await Backend.postgres.withStore(poolSize: 1) { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(conversation) }
            _ = try await store.read { repo in try await repo.conversation(brandId: fixture.brand.id, id: conversation.id, lock: false) }
            #expect(try await Self.kept(store).isEmpty)
        }
    }

    /// A marked statement whose binds PostgresKit would type in a way this path does not (here a
    /// date) runs unprepared, with the same answer.
    @Test(arguments: Backend.available) func aBindOfAnotherTypeRunsUnprepared(backend: Backend) async throws {
        try await backend.withStore(poolSize: 1) { store in
            struct Answer: Decodable { var n: Int64 }
            let answer = try await store.database.read { db in
                try await db.prepared("SELECT \(bind: Int64(41)) + 1 AS n WHERE \(bind: "x") = 'x'").first(decoding: Answer.self)
            }
            #expect(answer?.n == 42)
            if backend == .postgres { #expect(try await Self.kept(store).count == 1) }
            let date = try await store.database.read { db in
                try await db.prepared("SELECT 7 AS n WHERE \(bind: Date(timeIntervalSince1970: 0)) IS NOT NULL").first(decoding: Answer.self)
            }
            #expect(date?.n == 7)
            if backend == .postgres { #expect(try await Self.kept(store).count == 1) }
        }
    }

    @Test func bindsAreTypedAsPostgresKitTypesThem() throws {
        let id = ConversationID(rawValue: "cnv_1")
        let missing: String? = nil
        let bindings = try #require(
            PostgresSession.bindings(["text", Int64(1), 2, true, 1.5, ["a", "b"], id, MessageKind.text, missing, Optional("some")]))
        #expect(bindings.count == 10)
        #expect(PostgresSession.bindings([Date()]) == nil)
        #expect(PostgresSession.bindings([Data([1])]) == nil)
    }

    /// Names are handed out in order, once per text, up to the limit; past it a new text has none
    /// (it runs unprepared) and the named ones keep theirs.
    @Test func namesAreBounded() {
        let names = PreparedStatementNames(limit: 2)
        #expect(names.name(for: "SELECT 1") == "parley_1")
        #expect(names.name(for: "SELECT 2") == "parley_2")
        #expect(names.name(for: "SELECT 1") == "parley_1")
        #expect(names.name(for: "SELECT 3") == nil)
        #expect(names.name(for: "SELECT 2") == "parley_2")
        #expect(names.count == 2)
    }
}
