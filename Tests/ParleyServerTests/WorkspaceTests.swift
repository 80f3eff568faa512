import Foundation
import HTTPTypes
import JWTKit
import ParleyAPI
import ParleyDomain
import ParleyServer
import Testing

/// Claims a brand's backend signs with contact details and its own claims.
struct ProfileClaims: JWTPayload {
    var sub: SubjectClaim
    var exp: ExpirationClaim
    var name: String?
    var email: String?
    var phone_number: String?
    var plan: String?
    var lifetime_value: Double?
    var vip: Bool?
    var secret_note: String?
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

@Suite("Workspace: saved replies, search, presence, customer context")
struct WorkspaceTests {
    @Test("saved replies: admins create, change and delete them; agents list them; shortcuts are checked and unique per brand")
    func savedReplies() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (agentToken, _) = try await acme.agent()
            let created = try await server.post(
                "/v1/saved-replies", token: acme.adminToken, json: SaveReplyRequest(shortcut: "refund", text: "Refunds take 5 working days."))
            #expect(created.status == .created)
            let reply = try created.decode(SavedReplyDTO.self)
            #expect(reply.id.rawValue.hasPrefix("rpl_"))
            // Another brand may use the same shortcut.
            #expect(try await server.post("/v1/saved-replies", token: globex.adminToken, json: SaveReplyRequest(shortcut: "refund", text: "x")).status == .created)

            let refusals: [(SaveReplyRequest, String, HTTPResponse.Status)] = [
                (SaveReplyRequest(shortcut: "refund", text: "again"), "shortcut_taken", .conflict),
                (SaveReplyRequest(shortcut: "Has Space", text: "x"), "invalid_field", .badRequest),
                (SaveReplyRequest(shortcut: String(repeating: "a", count: 33), text: "x"), "invalid_field", .badRequest),
                (SaveReplyRequest(shortcut: "blank", text: "   "), "invalid_field", .badRequest),
                (SaveReplyRequest(shortcut: "long", text: String(repeating: "a", count: 4001)), "message_too_long", .contentTooLarge),
                (SaveReplyRequest(text: "no shortcut"), "missing_field", .badRequest),
            ]
            for (body, code, status) in refusals {
                let refused = try await server.post("/v1/saved-replies", token: acme.adminToken, json: body)
                #expect(refused.status == status, "\(code)")
                #expect(try refused.error.code.rawValue == code)
            }
            // Agents read; only admins write.
            #expect(try await server.post("/v1/saved-replies", token: agentToken, json: SaveReplyRequest(shortcut: "mine", text: "x")).status == .forbidden)
            let listed = try await server.get("/v1/saved-replies", token: agentToken).decode(ListResponse<SavedReplyDTO>.self).items
            #expect(listed.map(\.shortcut) == ["refund"])

            let changed = try await server.request(
                .patch, "/v1/saved-replies/\(reply.id)", token: acme.adminToken, json: SaveReplyRequest(text: "Refunds take 3 working days."))
            #expect(try changed.decode(SavedReplyDTO.self).text == "Refunds take 3 working days.")
            #expect(try changed.decode(SavedReplyDTO.self).shortcut == "refund")
            // Globex cannot see, change or delete Acme's.
            #expect(try await server.request(.patch, "/v1/saved-replies/\(reply.id)", token: globex.adminToken, json: SaveReplyRequest(text: "x")).status == .notFound)
            #expect(try await server.request(.delete, "/v1/saved-replies/\(reply.id)", token: globex.adminToken).status == .notFound)
            #expect(try await server.request(.delete, "/v1/saved-replies/\(reply.id)", token: acme.adminToken).status == .noContent)
            #expect(try await server.request(.delete, "/v1/saved-replies/\(reply.id)", token: acme.adminToken).status == .notFound)
            #expect(try await server.get("/v1/saved-replies", token: agentToken).decode(ListResponse<SavedReplyDTO>.self).items.isEmpty)
        }
    }

    @Test("saved replies: a brand has at most 500")
    func savedReplyLimit() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let now = Date()
            try await server.services.store.write { repo in
                for index in 0..<WorkspaceRules.maxSavedReplies {
                    try await repo.insertSavedReply(
                        SavedReplyDTO(id: .make(), shortcut: "r\(index)", text: "reply \(index)", createdAt: now, updatedAt: now),
                        brandId: acme.brand.id, createdBy: acme.admin.id)
                }
            }
            let refused = try await server.post("/v1/saved-replies", token: acme.adminToken, json: SaveReplyRequest(shortcut: "one-more", text: "x"))
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "saved_reply_limit")
        }
    }

    @Test("search finds conversations by words of their messages (as prefixes) and by the customer's name, in the agent's brand only")
    func search() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (ana, _) = try await acme.consumer(name: "Ana Pereira")
            let (bo, _) = try await acme.consumer(name: "Bo Chen")
            let (other, _) = try await globex.consumer(name: "Ana Other")
            let anaFirst = try await acme.send("My parcel never arrived, order 4411", as: ana)
            try await acme.send("Can I change the delivery address?", as: bo)
            try await acme.reply("Sorry about the parcel, I'm checking order 4411 now", in: anaFirst.conversation.id, as: acme.adminToken)
            try await globex.send("parcel missing too", as: other)

            func search(_ query: String, token: String? = nil) async throws -> [SearchHitDTO] {
                let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let reply = try await server.get("/v1/search?q=\(encoded)", token: token ?? acme.adminToken)
                guard reply.status == .ok else { throw TestFailure("search '\(query)': \(reply.status) \(reply.text)") }
                return try reply.decode(ListResponse<SearchHitDTO>.self).items
            }
            // Prefixes, any case, every word; the newest match is the one shown.
            let parcel = try await search("PARC")
            #expect(parcel.map(\.conversation.id) == [anaFirst.conversation.id])
            #expect(parcel.first?.consumerName == "Ana Pereira")
            #expect(parcel.first?.message?.text.contains("checking order 4411") == true)
            #expect(try await search("order 4411 arrived").first?.message?.seq == 1)
            #expect(try await search("deliv addr").map(\.consumerName) == ["Bo Chen"])
            #expect(try await search("parcel submarine").isEmpty)
            // By the customer's name.
            #expect(try await search("bo ch").map(\.consumerName) == ["Bo Chen"])
            // Query syntax is only words: nothing breaks, nothing leaks.
            for hostile in ["\"parcel\" OR *", "parcel) | (x", "NEAR(parcel", "%", "_", "'; DROP TABLE messages; --", "body:parcel"] {
                let hits = try await search(hostile)
                #expect(hits.allSatisfy { $0.conversation.brandId == acme.brand.id }, "\(hostile)")
            }
            // Globex sees only its own.
            #expect(try await search("parcel", token: globex.adminToken).map(\.consumerName) == ["Ana Other"])
            // One customer's conversations, for the details pane; another brand's customer has none.
            let anas = try await server.get("/v1/conversations?consumer=\(anaFirst.conversation.consumerId)", token: acme.adminToken)
                .decode(Page<ConversationDTO>.self).items
            #expect(anas.map(\.id) == [anaFirst.conversation.id])
            #expect(try await server.get("/v1/conversations?consumer=\(anaFirst.conversation.consumerId)", token: globex.adminToken)
                .decode(Page<ConversationDTO>.self).items.isEmpty)
            #expect(try await server.get("/v1/conversations?consumer=nonsense", token: acme.adminToken).status == .badRequest)
            // Bad queries.
            for (query, status) in [("", HTTPResponse.Status.badRequest), ("   ", .badRequest), (String(repeating: "a", count: 201), .badRequest)] {
                let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                #expect(try await server.get("/v1/search?q=\(encoded)", token: acme.adminToken).status == status)
            }
            #expect(try await server.get("/v1/search", token: acme.adminToken).error.code == "missing_field")
            #expect(try await server.get("/v1/search?q=parcel&limit=51", token: acme.adminToken).status == .badRequest)
        }
    }

    @Test("presence: agents choose online, away or offline; without a connection they show offline; the team hears of changes live")
    func presence() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, agent) = try await acme.agent()
            let (consumerToken, _) = try await acme.consumer()
            func team() async throws -> [AgentID: AgentPresenceDTO] {
                let items = try await server.get("/v1/presence", token: acme.adminToken).decode(ListResponse<AgentPresenceDTO>.self).items
                return Dictionary(uniqueKeysWithValues: items.map { ($0.agentId, $0) })
            }
            func available() async throws -> ConsumerSettingsDTO {
                try await server.get("/v1/consumer/settings", token: consumerToken).decode()
            }
            // Nobody connected: everyone is offline, and the widget says the brand is away.
            #expect(try await team()[agent.id]?.presence == .offline)
            #expect(try await team()[agent.id]?.chosen == .online)
            var settings = try await available()
            #expect(!settings.agentsAvailable)
            #expect(settings.availability == BrandSettingsDTO.defaultAwayText)

            // The admin watches the team but takes no conversations.
            let admin = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            _ = try await server.request(.put, "/v1/me/presence", token: acme.adminToken, json: SetPresenceRequest(presence: .offline))
            #expect(try await available().agentsAvailable == false)
            // The agent connects: the admin hears it, and the widget now says someone is there.
            let probe = try await RealtimeProbe.connect(port: server.port, token: agentToken)
            let online = try await admin.next { if case .presence(let p) = $0 { p.agentId == agent.id && p.connected } else { false } }
            guard case .presence(let connected) = online else { return }
            #expect(connected.presence == .online)
            settings = try await available()
            #expect(settings.agentsAvailable)
            #expect(settings.availability == BrandSettingsDTO.defaultAvailableText)

            // Away (by the workspace's idle timer): shown away, and not available.
            let away = try await server.request(.put, "/v1/me/presence", token: agentToken, json: SetPresenceRequest(presence: .away, automatic: true))
            #expect(try away.decode(AgentPresenceDTO.self).presence == .away)
            #expect(try away.decode(AgentPresenceDTO.self).automatic)
            _ = try await admin.next { if case .presence(let p) = $0 { p.agentId == agent.id && p.presence == .away } else { false } }
            #expect(try await available().agentsAvailable == false)
            // Only away can be automatic.
            let bad = try await server.request(.put, "/v1/me/presence", token: agentToken, json: SetPresenceRequest(presence: .online, automatic: true))
            #expect(bad.status == .badRequest)
            let unknown = try await server.request(.put, "/v1/me/presence", token: agentToken, raw: #"{"presence":"busy"}"#)
            #expect(unknown.status == .badRequest)

            // Open conversations assigned to them are counted.
            let sent = try await acme.send("hello", as: consumerToken)
            _ = try await server.post("/v1/conversations/\(sent.conversation.id)/assign", token: acme.adminToken, json: AssignRequest(agentId: agent.id))
            #expect(try await team()[agent.id]?.openConversations == 1)

            // They leave: offline for everyone, whatever they chose.
            _ = await probe.close()
            _ = try await admin.next { if case .presence(let p) = $0 { p.agentId == agent.id && !p.connected } else { false } }
            #expect(try await team()[agent.id]?.presence == .offline)
            #expect(try await team()[agent.id]?.chosen == .away)
            _ = await admin.close()
        }
    }

    @Test("the widget learns who answered: an agent's name and initials, from its own brand only")
    func publicAgent() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (consumerToken, _) = try await acme.consumer()
            let agent = try await server.get("/v1/consumer/agents/\(acme.admin.id)", token: consumerToken).decode(PublicAgentDTO.self)
            #expect(agent.name == "Acme Admin")
            #expect(agent.initials == "AA")
            #expect(try await server.get("/v1/consumer/agents/\(globex.admin.id)", token: consumerToken).status == .notFound)
            #expect(try await server.get("/v1/consumer/agents/nonsense", token: consumerToken).status == .notFound)
            #expect(WorkspaceRules.initials("sam") == "S")
            #expect(WorkspaceRules.initials("  ") == "?")
        }
    }

    @Test("customer context: the page and browser the widget reports, contact claims and the claims the brand exposes")
    func customerContext() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer(name: "Ana")
            let visit = try await server.request(
                .post, "/v1/consumer/visits", token: token,
                json: ConsumerVisitRequest(pageUrl: "https://shop.example/checkout?step=2", pageTitle: "Checkout"),
                headers: [.userAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Safari/604.1"])
            #expect(visit.status == .noContent)
            let seen = try await server.get("/v1/consumers/\(consumer.id)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(seen.lastPageUrl == "https://shop.example/checkout?step=2")
            #expect(seen.lastPageTitle == "Checkout")
            #expect(seen.lastBrowser?.contains("iPhone") == true)
            #expect(seen.lastSeenAt != nil)
            // The page the widget opened on comes with the session; the consumer's own view leaves it out.
            let opened = try await server.request(
                .post, "/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, pageUrl: "https://shop.example/", pageTitle: "Shop"),
                headers: [.userAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0"])
            let own = try opened.decode(ConsumerSessionResponse.self).consumer
            #expect(own.lastPageUrl == nil && own.lastBrowser == nil)
            let newcomer = try await server.get("/v1/consumers/\(own.id)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(newcomer.lastPageUrl == "https://shop.example/")
            #expect(newcomer.lastBrowser?.contains("Chrome") == true)
            // The page is a hint with a new session: one that is not an http(s) URL is left out, a long title cut.
            let badPage = try await server.post("/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, pageUrl: "javascript:x"))
            #expect(badPage.status == .created)
            let unseen = try await server.get("/v1/consumers/\(try badPage.decode(ConsumerSessionResponse.self).consumer.id)", token: acme.adminToken)
            #expect(try unseen.decode(ConsumerDTO.self).lastPageUrl == nil)
            let longTitle = try await server.post(
                "/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, pageUrl: "https://shop.example/a", pageTitle: String(repeating: "t", count: 900)))
            let titled = try await server.get("/v1/consumers/\(try longTitle.decode(ConsumerSessionResponse.self).consumer.id)", token: acme.adminToken)
            #expect(try titled.decode(ConsumerDTO.self).lastPageTitle?.count == 300)
            // An agent's message carries their name for the widget.
            let sent = try await acme.send("hi", as: token)
            let answer = try await acme.reply("Hello Ana", in: sent.conversation.id, as: acme.adminToken)
            #expect(answer.message.senderName == "Acme Admin")
            let history = try await server.get("/v1/consumer/conversations/\(sent.conversation.id)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(history.map(\.senderName) == [nil, "Acme Admin"])

            for url in ["javascript:alert(1)", "file:///etc/passwd", "https://x.example/" + String(repeating: "a", count: 2048), "https://x.example/a b"] {
                let refused = try await server.post("/v1/consumer/visits", token: token, json: ConsumerVisitRequest(pageUrl: url))
                #expect(refused.status == .badRequest, "\(url.prefix(40))")
            }

            // Claims: email and phone always; others only when the brand lists them.
            let secret = String(repeating: "k3y-", count: 10)
            _ = try await server.post("/v1/apps/\(acme.app.id)/keys", token: acme.adminToken, json: AddAppKeyRequest(kid: "k1", algorithm: "HS256", key: secret))
            let listed = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(exposedClaims: ["plan", "lifetime_value", "vip"]))
            #expect(listed.status == .ok)
            let signer = JWTKeyCollection()
            await signer.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: "k1")
            let claims = ProfileClaims(
                sub: .init(value: "user-7"), exp: .init(value: Date().addingTimeInterval(300)), name: "Ana Pereira",
                email: "ana@example.com", phone_number: "+351 912 345 678", plan: "Gold", lifetime_value: 1290.5, vip: true,
                secret_note: "do not store")
            let session = try await server.post(
                "/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id, identityToken: try await signer.sign(claims, kid: "k1")))
            let ana = try session.decode(ConsumerSessionResponse.self).consumer
            let known = try await server.get("/v1/consumers/\(ana.id)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(known.email == "ana@example.com")
            #expect(known.phone == "+351 912 345 678")
            #expect(known.attributes == ["plan": "Gold", "lifetime_value": "1290.5", "vip": "true"])

            // Settings are checked.
            for change in [
                UpdateBrandSettingsRequest(exposedClaims: ["email"]), UpdateBrandSettingsRequest(exposedClaims: ["has space"]),
                UpdateBrandSettingsRequest(exposedClaims: (0..<21).map { "c\($0)" }), UpdateBrandSettingsRequest(widgetColor: "red"),
                UpdateBrandSettingsRequest(autoAwayMinutes: 481), UpdateBrandSettingsRequest(awayText: ""),
                UpdateBrandSettingsRequest(previewOrigins: ["javascript:alert(1)"]), UpdateBrandSettingsRequest(previewOrigins: ["https://shop.example/path"]),
                UpdateBrandSettingsRequest(previewOrigins: ["https://a b.example"]), UpdateBrandSettingsRequest(previewOrigins: (0..<21).map { "https://s\($0).example" }),
            ] {
                #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: change).status == .badRequest)
            }
            let look = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken,
                json: UpdateBrandSettingsRequest(autoAwayMinutes: 5, widgetColor: "#0E7C66", availableText: "Here for you"))
            let saved = try look.decode(BrandSettingsDTO.self)
            #expect(saved.widgetColor == "#0e7c66")
            #expect(saved.autoAwayMinutes == 5)
            let sites = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken,
                json: UpdateBrandSettingsRequest(previewOrigins: ["https://Shop.Example", "http://localhost:8080", "https://shop.example"]))
            #expect(try sites.decode(BrandSettingsDTO.self).previewOrigins == ["https://shop.example", "http://localhost:8080"])
            let widget = try await server.get("/v1/consumer/settings", token: token).decode(ConsumerSettingsDTO.self)
            #expect(widget.widgetColor == "#0e7c66")
            #expect(widget.previewOrigins == ["https://shop.example", "http://localhost:8080"])
        }
    }

    @Test("visits count against the address's write limit")
    func visitLimit() async throws {
        try await TestServer.run(clock: ManualClock(), configure: { $0.rateIPWrites = 3 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<4 {
                statuses.append(try await server.post("/v1/consumer/visits", token: token, json: ConsumerVisitRequest(pageUrl: "https://a.example/")).status)
            }
            // The session took one of the address's 3 writes; the server's clock stands still.
            #expect(statuses == [.noContent, .noContent, .tooManyRequests, .tooManyRequests], "\(statuses)")
        }
    }
}
