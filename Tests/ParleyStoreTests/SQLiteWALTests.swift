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
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("store.sqlite").path
        // 256 frames of 4 KB pages: a WAL of about 1 MB before a checkpoint holds the writes back.
        // No background rounds: the writer whose commit is the 400th since the last round runs the
        // next, while the others go on writing (the server's rounds run every 250 ms on a thread of
        // their own). Counting all writers' commits keeps the rounds even however the tasks are scheduled.
        let client = try await SQLiteDatabaseClient.open(
            path: path, checkpoints: .init(interval: nil, restartFrames: 256), logger: Logger(label: "test"))
        try await client.write { db in
            try await db.raw("CREATE TABLE notes (id TEXT PRIMARY KEY, body BLOB NOT NULL)").run()
        }
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
}
