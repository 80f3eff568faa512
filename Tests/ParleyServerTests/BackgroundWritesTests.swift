import Foundation
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
/// Each test counts the write transactions of a `Store` of its own over the server's database: the
/// server's own loops keep running beside it and are not counted.
@Suite("Background work looks before it takes the writer")
struct BackgroundWritesTests {
    @Test("the search indexer and a search take no write transaction when every message is indexed")
    func searchIndexer() async throws {
        try await TestServer.run { server in
            guard !server.onPostgres else { return }  // PostgreSQL indexes as it writes: nothing to look at
            let acme = try await BrandScenario.make(server)
            let (ana, _) = try await acme.consumer(name: "Ana")
            try await acme.send("where is my parcel", as: ana)
            let mine = Store(database: server.services.store.database)
            let access = mine.access { $0 as any WorkspaceStore }
            try await SearchIndexer.catchUp(access)  // indexes the message, unless the server's own loop did
            #expect(try await mine.read { repo in try await repo.searchIndexIsBehind() } == false)

            // MUT: an indexer round and a search with nothing new.
            let before = mine.writeTransactions
            for _ in 0..<5 { try await SearchIndexer.catchUp(access) }
            #expect(mine.writeTransactions == before)
            let hits = try await server.get("/v1/search?q=parcel", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self)
            #expect(hits.items.count == 1)
        }
    }

    @Test("the job runner's look at the table takes no write transaction when no job is due, and claims a due one in one")
    func jobRunner() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let services = server.services
            let mine = Store(database: services.store.database)
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
            let base = mine.writeTransactions

            // MUT: nothing due.
            #expect(try await runner.claim(free: 4, running: running).isEmpty)
            #expect(mine.writeTransactions == base)

            // A job due in an hour of the server's time: due for the runner a day ahead.
            let due = clock.now().addingTimeInterval(3_600)
            _ = try await services.store.write { repo in
                try await repo.enqueueJob(JobRecord(
                    brandId: acme.brand.id, kind: "test.background", payload: "{}", maxAttempts: 1, runAt: due, createdAt: clock.now()))
            }
            let claimed = try await runner.claim(free: 4, running: running)
            #expect(claimed.map(\.kind) == ["test.background"])
            #expect(mine.writeTransactions == base + 1)
            // Claimed (running, leased): the next look finds nothing and writes nothing.
            #expect(try await runner.claim(free: 4, running: running).isEmpty)
            #expect(mine.writeTransactions == base + 1)
        }
    }
}
