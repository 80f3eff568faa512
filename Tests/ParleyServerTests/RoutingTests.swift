import Foundation
import ParleyAPI
import ParleyServer
import ParleyStore
import SQLKit
import Synchronization
import Testing

/// Routing: the queue, automatic assignment by team and room, handing back an absent agent's
/// conversations after the grace period, transfers, and the consumer's place in the queue.
@Suite("Routing")
struct RoutingTests {
    /// An agent signed in and connected (online by default): routing offers them conversations.
    struct Connected {
        let token: String
        let agent: AgentDTO
        let socket: RealtimeProbe
    }

    static func connectedAgent(_ brand: BrandScenario, server: TestServer) async throws -> Connected {
        let (token, agent) = try await brand.agent()
        let socket = try await RealtimeProbe.connect(port: server.port, token: token)
        return Connected(token: token, agent: agent, socket: socket)
    }

    static func conversations(_ server: TestServer, token: String) async throws -> [ConversationDTO] {
        var all: [ConversationDTO] = []
        var cursor: String?
        repeat {
            let page = try await server.get("/v1/conversations?state=open,reopened,resolved&limit=200" + (cursor.map { "&cursor=\($0)" } ?? ""), token: token)
                .decode(Page<ConversationDTO>.self)
            all += page.items
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    /// Waits until `check` holds for the brand's conversations.
    static func settle(
        _ server: TestServer, token: String, within seconds: Double = 20, _ check: @escaping ([ConversationDTO]) -> Bool
    ) async throws -> [ConversationDTO] {
        let deadline = Date().addingTimeInterval(seconds)
        var last: [ConversationDTO] = []
        while Date() < deadline {
            last = try await conversations(server, token: token)
            if check(last) { return last }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("routing did not settle: \(last.map { "\($0.id) \($0.assigneeId?.rawValue ?? "-")" })")
    }

    @Test("20 agents in two teams with a limit of 2: nobody above it, each team's oldest first, the rest wait in order; a resolved conversation makes room")
    func twentyAgentsTwoTeams() async throws {
        try await TestServer.run(configure: { $0.rateLogins = 0; $0.rateConsumerSessions = 0; $0.rateIPWrites = 0 }) { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            #expect(try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(maxConversations: 2)).status == .ok)
            let ios = try await acme.app(channel: .inApp, name: "Acme iOS")
            var agents: [Connected] = []
            for _ in 0..<20 { agents.append(try await Self.connectedAgent(acme, server: server)) }
            let billing = try await server.post(
                "/v1/teams", token: acme.adminToken,
                json: SaveTeamRequest(name: "Billing", memberIds: agents.prefix(10).map(\.agent.id), appIds: [acme.app.id])).decode(TeamDTO.self)
            let tech = try await server.post(
                "/v1/teams", token: acme.adminToken,
                json: SaveTeamRequest(name: "Tech", memberIds: agents.suffix(10).map(\.agent.id), appIds: [ios.id])).decode(TeamDTO.self)
            // The admin is connected nowhere: only the 20 take conversations.

            var order: [(ConversationID, TeamID)] = []
            for index in 0..<60 {
                let web = index % 2 == 0
                let (token, _) = try await acme.consumer(name: "Customer \(index)", appId: web ? acme.app.id : ios.id)
                let sent = try await acme.send("Question \(index)", as: token)
                order.append((sent.conversation.id, web ? billing.id : tech.id))
            }
            let settled = try await Self.settle(server, token: acme.adminToken) { all in
                all.filter { $0.assigneeId != nil }.count == 40
            }
            try await Task.sleep(for: .milliseconds(300))  // nothing more happens
            let now = try await Self.conversations(server, token: acme.adminToken)
            #expect(now.filter { $0.assigneeId != nil }.count == 40)
            let byId = Dictionary(uniqueKeysWithValues: now.map { ($0.id, $0) })
            let members = [billing.id: Set(agents.prefix(10).map(\.agent.id)), tech.id: Set(agents.suffix(10).map(\.agent.id))]
            for (team, ids) in members {
                let conversations = order.filter { $0.1 == team }.map(\.0)
                // The oldest 20 of the team have an agent of the team; the newest 10 wait.
                #expect(conversations.prefix(20).allSatisfy { byId[$0]?.assigneeId.map(ids.contains) == true })
                #expect(conversations.suffix(10).allSatisfy { byId[$0]?.assigneeId == nil })
            }
            let loads = Dictionary(grouping: settled.compactMap(\.assigneeId), by: { $0 }).mapValues(\.count)
            #expect(loads.values.allSatisfy { $0 == 2 })
            #expect(loads.count == 20)

            // The waiting see their place: the team's oldest waiting is first.
            let firstWaiting = try #require(order.filter { $0.1 == billing.id }.map(\.0).dropFirst(20).first)
            let waitingConsumer = try #require(byId[firstWaiting]?.consumerId)
            _ = waitingConsumer
            let admin = acme.adminToken
            // An agent resolves one: the oldest waiting of their team takes the room.
            let busy = agents[0]
            let theirs = try #require(now.first { $0.assigneeId == busy.agent.id })
            #expect(try await server.post("/v1/conversations/\(theirs.id)/resolve", token: busy.token).status == .ok)
            let after = try await Self.settle(server, token: admin) { all in
                all.first { $0.id == firstWaiting }?.assigneeId != nil
            }
            #expect(after.first { $0.id == firstWaiting }?.assigneeId == busy.agent.id)
            let open = after.filter { $0.state != .resolved }
            #expect(Dictionary(grouping: open.compactMap(\.assigneeId), by: { $0 }).values.allSatisfy { $0.count <= 2 })
            for agent in agents { _ = await agent.socket.close() }
        }
    }

    @Test("the consumer sees their place and the expected wait, live; in manual mode an agent takes one, and the queue moves")
    func queuePositionsAndManualMode() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            #expect(try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .manual)).status == .ok)
            let agent = try await Self.connectedAgent(acme, server: server)
            var waiting: [(token: String, conversation: ConversationID)] = []
            for index in 0..<3 {
                let (token, _) = try await acme.consumer(name: "Waiting \(index)")
                let sent = try await acme.send("Anyone there? \(index)", as: token)
                waiting.append((token, sent.conversation.id))
            }
            for (index, entry) in waiting.enumerated() {
                let position = try await server.get("/v1/consumer/conversations/\(entry.conversation)/queue", token: entry.token).decode(QueuePositionDTO.self)
                #expect(position.position == index + 1)
                #expect(position.expectedWaitSeconds == nil)  // no history yet
            }
            // The third customer listens: when the first is taken, they move up to 2.
            let listener = try await RealtimeProbe.connect(port: server.port, token: waiting[2].token)
            #expect(try await server.post("/v1/conversations/\(waiting[0].conversation)/assign", token: agent.token, json: AssignRequest(agentId: agent.agent.id)).status == .ok)
            let moved = try await listener.next { frame in
                if case .queue(let position) = frame { return position.position == 2 }
                return false
            }
            guard case .queue(let dto) = moved else { throw TestFailure("no queue frame") }
            #expect(dto.conversationId == waiting[2].conversation)
            let taken = try await server.get("/v1/consumer/conversations/\(waiting[0].conversation)/queue", token: waiting[0].token).decode(QueuePositionDTO.self)
            #expect(taken.position == nil)
            // Another consumer's conversation is not found.
            #expect(try await server.get("/v1/consumer/conversations/\(waiting[0].conversation)/queue", token: waiting[1].token).status == .notFound)
            // Automatic again: the agent (room 5) gets the other two at once.
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .automatic))
            _ = try await Self.settle(server, token: acme.adminToken) { all in all.allSatisfy { $0.assigneeId == agent.agent.id } }
            _ = await listener.close()
            _ = await agent.socket.close()
        }
    }

    @Test("an agent who goes offline hands back their conversations after the grace period (a moved clock), to an agent with room")
    func graceThenRequeue() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(maxConversations: 3, requeueGraceSeconds: 120))
            let leaving = try await Self.connectedAgent(acme, server: server)
            var ids: [ConversationID] = []
            for index in 0..<2 {
                let (token, _) = try await acme.consumer(name: "Customer \(index)")
                ids.append(try await acme.send("Help \(index)", as: token).conversation.id)
            }
            _ = try await Self.settle(server, token: acme.adminToken) { all in all.filter { $0.assigneeId == leaving.agent.id }.count == 2 }
            let staying = try await Self.connectedAgent(acme, server: server)
            _ = await leaving.socket.close()  // the laptop lid closes
            // The server hears it and schedules the requeue (on a loaded machine that can take a while;
            // moving the clock before it would move the job's due time along).
            let scheduled = Date().addingTimeInterval(30)
            while Date() < scheduled, try await server.services.store.database.read({ db in
                try await db.raw("SELECT COUNT(*) AS n FROM jobs WHERE kind = 'routing.requeue'").first()?.decode(column: "n", as: Int.self) ?? 0
            }) == 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            clock.advance(by: .seconds(119))
            try await Task.sleep(for: .seconds(1))  // the job runner polls: not due yet
            var now = try await Self.conversations(server, token: acme.adminToken)
            #expect(now.filter { $0.assigneeId == leaving.agent.id }.count == 2)
            clock.advance(by: .seconds(2))
            now = try await Self.settle(server, token: acme.adminToken) { all in all.filter { $0.assigneeId == staying.agent.id }.count == 2 }
            #expect(Set(now.filter { $0.assigneeId == staying.agent.id }.map(\.id)) == Set(ids))
            _ = await staying.socket.close()
        }
    }

    @Test("routing passes at once never give a conversation to two agents nor an agent more than their room")
    func concurrentPasses() async throws {
        try await TestServer.run(configure: { $0.rateLogins = 0; $0.rateConsumerSessions = 0 }) { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .manual, maxConversations: 3))
            var agents: [Connected] = []
            for _ in 0..<4 { agents.append(try await Self.connectedAgent(acme, server: server)) }
            for index in 0..<20 {
                let (token, _) = try await acme.consumer(name: "C\(index)")
                try await acme.send("Q\(index)", as: token)
            }
            // Automatic, and eight passes started together on top of the one the change starts.
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .automatic))
            let routing = server.services.routing
            let brandId = acme.brand.id
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 { group.addTask { _ = try await routing.dispatch(brandId) } }
                try await group.waitForAll()
            }
            let all = try await Self.settle(server, token: acme.adminToken) { $0.filter { $0.assigneeId != nil }.count == 12 }
            let loads = Dictionary(grouping: all.compactMap(\.assigneeId), by: { $0 }).mapValues(\.count)
            #expect(loads.count == 4 && loads.values.allSatisfy { $0 == 3 })
            // Each conversation was assigned once: one `assigned` event by the router.
            for conversation in all where conversation.assigneeId != nil {
                let events = try await server.get("/v1/conversations/\(conversation.id)/events", token: acme.adminToken)
                    .decode(ListResponse<ConversationEventDTO>.self).items.filter { $0.kind == .assigned }
                #expect(events.count == 1, "\(conversation.id): \(events.count) assignments")
            }
            for agent in agents { _ = await agent.socket.close() }
        }
    }

    @Test("managers transfer to an agent or a team with a note the consumer never sees; settings, teams and limits are checked")
    func transfersAndChecks() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .manual))
            let (agentToken, agent) = try await acme.agent()
            let (managerToken, _) = try await acme.agent(role: .manager)
            let (consumerToken, _) = try await acme.consumer(name: "Dana")
            let sent = try await acme.send("My invoice is wrong", as: consumerToken)
            let listener = try await RealtimeProbe.connect(port: server.port, token: consumerToken)
            // Agents cannot transfer; managers can, to an agent, with a note.
            #expect(try await server.post("/v1/conversations/\(sent.conversation.id)/transfer", token: agentToken, json: TransferRequest(agentId: agent.id)).status == .forbidden)
            let moved = try await server.post(
                "/v1/conversations/\(sent.conversation.id)/transfer", token: managerToken,
                json: TransferRequest(agentId: agent.id, note: "Invoice 2291, already refunded once"))
            #expect(moved.status == .ok)
            #expect(try moved.decode(ConversationDTO.self).assigneeId == agent.id)
            let assigned = try await listener.next { if case .event(let event) = $0 { event.kind == .assigned } else { false } }
            guard case .event(let event) = assigned else { throw TestFailure("no assigned event") }
            #expect(event.assigneeId == agent.id)
            #expect(try await listener.expectSilence(for: 0.3).map { if case .event(let e) = $0 { e.kind == .note } else { false } } != true)
            let events = try await server.get("/v1/consumer/conversations/\(sent.conversation.id)/events", token: consumerToken)
                .decode(ListResponse<ConversationEventDTO>.self).items
            #expect(!events.contains { $0.kind == .note })
            let agentEvents = try await server.get("/v1/conversations/\(sent.conversation.id)/events", token: agentToken)
                .decode(ListResponse<ConversationEventDTO>.self).items
            #expect(agentEvents.contains { $0.kind == .note && $0.text == "Invoice 2291, already refunded once" })

            // To a team: back in the queue, of that team.
            let team = try await server.post("/v1/teams", token: acme.adminToken, json: SaveTeamRequest(name: "Billing")).decode(TeamDTO.self)
            #expect(try await server.post("/v1/conversations/\(sent.conversation.id)/transfer", token: managerToken, json: TransferRequest(teamId: team.id)).status == .ok)
            #expect(try await server.get("/v1/consumer/conversations/\(sent.conversation.id)/queue", token: consumerToken).decode(QueuePositionDTO.self).position == 1)

            // Refusals, with their codes; nothing changes.
            let refusals: [(TestServer.Reply, Int, String)] = [
                (try await server.post("/v1/conversations/\(sent.conversation.id)/transfer", token: managerToken, json: TransferRequest()), 400, "missing_field"),
                (try await server.post("/v1/conversations/\(sent.conversation.id)/transfer", token: managerToken, json: TransferRequest(agentId: agent.id, teamId: team.id)), 400, "invalid_field"),
                (try await server.post("/v1/conversations/\(sent.conversation.id)/transfer", token: managerToken, json: TransferRequest(agentId: AgentID(rawValue: "agt_nobody"))), 422, "agent_not_found"),
                (try await server.post("/v1/teams", token: acme.adminToken, json: SaveTeamRequest(name: "Billing")), 409, "team_name_taken"),
                (try await server.post("/v1/teams", token: acme.adminToken, json: SaveTeamRequest(name: " ")), 400, "invalid_field"),
                (try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(maxConversations: 0)), 400, "invalid_field"),
                (try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(requeueGraceSeconds: 86_401)), 400, "invalid_field"),
                (try await server.request(.put, "/v1/agents/\(agent.id)/capacity", token: acme.adminToken, json: AgentCapacityRequest(maxConversations: 101)), 400, "invalid_field"),
                (try await server.request(.patch, "/v1/routing", token: agentToken, json: UpdateRoutingRequest(mode: .automatic)), 403, "forbidden"),
            ]
            for (reply, status, code) in refusals {
                #expect(reply.status.code == status, "\(reply.text)")
                #expect(try reply.error.code.rawValue == code)
            }
            // An agent's own limit shows in the loads.
            let load = try await server.request(.put, "/v1/agents/\(agent.id)/capacity", token: acme.adminToken, json: AgentCapacityRequest(maxConversations: 8))
                .decode(AgentLoadDTO.self)
            #expect(load.maxConversations == 8 && load.ownLimit == 8)
            let loads = try await server.get("/v1/routing/agents", token: managerToken).decode(ListResponse<AgentLoadDTO>.self).items
            #expect(loads.first { $0.agentId == agent.id }?.maxConversations == 8)
            _ = await listener.close()
        }
    }

    @Test("a manager puts a waiting conversation first: its place moves, routing offers it before older ones; only waiting ones, only managers")
    func priority() async throws {
        try await TestServer.run(configure: { $0.rateConsumerSessions = 0 }) { server in
            let acme = try await BrandScenario.make(server)  // manual: nothing is assigned meanwhile
            var ids: [ConversationID] = []
            var tokens: [String] = []
            for index in 0..<3 {
                let (token, _) = try await acme.consumer(name: "C\(index)")
                ids.append(try await acme.send("Question \(index)", as: token).conversation.id)
                tokens.append(token)
            }
            func place(_ index: Int) async throws -> Int? {
                try await server.get("/v1/consumer/conversations/\(ids[index])/queue", token: tokens[index]).decode(QueuePositionDTO.self).position
            }
            #expect(try await place(2) == 3)
            let (agentToken, _) = try await acme.agent()
            #expect(try await server.request(.put, "/v1/conversations/\(ids[2])/priority", token: agentToken, json: SetPriorityRequest(priority: 9)).status == .forbidden)
            #expect(try await server.request(.put, "/v1/conversations/\(ids[2])/priority", token: acme.adminToken, json: SetPriorityRequest(priority: 10)).status == .badRequest)
            let moved = try await server.request(.put, "/v1/conversations/\(ids[2])/priority", token: acme.adminToken, json: SetPriorityRequest(priority: 9))
            #expect(try moved.decode(QueuePositionDTO.self).position == 1)
            #expect(try await place(2) == 1)
            #expect(try await place(0) == 2)
            #expect(try await place(1) == 3)

            // One agent with room for one, automatic routing: the prioritised conversation goes first.
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(maxConversations: 1))
            let agent = try await Self.connectedAgent(acme, server: server)
            _ = try await server.request(.patch, "/v1/routing", token: acme.adminToken, json: UpdateRoutingRequest(mode: .automatic))
            let settled = try await Self.settle(server, token: acme.adminToken) { all in all.contains { $0.assigneeId == agent.agent.id } }
            #expect(settled.filter { $0.assigneeId == agent.agent.id }.map(\.id) == [ids[2]])
            let taken = try await server.request(.put, "/v1/conversations/\(ids[2])/priority", token: acme.adminToken, json: SetPriorityRequest(priority: 1))
            #expect(taken.status == .conflict)
            #expect(try taken.error.code == "not_waiting")
            _ = await agent.socket.close()
        }
    }
}
