import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
@testable import ParleyServer
import Synchronization
import Testing

@Suite("Co-browse: offer, consent, the page relayed to one agent, limits and the record")
struct CobrowseTests {
    /// A brand with an agent who may co-browse, a customer with an open web conversation, both connected.
    struct Party: Sendable {
        let acme: BrandScenario
        let agentToken: String
        let agent: AgentDTO
        let agentSocket: RealtimeProbe
        let consumerToken: String
        let consumer: ConsumerDTO
        let page: RealtimeProbe
        let conversation: ConversationDTO

        static func make(_ server: TestServer, permissions: [AgentPermission] = [.cobrowse]) async throws -> Party {
            let acme = try await BrandScenario.make(server)
            let (agentToken, agent) = try await acme.agent(permissions: permissions)
            let (consumerToken, consumer) = try await acme.consumer(name: "Ana")
            let sent = try await server.post(
                "/v1/consumer/messages", token: consumerToken,
                json: SendMessageRequest(clientMessageId: UUID().uuidString, text: "Where do I enter the coupon?")
            ).decode(SendMessageResponse.self)
            return Party(
                acme: acme, agentToken: agentToken, agent: agent,
                agentSocket: try await RealtimeProbe.connect(port: server.port, token: agentToken),
                consumerToken: consumerToken, consumer: consumer,
                page: try await RealtimeProbe.connect(port: server.port, token: consumerToken),
                conversation: sent.conversation)
        }

        func offer() async throws -> Result<CobrowseSessionDTO, FrameError> {
            try await CobrowseTests.request(agentSocket, .cobrowseOffer(id: "offer", conversationId: conversation.id), id: "offer")
        }

        /// Offered and accepted on `page`.
        func started(origin: String = "https://shop.acme.test") async throws -> CobrowseSessionDTO {
            let offered = try await offer().get()
            let accepted = try await CobrowseTests.request(
                page, .cobrowseAnswer(id: "yes", sessionId: offered.id, accept: true, origin: origin), id: "yes"
            ).get()
            #expect(accepted.state == .active)
            return accepted
        }

        func close() async {
            await agentSocket.close()
            await page.close()
        }
    }

    static func request(_ socket: RealtimeProbe, _ frame: ClientFrame, id: String) async throws -> Result<CobrowseSessionDTO, FrameError> {
        try socket.send(frame)
        let answer = try await socket.next { frame in
            switch frame {
            case .cobrowseAck(let ackId, _): ackId == id
            case .error(let errorId, _): errorId == id
            default: false
            }
        }
        switch answer {
        case .cobrowseAck(_, let session): return .success(session)
        case .error(_, let detail): return .failure(FrameError(detail: detail))
        default: throw TestFailure("unexpected \(answer)")
        }
    }

    static func code(_ result: Result<CobrowseSessionDTO, FrameError>) -> String? {
        if case .failure(let error) = result { return error.detail.code.rawValue }
        return nil
    }

    static func session(_ frame: ServerFrame, _ state: CobrowseState) -> CobrowseSessionDTO? {
        if case .cobrowse(let session) = frame, session.state == state { return session }
        return nil
    }

    /// An `error` frame without an id (a relayed frame refused).
    static func unansweredError(_ socket: RealtimeProbe) async throws -> String {
        let frame = try await socket.next { if case .error(nil, _) = $0 { true } else { false } }
        guard case .error(_, let detail) = frame else { throw TestFailure("no error") }
        return detail.code.rawValue
    }

    /// The next error frame without an id whose code is not `skipping` (earlier refusals may still be queued).
    static func unansweredError(_ socket: RealtimeProbe, skipping: String) async throws -> String {
        while true {
            let code = try await unansweredError(socket)
            if code != skipping { return code }
        }
    }

    @Test("control: its own permission, asked of the customer on the shared page, inputs relayed only while granted and limited, kept in the record")
    func control() async throws {
        try await TestServer.run(configure: { $0.cobrowseInputsPerSecond = 5 }) { server in
            // An agent who may co-browse but not take control.
            let viewer = try await Party.make(server)
            let watched = try await viewer.started()
            #expect(Self.code(try await Self.request(
                viewer.agentSocket, .cobrowseControl(id: "c0", sessionId: watched.id, action: .request), id: "c0")) == "cobrowse_permission_missing")
            try viewer.agentSocket.send(.cobrowseInput(sessionId: watched.id, payload: #"{"kind":"click","id":1}"#))
            #expect(try await Self.unansweredError(viewer.agentSocket) == "cobrowse_control_not_granted")
            await viewer.close()

            let party = try await Party.make(server, permissions: [.cobrowse, .cobrowseControl])
            let session = try await party.started()
            #expect(session.control == .none)
            // Nothing to grant before the agent asks; each side has its own actions.
            #expect(Self.code(try await Self.request(
                party.page, .cobrowseControl(id: "g0", sessionId: session.id, action: .grant), id: "g0")) == "cobrowse_control_not_granted")
            #expect(Self.code(try await Self.request(
                party.page, .cobrowseControl(id: "r0", sessionId: session.id, action: .request), id: "r0")) == "invalid_field")
            #expect(Self.code(try await Self.request(
                party.agentSocket, .cobrowseControl(id: "g1", sessionId: session.id, action: .grant), id: "g1")) == "invalid_field")

            let requested = try await Self.request(party.agentSocket, .cobrowseControl(id: "r1", sessionId: session.id, action: .request), id: "r1").get()
            #expect(requested.control == .requested)
            _ = try await party.page.next { if case .cobrowse(let s) = $0 { s.control == .requested } else { false } }
            // Asked is not granted.
            try party.agentSocket.send(.cobrowseInput(sessionId: session.id, payload: #"{"kind":"click","id":1}"#))
            #expect(try await Self.unansweredError(party.agentSocket) == "cobrowse_control_not_granted")
            // The customer answers on the page that is shared, not from another tab.
            let otherTab = try await RealtimeProbe.connect(port: server.port, token: party.consumerToken)
            #expect(Self.code(try await Self.request(
                otherTab, .cobrowseControl(id: "g2", sessionId: session.id, action: .grant), id: "g2")) == "cobrowse_on_other_page")
            let granted = try await Self.request(party.page, .cobrowseControl(id: "g3", sessionId: session.id, action: .grant), id: "g3").get()
            #expect(granted.control == .granted && granted.controlGrantedAt != nil)
            _ = try await party.agentSocket.next { if case .cobrowse(let s) = $0 { s.control == .granted } else { false } }

            // The agent's click reaches the shared page as it was sent, and no other tab.
            let click = #"{"kind":"click","id":7}"#
            try party.agentSocket.send(.cobrowseInput(sessionId: session.id, payload: click))
            let relayed = try await party.page.next { if case .cobrowseInput = $0 { true } else { false } }
            guard case .cobrowseInput(let relayedSession, let payload) = relayed else { throw TestFailure("no input") }
            #expect(relayedSession == session.id && payload == click)
            #expect(try await otherTab.expectSilence(for: 0.3).map { frame -> Bool in
                if case .cobrowseInput = frame { return false }
                return true
            } ?? true)
            // The customer cannot send inputs; an input has a size limit.
            try party.page.send(.cobrowseInput(sessionId: session.id, payload: click))
            #expect(try await Self.unansweredError(party.page) == "forbidden")
            try party.agentSocket.send(.cobrowseInput(sessionId: session.id, payload: String(repeating: "x", count: CobrowseRules.maxInputBytes + 1)))
            #expect(try await Self.unansweredError(party.agentSocket) == "invalid_field")
            // Five a second (a burst of five; one is spent): a flood is refused.
            for _ in 0..<10 { try party.agentSocket.send(.cobrowseInput(sessionId: session.id, payload: click)) }
            #expect(try await Self.unansweredError(party.agentSocket) == "rate_limited")

            // The customer takes control back, from any of their pages: inputs are refused again.
            let released = try await Self.request(otherTab, .cobrowseControl(id: "t", sessionId: session.id, action: .release), id: "t").get()
            #expect(released.control == .none)
            // (Control is checked before the rate: no wait for the bucket to refill.)
            try party.agentSocket.send(.cobrowseInput(sessionId: session.id, payload: click))
            #expect(try await Self.unansweredError(party.agentSocket, skipping: "rate_limited") == "cobrowse_control_not_granted")

            // Asked again and refused: nothing changes but the request.
            _ = try await Self.request(party.agentSocket, .cobrowseControl(id: "r2", sessionId: session.id, action: .request), id: "r2").get()
            #expect(try await Self.request(party.page, .cobrowseControl(id: "d", sessionId: session.id, action: .deny), id: "d").get().control == .none)
            // The record keeps that the agent had control.
            let ended = try await Self.request(party.agentSocket, .cobrowseEnd(id: "e", sessionId: session.id), id: "e").get()
            #expect(ended.state == .ended && ended.control == .none && ended.controlGrantedAt != nil)
            await otherTab.close()
            await party.close()
        }
    }

    @Test("several nodes: a node learns the sessions begun before it started; a node that is gone leaves none open")
    func orphans() async throws {
        try await TestServer.run { server in
            let services = server.services
            let here = services.cobrowse.node
            // Two sessions; the database says the first's agent, and the second's page, were on a node now gone.
            let first = try await Party.make(server)
            let second = try await Party.make(server)
            let agentGone = try await first.started()
            let pageGone = try await second.started()
            for (party, session, agentsNode) in [(first, agentGone, true), (second, pageGone, false)] {
                try await services.store.write { repo in
                    var record = try #require(try await repo.cobrowse(brandId: party.acme.brand.id, id: session.id))
                    #expect(record.agentNode == here && record.consumerNode == here)
                    if agentsNode { record.agentNode = "node_gone" } else { record.consumerNode = "node_gone" }
                    record.session.version += 1
                    #expect(try await repo.updateCobrowse(record, previousVersion: session.version))
                }
            }
            // Another node, started after both began.
            let alive = Mutex<Set<String>?>(nil)
            let other = CobrowseService(
                store: services.store, hub: services.hub, bus: services.bus, conversations: services.conversations,
                configuration: services.configuration, clock: services.cobrowse.clock,
                cluster: (node: "node_b", liveNodes: { alive.withLock { $0 } }), logger: services.cobrowse.logger)
            let consumer = ConsumerPrincipal(consumerId: first.consumer.id, brandId: first.acme.brand.id, appId: first.consumer.appId)
            #expect(await other.sessions(for: consumer).isEmpty)
            await other.adoptLive()
            #expect(await other.sessions(for: consumer).map(\.id) == [agentGone.id])

            // Too new to know who is alive: nothing is touched.
            await other.endOrphaned()
            #expect(try await services.store.read { repo in try await repo.liveCobrowses(limit: 10) }.count == 2)
            // This node and node_b are alive, node_gone is not: the agent's session ends, the page's waits for the next page.
            alive.withLock { $0 = [here, "node_b"] }
            await other.endOrphaned()
            let ended = try await first.agentSocket.next { Self.session($0, .ended) != nil }
            #expect(Self.session(ended, .ended)?.endReason == .agentLeft)
            _ = try await second.agentSocket.next { if case .cobrowse(let s) = $0 { s.id == pageGone.id && !s.consumerConnected } else { false } }
            let waiting = try await services.store.read { repo in try await repo.cobrowse(brandId: second.acme.brand.id, id: pageGone.id) }
            #expect(waiting?.session.state == .active && waiting?.session.consumerConnected == false)
            await first.close()
            await second.close()
        }
    }

    @Test("offered, accepted on one page, the page relayed to the offering agent only, the pointer back, stopped, and recorded for agents")
    func fullSession() async throws {
        try await TestServer.run { server in
            let party = try await Party.make(server)
            let otherTab = try await RealtimeProbe.connect(port: server.port, token: party.consumerToken)
            let otherAgent = try await RealtimeProbe.connect(port: server.port, token: party.acme.adminToken)
            #expect(try await server.request(.patch, "/v1/brand/settings", token: party.acme.adminToken,
                json: UpdateBrandSettingsRequest(cobrowseMaskSelectors: ["#iban", ".secret"])).status == .ok)

            let offered = try await party.offer().get()
            #expect(offered.state == .offered)
            #expect(offered.agentName == party.agent.name)
            #expect(offered.maskSelectors == ["#iban", ".secret"])
            // Every page of the customer's hears the offer.
            for socket in [party.page, otherTab] {
                #expect(Self.session(try await socket.next { Self.session($0, .offered) != nil }, .offered)?.id == offered.id)
            }

            let accepted = try await Self.request(
                party.page, .cobrowseAnswer(id: "yes", sessionId: offered.id, accept: true, origin: "https://Shop.Acme.test"), id: "yes"
            ).get()
            #expect(accepted.state == .active && accepted.consumerConnected && accepted.origin == "https://shop.acme.test")
            _ = try await party.agentSocket.next { Self.session($0, .active) != nil }

            // The page goes to the agent's connection only.
            try party.page.send(.cobrowseData(sessionId: offered.id, seq: 1, kind: .snapshot, last: true, payload: #"{"html":"<p>Coupon</p>"}"#))
            let relayed = try await party.agentSocket.next { if case .cobrowseData = $0 { true } else { false } }
            guard case .cobrowseData(let id, let seq, let kind, let last, let payload) = relayed else { throw TestFailure("no data") }
            #expect(id == offered.id && seq == 1 && kind == .snapshot && last && payload == #"{"html":"<p>Coupon</p>"}"#)
            #expect(try await otherAgent.expectSilence(for: 0.3).map { if case .cobrowseData = $0 { true } else { false } } != true)

            // Another tab of the customer's cannot feed the session.
            try otherTab.send(.cobrowseData(sessionId: offered.id, seq: 1, kind: .changes, last: false, payload: "{}"))
            #expect(try await Self.unansweredError(otherTab) == "cobrowse_on_other_page")
            // Nor can the agent send the page, or another agent point at it.
            try otherAgent.send(.cobrowsePoint(sessionId: offered.id, payload: #"{"x":1,"y":2}"#))
            #expect(try await Self.unansweredError(otherAgent) == "cobrowse_not_found")

            // The pointer goes to the shared page only.
            try party.agentSocket.send(.cobrowsePoint(sessionId: offered.id, payload: #"{"x":0.5,"y":0.25}"#))
            let pointed = try await party.page.next { if case .cobrowsePoint = $0 { true } else { false } }
            guard case .cobrowsePoint(_, let point) = pointed else { throw TestFailure("no point") }
            #expect(point == #"{"x":0.5,"y":0.25}"#)
            try party.agentSocket.send(.cobrowseResync(sessionId: offered.id))
            let resync = try await party.page.next { if case .cobrowseResync = $0 { true } else { false } }
            guard case .cobrowseResync(_, let reason) = resync else { throw TestFailure("no resync") }
            #expect(reason == "agent")

            // The customer stops it; both sides hear it, and the agents' log has the record (logged,
            // then the session's last state).
            let stopped = try await Self.request(party.page, .cobrowseEnd(id: "stop", sessionId: offered.id), id: "stop").get()
            #expect(stopped.state == .ended && stopped.endReason == .stoppedByConsumer)
            let logged = try await party.agentSocket.next { if case .event(let event) = $0, event.kind == .cobrowse { true } else { false } }
            guard case .event(let event) = logged else { throw TestFailure("no event") }
            #expect(event.cobrowse?.id == offered.id && event.cobrowse?.endReason == .stoppedByConsumer)
            _ = try await party.agentSocket.next { Self.session($0, .ended) != nil }
            try party.page.send(.cobrowseData(sessionId: offered.id, seq: 2, kind: .changes, last: false, payload: "{}"))
            #expect(try await Self.unansweredError(party.page) == "cobrowse_not_active")

            let agentsView = try await server.get("/v1/conversations/\(party.conversation.id)/events", token: party.agentToken)
                .decode(ListResponse<ConversationEventDTO>.self).items
            let record = try #require(agentsView.first { $0.kind == .cobrowse }?.cobrowse)
            #expect(record.id == offered.id && record.startedAt != nil && record.endedAt != nil && record.agentId == party.agent.id)
            let customersView = try await server.get("/v1/consumer/conversations/\(party.conversation.id)/events", token: party.consumerToken)
            #expect(try customersView.decode(ListResponse<ConversationEventDTO>.self).items.allSatisfy { $0.kind != .cobrowse })
            await otherTab.close()
            await otherAgent.close()
            await party.close()
        }
    }

    @Test("refused: no permission, turned off, a site not listed, a non-web conversation, a second offer, frames before the yes, another brand")
    func refusals() async throws {
        try await TestServer.run { server in
            let party = try await Party.make(server)
            let (plainToken, _) = try await party.acme.agent(permissions: [])
            let plain = try await RealtimeProbe.connect(port: server.port, token: plainToken)
            #expect(Self.code(try await Self.request(plain, .cobrowseOffer(id: "o", conversationId: party.conversation.id), id: "o")) == "cobrowse_permission_missing")

            // A consumer cannot offer.
            #expect(Self.code(try await Self.request(party.page, .cobrowseOffer(id: "c", conversationId: party.conversation.id), id: "c")) == "forbidden")

            let offered = try await party.offer().get()
            // The same agent offering again replaces their offer (their page reloaded); another agent is refused.
            let (secondToken, _) = try await party.acme.agent(permissions: [.cobrowse])
            let second = try await RealtimeProbe.connect(port: server.port, token: secondToken)
            #expect(Self.code(try await Self.request(second, .cobrowseOffer(id: "s", conversationId: party.conversation.id), id: "s")) == "cobrowse_in_progress")
            await second.close()
            // Page frames before the customer's yes are refused.
            try party.page.send(.cobrowseData(sessionId: offered.id, seq: 1, kind: .snapshot, last: true, payload: "{}"))
            #expect(try await Self.unansweredError(party.page) == "cobrowse_not_active")

            // Another brand's agent and customer do not find it.
            let other = try await Party.make(server)
            #expect(Self.code(try await Self.request(other.agentSocket, .cobrowseEnd(id: "e", sessionId: offered.id), id: "e")) == "cobrowse_not_found")
            #expect(Self.code(try await Self.request(
                other.page, .cobrowseAnswer(id: "a", sessionId: offered.id, accept: true, origin: nil), id: "a")) == "cobrowse_not_found")
            #expect(Self.code(try await Self.request(
                other.agentSocket, .cobrowseOffer(id: "x", conversationId: party.conversation.id), id: "x")) == "not_found")
            #expect(Self.code(try await Self.request(
                other.agentSocket, .cobrowseControl(id: "k", sessionId: offered.id, action: .release), id: "k")) == "cobrowse_not_found")
            #expect(Self.code(try await Self.request(
                other.page, .cobrowseControl(id: "g", sessionId: offered.id, action: .grant), id: "g")) == "cobrowse_not_found")

            // Only the brand's listed sites: accepting elsewhere ends the session, and the page is told.
            #expect(try await server.request(.patch, "/v1/brand/settings", token: party.acme.adminToken,
                json: UpdateBrandSettingsRequest(cobrowseOrigins: ["https://shop.acme.test"])).status == .ok)
            let current = try await party.offer().get()
            #expect(Self.code(try await Self.request(
                party.page, .cobrowseAnswer(id: "n", sessionId: current.id, accept: true, origin: "https://evil.test"), id: "n")) == "cobrowse_disabled")
            _ = try await party.agentSocket.next { Self.session($0, .ended)?.endReason == .notAllowed }

            // Turned off: no offers.
            #expect(try await server.request(.patch, "/v1/brand/settings", token: party.acme.adminToken,
                json: UpdateBrandSettingsRequest(cobrowseEnabled: false)).status == .ok)
            #expect(Self.code(try await party.offer()) == "cobrowse_disabled")

            // WhatsApp conversations have no page to see.
            #expect(try CobrowseRules.authorizeOffer(settings: BrandSettingsDTO(), channel: .web, conversationState: .open) == ())
            #expect(throws: ParleyError.self) {
                try CobrowseRules.authorizeOffer(settings: BrandSettingsDTO(), channel: .whatsapp, conversationState: .open)
            }
            await plain.close()
            await other.close()
            await party.close()
        }
    }

    @Test("limits: a snapshot over the limit ends the session for both sides; changes over the budget are dropped and a snapshot asked for")
    func limits() async throws {
        try await TestServer.run(configure: {
            $0.cobrowseSnapshotBytes = 65_536
            $0.cobrowseBytesPerSecond = 8_192
        }) { server in
            let party = try await Party.make(server)
            let session = try await party.started()
            let part = String(repeating: "a", count: 30_000)
            try party.page.send(.cobrowseData(sessionId: session.id, seq: 1, kind: .snapshot, last: false, payload: part))
            try party.page.send(.cobrowseData(sessionId: session.id, seq: 2, kind: .snapshot, last: true, payload: part))
            // Changes: 8 KB a second. The first fits, the second does not: dropped, and the page is asked again.
            try party.page.send(.cobrowseData(sessionId: session.id, seq: 3, kind: .changes, last: false, payload: String(repeating: "b", count: 6_000)))
            try party.page.send(.cobrowseData(sessionId: session.id, seq: 4, kind: .changes, last: false, payload: String(repeating: "c", count: 6_000)))
            let resync = try await party.page.next { if case .cobrowseResync = $0 { true } else { false } }
            guard case .cobrowseResync(_, let reason) = resync else { throw TestFailure("no resync") }
            #expect(reason == "budget")
            var seqs: [Int64] = []
            while let frame = try await party.agentSocket.expectSilence(for: 0.5) {
                if case .cobrowseData(_, let seq, _, _, _) = frame { seqs.append(seq) }
            }
            #expect(seqs == [1, 2, 3])

            // A snapshot past 64 KB ends the session.
            for seq in Int64(5)...7 {
                try party.page.send(.cobrowseData(sessionId: session.id, seq: seq, kind: .snapshot, last: false, payload: part))
            }
            let refused = try await party.page.next { if case .error(nil, let detail) = $0 { detail.code == .payloadTooLarge } else { false } }
            guard case .error(_, let detail) = refused else { throw TestFailure("no error") }
            #expect(detail.message.contains("larger than co-browse can show"))
            _ = try await party.agentSocket.next { Self.session($0, .ended)?.endReason == .pageTooLarge }
            await party.close()
        }
    }

    @Test("time: an offer nobody answers ends after a minute; a page that leaves has 30 s to come back, and the next page takes over")
    func deadlines() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let party = try await Party.make(server)
            let offered = try await party.offer().get()
            try await clock.advanceOnceSleeping(by: .seconds(CobrowseRules.offerSeconds))
            _ = try await party.page.next { Self.session($0, .ended)?.endReason == .unanswered }

            // Accepted, then the customer moves to another page of the site.
            let session = try await party.started()
            #expect(session.id != offered.id)
            await party.page.close()
            _ = try await party.agentSocket.next { frame in
                if case .cobrowse(let changed) = frame { changed.state == .active && !changed.consumerConnected } else { false }
            }
            let nextPage = try await RealtimeProbe.connect(port: server.port, token: party.consumerToken)
            // The new page hears of the session when it connects, and takes it over.
            _ = try await nextPage.next { Self.session($0, .active)?.id == session.id }
            let resumed = try await Self.request(
                nextPage, .cobrowseAnswer(id: "again", sessionId: session.id, accept: true, origin: "https://shop.acme.test"), id: "again"
            ).get()
            #expect(resumed.state == .active && resumed.consumerConnected)
            try nextPage.send(.cobrowseData(sessionId: session.id, seq: 1, kind: .snapshot, last: true, payload: "{}"))
            _ = try await party.agentSocket.next { if case .cobrowseData = $0 { true } else { false } }

            // It leaves again, and nothing comes back in 30 s. (Other services sleep on the clock too:
            // it moves 30 s at a time until the deadline, armed once the page is seen gone, passes.)
            await nextPage.close()
            _ = try await party.agentSocket.next { frame in
                if case .cobrowse(let changed) = frame { changed.state == .active && !changed.consumerConnected } else { false }
            }
            var ended: ServerFrame?
            for _ in 0..<20 where ended == nil {
                clock.advance(by: .seconds(CobrowseRules.returnSeconds))
                ended = try? await party.agentSocket.next(within: 0.5) { Self.session($0, .ended)?.endReason == .consumerLeft }
            }
            #expect(ended != nil)

            // The agent's connection closing ends the session it offered.
            let third = try await RealtimeProbe.connect(port: server.port, token: party.consumerToken)
            let last = try await party.offer().get()
            _ = try await third.next { Self.session($0, .offered)?.id == last.id }
            await party.agentSocket.close()
            _ = try await third.next { Self.session($0, .ended)?.endReason == .agentLeft }
            await third.close()
        }
    }

    @Test("brand settings: the switch, sites and mask selectors are validated, kept and read back")
    func settings() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let fresh = try await server.get("/v1/brand/settings", token: acme.adminToken).decode(BrandSettingsDTO.self)
            #expect(fresh.cobrowseEnabled && fresh.cobrowseOrigins.isEmpty && fresh.cobrowseMaskSelectors.isEmpty)
            let bad: [UpdateBrandSettingsRequest] = [
                UpdateBrandSettingsRequest(cobrowseOrigins: ["shop.acme.test"]),
                UpdateBrandSettingsRequest(cobrowseMaskSelectors: ["p { color: red }"]),
                UpdateBrandSettingsRequest(cobrowseMaskSelectors: Array(repeating: ".a", count: 21).enumerated().map { ".a\($0.offset)" }),
                UpdateBrandSettingsRequest(cobrowseMaskSelectors: [""]),
            ]
            for change in bad {
                let reply = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: change)
                #expect(reply.status == .badRequest)
            }
            let saved = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(
                cobrowseEnabled: false, cobrowseOrigins: ["https://Shop.Acme.test"], cobrowseMaskSelectors: ["#iban", " .secret ", "#iban"]))
            #expect(saved.status == .ok)
            let read = try await server.get("/v1/brand/settings", token: acme.adminToken).decode(BrandSettingsDTO.self)
            #expect(!read.cobrowseEnabled && read.cobrowseOrigins == ["https://shop.acme.test"] && read.cobrowseMaskSelectors == ["#iban", ".secret"])
        }
    }
}

@Suite("Co-browse rules")
struct CobrowseRulesTests {
    static func session() -> CobrowseSessionDTO {
        CobrowseSessionDTO(
            id: CobrowseID.make(), conversationId: ConversationID.make(), state: .offered, version: 1, agentId: AgentID.make(), agentName: "Sam",
            offeredAt: Date(timeIntervalSince1970: 1_790_000_000))
    }

    @Test("the state machine: accepted, moved, ended once; a late answer is refused")
    func machine() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_010)
        var machine = CobrowseMachine(Self.session())
        #expect(throws: ParleyError.self) { try machine.apply(.consumerLeft, now: now) }
        try machine.apply(.accept(origin: "https://a.test"), now: now)
        #expect(machine.session.state == .active && machine.session.startedAt == now && machine.session.version == 2)
        #expect(throws: ParleyError.self) { try machine.apply(.expire, now: now) }
        machine.pageLeft()
        #expect(!machine.session.consumerConnected && machine.session.version == 3)
        try machine.apply(.accept(origin: "https://a.test"), now: now)
        #expect(machine.session.consumerConnected)
        try machine.apply(.stop(.agent), now: now)
        #expect(machine.session.state == .ended && machine.session.endReason == .stoppedByAgent)
        #expect(throws: ParleyError.self) { try machine.apply(.accept(origin: nil), now: now) }

        var declined = CobrowseMachine(Self.session())
        try declined.apply(.decline, now: now)
        #expect(declined.session.endReason == .declined)
    }

    @Test("control: only in an active session, asked before granted, given back by either side, none once over")
    func controlMachine() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_010)
        var machine = CobrowseMachine(Self.session())
        #expect(throws: ParleyError.self) { try machine.apply(.requestControl, now: now) }
        try machine.apply(.accept(origin: nil), now: now)
        #expect(throws: ParleyError.self) { try machine.apply(.answerControl(true), now: now) }
        try machine.apply(.requestControl, now: now)
        let asked = machine.session.version
        try machine.apply(.requestControl, now: now)  // asked again: nothing changes
        #expect(machine.session.control == .requested && machine.session.version == asked)
        try machine.apply(.answerControl(true), now: now)
        #expect(machine.session.control == .granted && machine.session.controlGrantedAt == now)
        try machine.apply(.releaseControl, now: now)
        #expect(machine.session.control == .none)
        try machine.apply(.requestControl, now: now)
        try machine.apply(.answerControl(true), now: now.addingTimeInterval(60))
        #expect(machine.session.controlGrantedAt == now)  // the first time is kept
        try machine.apply(.stop(.consumer), now: now)
        #expect(machine.session.control == .none && machine.session.controlGrantedAt == now)
        // A record from before agent control decodes with none.
        var json = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(Self.session())) as! [String: Any]
        json["control"] = nil
        let old = try JSONDecoder().decode(CobrowseSessionDTO.self, from: try JSONSerialization.data(withJSONObject: json))
        #expect(old.control == .none && old.controlGrantedAt == nil)
    }

    @Test("mask selectors: selectors only, trimmed, without duplicates")
    func selectors() throws {
        let (_, kept) = try CobrowseRules.validate(UpdateBrandSettingsRequest(cobrowseMaskSelectors: [" #a ", "input[name=iban]", "#a"]))
        #expect(kept == ["#a", "input[name=iban]"])
        for bad in ["a{}", "<script>", "a;b", "x\\y", String(repeating: "a", count: 201)] {
            #expect(throws: ParleyError.self) { try CobrowseRules.validate(UpdateBrandSettingsRequest(cobrowseMaskSelectors: [bad])) }
        }
    }
}


@Suite("Co-browse page budget")
struct PageBudgetTests {
    @Test("changes: a second's worth at once, refilled with time; over it dropped until the next whole snapshot")
    func budget() {
        let start = ContinuousClock.now
        var budget = PageBudget(perSecond: 1_000, at: start)
        #expect(budget.take(.changes, bytes: 600, last: false, snapshotLimit: 10_000, at: start) == .relay)
        #expect(budget.take(.changes, bytes: 600, last: false, snapshotLimit: 10_000, at: start) == .dropAndResync)
        #expect(budget.take(.changes, bytes: 10, last: false, snapshotLimit: 10_000, at: start + .seconds(5)) == .drop)
        #expect(budget.take(.snapshot, bytes: 4_000, last: false, snapshotLimit: 10_000, at: start + .seconds(5)) == .relay)
        #expect(budget.take(.snapshot, bytes: 4_000, last: true, snapshotLimit: 10_000, at: start + .seconds(5)) == .relay)
        #expect(budget.take(.changes, bytes: 900, last: false, snapshotLimit: 10_000, at: start + .seconds(5)) == .relay)
        #expect(budget.take(.changes, bytes: 500, last: false, snapshotLimit: 10_000, at: start + .milliseconds(5_600)) == .relay)
        #expect(budget.take(.snapshot, bytes: 6_000, last: false, snapshotLimit: 10_000, at: start + .seconds(6)) == .relay)
        #expect(budget.take(.snapshot, bytes: 6_000, last: true, snapshotLimit: 10_000, at: start + .seconds(6)) == .tooLarge)
    }
}
