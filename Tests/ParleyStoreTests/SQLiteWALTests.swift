import Foundation
import Logging
import SQLKit
import Synchronization
import Testing

@testable import ParleyStore

/// The SQLite store's WAL under writes that never pause.
@Suite("SQLite's write-ahead log")
struct SQLiteWALTests {
    final class Commits: Sendable {
        let count = Atomic<Int>(0)
    }

    static func walBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int) ?? 0
    }

    @Test("under writes that never pause the WAL starts again from its beginning instead of growing with every commit, and nothing written is lost")
    func walStaysBounded() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-wal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.sqlite").path
        // 256 frames of 4 KB pages: a WAL of about 1 MB before a checkpoint holds the writes back.
        // No background rounds: the writer whose commit is the 400th since the last round runs the
        // next, while the others go on writing (the server's rounds run every 250 ms on a thread of
        // their own). Counting all writers' commits keeps the rounds even however the tasks are scheduled.
        let client = try await Self.openNotes(directory, restartFrames: 256)
        // Four writers, each committing as soon as the one before has: the writer never waits, as
        // under a steady stream of messages. Each commit appends a few pages (a random key, a 3 KB row).
        let writers = 4
        let commits = Commits()
        let perWriter = 5_000
        let largest = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<writers {
                group.addTask {
                    var largest = 0
                    for index in 0..<perWriter {
                        let id = UUID().uuidString
                        let body = SQLBind(Data(repeating: UInt8(index % 251), count: 3000))
                        try await client.write { db in
                            try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: id), \(body))").run()
                        }
                        if commits.count.add(1, ordering: .relaxed).newValue % 400 == 0 {
                            largest = max(largest, Self.walBytes(path))
                            try await client.checkpointRound()
                        }
                    }
                    return largest
                }
            }
            return try await group.reduce(0) { max($0, $1) }
        }
        let written = writers * perWriter
        // At least two pages and their headers per commit: about 160 MB went through the WAL.
        let total = written * 2 * 4120
        #expect(largest < total / 4, "the WAL reached \(largest) bytes of the \(total) written through it")
        let count = try await client.read { db in try await db.raw("SELECT count(*) AS n FROM notes").first()?.decode(column: "n", as: Int.self) }
        #expect(count == written)
        await client.close()
        // Reopened, every row is there.
        let again = try await SQLiteDatabaseClient.open(path: path, logger: Logger(label: "test"))
        #expect(try await again.read { db in try await db.raw("SELECT count(*) AS n FROM notes").first()?.decode(column: "n", as: Int.self) } == written)
        await again.close()
    }

    /// A store on a new file with a table of notes, and no background rounds (the test runs them).
    static func openNotes(_ directory: URL, restartFrames: Int = SQLiteDatabaseClient.CheckpointPolicy.frames(megabytes: 128)) async throws -> SQLiteDatabaseClient {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let client = try await SQLiteDatabaseClient.open(
            path: directory.appendingPathComponent("store.sqlite").path, checkpoints: .init(interval: nil, restartFrames: restartFrames),
            logger: Logger(label: "test"))
        try await client.write { db in
            try await db.raw("CREATE TABLE notes (id TEXT PRIMARY KEY, body BLOB NOT NULL)").run()
        }
        return client
    }

    /// Writes `count` notes of 3 KB, each in its own transaction (a page and an index page or more each).
    static func writeNotes(_ client: SQLiteDatabaseClient, _ count: Int) async throws {
        for index in 0..<count {
            let id = UUID().uuidString
            let body = SQLBind(Data(repeating: UInt8(index % 251), count: 3000))
            try await client.write { db in
                try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: id), \(body))").run()
            }
        }
    }

    static func restarts(_ client: SQLiteDatabaseClient) async throws -> Int? {
        try await client.read { db in try await db.raw("SELECT count FROM wal_restart WHERE id = 1").first()?.decode(column: "count", as: Int.self) }
    }

    /// The first commit into a WAL whose every frame is copied starts it again from its beginning, and
    /// SQLite syncs the WAL's new header inside that commit: a disk flush, which on a shared disk
    /// took up to half a second (bench/RESULTS.md, "An event loop waiting for the disk"). At a quiet
    /// hour the background round copies everything every 250 ms, so that commit was the next message's,
    /// on the event loop that runs it. The round starts the WAL again itself.
    @Test("a round that copies every frame starts the WAL again itself: the next write of data appends to it, and an idle round writes nothing")
    func roundStartsWALAgain() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-wal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await Self.openNotes(directory)
        try await Self.writeNotes(client, 20)
        let before = try client.walFrames()
        #expect(before.log > 20)
        try await client.checkpointRound()
        // The round copied the notes, then its own one-page write started the WAL again.
        let after = try client.walFrames()
        #expect(after.log == 1, "the WAL holds \(after.log) frames after the round (\(before.log) before it)")
        let restarts = try await Self.restarts(client)
        // The next note appends after the round's frame instead of starting the WAL (and syncing it).
        try await Self.writeNotes(client, 1)
        #expect(try client.walFrames().log > 1)
        // Rounds with nothing new to copy leave the WAL as it is.
        try await client.checkpointRound()
        let settled = try await Self.restarts(client)
        #expect(settled == (restarts ?? 0) + 1)
        try await client.checkpointRound()
        try await client.checkpointRound()
        #expect(try await Self.restarts(client) == settled)
        #expect(try client.walFrames().log == 1)
        await client.close()
    }

    @Test("a round that holds the writes back to copy the last frames starts the WAL again before it lets them go")
    func holdStartsWALAgain() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-wal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await Self.openNotes(directory, restartFrames: 16)
        try await Self.writeNotes(client, 20)
        try await client.checkpointRound()
        let after = try client.walFrames()
        #expect(after.log == 1, "the WAL holds \(after.log) frames after the hold")
        try await Self.writeNotes(client, 1)
        #expect(try client.walFrames().log > 1)
        #expect(try await client.read { db in try await db.raw("SELECT count(*) AS n FROM notes").first()?.decode(column: "n", as: Int.self) } == 21)
        await client.close()
    }

    struct Refused: Error {}

    @Test("writes that arrive together commit together, and one that fails takes back only its own rows (its savepoint), whichever way they were grouped")
    func groupCommitSavepoints() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-group-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try await Self.openNotes(directory)
        // 60 writes at once: the writer takes them in groups while it commits the one before.
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<60 {
                group.addTask {
                    do {
                        try await client.write { db in
                            try await db.raw("INSERT INTO notes (id, body) VALUES (\(bind: "note-\(index)"), \(bind: Data([1])))").run()
                            if index % 3 == 0 { throw Refused() }
                        }
                        return (index, true)
                    } catch is Refused {
                        return (index, false)
                    }
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.count == 60)
        #expect(outcomes.allSatisfy { $0.value == ($0.key % 3 != 0) })
        let stored = try await client.read { db in
            try await db.raw("SELECT id FROM notes").all().map { try $0.decode(column: "id", as: String.self) }
        }
        #expect(Set(stored) == Set((0..<60).filter { $0 % 3 != 0 }.map { "note-\($0)" }))
        // And the connection is usable after all that: no transaction or savepoint was left open.
        try await client.write { db in try await db.raw("INSERT INTO notes (id, body) VALUES ('after', x'01')").run() }
        #expect(try await SQLiteWALWritesTests.count(client) == 41)
        await client.close()
    }
}
