import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import SQLKit
import Testing

@testable import ParleyStore

/// What a text message's commit writes on SQLite, b-tree by b-tree. Each table or index a message
/// changes costs at least one 4 KB page in the WAL, its checksum, and the copy into the database at
/// the next checkpoint (bench/RESULTS.md, "Pages per message"): a new index on the message path shows
/// up here before it shows up in the benchmarks.
@Suite("Pages a message writes")
struct MessagePagesTests {
    @Test("a text message writes the conversation, its brand list entry and the message with its three unique keys and time index, and nothing else")
    func messageBTrees() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-pages-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("store.sqlite").path
        let logger = Logger(label: "parley-test")
        // No checkpoints: the WAL only grows, so the frames after its size before a commit are that commit's.
        let client = try await SQLiteDatabaseClient.open(path: path, checkpoints: .init(interval: nil), logger: logger)
        let store = Store(database: client)
        try await Migrations.apply(to: client, logger: logger)
        let fixture = try await Fixture.make(in: store)
        var conversation = fixture.conversation()
        let inserted = conversation
        try await store.write { repo in try await repo.insertConversation(inserted) }

        var pages: [UInt32] = []
        for seq in Int64(1)...10 {
            let message = fixture.message(in: conversation, seq: seq, from: seq % 2 == 0 ? .agent : .consumer, text: "message \(seq)")
            var next = conversation
            next.lastSeq = seq
            next.lastMessagePreview = message.text
            next.lastMessageAt = message.createdAt
            next.updatedAt = conversation.updatedAt.addingTimeInterval(1)
            let (previous, updated) = (conversation, next)
            let before = SQLiteWALTests.walBytes(path)
            try await store.write { repo in try await repo.updateConversation(updated, from: previous, inserting: message) }
            pages += try Self.framePages(path, from: before)
            conversation = next
        }
        let names = try await client.read { db in
            try await db.raw("SELECT name, pageno FROM dbstat").all().reduce(into: [UInt32: String]()) { names, row in
                names[UInt32(try row.decode(column: "pageno", as: Int.self))] = try row.decode(column: "name", as: String.self)
            }
        }
        // Page 1 holds the file's size, written whenever a commit adds a page.
        let written = Set(pages.map { names[$0] ?? "page \($0)" }).subtracting(["sqlite_schema"])
        #expect(written == [
            "conversations", "conversations_by_brand",
            "messages", "sqlite_autoindex_messages_1", "sqlite_autoindex_messages_2", "sqlite_autoindex_messages_3", "messages_by_time",
        ])
        await store.close()
    }

    @Test("a consumer's conversations are read through the consumer's index, not by walking the brand's list until they turn up")
    func consumerConversationsPlan() async throws {
        try await Backend.sqlite.withStore { store in
            let fixture = try await Fixture.make(in: store)
            // Other consumers' conversations, newer than this consumer's one.
            let other = ConsumerDTO(
                id: ConsumerID.make(), brandId: fixture.brand.id, appId: fixture.app.id, externalId: nil, displayName: "Other",
                anonymous: true, createdAt: SystemClock().now())
            let mine = fixture.conversation(updatedAt: Date(timeIntervalSince1970: 1_000))
            try await store.write { repo in
                try await repo.insertConsumer(other)
                try await repo.insertConversation(mine)
                for index in 0..<50 {
                    var theirs = fixture.conversation(updatedAt: Date(timeIntervalSince1970: 2_000 + Double(index)))
                    theirs.consumerId = other.id
                    try await repo.insertConversation(theirs)
                }
            }
            #expect(try await store.read { repo in
                try await repo.conversations(consumerId: fixture.consumer.id, brandId: fixture.brand.id, limit: 10)
            }.map(\.id) == [mine.id])
            let plan = try await store.read { repo in
                try await (repo as! SQLRepository).db.raw(SQLQueryString("EXPLAIN QUERY PLAN " + SQLRepository.consumerConversationsText(.sqlite)))
                    .all().map { try $0.decode(column: "detail", as: String.self) }
            }
            #expect(plan.contains { $0.contains("USING INDEX conversations_by_consumer (consumer_id=?)") }, "\(plan)")
        }
    }

    /// The page numbers of the WAL's frames from byte `offset` on (SQLite's WAL format: a 32-byte
    /// header with the page size at byte 8, then frames of a 24-byte header, the page number first,
    /// and a page; big-endian).
    static func framePages(_ path: String, from offset: Int) throws -> [UInt32] {
        let wal = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        func word(_ at: Int) -> UInt32 { wal[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        let frame = 24 + Int(word(8))
        var pages: [UInt32] = []
        var at = max(offset, 32)
        while at + frame <= wal.count {
            pages.append(word(at))
            at += frame
        }
        return pages
    }
}
