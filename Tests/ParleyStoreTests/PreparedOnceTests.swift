import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import SQLiteKit
import Testing
import VaporCSQLite

@testable import ParleyStore

/// A kept statement is prepared once. SQLite prepares one again (as after a schema change) when a
/// value its plan was made for is bound anew: a `LIMIT ?`, a comparison a partial index depends on,
/// a `LIKE ?` pattern; `sqlite3_clear_bindings` counts as such a bind for every one of them, and
/// every PRAGMA is prepared again each time it runs.
@Suite struct PreparedOnceTests {
    @Test("a read with a bound LIMIT and a partial index, run again with new values, is not prepared again")
    func boundLimit() throws {
        try SQLiteHandle.withTemporary { handle in
            try handle.run("CREATE TABLE t (id INTEGER PRIMARY KEY, at INTEGER)", [SQLiteData]()) { _ in }
            try handle.run("CREATE INDEX t_at ON t (at) WHERE at IS NOT NULL", [SQLiteData]()) { _ in }
            for at in 1...20 { try handle.run("INSERT INTO t (at) VALUES (?)", [ColumnValue.integer(Int64(at))]) { _ in } }
            let sql = "SELECT id FROM t WHERE at >= ? ORDER BY at LIMIT ?"
            // The first values bound to a fresh statement are new to its plan: one more prepare.
            try handle.run(sql, [SQLiteData.integer(1), .integer(3)]) { _ in }
            let first = handle.statementStatus(SQLITE_STMTSTATUS_REPREPARE).reduce(0) { $0 + $1.value }
            #expect(first <= 1)
            for from in 1...6 {
                var ids: [Int] = []
                try handle.run(sql, [SQLiteData.integer(from * 2), .integer(3)]) { row in ids.append((try? row.decode(column: "id", as: Int.self)) ?? 0) }
                #expect(ids == [from * 2, from * 2 + 1, from * 2 + 2])
            }
            #expect(handle.statementStatus(SQLITE_STMTSTATUS_REPREPARE).reduce(0) { $0 + $1.value } == first)
            // A new LIMIT is a new plan: SQLite prepares it again, and the answer follows it.
            var count = 0
            try handle.run(sql, [SQLiteData.integer(1), .integer(5)]) { _ in count += 1 }
            #expect(count == 5)
        }
    }

    @Test("a parameter given no value this run is NULL, not the last run's value")
    func unboundIsNull() throws {
        try SQLiteHandle.withTemporary { handle in
            let sql = "SELECT ?1 IS NULL AS first, ?2 IS NULL AS second"
            var found: [(Int?, Int?)] = []
            let read = { (row: DirectSQLiteRow) in found.append(((try? row.decode(column: "first", as: Int.self)), (try? row.decode(column: "second", as: Int.self)))) }
            try handle.run(sql, [ColumnValue.text("a"), .text("b")], read)
            try handle.run(sql, [ColumnValue.text("a")], read)
            try handle.run(sql, [ColumnValue](), read)
            #expect(found.map(\.0) == [0, 0, 1])
            #expect(found.map(\.1) == [0, 1, 1])
        }
    }

    @Test("a large bound value is not kept in the statement after its run")
    func largeValueReleased() throws {
        try SQLiteHandle.withTemporary { handle in
            let sql = "SELECT length(?) AS n"
            let large = String(repeating: "x", count: 1 << 20)
            var n = 0
            try handle.run(sql, [ColumnValue.text(large)]) { row in n = (try? row.decode(column: "n", as: Int.self)) ?? 0 }
            #expect(n == 1 << 20)
            let kept = handle.statementStatus(SQLITE_STMTSTATUS_MEMUSED).first { $0.sql == sql }?.value ?? 0
            #expect(kept > 0 && kept < 64 * 1024, "\(kept) bytes kept")
        }
    }

    @Test("the search indexer, the job runner, revoked sessions and WAL rounds prepare nothing again")
    func background() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-prepared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let logger = Logger(label: "test")
        let client = try await SQLiteDatabaseClient.open(
            path: directory.appendingPathComponent("once.sqlite").path, checkpoints: .init(interval: nil), logger: logger)
        try await Migrations.apply(to: client, logger: logger)
        let store = Store(database: client)
        let fixture = try await Fixture.make(in: store)
        let conversation = fixture.conversation()
        try await store.write { repo in try await repo.insertConversation(conversation) }
        // Counted from after the first round: the migrations changed the schema, and what they
        // ran was prepared again, as it must be; a fresh statement's first values are new to its plan.
        var before: [String: Int] = [:]
        var written = conversation
        for seq in 1...5 {
            if seq == 2 { before = Dictionary(client.reprepares().map { ($0.sql, $0.count) }, uniquingKeysWith: +) }
            written = try await fixture.append("parcel \(seq)", to: written, in: store)
            #expect(try await store.write { repo in try await repo.indexForSearch(limit: 50) } == 1)
            _ = try await store.read { repo in try await repo.claimableJobOwners(now: Date(), excluding: []) }
            _ = try await store.read { repo in try await repo.sessionsRevoked(since: Date(timeIntervalSinceNow: -Double(seq)), limit: 50) }
            #expect(try await store.read { repo in try await repo.searchIndexIsBehind() } == false)
            try await client.checkpointRound()
            #expect(try client.walFrames().log >= 0)
        }
        let again = client.reprepares().filter { $0.count != before[$0.sql, default: 0] }
        #expect(again.map { "\($0.count - before[$0.sql, default: 0])× \($0.sql.prefix(80))" } == [])
        await store.close()
    }
}
