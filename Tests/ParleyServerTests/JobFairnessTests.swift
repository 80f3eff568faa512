import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
@testable import ParleyServer
import SQLKit
import Testing

/// One brand's backlog never delays another brand's work: the job runner shares its slots between
/// brands (issue 32: a consumer's 5,000 push registrations once held every brand's webhooks for 80 s).
@Suite("Durable jobs are shared fairly between brands")
struct JobFairnessTests {
    static let a = JobOwner.brand("brd_a")
    static let b = JobOwner.brand("brd_b")
    static let c = JobOwner.brand("brd_c")

    @Test("the share: each free slot to the waiting brand with the fewest running, never every slot to one brand")
    func share() {
        let early = Date(timeIntervalSince1970: 1_000)
        let late = Date(timeIntervalSince1970: 2_000)
        // One brand alone: all but one slot.
        #expect(JobRunner.share(free: 4, concurrency: 4, running: [:], waiting: [(Self.a, early)]).map(\.1) == [3])
        // A holds three: the last slot is B's, whoever waited longer.
        let shared = JobRunner.share(free: 1, concurrency: 4, running: [Self.a: 3], waiting: [(Self.a, early), (Self.b, late)])
        #expect(shared.map(\.0) == [Self.b] && shared.map(\.1) == [1])
        // A and C hold two each and B waits: B gets the next slot.
        #expect(JobRunner.share(free: 1, concurrency: 5, running: [Self.a: 2, Self.c: 2], waiting: [(Self.a, early), (Self.c, early), (Self.b, late)]).map(\.0) == [Self.b])
        // Four free slots, three brands: oldest first, then round and round.
        let spread = JobRunner.share(free: 4, concurrency: 4, running: [:], waiting: [(Self.c, late), (Self.a, early), (Self.b, early)])
        #expect(spread.map(\.0) == [Self.a, Self.b, Self.c] && spread.map(\.1) == [2, 1, 1])
        // One slot in all: it goes round too.
        #expect(JobRunner.share(free: 1, concurrency: 1, running: [:], waiting: [(Self.a, early)]).map(\.1) == [1])
        #expect(JobRunner.share(free: 0, concurrency: 4, running: [:], waiting: [(Self.a, early)]).isEmpty)
    }

    @Test("with 20,000 slow push jobs of brand A queued, brand B's SMS webhook message is listed at once")
    func backlogDoesNotDelayAnotherBrand() async throws {
        let (account, fcm) = try await PushTests.fcmAccount()
        fcm.state.withLock { $0.delay = .milliseconds(300) }
        do {
            try await SMSTests.run(clock: ManualClock()) {
                $0.fcmAPIURL = fcm.baseURL
                $0.fcmTokenURL = fcm.tokenURL
            } _: { server, acme, app, _ in
                // setup: brand A, its app with FCM credentials, a consumer with a device and 20,000 queued pushes.
                let flood = try await BrandScenario.make(server, name: "Flood")
                #expect(try await server.request(.put, "/v1/apps/\(flood.app.id)/push/fcm", token: flood.adminToken, json: ConnectFCMRequest(serviceAccount: account)).status == .ok)
                let (consumerToken, consumer) = try await flood.consumer(name: "Fox")
                let sent = try await flood.send("hello", as: consumerToken)
                #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .fcm, token: "fcm-" + String(repeating: "f", count: 150))).status == .ok)
                let registration = try #require(try await server.services.store.read { repo in try await repo.pushRegistrations(consumerId: consumer.id) }.first)
                let job = PushService.Job(registrationId: registration.id, announcement: .init(
                    key: "flood", brandId: flood.brand.id, consumerId: consumer.id, conversationId: sent.conversation.id, kind: .text, text: "x", badgeSeq: nil))
                let payload = String(decoding: try JSONEncoder().encode(job), as: UTF8.self)
                let now = StoredTime.millis(server.services.clock.now())
                try await server.services.store.database.write { db in
                    try await db.raw(
                        """
                        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
                        INSERT INTO jobs (brand_id, kind, lane, payload, dedupe_key, state, attempts, max_attempts, run_at, locked_until,
                            last_error, created_at, updated_at)
                        SELECT \(bind: flood.brand.id), 'push.send', NULL, \(bind: payload), NULL, 'queued', 0, 8, \(bind: now) - 20000 + i, NULL,
                            NULL, \(bind: now), \(bind: now) FROM n
                        """
                    ).run()
                }
                server.services.jobRunner.signal.wake()
                // The runner is busy with A's pushes (each takes the provider 300 ms).
                let busy = Date().addingTimeInterval(30)
                while fcm.sent.count < 4, Date() < busy { try await Task.sleep(for: .milliseconds(20)) }
                #expect(fcm.sent.count >= 4)

                // MUT: B's customer writes over SMS.
                let started = Date()
                try await SMSTests.deliver(server, app, try SMSTests.form("incoming-sms.form"))
                var listed: ConversationDTO?
                let deadline = Date().addingTimeInterval(30)  // a deadline for a loaded machine, not a measure
                while listed == nil, Date() < deadline {
                    listed = try await server.get("/v1/conversations?channel=sms", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first
                    if listed == nil { try await Task.sleep(for: .milliseconds(20)) }
                }
                let elapsed = Date().timeIntervalSince(started)

                // validate: B's message is there while nearly all of A's backlog still waits.
                #expect(listed != nil, "brand B's webhook waited behind brand A's backlog")
                let waiting = try await Self.queued(server, flood.brand.id)
                #expect(waiting > 19_900, "B's message came only after \(20_000 - waiting) of A's jobs")
                print("job fairness: brand B's SMS listed \(Int(elapsed * 1000)) ms after its webhook, with \(waiting) of brand A's 20,000 pushes waiting")
                try await server.services.store.database.write { db in try await db.raw("DELETE FROM jobs WHERE brand_id = \(bind: flood.brand.id) AND state = 'queued'").run() }
            }
        } catch {
            await fcm.stop()
            throw error
        }
        await fcm.stop()
    }

    static func queued(_ server: TestServer, _ brandId: BrandID) async throws -> Int {
        try await server.services.store.database.read { db in
            try await db.raw("SELECT COUNT(*) AS n FROM jobs WHERE brand_id = \(bind: brandId) AND state = 'queued'").first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }
}
