import Foundation
import Logging
import Synchronization
import ParleyAPI
import ParleyDomain
import ParleyStore
@testable import ParleyServer
import Testing

/// The server's background loops (the search indexer four times a second, the job runner's polls
/// twice a second) and every search look before they write: on SQLite a write transaction waits for,
/// and holds up, the one writer every message commits on, so a look that finds nothing to do must not
/// take one (issue 28: an idle server opened some six empty write transactions a second).
///
/// Each test counts the transactions of a `Store` of its own over the server's database, recorded by a
/// `RecordingDatabase`: the server's own loops keep running beside it and are not counted.
@Suite("Background work looks before it takes the writer")
struct BackgroundWritesTests {
    @Test("the search indexer and a search take no write transaction when every message is indexed")
    func searchIndexer() async throws {
        try await TestServer.run { server in
            guard !server.onPostgres else { return }  // PostgreSQL indexes as it writes: nothing to look at
            let acme = try await BrandScenario.make(server)
            let (ana, _) = try await acme.consumer(name: "Ana")
            try await acme.send("where is my parcel", as: ana)
            let recording = RecordingDatabase(wrapping: server.services.store.database)
            let mine = Store(database: recording)
            let access = mine.access { $0 as any WorkspaceStore }
            try await SearchIndexer.catchUp(access)  // indexes the message, unless the server's own loop did
            #expect(try await mine.read { repo in try await repo.searchIndexIsBehind() } == false)

            // MUT: an indexer round and a search with nothing new.
            let before = recording.writes
            for _ in 0..<5 { try await SearchIndexer.catchUp(access) }
            #expect(recording.writes == before)
            let hits = try await server.get("/v1/search?q=parcel", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self)
            #expect(hits.items.count == 1)
        }
    }

    @Test("while messages come in, the indexer's round after one that indexed goes straight to the writer")
    func searchIndexerRounds() async throws {
        // The server's own indexer would race the rounds counted below: they run on the database
        // it left, after it stopped, with the messages it wrote (and more written here).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-rounds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("parley.sqlite").path
        let written = Mutex<(SendMessageResponse, BrandID)?>(nil)
        try await TestServer.run(configure: { $0.databaseURL = "sqlite://\(path)" }) { server in
            let acme = try await BrandScenario.make(server)
            let (ana, _) = try await acme.consumer(name: "Ana")
            let sent = try await acme.send("where is my parcel", as: ana)
            written.withLock { $0 = (sent, acme.brand.id) }
        }
        guard let (sent, brandId) = written.withLock({ $0 }) else { throw TestFailure("no message was sent") }
        var logger = Logger(label: "parley-test-rounds")
        logger.logLevel = .warning
        let recording = RecordingDatabase(wrapping: try await openDatabase(.sqliteFile(path: path), logger: logger))
        let store = Store(database: recording)
        let access = store.access { $0 as any WorkspaceStore }
        var seq = sent.message.seq
        func arrives() async throws {
            seq += 1
            var message = sent.message
            message.id = MessageID.make()
            message.seq = seq
            message.clientMessageId = UUID().uuidString
            message.text = "parcel \(seq)"
            let arrived = message
            try await store.write { repo in try await repo.insertMessage(arrived, brandId: brandId) }
        }
        var rounds = SearchIndexer.Rounds()
        func round() async throws -> (indexed: Int, reads: Int, writes: Int) {
            let (reads, writes) = (recording.reads, recording.writes)
            let indexed = try await rounds.next(access)
            return (indexed, recording.reads - reads, recording.writes - writes)
        }
        do {
            // Whatever the server had not indexed yet, then a round that finds nothing.
            try await SearchIndexer.catchUp(access)
            #expect(try await round().indexed == 0)

            // MUT: a message arrives after a round that found nothing: the round looks, then indexes.
            try await arrives()
            let first = try await round()
            #expect(first.indexed == 1 && first.reads == 1 && first.writes == 1)
            // Another arrives: the round after one that indexed takes the writer without a look.
            try await arrives()
            let second = try await round()
            #expect(second.indexed == 1 && second.reads == 0 && second.writes == 1)
            // The traffic stops: one round finds nothing in the writer, the next ones only look.
            let third = try await round()
            #expect(third.indexed == 0 && third.reads == 0 && third.writes == 1)
            let fourth = try await round()
            #expect(fourth.indexed == 0 && fourth.reads == 1 && fourth.writes == 0)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    @Test("the job runner's look at the table takes no write transaction when no job is due, and claims a due one in one")
    func jobRunner() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let services = server.services
            let recording = RecordingDatabase(wrapping: services.store.database)
            let mine = Store(database: recording)
            // The runner under test lives a day ahead of the server, whose own runner (on `clock`)
            // never sees the job below come due.
            let ahead = ManualClock(start: clock.now().addingTimeInterval(86_400))
            let runner = JobRunner(
                store: mine, clock: ahead, signal: JobSignal(), handlers: [:], concurrency: 4, lease: 60,
                pollInterval: .seconds(1), metrics: services.metrics, logger: services.jobRunner.logger)
            let running = RunningJobs()
            // Whatever the brand's setup queued for later (timers) is due a day ahead: claimed here.
            var rounds = 0
            while rounds < 100, try await !runner.claim(free: 4, running: running).isEmpty { rounds += 1 }
            let base = recording.writes

            // MUT: nothing due.
            #expect(try await runner.claim(free: 4, running: running).isEmpty)
            #expect(recording.writes == base)

            // A job due in an hour of the server's time: due for the runner a day ahead.
            let due = clock.now().addingTimeInterval(3_600)
            _ = try await services.store.write { repo in
                try await repo.enqueueJob(JobRecord(
                    brandId: acme.brand.id, kind: "test.background", payload: "{}", maxAttempts: 1, runAt: due, createdAt: clock.now()))
            }
            let claimed = try await runner.claim(free: 4, running: running)
            #expect(claimed.map(\.kind) == ["test.background"])
            #expect(recording.writes == base + 1)
            // Claimed (running, leased): the next look finds nothing and writes nothing.
            #expect(try await runner.claim(free: 4, running: running).isEmpty)
            #expect(recording.writes == base + 1)
        }
    }
}
