import Foundation
import ParleyMedia
import Testing

/// What every `BlobStore` must do, whatever it stores on: the services depend on nothing else.
/// `LocalBlobStore` runs it here; each other store runs the same `check` on a real server.
@Suite("Blob store contract")
struct BlobStoreContractTests {
    /// The contract, on an empty store.
    static func check(_ store: any BlobStore) async throws {
        let key = "voice/brd_1/msg_1/original.webm"
        #expect(try await store.get(key: key) == nil)
        #expect(try await store.size(key: key) == nil)
        try await store.put(Data("hello world".utf8), key: key)
        #expect(try await store.get(key: key) == Data("hello world".utf8))
        #expect(try await store.size(key: key) == 11)
        #expect(try await store.read(key: key, range: 6..<11) == Data("world".utf8))
        // A second put replaces the blob whole.
        try await store.put(Data("bye".utf8), key: key)
        #expect(try await store.get(key: key) == Data("bye".utf8))

        // A finished scratch file moves in, and is gone from scratch afterwards.
        let scratch = store.scratchFile(".ogg")
        try FileManager.default.createDirectory(at: scratch.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(repeating: 7, count: 70_000).write(to: scratch)
        try await store.putFile(scratch, key: "voice/brd_1/msg_1/voice.ogg")
        #expect(!FileManager.default.fileExists(atPath: scratch.path))
        #expect(try await store.size(key: "voice/brd_1/msg_1/voice.ogg") == 70_000)
        // Tools read a local file with the blob's bytes.
        let read = try await store.withLocalFile(key: "voice/brd_1/msg_1/voice.ogg") { file in try Data(contentsOf: file) }
        #expect(read == Data(repeating: 7, count: 70_000))

        // Listing by prefix: only under it (not a sibling whose name starts the same).
        try await store.put(Data("a".utf8), key: "files/brd_1/msg_2/file")
        try await store.put(Data("b".utf8), key: "files/brd_1/msg_22/file")
        let listed = try await store.list(prefix: "voice/brd_1")
        #expect(listed.map(\.key) == ["voice/brd_1/msg_1/original.webm", "voice/brd_1/msg_1/voice.ogg"])
        #expect(listed.map(\.bytes) == [3, 70_000])
        #expect(listed.allSatisfy { abs($0.modified.timeIntervalSinceNow) < 600 })
        #expect(try await store.list(prefix: "files/brd_1/msg_2").map(\.key) == ["files/brd_1/msg_2/file"])
        #expect(try await store.list(prefix: "nothing/here").isEmpty)

        // Quarantine: a move; a missing source is not an error.
        try await store.move(key: key, to: "quarantine/voice/brd_1/msg_1/original.webm")
        #expect(try await store.get(key: key) == nil)
        #expect(try await store.get(key: "quarantine/voice/brd_1/msg_1/original.webm") == Data("bye".utf8))
        try await store.move(key: key, to: "quarantine/voice/brd_1/msg_1/other")

        // A message's media goes at once, and nobody else's.
        #expect(try await store.removeMessageMedia(brandId: "brd_1", messageId: "msg_1") == 2)
        #expect(try await store.list(prefix: "voice/brd_1").isEmpty)
        #expect(try await store.list(prefix: "quarantine/voice/brd_1").isEmpty)
        #expect(try await store.deletePrefix("files/brd_1/msg_2") == 1)
        #expect(try await store.get(key: "files/brd_1/msg_22/file") == Data("b".utf8))
        try await store.delete(key: "files/brd_1/msg_22/file")
        try await store.delete(key: "files/brd_1/msg_22/file")
        #expect(try await store.get(key: "files/brd_1/msg_22/file") == nil)
    }

    @Test("local disk keeps the contract")
    func local() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try await Self.check(try LocalBlobStore(root: root))
    }
}
