import Foundation
import ParleyAPI
import ParleyDomain
import Synchronization
import Testing

@testable import ParleyServer

/// Services ask a `PresenceDirectory` who is connected, not this node's hub: an agent connected to
/// another node is as available here (what a directory shared by several nodes will say).
@Suite("Presence directory")
struct PresenceSeamTests {
    /// A directory that knows of agents connected elsewhere.
    final class Elsewhere: PresenceDirectory {
        let agents: Mutex<Set<AgentID>>
        init(_ agents: Set<AgentID>) { self.agents = Mutex(agents) }
        func connectedAgents(brandId: BrandID) -> Set<AgentID> { agents.withLock { $0 } }
        func isConnected(consumerId: ConsumerID) -> Bool { false }
        func onAgentConnectivity(_ observer: @escaping @Sendable (AgentPrincipal, Bool) -> Void) {}
    }

    @Test("routing gives a waiting conversation to an online agent the directory says is connected, though no socket is open on this node")
    func routesToAnAgentConnectedElsewhere() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server, routing: .automatic)
            let (agentToken, agent) = try await acme.agent()
            // Only the agent takes conversations.
            _ = try await server.request(.put, "/v1/me/presence", token: acme.adminToken, json: SetPresenceRequest(presence: .offline))
            _ = try await server.request(.put, "/v1/me/presence", token: agentToken, json: SetPresenceRequest(presence: .online))
            let (token, _) = try await acme.consumer()
            let conversation = try await acme.send("Anyone there?", as: token).conversation
            // This node's hub has no agent connected: its own routing leaves the conversation waiting.
            #expect(try await server.services.routing.dispatch(acme.brand.id).isEmpty)

            let local = server.services.routing
            let routing = RoutingService(
                store: local.store, presence: Elsewhere([agent.id]), bus: local.bus, jobs: local.jobs, clock: local.clock, logger: local.logger)
            let assigned = try await routing.dispatch(acme.brand.id)
            #expect(assigned.count == 1 && assigned.first?.0 == conversation.id && assigned.first?.1 == agent.id)
            let stored = try await server.get("/v1/conversations/\(conversation.id)", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(stored.assigneeId == agent.id)
        }
    }
}
