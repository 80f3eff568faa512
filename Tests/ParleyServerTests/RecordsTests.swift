import Foundation
import ParleyAPI
import ParleyServer
import Testing

/// Records on a moved clock: retention deletes exactly what is older than the cut-off (rows and
/// files) and nothing under a legal hold; holds; a customer's data exported and erased; how far
/// back customers see their conversations.
@Suite("Records and retention")
struct RecordsTests {
    static func login(_ server: TestServer, _ brand: BrandScenario) async throws -> String {
        try await server.post("/v1/auth/login", json: LoginRequest(email: brand.admin.email, password: brand.adminPassword))
            .decode(AgentSessionResponse.self).token
    }

    static func mediaDirectories(_ server: TestServer, brand: BrandID, message: MessageID) async throws -> [String] {
        var found: [String] = []
        for prefix in ["voice", "quarantine/voice", "files"] where try await !server.services.blobs.list(prefix: "\(prefix)/\(brand)/\(message)").isEmpty {
            found.append(prefix)
        }
        return found
    }

    @Test("the retention job deletes what is older than the cut-off, rows and files, and nothing held; the audit log says what went")
    func retention() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock, configure: { $0.rateConsumerSessions = 0; $0.consumerSessionTTL = 400 * 86_400 }) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(.patch, "/v1/records", token: acme.adminToken, json: UpdateRecordsRequest(retentionMonths: 1))
            let note = try AudioFixtures.files().data("note.webm")
            let photo = try ImageFixtures.files().data("photo.jpg")

            // Day 0: an old conversation with a voice note and a photo; one held; one whose customer is
            // held; one that goes on (its first message is old, its later one is not).
            let (oldToken, _) = try await acme.consumer(name: "Old")
            let old = try await acme.send("An old question", as: oldToken).conversation.id
            let voice = try await VoiceTests.upload(server, note, token: oldToken, conversationId: old).decode(SendMessageResponse.self).message
            _ = try await VoiceTests.processed(server, voice, token: acme.adminToken)
            let image = try await AttachmentTests.upload(server, photo, token: oldToken, name: "receipt.jpg", conversationId: old)
                .decode(SendMessageResponse.self).message
            _ = try await server.post("/v1/conversations/\(old)/resolve", token: acme.adminToken)
            #expect(try await Self.mediaDirectories(server, brand: acme.brand.id, message: voice.id) == ["voice"])
            #expect(try await Self.mediaDirectories(server, brand: acme.brand.id, message: image.id) == ["files"])
            let (heldToken, _) = try await acme.consumer(name: "Held conversation")
            let held = try await acme.send("Keep this one", as: heldToken).conversation.id
            let (customerToken, customer) = try await acme.consumer(name: "Held customer")
            let customerConversation = try await acme.send("Keep me too", as: customerToken).conversation.id
            let (longToken, _) = try await acme.consumer(name: "Long")
            let long = try await acme.send("First, long ago", as: longToken).conversation.id
            for request in [CreateLegalHoldRequest(conversationId: held, reason: "Dispute 2026-114"), CreateLegalHoldRequest(consumerId: customer.id, reason: "Court order")] {
                #expect(try await server.post("/v1/legal-holds", token: acme.adminToken, json: request).status == .created)
            }

            // The cut-off is one month back. The job runs by itself whenever its day comes (the clock
            // moves in steps that never put day 0 out of the period until everything is written):
            // 20 days later the long conversation goes on and a new one begins; 12 days and a minute
            // after that, day 0 is older than a month and day 20 is not.
            clock.advance(by: .seconds(20 * 86_400))
            try await acme.send("Still going", as: longToken)
            let (recentToken, _) = try await acme.consumer(name: "Recent")
            let recent = try await acme.send("Just inside the period", as: recentToken).conversation.id
            // The run that day 20 made due ends before the clock moves on: a run that started on day 20
            // and finished after the next move came back a day after day 32, not after day 20, and the
            // test waited for a run that was not due (CI, on PostgreSQL, under load).
            try await server.jobsSettled()
            clock.advance(by: .seconds(12 * 86_400 + 60))

            // The job runs on its own once its day has come.
            let admin = try await Self.login(server, acme)
            let purges = try await LifecycleTests.eventually("the retention run", {
                try await server.get("/v1/purges", token: admin).decode(ListResponse<PurgeDTO>.self).items
            }) { !$0.isEmpty }
            let purge = try #require(purges.first)
            #expect(purge.kind == .retention && purge.actor == "retention")
            #expect(purge.conversations == 1)
            #expect(purge.messages == 4)  // the old conversation's three and the long one's first
            #expect(purge.voiceNotes == 1 && purge.attachments == 1)
            #expect(purge.files >= 3)  // the note's original and renditions, the photo and its thumbnail
            #expect(purge.cutoff == Calendar(identifier: .gregorian).date(byAdding: .month, value: -1, to: purge.startedAt))

            #expect(try await server.get("/v1/conversations/\(old)", token: admin).status == .notFound)
            #expect(try await Self.mediaDirectories(server, brand: acme.brand.id, message: voice.id).isEmpty)
            #expect(try await Self.mediaDirectories(server, brand: acme.brand.id, message: image.id).isEmpty)
            for kept in [held, customerConversation, recent] {
                #expect(try await LifecycleTests.messages(server, admin, kept).count == 1)
            }
            #expect(try await LifecycleTests.messages(server, admin, long).map(\.text) == ["Still going"])
            // Nothing more goes on the next run; the log keeps one entry.
            _ = try await server.services.records.purgeExpired(brandId: acme.brand.id)
            #expect(try await server.get("/v1/purges", token: admin).decode(ListResponse<PurgeDTO>.self).items.count == 1)
        }
    }

    @Test("legal holds: on a conversation or a customer, with a reason; admins only; another brand's ids are not found")
    func holds() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer()
            let id = try await acme.send("Hello", as: token).conversation.id
            let bad: [CreateLegalHoldRequest] = [
                CreateLegalHoldRequest(reason: "Nothing named"), CreateLegalHoldRequest(conversationId: id, consumerId: consumer.id, reason: "Both"),
                CreateLegalHoldRequest(conversationId: id, reason: "  "),
            ]
            for request in bad {
                #expect(try await server.post("/v1/legal-holds", token: acme.adminToken, json: request).status == .badRequest)
            }
            let (managerToken, _) = try await acme.agent(role: .manager)
            #expect(try await server.post("/v1/legal-holds", token: managerToken, json: CreateLegalHoldRequest(conversationId: id, reason: "x")).status == .forbidden)
            let globex = try await BrandScenario.make(server, name: "Globex")
            #expect(try await server.post("/v1/legal-holds", token: globex.adminToken, json: CreateLegalHoldRequest(conversationId: id, reason: "x")).status == .notFound)
            #expect(try await server.post("/v1/legal-holds", token: globex.adminToken, json: CreateLegalHoldRequest(consumerId: consumer.id, reason: "x")).status == .notFound)

            let hold = try await server.post("/v1/legal-holds", token: acme.adminToken, json: CreateLegalHoldRequest(conversationId: id, reason: "Chargeback"))
                .decode(LegalHoldDTO.self)
            #expect(try await server.get("/v1/legal-holds", token: managerToken).decode(ListResponse<LegalHoldDTO>.self).items == [hold])
            #expect(try await server.get("/v1/legal-holds", token: globex.adminToken).decode(ListResponse<LegalHoldDTO>.self).items.isEmpty)
            #expect(try await server.request(.delete, "/v1/legal-holds/\(hold.id)", token: globex.adminToken).status == .notFound)
            #expect(try await server.request(.delete, "/v1/legal-holds/\(hold.id)", token: acme.adminToken).status == .noContent)
            #expect(try await server.request(.delete, "/v1/legal-holds/\(hold.id)", token: acme.adminToken).status == .notFound)
        }
    }

    @Test("a customer's data: exported whole, erased on request (refused while held), their session ended, the log keeps counts only")
    func exportAndErase() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer(name: "Erin Example")
            let first = try await acme.send("My address is 1 Main St", as: token).conversation.id
            try await acme.reply("Thanks, noted.", in: first, as: acme.adminToken)
            _ = try await server.post("/v1/conversations/\(first)/resolve", token: acme.adminToken)
            let photo = try ImageFixtures.files().data("photo.jpg")
            let image = try await AttachmentTests.upload(server, photo, token: token, name: "id-card.jpg").decode(SendMessageResponse.self).message
            _ = try await server.post(
                "/v1/consumer/activity", token: token,
                json: ReportActivityRequest(events: [ActivityEventInput(clientEventId: "e1", name: "screen_view", properties: ["screen": .string("checkout")], occurredAt: Date())]))

            let exported = try await server.get("/v1/consumers/\(consumer.id)/export", token: acme.adminToken)
            #expect(exported.status == .ok)
            #expect(exported.headers[.contentDisposition] == "attachment; filename=\"customer-\(consumer.id).json\"")
            let export = try exported.decode(ConsumerExportDTO.self)
            #expect(export.consumer.displayName == "Erin Example")
            #expect(export.conversations.count == 2)
            #expect(Set(export.messages.map(\.text)) == ["My address is 1 Main St", "Thanks, noted.", "[image]"])
            #expect(export.activity.map(\.name) == ["screen_view"])
            let (agentToken, _) = try await acme.agent(role: .manager)
            #expect(try await server.get("/v1/consumers/\(consumer.id)/export", token: agentToken).status == .forbidden)
            #expect(try await server.request(.delete, "/v1/consumers/\(consumer.id)", token: agentToken).status == .forbidden)

            // Held: refused, nothing changes.
            let hold = try await server.post("/v1/legal-holds", token: acme.adminToken, json: CreateLegalHoldRequest(conversationId: first, reason: "Complaint"))
                .decode(LegalHoldDTO.self)
            let refused = try await server.request(.delete, "/v1/consumers/\(consumer.id)", token: acme.adminToken)
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "legal_hold")
            #expect(try await server.get("/v1/consumers/\(consumer.id)", token: acme.adminToken).status == .ok)
            _ = try await server.request(.delete, "/v1/legal-holds/\(hold.id)", token: acme.adminToken)

            let socket = try await RealtimeProbe.connect(port: server.port, token: token)
            let erased = try await server.request(.delete, "/v1/consumers/\(consumer.id)", token: acme.adminToken)
            #expect(erased.status == .ok, "\(erased.text)")
            let purge = try erased.decode(PurgeDTO.self)
            #expect(purge.kind == .erasure && purge.subject == consumer.id.rawValue && purge.actor == acme.admin.id.rawValue)
            #expect(purge.conversations == 2 && purge.messages == 3 && purge.attachments == 1 && purge.files >= 1)
            #expect(try await server.get("/v1/consumers/\(consumer.id)", token: acme.adminToken).status == .notFound)
            #expect(try await server.get("/v1/conversations/\(first)", token: acme.adminToken).status == .notFound)
            #expect(try await Self.mediaDirectories(server, brand: acme.brand.id, message: image.id).isEmpty)
            #expect(try await server.get("/v1/consumer/conversations", token: token).status == .unauthorized)
            #expect(try await socket.closedByServer() != nil)
            let log = try await server.get("/v1/purges", token: acme.adminToken)
            #expect(!log.text.contains("Erin") && !log.text.contains("Main St"))
            #expect(try log.decode(ListResponse<PurgeDTO>.self).items.first?.id == purge.id)
            #expect(try await server.request(.delete, "/v1/consumers/\(consumer.id)", token: acme.adminToken).status == .notFound)
        }
    }

    @Test("customers see their conversations as far back as the brand says, in the states it shows, a page at a time")
    func history() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock, configure: { $0.consumerSessionTTL = 400 * 86_400 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Hana")
            let ancient = try await acme.send("Two months ago", as: token).conversation.id
            _ = try await server.post("/v1/conversations/\(ancient)/resolve", token: acme.adminToken)
            clock.advance(by: .seconds(62 * 86_400))
            let admin = try await Self.login(server, acme)
            var closed: [ConversationID] = []
            for index in 0..<3 {
                let id = try await acme.send("Question \(index)", as: token).conversation.id
                _ = try await server.post("/v1/conversations/\(id)/resolve", token: admin)
                closed.append(id)
                clock.advance(by: .seconds(60))
            }
            let current = try await acme.send("Open now", as: token).conversation.id
            func history(_ query: String = "") async throws -> Page<ConversationDTO> {
                try await server.get("/v1/consumer/conversations\(query)", token: token).decode()
            }
            #expect(try await history().items.map(\.id) == [current] + closed.reversed() + [ancient])
            _ = try await server.request(.patch, "/v1/records", token: admin, json: UpdateRecordsRequest(historyMonths: 1))
            #expect(try await history().items.map(\.id) == [current] + closed.reversed())
            let first = try await history("?limit=2")
            #expect(first.items.map(\.id) == [current, closed[2]])
            let second = try await history("?limit=2&cursor=\(try #require(first.nextCursor))")
            #expect(second.items.map(\.id) == [closed[1], closed[0]])
            _ = try await server.request(.patch, "/v1/records", token: admin, json: UpdateRecordsRequest(historyStates: [.open, .reopened]))
            #expect(try await history().items.map(\.id) == [current])
            // Settings are checked; managers read them, only admins change them.
            for request in [UpdateRecordsRequest(retentionMonths: 0), UpdateRecordsRequest(historyMonths: 121), UpdateRecordsRequest(historyStates: [])] {
                #expect(try await server.request(.patch, "/v1/records", token: admin, json: request).status == .badRequest)
            }
            let manager = try await server.post(
                "/v1/agents", token: admin,
                json: CreateAgentRequest(email: "m@acme.test", name: "Manager", password: "a long password", role: .manager, permissions: []))
            #expect(manager.status == .created)
            let managerToken = try await server.post("/v1/auth/login", json: LoginRequest(email: "m@acme.test", password: "a long password"))
                .decode(AgentSessionResponse.self).token
            #expect(try await server.get("/v1/records", token: managerToken).decode(RecordsSettingsDTO.self).historyMonths == 1)
            #expect(try await server.request(.patch, "/v1/records", token: managerToken, json: UpdateRecordsRequest(historyMonths: 3)).status == .forbidden)
        }
    }
}
