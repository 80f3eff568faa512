import Foundation
import ParleyAPI
import ParleyDomain
import ParleyServer
import Testing

/// Conversations' lifecycle on a moved clock: automatic close with its warning, the rating question
/// in the widget and as text on WhatsApp, business hours and languages of automatic messages, and a
/// customer writing after the close.
@Suite("Lifecycle")
struct LifecycleTests {
    static func messages(_ server: TestServer, _ token: String, _ id: ConversationID) async throws -> [MessageDTO] {
        try await server.get("/v1/conversations/\(id)/messages?limit=200", token: token).decode(ListResponse<MessageDTO>.self).items
    }

    static func conversation(_ server: TestServer, _ token: String, _ id: ConversationID) async throws -> ConversationDTO {
        try await server.get("/v1/conversations/\(id)", token: token).decode(ConversationDTO.self)
    }

    /// Polls (real time, short) until `check` holds; the job runner looks at the moved clock twice a second.
    @discardableResult
    static func eventually<T: Sendable>(
        within seconds: Double = 15, _ what: String, _ read: () async throws -> T, _ check: (T) -> Bool
    ) async throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        var last = try await read()
        while !check(last) {
            guard Date() < deadline else { throw TestFailure("\(what) did not happen: \(last)") }
            try await Task.sleep(for: .milliseconds(100))
            last = try await read()
        }
        return last
    }

    static func patch(_ server: TestServer, _ brand: BrandScenario, _ request: UpdateLifecycleRequest) async throws -> LifecycleSettingsDTO {
        let reply = try await server.request(.patch, "/v1/lifecycle", token: brand.adminToken, json: request)
        guard reply.status == .ok else { throw TestFailure("lifecycle settings: \(reply.status) \(reply.text)") }
        return try reply.decode()
    }

    @Test("a quiet conversation is warned 10 minutes before and closes at the 60th minute; a customer message moves both; the survey is offered")
    func autoClose() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await Self.patch(server, acme, UpdateLifecycleRequest(autoCloseMinutes: ["web": 60], warningMinutes: 10, survey: true))
            let (token, _) = try await acme.consumer(name: "Quiet Quinn")
            let id = try await acme.send("Is my order shipped?", as: token).conversation.id
            let (agentToken, agent) = try await acme.agent()
            _ = try await server.request(.post, "/v1/conversations/\(id)/assign", token: agentToken, json: AssignRequest(agentId: agent.id))
            try await acme.reply("Let me check.", in: id, as: agentToken)

            clock.advance(by: .seconds(49 * 60 + 59))
            try await server.services.jobRunner.runDue()  // what is due has run: nothing yet
            #expect(try await Self.messages(server, agentToken, id).count == 2)

            clock.advance(by: .seconds(1))  // minute 50: the warning
            let warned = try await Self.eventually("the warning", { try await Self.messages(server, agentToken, id) }) { $0.count == 3 }
            let warning = try #require(warned.last)
            #expect(warning.senderKind == .system)
            #expect(warning.text == "Are you still there? This conversation will close in 10 minutes if we don't hear from you.")
            #expect(try await Self.conversation(server, agentToken, id).state == .open)

            // The customer answers at minute 55: the close moves to minute 115, the next warning to 105.
            clock.advance(by: .seconds(5 * 60))
            try await acme.send("Still here!", as: token)
            clock.advance(by: .seconds(49 * 60))  // minute 104
            try await server.services.jobRunner.runDue()
            #expect(try await Self.messages(server, agentToken, id).count == 4)
            clock.advance(by: .seconds(60))  // minute 105
            try await Self.eventually("the second warning", { try await Self.messages(server, agentToken, id) }) { $0.count == 5 }
            clock.advance(by: .seconds(9 * 60 + 59))  // a second before minute 115
            try await server.services.jobRunner.runDue()
            #expect(try await Self.conversation(server, agentToken, id).state == .open)
            clock.advance(by: .seconds(1))
            let closed = try await Self.eventually("the close", { try await Self.conversation(server, agentToken, id) }) { $0.state == .resolved }
            #expect(closed.survey == .offered)
            #expect(closed.rating == nil)
            let events = try await server.get("/v1/conversations/\(id)/events", token: agentToken).decode(ListResponse<ConversationEventDTO>.self).items
            let close = try #require(events.last { $0.kind == .stateChanged })
            #expect(close.state == .resolved && close.actorKind == .system && close.actorId == "lifecycle")
            // A closed web conversation gets no text of its own (the widget shows the close), and nothing more comes.
            clock.advance(by: .seconds(3 * 3600))
            try await server.services.jobRunner.runDue()
            #expect(try await Self.messages(server, agentToken, id).count == 5)
        }
    }

    @Test("turning automatic close on reaches conversations already open; a channel not named never closes")
    func settingsReachOpenConversations() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let ios = try await acme.app(channel: .inApp, name: "Acme iOS")
            let (webToken, _) = try await acme.consumer(name: "Web")
            let (appToken, _) = try await acme.consumer(name: "App", appId: ios.id)
            let web = try await acme.send("Hello from the web", as: webToken).conversation.id
            let app = try await acme.send("Hello from the app", as: appToken).conversation.id
            clock.advance(by: .seconds(3 * 3600))
            _ = try await Self.patch(server, acme, UpdateLifecycleRequest(autoCloseMinutes: ["web": 120], warningMinutes: 0))
            // Quiet for three hours already: the web conversation closes now, with no warning; the app's stays.
            try await Self.eventually("the close", { try await Self.conversation(server, acme.adminToken, web) }) { $0.state == .resolved }
            #expect(try await Self.messages(server, acme.adminToken, web).count == 1)
            #expect(try await Self.conversation(server, acme.adminToken, app).state == .open)
        }
    }

    @Test("the customer rates a closed conversation 1-5 once, with a comment; it is attached to the agent; refusals change nothing")
    func ratingInWidget() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Rita")
            let id = try await acme.send("My card was charged twice", as: token).conversation.id
            let (agentToken, agent) = try await acme.agent()
            _ = try await server.request(.post, "/v1/conversations/\(id)/assign", token: agentToken, json: AssignRequest(agentId: agent.id))
            let path = "/v1/consumer/conversations/\(id)/rating"
            // Not closed yet; then closed without a survey (the brand has it off).
            #expect(try await server.post(path, token: token, json: RateConversationRequest(score: 4)).error.code == "rating_not_requested")
            _ = try await server.post("/v1/conversations/\(id)/resolve", token: agentToken)
            #expect(try await Self.conversation(server, agentToken, id).survey == nil)
            #expect(try await server.post(path, token: token, json: RateConversationRequest(score: 4)).error.code == "rating_not_requested")

            _ = try await Self.patch(server, acme, UpdateLifecycleRequest(survey: true))
            _ = try await server.post("/v1/conversations/\(id)/reopen", token: agentToken)
            _ = try await server.post("/v1/conversations/\(id)/resolve", token: agentToken)
            #expect(try await Self.conversation(server, agentToken, id).survey == .offered)
            let agentSocket = try await RealtimeProbe.connect(port: server.port, token: agentToken)
            for (score, field) in [(0, "score"), (6, "score")] {
                let refused = try await server.post(path, token: token, json: RateConversationRequest(score: score))
                #expect(refused.status == .badRequest)
                #expect(try refused.error.field == field)
            }
            let long = try await server.post(path, token: token, json: RateConversationRequest(score: 4, comment: String(repeating: "a", count: 1001)))
            #expect(try long.error.field == "comment")
            let (strangerToken, _) = try await acme.consumer(name: "Stranger")
            #expect(try await server.post(path, token: strangerToken, json: RateConversationRequest(score: 1)).status == .notFound)

            let rated = try await server.post(path, token: token, json: RateConversationRequest(score: 4, comment: "  Quick and kind  "))
            #expect(rated.status == .ok, "\(rated.text)")
            let conversation = try rated.decode(ConversationDTO.self)
            #expect(conversation.survey == .answered)
            #expect(conversation.rating?.score == 4 && conversation.rating?.comment == "Quick and kind" && conversation.rating?.agentId == agent.id)
            let frame = try await agentSocket.next { frame in
                if case .event(let event) = frame { return event.kind == .rated }
                return false
            }
            guard case .event(let event) = frame else { throw TestFailure("not an event") }
            #expect(event.rating?.score == 4 && event.conversationId == id)
            // The same again is answered as it was; another is refused; nothing changed.
            #expect(try await server.post(path, token: token, json: RateConversationRequest(score: 4, comment: "Quick and kind")).status == .ok)
            #expect(try await server.post(path, token: token, json: RateConversationRequest(score: 1)).error.code == "already_rated")
            let stored = try await Self.conversation(server, agentToken, id)
            #expect(stored.rating?.score == 4)
            let ratedEvents = try await server.get("/v1/conversations/\(id)/events", token: agentToken).decode(ListResponse<ConversationEventDTO>.self)
                .items.filter { $0.kind == .rated }
            #expect(ratedEvents.count == 1 && ratedEvents.first?.rating?.comment == "Quick and kind" && ratedEvents.first?.rating?.agentId == agent.id)
            _ = await agentSocket.close()
        }
    }

    @Test("writing after the close starts a new conversation that links to the closed one; the closed one keeps its record")
    func writeAfterClose() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Back again")
            let first = try await acme.send("First question", as: token).conversation
            _ = try await server.post("/v1/conversations/\(first.id)/resolve", token: acme.adminToken)
            // Naming the closed conversation, or not: either way a new one, linked.
            let named = try await acme.send("One more thing", as: token, conversationId: first.id)
            #expect(named.conversation.id != first.id)
            #expect(named.conversation.previousConversationId == first.id)
            #expect(named.conversation.state == .open)
            let again = try await acme.send("And another", as: token)
            #expect(again.conversation.id == named.conversation.id)
            let old = try await Self.conversation(server, acme.adminToken, first.id)
            #expect(old.state == .resolved)
            #expect(try await Self.messages(server, acme.adminToken, first.id).map(\.text) == ["First question"])
            // An agent still reopens the old one by hand.
            #expect(try await server.post("/v1/conversations/\(first.id)/reopen", token: acme.adminToken).decode(ConversationDTO.self).state == .reopened)
        }
    }

    @Test("business hours switch the first automatic message, holidays included, in the customer's language")
    func businessHoursAndLanguages() async throws {
        // Monday 2026-11-23 10:00 in New York (15:00 UTC).
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_795_446_000))
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let weekdays = (1...5).map { OpeningHoursDTO(weekday: $0, opens: "09:00", closes: "17:00") }
            _ = try await Self.patch(
                server, acme, UpdateLifecycleRequest(timeZone: "America/New_York", businessHours: weekdays, holidays: ["2026-11-26"]))
            let welcome = try await server.request(
                .put, "/v1/automatic-messages/welcome/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: "Hi! Sam or Kim will answer soon.", enabled: true))
            #expect(welcome.status == .ok, "\(welcome.text)")
            _ = try await server.request(
                .put, "/v1/automatic-messages/outside_hours/pt", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: "Estamos fechados; respondemos amanhã."))

            func firstAnswer(_ name: String, language: String? = nil) async throws -> String {
                let reply = try await server.post(
                    "/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, displayName: name, language: language))
                let token = try reply.decode(ConsumerSessionResponse.self).token
                let id = try await acme.send("Hello", as: token).conversation.id
                // Days pass on this clock: the admin signs in again rather than outlive their session.
                let admin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                    .decode(AgentSessionResponse.self).token
                let messages = try await Self.eventually("the automatic message", { try await Self.messages(server, admin, id) }) { $0.count == 2 }
                #expect(messages[1].senderKind == .system)
                return messages[1].text
            }
            #expect(try await firstAnswer("Monday morning") == "Hi! Sam or Kim will answer soon.")
            clock.advance(by: .seconds(8 * 3600))  // 18:00
            #expect(try await firstAnswer("Monday evening") == LifecycleDefaults.outsideHours)
            #expect(try await firstAnswer("Monday evening, Portuguese", language: "pt-BR") == "Estamos fechados; respondemos amanhã.")
            clock.advance(by: .seconds(2 * 86_400 - 3 * 3600))  // Wednesday 15:00
            #expect(try await firstAnswer("Wednesday afternoon") == "Hi! Sam or Kim will answer soon.")
            clock.advance(by: .seconds(86_400))  // Thursday 15:00: Thanksgiving, a holiday
            #expect(try await firstAnswer("Thanksgiving") == LifecycleDefaults.outsideHours)

            // The list shows every kind in the languages written, Parley's English where none.
            let admin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                .decode(AgentSessionResponse.self).token
            let list = try await server.get("/v1/automatic-messages", token: admin).decode(ListResponse<AutomaticMessageDTO>.self).items
            #expect(Set(list.map(\.language)) == ["en", "pt"])
            #expect(list.first { $0.kind == .outsideHours && $0.language == "pt" }?.isDefault == false)
            #expect(list.first { $0.kind == .closed && $0.language == "en" }?.isDefault == true)
            // Deleting the Portuguese text falls back to the default language.
            #expect(try await server.request(.delete, "/v1/automatic-messages/outside_hours/pt", token: admin).status == .noContent)
            #expect(try await firstAnswer("Portuguese again", language: "pt") == LifecycleDefaults.outsideHours)
        }
    }

    @Test("agents joining and transfers are announced when the brand has them on, never counted as agents' messages")
    func announcements() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            for kind in ["agent_joined", "transferred"] {
                _ = try await server.request(.put, "/v1/automatic-messages/\(kind)/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(enabled: true))
            }
            let (token, _) = try await acme.consumer(name: "Tess")
            let id = try await acme.send("Hi", as: token).conversation.id
            let (agentToken, agent) = try await acme.agent()
            let (_, other) = try await acme.agent()
            _ = try await server.request(.post, "/v1/conversations/\(id)/assign", token: agentToken, json: AssignRequest(agentId: agent.id))
            let joined = try await Self.eventually("the join", { try await Self.messages(server, agentToken, id) }) { $0.count == 2 }
            #expect(joined[1].text == "\(agent.name) joined the conversation." && joined[1].senderKind == .system)
            _ = try await server.post("/v1/conversations/\(id)/transfer", token: acme.adminToken, json: TransferRequest(agentId: other.id, note: "Billing"))
            let moved = try await Self.eventually("the transfer", { try await Self.messages(server, agentToken, id) }) { $0.count == 3 }
            #expect(moved[2].text == "You've been passed to \(other.name). They can see everything so far.")
            #expect(moved.filter { $0.senderKind == .agent }.isEmpty)
        }
    }

    @Test("settings are checked; only admins change them; unknown automatic messages are not found")
    func validation() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let bad: [(UpdateLifecycleRequest, String)] = [
                (UpdateLifecycleRequest(autoCloseMinutes: ["fax": 60]), "autoCloseMinutes"),
                (UpdateLifecycleRequest(autoCloseMinutes: ["web": 2]), "autoCloseMinutes"),
                (UpdateLifecycleRequest(autoCloseMinutes: ["web": 30], warningMinutes: 30), "warningMinutes"),
                (UpdateLifecycleRequest(timeZone: "Mars/Olympus"), "timeZone"),
                (UpdateLifecycleRequest(businessHours: [OpeningHoursDTO(weekday: 8, opens: "09:00", closes: "17:00")]), "businessHours"),
                (UpdateLifecycleRequest(businessHours: [OpeningHoursDTO(weekday: 1, opens: "17:00", closes: "09:00")]), "businessHours"),
                (UpdateLifecycleRequest(businessHours: [OpeningHoursDTO(weekday: 1, opens: "9am", closes: "17:00")]), "businessHours"),
                (UpdateLifecycleRequest(holidays: ["2026-02-30"]), "holidays"),
                (UpdateLifecycleRequest(defaultLanguage: "english!"), "defaultLanguage"),
            ]
            for (request, field) in bad {
                let reply = try await server.request(.patch, "/v1/lifecycle", token: acme.adminToken, json: request)
                #expect(reply.status == .badRequest, "\(request)")
                #expect(try reply.error.field == field, "\(request)")
            }
            #expect(try await server.get("/v1/lifecycle", token: acme.adminToken).decode(LifecycleSettingsDTO.self) == .default)
            let (agentToken, _) = try await acme.agent(role: .manager)
            #expect(try await server.request(.patch, "/v1/lifecycle", token: agentToken, json: UpdateLifecycleRequest(survey: true)).status == .forbidden)
            #expect(try await server.request(
                .put, "/v1/automatic-messages/welcome/en", token: agentToken, json: SaveAutomaticMessageRequest(text: "Hi")).status == .forbidden)
            let unknown = try await server.request(.put, "/v1/automatic-messages/farewell/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: "Bye"))
            #expect(unknown.status == .notFound)
            #expect(try unknown.error.code == "automatic_message_not_found")
            let tooLong = try await server.request(
                .put, "/v1/automatic-messages/welcome/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: String(repeating: "x", count: 1001)))
            #expect(tooLong.status == .badRequest)
            let badLanguage = try await server.request(.put, "/v1/automatic-messages/welcome/x1", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: "Hi"))
            #expect(badLanguage.status == .badRequest)
            // A language is a hint: one that is not a tag is left out, never a refusal (issue 32).
            for (hint, kept) in [("not a language", nil), ("C", nil), ("POSIX", nil), ("pt_BR.UTF-8", "pt-BR"), ("en_US", "en-US"), ("de-DE", "de-DE"), ("", nil)] as [(String, String?)] {
                let session = try await server.post("/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, language: hint))
                #expect(session.status == .created, "\(hint): \(session.text)")
                let consumer = try session.decode(ConsumerSessionResponse.self).consumer
                #expect(try await server.get("/v1/consumers/\(consumer.id)", token: acme.adminToken).decode(ConsumerDTO.self).language == kept, "\(hint)")
            }
        }
    }
}

/// Parley's English texts, as tests expect them.
enum LifecycleDefaults {
    static let outsideHours = "Thanks for your message. We're closed right now; an agent will answer when we're back."
}

/// The close and the rating question on WhatsApp, against the local Cloud API endpoint.
@Suite("Lifecycle on WhatsApp")
struct WhatsAppLifecycleTests {
    /// Meta's documented text message, with another text and message id.
    static func customerText(_ text: String, id: String) throws -> Data {
        let fixture = String(decoding: try WhatsAppTests.fixture("text-message.json"), as: UTF8.self)
            .replacingOccurrences(of: "Does it come in another color?", with: text)
            .replacingOccurrences(of: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", with: id)
        return Data(fixture.utf8)
    }

    static func sentTexts(_ fake: FakeWhatsApp) -> [String] {
        fake.sent.compactMap { ($0["text"] as? [String: Any])?["body"] as? String }
    }

    @Test("closing sends the closed line and the rating question; \"4 great\" rates it, is logged there and thanked; the next text opens a new conversation")
    func ratingByText() async throws {
        try await WhatsAppDeliveryTests.run { server, acme, app, fake in
            _ = try await LifecycleTests.patch(server, acme, UpdateLifecycleRequest(survey: true))
            let conversation = try await WhatsAppDeliveryTests.customerWrote(server, acme, app)
            let (agentToken, agent) = try await acme.agent()
            _ = try await server.request(.post, "/v1/conversations/\(conversation.id)/assign", token: agentToken, json: AssignRequest(agentId: agent.id))
            _ = try await server.post("/v1/conversations/\(conversation.id)/resolve", token: agentToken)
            try await WhatsAppDeliveryTests.messages(server, agentToken, in: conversation.id) { messages in
                messages.count == 3 && messages.dropFirst().allSatisfy { $0.channelDelivery?.state == .sent }
            }
            #expect(Self.sentTexts(fake) == [LifecycleRules.defaultMessage(.closed).text, LifecycleRules.defaultMessage(.survey).text])

            try await WhatsAppDeliveryTests.deliver(server, app, try Self.customerText("4 great service", id: "wamid.rating-1"))
            let rated = try await LifecycleTests.eventually("the rating", { try await LifecycleTests.conversation(server, agentToken, conversation.id) }) {
                $0.rating != nil
            }
            #expect(rated.rating?.score == 4 && rated.rating?.comment == "great service" && rated.rating?.agentId == agent.id)
            #expect(rated.state == .resolved && rated.survey == .answered)
            try await WhatsAppDeliveryTests.messages(server, agentToken, in: conversation.id) { messages in
                messages.count == 5 && messages[3].text == "4 great service" && messages[4].text == LifecycleRules.defaultMessage(.surveyThanks).text
                    && messages[4].channelDelivery?.state == .sent
            }
            // A rating given, the next message is the customer's next question: a new conversation.
            try await WhatsAppDeliveryTests.deliver(server, app, try Self.customerText("5", id: "wamid.next-1"))
            let all = try await LifecycleTests.eventually("the new conversation", {
                try await server.get("/v1/conversations?channel=whatsapp&state=open,resolved", token: agentToken).decode(Page<ConversationDTO>.self).items
            }) { $0.count == 2 }
            let next = try #require(all.first { $0.id != conversation.id })
            #expect(next.previousConversationId == conversation.id && next.state == .open)
        }
    }

    @Test("past the 24-hour window the question is skipped: nothing is sent, the survey says so")
    func surveySkippedOutsideWindow() async throws {
        let clock = ManualClock()
        try await WhatsAppDeliveryTests.run(clock: clock) { server, acme, app, fake in
            _ = try await LifecycleTests.patch(server, acme, UpdateLifecycleRequest(survey: true))
            let conversation = try await WhatsAppDeliveryTests.customerWrote(server, acme, app)
            clock.advance(by: .seconds(25 * 3600))
            let admin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                .decode(AgentSessionResponse.self).token
            let resolved = try await server.post("/v1/conversations/\(conversation.id)/resolve", token: admin).decode(ConversationDTO.self)
            #expect(resolved.survey == .skipped)
            try await server.services.jobRunner.runDue()
            #expect(fake.sent.isEmpty)
            #expect(try await LifecycleTests.messages(server, admin, conversation.id).count == 1)
        }
    }
}
