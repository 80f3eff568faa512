import Foundation
import JWTKit
import HTTPTypes
import ParleyAPI
import ParleyServer
import Testing

/// Every route of the OpenAPI document that names an id, tried by another brand's admin, agent and
/// consumer against the first brand's ids, with bodies that would otherwise be valid: each answer is
/// 403 or 404, and nothing changes. Real-time frames get the same treatment.
@Suite("Cross-tenant isolation")
struct CrossTenantTests {
    struct Route: Sendable {
        var method: HTTPRequest.Method
        var template: String
    }

    static func documentedRoutesWithIds() throws -> [Route] {
        let data = try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("openapi.json"))
        let document = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let paths = document?["paths"] as? [String: [String: Any]] ?? [:]
        var routes: [Route] = []
        for (template, item) in paths where template.contains("{") {
            for method in item.keys.sorted() {
                guard let parsed = HTTPRequest.Method(method.uppercased()), ["GET", "POST", "PATCH", "PUT", "DELETE"].contains(method.uppercased())
                else { continue }
                routes.append(Route(method: parsed, template: template))
            }
        }
        return routes.sorted { ($0.template, $0.method.rawValue) < ($1.template, $1.method.rawValue) }
    }

    @Test("another brand's admin, agent and consumer get 403 or 404 on every route that names the first brand's ids")
    func everyRoute() async throws {
        let note = try AudioFixtures.files().data("note.webm")
        let routes = try Self.documentedRoutesWithIds()
        #expect(routes.count >= 20)
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server, name: "Acme")
            let (acmeConsumerToken, acmeConsumer) = try await acme.consumer(name: "Ana")
            let sent = try await acme.send("private to Acme", as: acmeConsumerToken)
            let voice = try await VoiceTests.upload(server, note, token: acmeConsumerToken, conversationId: sent.conversation.id)
                .decode(SendMessageResponse.self).message
            let (_, acmeAgent) = try await acme.agent()
            _ = try await VoiceTests.processed(server, voice, token: acme.adminToken)  // no background writes during the check

            let photo = try ImageFixtures.files().data("photo.jpg")
            let image = try await AttachmentTests.upload(server, photo, token: acmeConsumerToken, name: "private.jpg", conversationId: sent.conversation.id)
                .decode(SendMessageResponse.self).message
            let savedReply = try await server.post(
                "/v1/saved-replies", token: acme.adminToken, json: SaveReplyRequest(shortcut: "acme-only", text: "private to Acme: our refund code"))
                .decode(SavedReplyDTO.self)
            let rule = try await server.post(
                "/v1/engagement-rules", token: acme.adminToken,
                json: SaveEngagementRuleRequest(name: "Acme checkout", event: "checkout", action: .prompt, text: "private to Acme: 10% off"))
                .decode(EngagementRuleDTO.self)
            _ = try await server.post(
                "/v1/consumer/activity", token: acmeConsumerToken,
                json: ReportActivityRequest(events: [ActivityEventInput(clientEventId: "e1", name: "screen_view", properties: ["screen": .string("private to Acme")], occurredAt: Date())]))

            let team = try await server.post("/v1/teams", token: acme.adminToken, json: SaveTeamRequest(name: "Acme billing", memberIds: [acmeAgent.id]))
                .decode(TeamDTO.self)
            let hold = try await server.post(
                "/v1/legal-holds", token: acme.adminToken, json: CreateLegalHoldRequest(conversationId: sent.conversation.id, reason: "private to Acme: dispute"))
                .decode(LegalHoldDTO.self)

            _ = try await server.request(.patch, "/v1/lifecycle", token: acme.adminToken, json: UpdateLifecycleRequest(survey: true, timeZone: "Europe/Lisbon"))
            _ = try await server.request(
                .put, "/v1/automatic-messages/welcome/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(text: "private to Acme: welcome", enabled: true))

            let globex = try await BrandScenario.make(server, name: "Globex")
            let (globexAgentToken, _) = try await globex.agent(permissions: AgentPermission.allCases)
            let (globexConsumerToken, _) = try await globex.consumer(name: "Mallory")
            try await globex.send("hello from Globex", as: globexConsumerToken)
            let before = try await HTTPErrorTests.rowCounts(server)

            let ids = [
                "{conversationId}": sent.conversation.id.rawValue, "{consumerId}": acmeConsumer.id.rawValue,
                "{agentId}": acmeAgent.id.rawValue, "{appId}": acme.app.id.rawValue, "{messageId}": voice.id.rawValue, "{format}": "original",
                "{replyId}": savedReply.id.rawValue, "{ruleId}": rule.id.rawValue, "{teamId}": team.id.rawValue, "{holdId}": hold.id.rawValue,
                // Logos are public by design (the brand shows them on its pages); Acme has none here.
                "{brandId}": acme.brand.id.rawValue,
                // Shared links carry their own signature, not a principal: an unsigned one is nothing.
                "{token}": "\(acme.brand.id).\(voice.id).4102444800.forged",
            ]
            func body(for route: Route) throws -> (Data?, String?) {
                let json: (any Encodable)?
                switch (route.method, route.template) {
                case (.post, let path) where path.hasSuffix("/messages"):
                    json = SendMessageRequest(clientMessageId: UUID().uuidString, text: "sneaking in")
                case (.post, let path) where path.hasSuffix("/receipts"): json = ReceiptRequest(upToSeq: 1, state: .read)
                case (.post, let path) where path.hasSuffix("/assign"): json = AssignRequest(agentId: globex.admin.id)
                case (.post, let path) where path.hasSuffix("/notes"): json = AddNoteRequest(clientNoteId: UUID().uuidString, text: "peek")
                case (.post, let path) where path.hasSuffix("/transfer"): json = TransferRequest(agentId: globex.admin.id, note: "stolen")
                case (.put, let path) where path.hasSuffix("/capacity"): json = AgentCapacityRequest(maxConversations: 50)
                case (.post, let path) where path.hasSuffix("/rating"): json = RateConversationRequest(score: 1, comment: "stolen")
                case (.put, let path) where path.hasSuffix("/priority"): json = SetPriorityRequest(priority: 9)
                case (.put, let path) where path.hasPrefix("/v1/teams/"): json = SaveTeamRequest(name: "Renamed by Globex", memberIds: [globex.admin.id])
                case (.post, let path) where path.hasSuffix("/calls"): json = StartCallRequest(media: .voice, connectionId: "ws_none")
                case (.post, let path) where path.hasSuffix("/keys"):
                    json = AddAppKeyRequest(kid: "stolen", algorithm: "HS256", key: String(repeating: "k", count: 40))
                case (.put, let path) where path.hasSuffix("/whatsapp"):
                    json = ConnectWhatsAppRequest(phoneNumberId: "123", verifyToken: "stolen-token", appSecret: "stolen-secret", accessToken: "stolen-token")
                case (.put, let path) where path.hasSuffix("/messenger"):
                    json = ConnectMessengerRequest(pageId: "123", verifyToken: "stolen-token", appSecret: "stolen-secret", pageAccessToken: "stolen-token")
                case (.put, let path) where path.hasSuffix("/messenger/settings"): json = MessengerSettingsRequest(humanAgent: true)
                case (.put, let path) where path.hasSuffix("/push/apns"):
                    json = ConnectAPNsRequest(teamId: "ABCDE12345", keyId: "KEY1234567", privateKey: ES256PrivateKey().pemRepresentation, topic: "com.globex")
                case (.put, let path) where path.hasSuffix("/push/fcm"): json = ConnectFCMRequest(serviceAccount: "{}")
                case (.put, let path) where path.hasSuffix("/apple"):
                    json = ConnectAppleRequest(businessId: "stolen-business", mspId: "stolen-msp", secret: Data(repeating: 7, count: 32).base64EncodedString())
                case (.put, let path) where path.hasSuffix("/sms"):
                    json = ConnectSMSRequest(accountSid: "AC" + String(repeating: "b", count: 32), authToken: "stolen-token", phoneNumber: "+15550001111")
                case (.put, let path) where path.hasSuffix("/whatsapp/templates"):
                    json = WhatsAppTemplatesRequest(templates: [WhatsAppTemplateDTO(name: "stolen", language: "en_US", body: "x")])
                case (.post, let path) where path.hasSuffix("/template"):
                    json = SendTemplateRequest(clientMessageId: UUID().uuidString, name: "stolen", language: "en_US")
                case (.patch, _): json = UpdateAgentRequest(name: "Renamed by Globex", role: .admin)
                case (.post, let path) where path.hasSuffix("/voice-messages"): return (note, "audio/webm")
                case (.post, let path) where path.hasSuffix("/attachments"): return (photo, "image/jpeg")
                case (.post, _): json = [String: String]()
                default: json = nil
                }
                return (try json.map { try ParleyJSON.makeEncoder().encode($0) }, json == nil ? nil : "application/json")
            }

            var checked = 0
            // Providers' webhooks are authenticated by the provider's signature, not a principal
            // (WhatsAppTests covers them).
            // An automatic message's path names a kind and a language, never another brand's ids:
            // each brand edits its own (checked below with the routes without ids).
            let brandScoped = { (route: Route) in route.template.hasPrefix("/v1/webhooks/") || route.template.hasPrefix("/v1/automatic-messages/") }
            for route in routes where !brandScoped(route) {
                var path = route.template
                if route.template.hasPrefix("/v1/files/") {
                    path = path.replacingOccurrences(of: "{messageId}", with: image.id.rawValue).replacingOccurrences(of: "{variant}", with: "original")
                }
                for (name, value) in ids { path = path.replacingOccurrences(of: name, with: value) }
                if route.template.hasSuffix("/voice-messages") || route.template.hasSuffix("/attachments") { path += "?clientMessageId=\(UUID().uuidString)" }
                for (who, token) in [("Globex admin", globex.adminToken), ("Globex agent", globexAgentToken), ("Globex consumer", globexConsumerToken)] {
                    let (data, contentType) = try body(for: route)
                    var headers: HTTPFields = [:]
                    if let contentType { headers[.contentType] = contentType }
                    let reply = try await server.request(route.method, path, token: token, data: data, headers: headers)
                    #expect(reply.status == .notFound || reply.status == .forbidden, "\(who) \(route.method) \(route.template): \(reply.status) \(reply.text)")
                    #expect(!reply.text.contains("private to Acme"), "\(who) \(route.method) \(route.template) leaked Acme's text")
                    checked += 1
                }
            }
            #expect(checked == routes.filter { !brandScoped($0) }.count * 3)
            // Routes without ids answer with Globex's own data only: search, saved replies, presence.
            for token in [globex.adminToken, globexAgentToken] {
                let search = try await server.get("/v1/search?q=private", token: token)
                #expect(search.status == .ok)
                #expect(try search.decode(ListResponse<SearchHitDTO>.self).items.isEmpty)
                #expect(try await server.get("/v1/search?q=Ana", token: token).decode(ListResponse<SearchHitDTO>.self).items.isEmpty)
                #expect(try await server.get("/v1/saved-replies", token: token).decode(ListResponse<SavedReplyDTO>.self).items.isEmpty)
                #expect(try await server.get("/v1/engagement-rules", token: token).decode(ListResponse<EngagementRuleDTO>.self).items.isEmpty)
                #expect(try await server.get("/v1/teams", token: token).decode(ListResponse<TeamDTO>.self).items.isEmpty)
                #expect(!(try await server.get("/v1/routing/agents", token: token).decode(ListResponse<AgentLoadDTO>.self).items.contains { $0.agentId == acmeAgent.id }))
                if token == globex.adminToken {
                    #expect(try await server.get("/v1/jobs?state=queued", token: token).decode(ListResponse<JobDTO>.self).items.isEmpty)
                }
                let team = try await server.get("/v1/presence", token: token).decode(ListResponse<AgentPresenceDTO>.self).items
                #expect(!team.contains { $0.agentId == acme.admin.id || $0.agentId == acmeAgent.id })
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            // Acme's agent record and app keys are as they were.
            let agents = try await server.get("/v1/agents", token: acme.adminToken).decode(ListResponse<AgentDTO>.self).items
            #expect(agents.first { $0.id == acmeAgent.id }?.name == acmeAgent.name)
            let teams = try await server.get("/v1/teams", token: acme.adminToken).decode(ListResponse<TeamDTO>.self).items
            #expect(teams.map(\.name) == ["Acme billing"] && teams.first?.memberIds == [acmeAgent.id])
            let loads = try await server.get("/v1/routing/agents", token: acme.adminToken).decode(ListResponse<AgentLoadDTO>.self).items
            #expect(loads.first { $0.agentId == acmeAgent.id }?.ownLimit == nil)

            // Real-time: Globex's sockets cannot send into, read, resume or signal Acme's conversation.
            for token in [globex.adminToken, globexConsumerToken] {
                let socket = try await RealtimeProbe.connect(port: server.port, token: token)
                let frames: [ClientFrame] = [
                    .send(id: "s", SendMessageRequest(clientMessageId: UUID().uuidString, text: "x", conversationId: sent.conversation.id)),
                    .receipt(id: "r", conversationId: sent.conversation.id, ReceiptRequest(upToSeq: 1, state: .read)),
                    .resume(id: "m", cursors: [sent.conversation.id.rawValue: 0]),
                    .callAccept(id: "c", callId: "call_aaaaaaaaaaaaaaaaaaaaaaaa"),
                    // Co-browse: Globex's admin cannot offer it in Acme's conversation (its consumer
                    // may not offer at all), and nobody finds a session by id across brands
                    // (CobrowseTests.refusals does it with a live one).
                    .cobrowseOffer(id: "o", conversationId: sent.conversation.id),
                    .cobrowseEnd(id: "e", sessionId: "cob_aaaaaaaaaaaaaaaaaaaaaaaa"),
                    .cobrowseControl(id: "k", sessionId: "cob_aaaaaaaaaaaaaaaaaaaaaaaa", action: .release),
                    .cobrowseInput(sessionId: "cob_aaaaaaaaaaaaaaaaaaaaaaaa", payload: "{}"),
                ]
                for frame in frames {
                    try socket.send(frame)
                    let answer = try await socket.next { if case .error = $0 { return true } else { return false } }
                    guard case .error(_, let detail) = answer else { throw TestFailure("expected an error") }
                    let refused: Set<ErrorCode> = ["not_found", "call_not_found", "cobrowse_not_found"]
                    #expect(refused.contains(detail.code) || (token == globexConsumerToken && detail.code == .forbidden), "\(frame): \(detail.code)")
                }
                try socket.send(.typing(conversationId: sent.conversation.id, isTyping: true))
                #expect(try await socket.expectSilence(for: 0.3).map { frame -> Bool in
                    if case .error = frame { return true }
                    return false
                } ?? true)
                await socket.close()
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            // Lifecycle settings and automatic messages are the brand's own: Globex reads its own and
            // its changes stay with it.
            #expect(try await server.get("/v1/lifecycle", token: globex.adminToken).decode(LifecycleSettingsDTO.self) == .default)
            let globexMessages = try await server.get("/v1/automatic-messages", token: globexAgentToken)
            #expect(globexMessages.status == .ok && !globexMessages.text.contains("private to Acme"))
            _ = try await server.request(.put, "/v1/automatic-messages/welcome/en", token: globex.adminToken, json: SaveAutomaticMessageRequest(text: "Globex says hi", enabled: false))
            _ = try await server.request(.delete, "/v1/automatic-messages/welcome/en", token: globex.adminToken)
            _ = try await server.request(.patch, "/v1/lifecycle", token: globex.adminToken, json: UpdateLifecycleRequest(survey: false, timeZone: "Asia/Tokyo"))
            let acmeWelcome = try await server.get("/v1/automatic-messages", token: acme.adminToken).decode(ListResponse<AutomaticMessageDTO>.self)
                .items.first { $0.kind == .welcome && $0.language == "en" }
            #expect(acmeWelcome?.text == "private to Acme: welcome" && acmeWelcome?.enabled == true)
            let acmeLifecycle = try await server.get("/v1/lifecycle", token: acme.adminToken).decode(LifecycleSettingsDTO.self)
            #expect(acmeLifecycle.survey && acmeLifecycle.timeZone == "Europe/Lisbon")
            // Records, holds and the purge log are the brand's own.
            #expect(try await server.get("/v1/legal-holds", token: globex.adminToken).decode(ListResponse<LegalHoldDTO>.self).items.isEmpty)
            #expect(try await server.get("/v1/records", token: globex.adminToken).decode(RecordsSettingsDTO.self) == .default)
            #expect(try await server.get("/v1/legal-holds", token: acme.adminToken).decode(ListResponse<LegalHoldDTO>.self).items == [hold])
            // A date-range transcript export holds the brand's own conversations only.
            let day = String(Date().formatted(.iso8601).prefix(10))
            let export = try await server.get("/v1/transcripts?from=\(day)&to=\(day)&format=json", token: globex.adminToken)
            #expect(export.status == .ok && export.text.contains("hello from Globex") && !export.text.contains("private to Acme"))
        }
    }
}
