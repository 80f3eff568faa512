import CParleySQLite
import Foundation
import Logging
import SQLKit
import Testing

@testable import ParleyStore

/// The VFS that gathers a commit's WAL writes into one (Sources/CParleySQLite/wal_writes.c).
@Suite("SQLite's WAL writes, gathered")
struct SQLiteWALWritesTests {
    static func counts() -> (sqlite: Int64, file: Int64, overwrites: Int64) {
        var (sqlite, file, overwrites): (Int64, Int64, Int64) = (0, 0, 0)
        parley_wal_writes_counts(&sqlite, &file, &overwrites)
        return (sqlite, file, overwrites)
    }

    static func count(_ client: SQLiteDatabaseClient) async throws -> Int? {
        try await client.read { db in try await db.raw("SELECT count(*) AS n FROM notes").first()?.decode(column: "n", as: Int.self) }
    }

    /// The database and its WAL as they are on disk now, copied while the store stays open: what a
    /// machine that lost power (or a process killed) would leave. Opening the copy recovers from the WAL.
    static func crashImage(of directory: URL) throws -> URL {
        let copy = directory.appendingPathComponent("image-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        for suffix in ["", "-wal"] {
            let from = directory.appendingPathComponent("store.sqlite" + suffix)
            if FileManager.default.fileExists(atPath: from.path) {
                try FileManager.default.copyItem(at: from, to: copy.appendingPathComponent("store.sqlite" + suffix))
            }
        }
        return copy
    }

    /// Opens a `crashImage` of `directory` (SQLite recovers it from its WAL), runs `body` on it, and
    /// closes and deletes it.
    static func recovered<T>(from directory: URL, _ body: (SQLiteDatabaseClient) async throws -> T) async throws -> T {
        let image = try crashImage(of: directory)
        defer { try? FileManager.default.removeItem(at: image) }
        let store = try await SQLiteDatabaseClient.open(
            path: image.appendingPathComponent("store.sqlite").path, checkpoints: .init(interval: nil), logger: Logger(label: "test"))
        do {
            let value = try await body(store)
            await store.close()
            return value
        } catch {
            await store.close()
            throw error
        }
    }

    @Test("a commit's frames reach the WAL file in one write; every commit is in the file, whole, when it returns, and another connection reads it at once")
    func oneWritePerCommit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-walw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await SQLiteWALTests.openNotes(directory)
        let before = Self.counts()
        for index in 1...200 {
            try await SQLiteWALTests.writeNotes(client, 1)
            #expect(try await Self.count(client) == index)
        }
        let after = Self.counts()
        // Each commit is at least two frames (the row's page and its key's), four writes asked for.
        // (Other suites' stores write through the same VFS meanwhile: the figures are the process's.)
        let asked = after.sqlite - before.sqlite
        let made = after.file - before.file
        #expect(asked >= 200 * 4)
        #expect(made * 3 <= asked, "\(made) writes reached the file for \(asked) asked")

        // What is on disk is every commit: a copy of the files now recovers all 200 rows.
        #expect(try await Self.recovered(from: directory) { try await Self.count($0) } == 200)
        await client.close()
    }

    @Test("the first commit of a store opened over a WAL that already holds frames, one page alone, is in the file when it returns")
    func firstCommitOverAnOldWAL() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-walw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await SQLiteWALTests.openNotes(directory)
        try await SQLiteWALTests.writeNotes(client, 20)
        try await client.write { db in try await db.raw("INSERT INTO notes (id, body) VALUES ('one', x'00')").run() }
        // A copy with frames in its WAL: the store opened over it appends after them, so its first
        // write is not where this process's handle last wrote.
        let image = try Self.crashImage(of: directory)
        await client.close()
        let reopened = try await SQLiteDatabaseClient.open(
            path: image.appendingPathComponent("store.sqlite").path, checkpoints: .init(interval: nil), logger: Logger(label: "test"))
        // One page: the row's leaf (its key does not change).
        try await reopened.write { db in try await db.raw("UPDATE notes SET body = x'0102' WHERE id = 'one'").run() }
        let read = try await reopened.read { db in
            try await db.raw("SELECT hex(body) AS body FROM notes WHERE id = 'one'").first()?.decode(column: "body", as: String.self)
        }
        #expect(read == "0102")
        let body = try await Self.recovered(from: image) { recovered in
            try await recovered.read { db in
                try await db.raw("SELECT hex(body) AS body FROM notes WHERE id = 'one'").first()?.decode(column: "body", as: String.self)
            }
        }
        #expect(body == "0102", "the commit's page was not in the WAL file when the commit returned")
        await reopened.close()
    }

    @Test("commits of 1 to 40 pages, whatever falls at the 64 KB edge of what is kept back (a commit frame's header last in it, its page over): each is in the file when it returns")
    func everyCommitSize() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-walw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await SQLiteWALTests.openNotes(directory)
        var written = 0
        for rows in 1...40 {
            try await client.write { db in
                for _ in 0..<rows {
                    let body = SQLBind(Data(repeating: UInt8(rows), count: 3000))
                    try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: UUID().uuidString), \(body))").run()
                }
            }
            written += rows
            let count = try await Self.recovered(from: directory) { try await Self.count($0) }
            #expect(count == written, "after the commit of \(rows) rows")
            if count != written { break }
        }
        await client.close()
    }

    /// SplitMix64: the same sequence on every run, so a failure can be replayed.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("300 transactions of random shapes (inserts, updates, deletes, a tiny page cache now and then, the store reopened now and then): after each, another connection and a copy of the files both hold exactly what was committed")
    func randomTransactions() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-walw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var client = try await SQLiteWALTests.openNotes(directory)
        var random = Seeded(state: 28)
        var expected: [String: Int] = [:]  // id -> body length
        var next = 0
        let path = directory.appendingPathComponent("store.sqlite").path
        for round in 0..<300 {
            if round > 0, round % 37 == 0 {
                // A new handle: its first write is not where the last handle's was.
                await client.close()
                client = try await SQLiteDatabaseClient.open(path: path, checkpoints: .init(interval: nil), logger: Logger(label: "test"))
            }
            if round % 23 == 0 { try await client.checkpointRound() }
            let tiny = Int.random(in: 0..<10, using: &random) == 0
            var changes: [(id: String, length: Int?)] = []
            for _ in 0..<Int.random(in: 1...30, using: &random) {
                let pick = Int.random(in: 0..<10, using: &random)
                if pick < 6 || expected.isEmpty {
                    next += 1
                    changes.append(("n\(next)", Int.random(in: 1...3500, using: &random)))
                } else if let id = expected.keys.randomElement(using: &random) {
                    changes.append((id, pick < 9 ? Int.random(in: 1...3500, using: &random) : nil))
                }
            }
            let planned = changes
            try await client.write { db in
                if tiny { try await db.raw("PRAGMA cache_size = 4").run() }
                for change in planned {
                    if let length = change.length {
                        let body = SQLBind(Data(repeating: UInt8(length % 251), count: length))
                        try await db.raw("INSERT OR REPLACE INTO notes (id, body) VALUES (\(bind: change.id), \(body))").run()
                    } else {
                        try await db.raw("DELETE FROM notes WHERE id = \(bind: change.id)").run()
                    }
                }
                if tiny { try await db.raw("PRAGMA cache_size = -16384").run() }
            }
            for change in planned { expected[change.id] = change.length }
            let want = expected.values.reduce(0, +)
            func total(_ store: SQLiteDatabaseClient) async throws -> (rows: Int, bytes: Int) {
                let row = try await store.read { db in try await db.raw("SELECT count(*) AS n, coalesce(sum(length(body)), 0) AS b FROM notes").first() }
                return (try row?.decode(column: "n", as: Int.self) ?? -1, try row?.decode(column: "b", as: Int.self) ?? -1)
            }
            let seen = try await total(client)
            #expect(seen.rows == expected.count && seen.bytes == want, "round \(round): read \(seen)")
            let kept = try await Self.recovered(from: directory) { try await total($0) }
            #expect(kept.rows == expected.count && kept.bytes == want, "round \(round): recovered \(kept)")
            if kept.rows != expected.count || seen.rows != expected.count { break }
        }
        await client.close()
    }

    @Test("a transaction larger than what is kept back, and one that rewrites frames it wrote itself (a tiny page cache spills pages mid-transaction), commit whole: read by another connection, recovered from a copy of the files, intact")
    func largeAndRewritten() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-walw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await SQLiteWALTests.openNotes(directory)
        // About 6 MB in one transaction: nearly a hundred times the 64 KB kept back.
        try await client.write { db in
            for index in 0..<2_000 {
                let body = SQLBind(Data(repeating: UInt8(index % 251), count: 3000))
                try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: String(format: "a%05d", index)), \(body))").run()
            }
        }
        #expect(try await Self.count(client) == 2_000)
        let before = Self.counts()
        // A page cache of a few pages: SQLite writes dirty pages into the WAL before the commit
        // and, when the transaction changes them again, rewrites those frames in place and then
        // their checksums (walRewriteChecksums): writes that are not appends.
        try await client.write { db in
            try await db.raw("PRAGMA cache_size = 4").run()
            for round in 0..<3 {
                for index in stride(from: 0, to: 2_000, by: 7) {
                    let body = SQLBind(Data(repeating: UInt8((index + round) % 251), count: 2900 + round))
                    try await db.raw("UPDATE notes SET body = \(body) WHERE id = \(bind: String(format: "a%05d", index))").run()
                }
                try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: "b\(round)"), \(SQLBind(Data(count: 100))))").run()
            }
            try await db.raw("PRAGMA cache_size = -2000").run()
        }
        // (Counted across the process: this is the only test that makes SQLite rewrite its own frames.)
        #expect(Self.counts().overwrites > before.overwrites, "the transaction rewrote none of its frames")
        let expected = 2_003
        #expect(try await Self.count(client) == expected)
        func changedLength(_ store: SQLiteDatabaseClient) async throws -> Int? {
            try await store.read { db in
                try await db.raw("SELECT length(body) AS n FROM notes WHERE id = 'a00007'").first()?.decode(column: "n", as: Int.self)
            }
        }
        #expect(try await changedLength(client) == 2902)

        try await Self.recovered(from: directory) { recovered in
            #expect(try await Self.count(recovered) == expected)
            let check = try await recovered.read { db in
                try await db.raw("PRAGMA integrity_check").first()?.decode(column: "integrity_check", as: String.self)
            }
            #expect(check == "ok")
            #expect(try await changedLength(recovered) == 2902)
        }
        await client.close()
    }
}
