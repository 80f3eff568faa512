import AsyncHTTPClient
import Foundation
import Logging
import ParleyMedia
import ParleyServer
import Testing

/// What every `BlobStore` must do, whatever it stores on: the services depend on nothing else.
/// Local disk, and an S3 store on a real SeaweedFS (`TEST_S3_ENDPOINT`, started by the test script).
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

    static let s3Endpoint = ProcessInfo.processInfo.environment["TEST_S3_ENDPOINT"]

    /// The one bucket of the test SeaweedFS (each bucket costs SeaweedFS volumes); every test has a
    /// folder of its own in it.
    static let s3Bucket = "parley-test"

    /// An S3 store in a new folder of the test bucket.
    static func s3(
        multipartThreshold: Int = 16 * 1024 * 1024, timeout: Duration = .seconds(10), endpoint: String? = nil, bucket: String = s3Bucket
    ) async throws -> (S3BlobStore, HTTPClient) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let store = try S3BlobStore(
            settings: .init(
                endpoint: endpoint ?? s3Endpoint!, bucket: bucket, prefix: "t-\(UUID().uuidString.prefix(8).lowercased())", accessKey: "parley",
                secretKey: "parley-secret",
                timeout: timeout, multipartThreshold: multipartThreshold, partSize: 5 * 1024 * 1024),
            client: client, scratch: FileManager.default.temporaryDirectory.appendingPathComponent("s3-scratch-\(UUID().uuidString)"),
            logger: Logger(label: "test-s3"))
        if endpoint == nil { try await store.ensureBucket() }
        return (store, client)
    }

    @Test("nodes that start together on a new bucket all start: a create answered 409 BucketAlreadyOwnedByYou (the bucket is there) is success",
          .enabled(if: s3Endpoint != nil, "the test script starts SeaweedFS"))
    func bucketCreatedTogether() async throws {
        // A bucket of its own (the shared one exists by now); CI once saw a cluster test's second
        // node refuse to start on that answer.
        let bucket = "parley-race-\(UUID().uuidString.prefix(8).lowercased())"
        var stores: [(S3BlobStore, HTTPClient)] = []
        for _ in 0..<6 { stores.append(try await Self.s3(endpoint: Self.s3Endpoint, bucket: bucket)) }
        let nodes = stores.map(\.0)
        await withTaskGroup(of: Void.self) { group in
            for (index, store) in nodes.enumerated() {
                group.addTask { await #expect(throws: Never.self, "node \(index)") { try await store.ensureBucket() } }
            }
        }
        // (Nothing is stored in it: the test SeaweedFS has volumes for its one shared bucket only.)
        for (_, client) in stores { try await client.shutdown() }
    }

    @Test("S3 on SeaweedFS keeps the contract; a file over the multipart threshold goes up in parts and comes back whole",
          .enabled(if: s3Endpoint != nil, "the test script starts SeaweedFS"))
    func s3() async throws {
        let (store, client) = try await Self.s3(multipartThreshold: 6 * 1024 * 1024)
        do {
            try await Self.check(store)
            // 12 MiB of varied bytes: three parts of 5, 5 and 2 MiB.
            var bytes = Data(count: 12 * 1024 * 1024)
            for index in stride(from: 0, to: bytes.count, by: 4096) { bytes[index] = UInt8(truncatingIfNeeded: index / 4096) }
            let file = store.scratchFile(".bin")
            try bytes.write(to: file)
            try await store.putFile(file, key: "files/brd_1/msg_big/file")
            #expect(try await store.size(key: "files/brd_1/msg_big/file") == bytes.count)
            #expect(try await store.read(key: "files/brd_1/msg_big/file", range: 5_242_870..<5_242_890) == bytes.subdata(in: 5_242_870..<5_242_890))
            #expect(try await store.get(key: "files/brd_1/msg_big/file") == bytes)
            #expect(try await store.deletePrefix("files/brd_1/msg_big") == 1)
            try await store.check()
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test("an S3 store that does not answer fails within its deadline as unavailable, and check says so")
    func s3Unreachable() async throws {
        // A port nothing listens on (bound and closed): refused at once, retried, then unavailable.
        let (store, client) = try await Self.s3(timeout: .seconds(1), endpoint: "http://127.0.0.1:9")
        let started = ContinuousClock.now
        await #expect(throws: BlobStoreUnavailable.self) { try await store.put(Data("x".utf8), key: "voice/brd_1/msg_1/original.webm") }
        await #expect(throws: BlobStoreUnavailable.self) { try await store.get(key: "voice/brd_1/msg_1/original.webm") }
        await #expect(throws: BlobStoreUnavailable.self) { try await store.check() }
        // Each ends at its deadline and two retries (about 3.5 s here), not at a connect timeout of
        // minutes; a loaded machine stretches that, so the bound is loose.
        #expect(ContinuousClock.now - started < .seconds(60))
        try await client.shutdown()
    }

    @Test("an S3 store that stops in the middle of an answer's body is unavailable after its deadline, not waited on for ever", .timeLimit(.minutes(1)))
    func s3StallsMidBody() async throws {
        let stalling = try StallingHTTPServer()
        defer { stalling.stop() }
        let (store, client) = try await Self.s3(timeout: .seconds(1), endpoint: "http://127.0.0.1:\(stalling.port)")
        await #expect(throws: BlobStoreUnavailable.self) { try await store.get(key: "voice/brd_1/msg_1/original.webm") }
        await #expect(throws: BlobStoreUnavailable.self) { try await store.read(key: "voice/brd_1/msg_1/original.webm", range: 0..<100) }
        // Retried like any failure to answer: each attempt got its head and half a body.
        #expect(stalling.answered.withLock { $0 } >= 2)
        try await client.shutdown()
    }
}
