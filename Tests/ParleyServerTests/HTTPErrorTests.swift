import Foundation
import HTTPTypes
import ParleyAPI
@testable import ParleyServer
import ParleyStore
import Testing

/// Bad input gets a specific 4xx with the one error shape, and changes nothing.
@Suite("HTTP errors")
struct HTTPErrorTests {
    /// Counts of every table, to show that a refused request wrote nothing.
    static func rowCounts(_ server: TestServer) async throws -> [String: Int] {
        try await server.services.store.database.read { db in
            var counts: [String: Int] = [:]
            for table in ["brands", "apps", "agents", "consumers", "sessions", "conversations", "messages", "conversation_events", "saved_replies", "activity_events", "engagement_rules", "lifecycle_settings", "automatic_messages", "legal_holds", "purges", "records_settings", "push_registrations"] {
                counts[table] = try await db.raw("SELECT COUNT(*) AS n FROM \(unsafeRaw: table)").first()?.decode(column: "n", as: Int.self)
            }
            return counts
        }
    }

    @Test("malformed bodies get a specific 400 or 413 and change nothing")
    func malformedBodies() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            try await acme.send("first", as: token)
            let before = try await Self.rowCounts(server)

            let cases: [(String, String, HTTPResponse.Status, String, String?)] = [
                ("not json", "{\"clientMessageId\": ", .badRequest, "invalid_json", nil),
                ("empty body", "", .badRequest, "invalid_json", nil),
                ("wrong type", #"{"clientMessageId": 42, "text": "hi"}"#, .badRequest, "invalid_field", "clientMessageId"),
                ("missing field", #"{"clientMessageId": "x"}"#, .badRequest, "missing_field", "text"),
                ("null field", #"{"clientMessageId": "x", "text": null}"#, .badRequest, "missing_field", "text"),
                ("bad enum", #"{"clientMessageId": "x", "text": "hi", "channel": "fax"}"#, .badRequest, "invalid_field", "channel"),
                ("array body", #"["x"]"#, .badRequest, "invalid_json", nil),
                ("invalid utf-8", "{\"clientMessageId\": \"x\", \"text\": \"\u{FFFD}\"}".replacingOccurrences(of: "\u{FFFD}", with: "\\udc00"), .badRequest, "invalid_json", nil),
                ("huge body", #"{"clientMessageId": "x", "text": ""# + String(repeating: "a", count: 70_000) + #""}"#, .contentTooLarge, "payload_too_large", nil),
                ("deeply nested", String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000), .badRequest, "invalid_json", nil),
                ("control characters", #"{"clientMessageId": "x", "text": "a\u0007b"}"#, .badRequest, "invalid_characters", "text"),
                ("too long", #"{"clientMessageId": "x", "text": ""# + String(repeating: "a", count: 2001) + #""}"#, .unprocessableContent, "message_too_long", "text"),
            ]
            for (name, body, status, code, field) in cases {
                let reply = try await server.request(.post, "/v1/consumer/messages", token: token, raw: body)
                #expect(reply.status == status, "\(name): \(reply.text)")
                let error = try reply.error
                #expect(error.code.rawValue == code, "\(name)")
                #expect(error.field == field, "\(name)")
                #expect(!error.message.isEmpty)
                #expect(reply.headers[.contentType]?.hasPrefix("application/json") == true)
            }
            let wrongType = try await server.request(
                .post, "/v1/consumer/messages", token: token, raw: "text=hi", headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(wrongType.status == .unsupportedMediaType)
            #expect(try wrongType.error.code == "unsupported_media_type")

            #expect(try await Self.rowCounts(server) == before)
        }
    }

    @Test("bad tokens are refused with their own codes")
    func badTokens() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let cases: [(String?, String)] = [
                (nil, "unauthenticated"),
                ("garbage", "invalid_token"),
                ("pst_" + String(repeating: "a", count: 52), "invalid_token"),
            ]
            for (token, code) in cases {
                let reply = try await server.get("/v1/conversations", token: token)
                #expect(reply.status == .unauthorized)
                #expect(try reply.error.code.rawValue == code)
                #expect(reply.headers[.wwwAuthenticate] == "Bearer")
            }
            // A consumer token cannot act as an agent, nor an agent token as a consumer.
            let (consumerToken, _) = try await acme.consumer()
            #expect(try await server.get("/v1/conversations", token: consumerToken).status == .forbidden)
            #expect(try await server.get("/v1/consumer/conversations", token: acme.adminToken).status == .forbidden)
        }
    }

    @Test("unknown routes and ids are 404 with the error shape")
    func notFound() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let route = try await server.get("/v1/nothing-here", token: acme.adminToken)
            #expect(route.status == .notFound)
            #expect(try route.error.code == "route_not_found")
            for path in ["/v1/conversations/cnv_doesnotexist", "/v1/conversations/msg_wrongprefix", "/v1/conversations/cnv_%2E%2E%2Fx"] {
                let reply = try await server.get(path, token: acme.adminToken)
                #expect(reply.status == .notFound, "\(path)")
                #expect(try reply.error.code == "not_found")
            }
            let traversal = try await server.get("/v1/conversations/../../etc/passwd", token: acme.adminToken)
            #expect(traversal.status == .badRequest || traversal.status == .notFound)
            #expect(!(try traversal.error.code).rawValue.isEmpty)
            let badQuery = try await server.get("/v1/conversations?limit=0", token: acme.adminToken)
            #expect(badQuery.status == .badRequest)
            #expect(try badQuery.error.field == "limit")
            let badCursor = try await server.get("/v1/conversations?cursor=zzz", token: acme.adminToken)
            #expect(try badCursor.error.code == "invalid_field")
        }
    }

    @Test("one brand never reaches another brand's data")
    func crossBrand() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server, name: "Acme")
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (acmeConsumerToken, acmeConsumer) = try await acme.consumer()
            let sent = try await acme.send("private to Acme", as: acmeConsumerToken)
            let conversationId = sent.conversation.id
            let (globexConsumerToken, _) = try await globex.consumer()
            let before = try await Self.rowCounts(server)

            // Globex's admin, with every id of Acme's:
            let agentReads = [
                "/v1/conversations/\(conversationId)", "/v1/conversations/\(conversationId)/messages",
                "/v1/conversations/\(conversationId)/events", "/v1/consumers/\(acmeConsumer.id)",
                "/v1/apps/\(acme.app.id)/keys",
            ]
            for path in agentReads {
                #expect(try await server.get(path, token: globex.adminToken).status == .notFound, "\(path)")
            }
            let agentWrites: [(String, any Encodable)] = [
                ("/v1/conversations/\(conversationId)/messages", SendMessageRequest(clientMessageId: "g1", text: "hi")),
                ("/v1/conversations/\(conversationId)/receipts", ReceiptRequest(upToSeq: 1, state: .read)),
                ("/v1/conversations/\(conversationId)/assign", AssignRequest(agentId: nil)),
                ("/v1/conversations/\(conversationId)/resolve", LoginRequest(email: "", password: "")),
                ("/v1/conversations/\(conversationId)/reopen", LoginRequest(email: "", password: "")),
                ("/v1/apps/\(acme.app.id)/keys", AddAppKeyRequest(kid: "k", algorithm: "HS256", key: String(repeating: "k", count: 40))),
            ]
            for (path, body) in agentWrites {
                #expect(try await server.post(path, token: globex.adminToken, json: body).status == .notFound, "\(path)")
            }
            #expect(try await server.request(.patch, "/v1/agents/\(acme.admin.id)", token: globex.adminToken, json: UpdateAgentRequest(name: "x")).status == .notFound)
            #expect(try await server.get("/v1/agents", token: globex.adminToken).decode(ListResponse<AgentDTO>.self).items.allSatisfy { $0.brandId == globex.brand.id })
            #expect(try await server.get("/v1/conversations", token: globex.adminToken).decode(Page<ConversationDTO>.self).items.isEmpty)

            // Globex's consumer, with Acme's conversation:
            for path in ["/v1/consumer/conversations/\(conversationId)", "/v1/consumer/conversations/\(conversationId)/messages"] {
                #expect(try await server.get(path, token: globexConsumerToken).status == .notFound)
            }
            let intrude = try await server.post(
                "/v1/consumer/messages", token: globexConsumerToken,
                json: SendMessageRequest(clientMessageId: "x1", text: "hi", conversationId: conversationId))
            #expect(intrude.status == .notFound)
            #expect(try await server.post("/v1/consumer/conversations/\(conversationId)/receipts", token: globexConsumerToken, json: ReceiptRequest(upToSeq: 1, state: .read)).status == .notFound)

            #expect(try await Self.rowCounts(server) == before)
        }
    }

    @Test("a consumer sees only their own conversations")
    func consumerIsolation() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (ana, _) = try await acme.consumer(name: "Ana")
            let (ben, _) = try await acme.consumer(name: "Ben")
            let anas = try await acme.send("Ana's question", as: ana)
            #expect(try await server.get("/v1/consumer/conversations/\(anas.conversation.id)", token: ben).status == .notFound)
            #expect(try await server.get("/v1/consumer/conversations", token: ben).decode(ListResponse<ConversationDTO>.self).items.isEmpty)
            #expect(try await server.get("/v1/consumer/conversations", token: ana).decode(ListResponse<ConversationDTO>.self).items.map(\.id) == [anas.conversation.id])
        }
    }

    @Test("responses carry security headers")
    func securityHeaders() async throws {
        try await TestServer.run { server in
            let reply = try await server.get("/health")
            #expect(reply.status == .ok)
            #expect(reply.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
            let error = try await server.get("/v1/me")
            #expect(error.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
        }
    }

    @Test("/ready: 200 with every part ok; 503 naming the part when the media store cannot be written, and while draining")
    func readiness() async throws {
        struct Readiness: Decodable { var status, database, media, bus: String; var draining: Bool }
        try await TestServer.run { server in
            let ready = try await server.get("/ready")
            #expect(ready.status == .ok)
            let body = try ready.decode(Readiness.self)
            #expect(body.status == "ready" && body.database == "ok" && body.media == "ok" && body.bus == "ok" && !body.draining)

            // The media directory's scratch space is gone (a full or unmounted disk would do the same).
            let scratch = server.dataDirectory.appendingPathComponent("media/.partial")
            try FileManager.default.removeItem(at: scratch)
            let broken = try await server.get("/ready")
            #expect(broken.status == .serviceUnavailable)
            let why = try broken.decode(Readiness.self)
            #expect(why.status == "not_ready" && why.media == "unavailable" && why.database == "ok")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            #expect(try await server.get("/ready").status == .ok)

            // SIGTERM begins the drain: the node says so until it stops; /health still answers.
            server.services.drain.startDeadline(.seconds(600), logger: .init(label: "test"))
            let draining = try await server.get("/ready")
            #expect(draining.status == .serviceUnavailable)
            #expect(try draining.decode(Readiness.self).status == "draining")
            #expect(try await server.get("/health").status == .ok)
            server.services.drain.stop()
        }
    }
}
