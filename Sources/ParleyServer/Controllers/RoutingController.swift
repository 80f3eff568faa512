import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Routing: the brand's settings, teams, agents' limits and load, transfers, and the consumer's
/// place in the queue.
struct RoutingController {
    let routing: RoutingService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/routing", use: settings)
        routes.admins.patch("/v1/routing", use: updateSettings)
        routes.agents.get("/v1/routing/agents", use: loads)
        routes.agents.get("/v1/teams", use: teams)
        routes.admins.post("/v1/teams", use: createTeam)
        routes.admins.put("/v1/teams/{teamId}", use: updateTeam)
        routes.admins.delete("/v1/teams/{teamId}", use: deleteTeam)
        routes.admins.put("/v1/agents/{agentId}/capacity", use: capacity)
        // Managers and admins (checked by the service: the role, not a route group).
        routes.agents.post("/v1/conversations/{conversationId}/transfer", use: transfer)
        routes.agents.put("/v1/conversations/{conversationId}/priority", use: priority)
        routes.consumers.get("/v1/consumer/conversations/{conversationId}/queue", use: queue)
    }

    @Sendable func settings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<RoutingSettingsDTO> {
        JSONResponse(.ok, try await routing.settings(context.requireAgent()))
    }

    @Sendable func updateSettings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<RoutingSettingsDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(UpdateRoutingRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await routing.updateSettings(admin, body))
    }

    @Sendable func loads(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AgentLoadDTO>> {
        JSONResponse(.ok, ListResponse(items: try await routing.loads(context.requireAgent())))
    }

    @Sendable func teams(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<TeamDTO>> {
        JSONResponse(.ok, ListResponse(items: try await routing.teams(context.requireAgent())))
    }

    @Sendable func createTeam(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<TeamDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(SaveTeamRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await routing.createTeam(admin, body))
    }

    @Sendable func updateTeam(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<TeamDTO> {
        let admin = try context.requireAgent()
        let id = try context.id("teamId", as: TeamID.self, what: "Team")
        let body = try await request.decodeJSON(SaveTeamRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await routing.updateTeam(admin, id: id, body))
    }

    @Sendable func deleteTeam(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await routing.deleteTeam(context.requireAgent(), id: try context.id("teamId", as: TeamID.self, what: "Team"))
        return Response(status: .noContent)
    }

    @Sendable func capacity(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentLoadDTO> {
        let admin = try context.requireAgent()
        let id = try context.id("agentId", as: AgentID.self, what: "Agent")
        let body = try await request.decodeJSON(AgentCapacityRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await routing.setCapacity(admin, agentId: id, body))
    }

    @Sendable func transfer(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        let manager = try context.requireAgent()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let body = try await request.decodeJSON(TransferRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await routing.transfer(manager, conversationId: id, body))
    }

    @Sendable func priority(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<QueuePositionDTO> {
        let manager = try context.requireAgent()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let body = try await request.decodeJSON(SetPriorityRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await routing.setPriority(manager, conversationId: id, body))
    }

    @Sendable func queue(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<QueuePositionDTO> {
        let consumer = try context.requireConsumer()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        return JSONResponse(.ok, try await routing.queuePosition(consumer, conversationId: id))
    }
}
