import Foundation
import Logging
import NIOCore
import NIOPosix
import ParleyAPI
import SQLKit
import Testing

@testable import ParleyStore

/// `DirectStatement`: the message path's statements as text and values, run by SQLite as they are
/// and serialized like any SQLKit expression elsewhere.
@Suite("Direct statements")
struct DirectStatementTests {
    /// A database that only serializes, with PostgreSQL's numbered placeholders.
    struct NumberedDialect: SQLDialect {
        var name: String { "numbered" }
        var identifierQuote: any SQLExpression { SQLRaw("\"") }
        var literalStringQuote: any SQLExpression { SQLRaw("'") }
        func bindPlaceholder(at position: Int) -> any SQLExpression { SQLRaw("$\(position)") }
        func literalBoolean(_ value: Bool) -> any SQLExpression { SQLRaw(value ? "true" : "false") }
        var autoIncrementClause: any SQLExpression { SQLRaw("") }
        var supportsAutoIncrement: Bool { false }
    }

    struct Serializing: SQLDatabase {
        var logger: Logger { Logger(label: "test") }
        var eventLoop: any EventLoop { MultiThreadedEventLoopGroup.singleton.any() }
        var dialect: any SQLDialect { NumberedDialect() }
        func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
            eventLoop.makeSucceededVoidFuture()
        }
    }

    @Test("each ? becomes the next value's bind elsewhere, NULL as a literal, as RowStatements wrote it")
    func serializesLikeRowStatements() throws {
        let statement = DirectStatement("UPDATE t SET a = ?, b = ? WHERE id = ? AND n = ?", [.text("x"), .null, .text("id_1"), .integer(7)])
        let (sql, binds) = Serializing().serialize(statement)
        #expect(sql == "UPDATE t SET a = $1, b = NULL WHERE id = $2 AND n = $3")
        #expect(binds.count == 3)
        #expect(binds[0] as? String == "x")
        #expect(binds[2] as? Int64 == 7)
    }

    @Test("a message's INSERT is one text whatever its NULLs (one prepared statement), with the row's values in column order")
    func insertText() throws {
        let brandId = BrandID.make()
        let conversationId = ConversationID.make()
        var message = MessageDTO(
            id: MessageID.make(), conversationId: conversationId, seq: 1, senderKind: .consumer, senderId: "c", clientMessageId: "m1",
            kind: .text, text: "hi", deliveryState: .sent, createdAt: Date(timeIntervalSince1970: 1_790_000_000))
        let plain = RowStatements.directInsert(MessageRow(message, brandId: brandId))
        message.senderName = "Sam"
        let full = RowStatements.directInsert(MessageRow(message, brandId: brandId))
        #expect(plain.sql == full.sql)
        #expect(plain.sql.filter { $0 == "?" }.count == MessageRow.columns.count)
        #expect(full.sql.hasPrefix("INSERT INTO messages (\(MessageRow.columns.joined(separator: ", "))) VALUES (?, "))
        #expect(full.values == MessageRow(message, brandId: brandId).values)
    }

    @Test("an update names only the changed columns, then the predicate's values; nothing changed, no statement")
    func update() throws {
        let before = ConversationDTO(
            id: ConversationID.make(), brandId: BrandID.make(), appId: AppID.make(), consumerId: ConsumerID.make(), channel: .web,
            state: .open, assigneeId: nil, lastSeq: 3, lastMessagePreview: "a", lastMessageAt: nil,
            createdAt: Date(timeIntervalSince1970: 1_790_000_000), updatedAt: Date(timeIntervalSince1970: 1_790_000_000))
        var after = before
        after.lastSeq = 4
        after.lastMessagePreview = "b"
        let statement = try #require(
            RowStatements.directUpdate(ConversationRow(after), from: ConversationRow(before), where: "id = ? AND last_seq = ?", [.text(before.id.rawValue), .integer(3)]))
        #expect(statement.sql == "UPDATE conversations SET last_seq = ?, last_message_preview = ? WHERE id = ? AND last_seq = ?")
        #expect(statement.values == [.integer(4), .text("b"), .text(before.id.rawValue), .integer(3)])
        #expect(RowStatements.directUpdate(ConversationRow(before), from: ConversationRow(before), where: "id = ?", [.text("x")]) == nil)
        // The text is kept for each set of changed columns and predicate: the same shape again has
        // it (with its own values), another set or predicate its own.
        var later = after
        (later.lastSeq, later.lastMessagePreview) = (5, "c")
        let again = try #require(
            RowStatements.directUpdate(ConversationRow(later), from: ConversationRow(after), where: "id = ? AND last_seq = ?", [.text(before.id.rawValue), .integer(4)]))
        #expect(again.sql == statement.sql)
        #expect(again.values == [.integer(5), .text("c"), .text(before.id.rawValue), .integer(4)])
        var assigned = later
        assigned.assigneeId = AgentID.make()
        let other = try #require(
            RowStatements.directUpdate(ConversationRow(assigned), from: ConversationRow(after), where: "id = ?", [.text(before.id.rawValue)]))
        #expect(other.sql == "UPDATE conversations SET assignee_id = ?, last_seq = ?, last_message_preview = ? WHERE id = ?")
        let otherPredicate = try #require(
            RowStatements.directUpdate(ConversationRow(later), from: ConversationRow(after), where: "id = ?", [.text(before.id.rawValue)]))
        #expect(otherPredicate.sql == "UPDATE conversations SET last_seq = ?, last_message_preview = ? WHERE id = ?")
    }

    @Test("on SQLite a direct statement runs as it is, NULLs bound, and its rows read directly")
    func runsOnSQLite() async throws {
        let client = try await SQLiteDatabaseClient.open(path: nil, logger: Logger(label: "test"))
        try await client.write { db in
            try await db.raw("CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT, n BIGINT)").run()
            try await db.run(DirectStatement("INSERT INTO t (id, name, n) VALUES (?, ?, ?)", [.text("a"), .null, .integer(5)]))
            try await db.run(DirectStatement("INSERT INTO t (id, name, n) VALUES (?, ?, ?)", [.text("b"), .text("Bea"), .null]))
            #expect(try await db.returnsRow(DirectStatement("UPDATE t SET n = ? WHERE id = ? RETURNING id", [.integer(6), .text("a")])))
            #expect(try await !db.returnsRow(DirectStatement("UPDATE t SET n = ? WHERE id = ? RETURNING id", [.integer(6), .text("z")])))
        }
        let rows = try await client.read { db in try await db.prepared(DirectStatement("SELECT * FROM t ORDER BY id", [])).all() }
        #expect(rows.count == 2)
        #expect(try rows[0].text("id") == "a")
        #expect(try rows[0].optionalText("name") == nil)
        #expect(try rows[0].int64("n") == 6)
        #expect(try rows[1].optionalText("name") == "Bea")
        #expect(try rows[1].optionalInt64("n") == nil)
        #expect(throws: (any Error).self) { try rows[1].int64("n") }
        #expect(throws: (any Error).self) { try rows[1].text("missing") }
    }

    @Test("SQLite runs a DirectStatement as it is, alone or inside PreparedSQL; anything else is serialized")
    func directStatementsAreRecognized() {
        let statement = DirectStatement("SELECT ? AS n", [.integer(1)])
        #expect(DirectSQLiteDatabase.direct(statement)?.sql == "SELECT ? AS n")
        #expect(DirectSQLiteDatabase.direct(PreparedSQL(statement: statement))?.sql == "SELECT ? AS n")
        #expect(DirectSQLiteDatabase.direct(PreparedSQL(statement: PreparedSQL(statement: statement)))?.sql == "SELECT ? AS n")
        let raw: SQLQueryString = "SELECT \(bind: 1) AS n"
        #expect(DirectSQLiteDatabase.direct(raw) == nil)
        #expect(DirectSQLiteDatabase.direct(PreparedSQL(statement: raw)) == nil)
        #expect(DirectSQLiteDatabase.direct(SQLRaw("SELECT 1")) == nil)
    }
}
