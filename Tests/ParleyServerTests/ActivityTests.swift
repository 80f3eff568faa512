import Foundation
import ParleyAPI
import ParleyServer
import Testing

/// What consumers' apps report (ParleyKit's `report`) and the brand's engagement rules.
@Suite("Activity and engagement rules")
struct ActivityTests {
    static func event(_ name: String, _ properties: [String: ActivityValue] = [:], id: String = UUID().uuidString, at date: Date = Date())
        -> ActivityEventInput
    {
        ActivityEventInput(clientEventId: id, name: name, properties: properties, occurredAt: date)
    }

    static func report(_ server: TestServer, token: String, _ events: [ActivityEventInput]) async throws -> TestServer.Reply {
        try await server.post("/v1/consumer/activity", token: token, json: ReportActivityRequest(events: events))
    }

    @Test("events are stored once per client id, agents see the newest first, the oldest beyond 200 go")
    func storedOnceNewestFirst() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer(name: "Ana")
            let start = Date().addingTimeInterval(-600)
            let batch = [
                Self.event("screen_view", ["screen": .string("checkout")], id: "e1", at: start),
                Self.event("cart_value", ["value": .number(129.9), "currency": .string("EUR")], id: "e2", at: start.addingTimeInterval(1)),
            ]
            let first = try await Self.report(server, token: token, batch).decode(ReportActivityResponse.self)
            #expect(first.accepted == 2)
            // The device did not hear the answer and sends the batch again: nothing new.
            let again = try await Self.report(server, token: token, batch).decode(ReportActivityResponse.self)
            #expect(again.accepted == 0)
            let seen = try await server.get("/v1/consumers/\(consumer.id)/activity", token: acme.adminToken)
                .decode(ListResponse<ActivityEventDTO>.self).items
            #expect(seen.map(\.name) == ["cart_value", "screen_view"])
            #expect(seen.first?.properties["value"] == .number(129.9))
            #expect(seen.last?.properties["screen"] == .string("checkout"))

            // 210 more: only the newest 200 are kept.
            for page in 0..<5 {
                let events = (0..<42).map { Self.event("tap", ["n": .number(Double(page * 42 + $0))], at: start.addingTimeInterval(Double(10 + page * 42 + $0))) }
                #expect(try await Self.report(server, token: token, events).decode(ReportActivityResponse.self).accepted == 42)
            }
            let kept = try await server.get("/v1/consumers/\(consumer.id)/activity?limit=200", token: acme.adminToken)
                .decode(ListResponse<ActivityEventDTO>.self).items
            #expect(kept.count == 200)
            #expect(kept.first?.properties["n"] == .number(209))
            #expect(!kept.contains { $0.name == "screen_view" })
        }
    }

    @Test("bad batches are refused with a stable code and store nothing; a consumer's batches are rate-limited")
    func limits() async throws {
        try await TestServer.run(clock: ManualClock(), configure: { $0.rateConsumerActivity = 3 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer()
            let cases: [([ActivityEventInput], Int, String)] = [
                ([], 400, "invalid_field"),
                ((0..<51).map { _ in Self.event("tap") }, 413, "too_many_events"),
                ([Self.event("has space")], 400, "invalid_field"),
                ([Self.event(String(repeating: "a", count: 65))], 400, "invalid_field"),
                ([Self.event("ok", Dictionary(uniqueKeysWithValues: (0..<21).map { ("k\($0)", ActivityValue.bool(true)) }))], 400, "invalid_field"),
                ([Self.event("ok", ["note": .string(String(repeating: "x", count: 257))])], 400, "invalid_field"),
                ([Self.event("ok", id: "")], 400, "missing_field"),
                ([Self.event("ok", at: Date().addingTimeInterval(-31 * 24 * 3600))], 422, "event_too_old"),
                // One bad event refuses the batch: the good one before it is not stored either.
                ([Self.event("fine"), Self.event("bad name")], 400, "invalid_field"),
            ]
            for (events, status, code) in cases {
                let reply = try await Self.report(server, token: token, events)
                #expect(reply.status.code == status, "\(events.first?.name ?? "empty"): \(reply.text)")
                #expect(try reply.error.code.rawValue == code)
            }
            // A time in a body is read as strictly as one in a query: junk after it, or a day that does not exist.
            for at in ["2026-11-24T00:00:00Zjunk", "2026-02-30T10:00:00Z"] {
                let body = #"{"events":[{"clientEventId":"e1","name":"tap","properties":{},"occurredAt":"\#(at)"}]}"#
                let reply = try await server.request(.post, "/v1/consumer/activity", token: token, raw: body)
                #expect(reply.status == .badRequest, "\(at): \(reply.text)")
                #expect(try reply.error.code == "invalid_date")
                #expect(try reply.error.field == "events[0].occurredAt")
            }
            let stored = try await server.get("/v1/consumers/\(consumer.id)/activity", token: acme.adminToken)
                .decode(ListResponse<ActivityEventDTO>.self).items
            #expect(stored.isEmpty)
            // The limit: 3 batches a minute for one consumer, then 429 with Retry-After.
            for _ in 0..<3 { #expect(try await Self.report(server, token: token, [Self.event("tap")]).status == .ok) }
            let limited = try await Self.report(server, token: token, [Self.event("tap")])
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] != nil)
            // Agents cannot report, consumers cannot read activity.
            #expect(try await Self.report(server, token: acme.adminToken, [Self.event("tap")]).status == .forbidden)
            #expect(try await server.get("/v1/consumers/\(consumer.id)/activity", token: token).status == .forbidden)
            #expect(try await server.get("/v1/consumers/\(consumer.id)/activity?limit=500", token: acme.adminToken).status == .badRequest)
        }
    }

    @Test("a message rule writes the brand's automatic message once per cool-down; a prompt rule answers the app; conditions match")
    func rulesAct() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, _) = try await acme.agent()
            let offer = try await server.post(
                "/v1/engagement-rules", token: acme.adminToken,
                json: SaveEngagementRuleRequest(
                    name: "Big carts", event: "cart_value", property: "value", comparison: .atLeast, value: "100", action: .message,
                    text: "Need a hand with your order? Reply here and an agent will help.", cooldownHours: 24))
            #expect(offer.status == .created)
            let rule = try offer.decode(EngagementRuleDTO.self)
            let prompt = try await server.post(
                "/v1/engagement-rules", token: acme.adminToken,
                json: SaveEngagementRuleRequest(
                    name: "Checkout help", event: "screen_view", property: "screen", comparison: .equals, value: "checkout", action: .prompt,
                    text: "Questions about delivery? Chat with us."))
                .decode(EngagementRuleDTO.self)
            // Agents read the rules, only admins write them.
            #expect(try await server.get("/v1/engagement-rules", token: agentToken).decode(ListResponse<EngagementRuleDTO>.self).items.count == 2)
            #expect(try await server.post("/v1/engagement-rules", token: agentToken, json: SaveEngagementRuleRequest(name: "x", event: "y", action: .prompt, text: "z")).status == .forbidden)

            let (token, consumer) = try await acme.consumer(name: "Ana")
            // Below the threshold, another screen: nothing.
            var answer = try await Self.report(server, token: token, [
                Self.event("cart_value", ["value": .number(99.99)], at: clock.now()), Self.event("screen_view", ["screen": .string("home")], at: clock.now()),
            ]).decode(ReportActivityResponse.self)
            #expect(answer.prompts.isEmpty)
            #expect(try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self).items.isEmpty)

            // Both match: the prompt comes back, the message is in a new conversation the agents see.
            answer = try await Self.report(server, token: token, [
                Self.event("cart_value", ["value": .string("129.90")], id: "big", at: clock.now()),
                Self.event("screen_view", ["screen": .string("checkout")], id: "co", at: clock.now()),
            ]).decode(ReportActivityResponse.self)
            #expect(answer.prompts == [EngagementPromptDTO(ruleId: prompt.id, text: "Questions about delivery? Chat with us.", clientEventId: "co", occurredAt: clock.now())])
            let conversations = try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self).items
            #expect(conversations.count == 1)
            let conversation = try #require(conversations.first)
            let messages = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(messages.map(\.text) == ["Need a hand with your order? Reply here and an agent will help."])
            #expect(messages.first?.senderKind == .system)
            // The conversation the brand started waits for an agent like any other.
            #expect(try await server.get("/v1/consumer/conversations/\(conversation.id)/queue", token: token).decode(QueuePositionDTO.self).position == 1)

            // Within the cool-down nothing acts again; after it, both act once more (the message in
            // the same open conversation, after the customer's answer).
            try await acme.send("Yes, is express delivery available?", as: token)
            answer = try await Self.report(server, token: token, [
                Self.event("cart_value", ["value": .number(300)], at: clock.now()), Self.event("screen_view", ["screen": .string("checkout")], at: clock.now()),
            ]).decode(ReportActivityResponse.self)
            #expect(answer.prompts.isEmpty)
            clock.advance(by: .seconds(24 * 3600 + 1))
            answer = try await Self.report(server, token: token, [
                Self.event("cart_value", ["value": .number(300)], at: clock.now()), Self.event("screen_view", ["screen": .string("checkout")], at: clock.now()),
            ]).decode(ReportActivityResponse.self)
            #expect(answer.prompts.count == 1)
            // A day later the admin signs in again (sessions last 12 hours).
            let admin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                .decode(AgentSessionResponse.self).token
            let after = try await server.get("/v1/conversations/\(conversation.id)/messages", token: admin)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(after.map(\.senderKind) == [.system, .consumer, .system])

            // A disabled rule does nothing; a resolved conversation is not reopened by a rule.
            #expect(try await server.request(.patch, "/v1/engagement-rules/\(prompt.id)", token: admin, json: SaveEngagementRuleRequest(enabled: false)).status == .ok)
            _ = try await server.post("/v1/conversations/\(conversation.id)/resolve", token: admin)
            clock.advance(by: .seconds(24 * 3600 + 1))
            answer = try await Self.report(server, token: token, [
                Self.event("cart_value", ["value": .number(300)], at: clock.now()), Self.event("screen_view", ["screen": .string("checkout")], at: clock.now()),
            ]).decode(ReportActivityResponse.self)
            #expect(answer.prompts.isEmpty)
            let now = try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self).items
            #expect(now.count == 2)
            #expect(now.first { $0.id == conversation.id }?.state == .resolved)
            _ = consumer
            let later = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                .decode(AgentSessionResponse.self).token
            #expect(try await server.request(.delete, "/v1/engagement-rules/\(rule.id)", token: later).status == .noContent)
            #expect(try await server.request(.delete, "/v1/engagement-rules/\(rule.id)", token: later).status == .notFound)
        }
    }

    @Test("rules are checked: a condition whole, numbers for at_least, text and cool-down in range, the brand's own app")
    func ruleValidation() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let cases: [(SaveEngagementRuleRequest, Int, String)] = [
                (SaveEngagementRuleRequest(event: "x", action: .prompt, text: "t"), 400, "missing_field"),
                (SaveEngagementRuleRequest(name: "n", event: "bad event", action: .prompt, text: "t"), 400, "invalid_field"),
                (SaveEngagementRuleRequest(name: "n", event: "cart", property: "value", action: .prompt, text: "t"), 400, "invalid_field"),
                (SaveEngagementRuleRequest(name: "n", event: "cart", property: "value", comparison: .atLeast, value: "lots", action: .prompt, text: "t"), 400, "invalid_field"),
                (SaveEngagementRuleRequest(name: "n", event: "cart", action: .message, text: String(repeating: "t", count: 1001)), 400, "invalid_field"),
                (SaveEngagementRuleRequest(name: "n", event: "cart", action: .message, text: "t", cooldownHours: 0), 400, "invalid_field"),
                (SaveEngagementRuleRequest(name: "n", appId: globex.app.id, event: "cart", action: .message, text: "t"), 422, "app_not_found"),
            ]
            for (request, status, code) in cases {
                let reply = try await server.post("/v1/engagement-rules", token: acme.adminToken, json: request)
                #expect(reply.status.code == status, "\(request): \(reply.text)")
                #expect(try reply.error.code.rawValue == code)
            }
            #expect(try await server.get("/v1/engagement-rules", token: acme.adminToken).decode(ListResponse<EngagementRuleDTO>.self).items.isEmpty)
            // A rule for one app acts only on that app's consumers.
            let other = try await acme.app(channel: .inApp, name: "Acme iOS")
            _ = try await server.post(
                "/v1/engagement-rules", token: acme.adminToken,
                json: SaveEngagementRuleRequest(name: "iOS only", appId: other.id, event: "opened", action: .prompt, text: "Hi from iOS"))
            let (webToken, _) = try await acme.consumer()
            let (iosToken, _) = try await acme.consumer(appId: other.id)
            #expect(try await Self.report(server, token: webToken, [Self.event("opened")]).decode(ReportActivityResponse.self).prompts.isEmpty)
            #expect(try await Self.report(server, token: iosToken, [Self.event("opened")]).decode(ReportActivityResponse.self).prompts.map(\.text) == ["Hi from iOS"])
        }
    }
}
