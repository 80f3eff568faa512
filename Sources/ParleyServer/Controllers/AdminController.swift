import Hummingbird
import ParleyAPI
import ParleyDomain

/// The brand's own administration: agents, apps and their identity keys.
struct AdminController {
    let identity: IdentityService
    let hub: RealtimeHub
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/brand", use: brand)
        routes.agents.get("/v1/agents", use: listAgents)
        routes.admins.post("/v1/agents", use: createAgent)
        routes.admins.patch("/v1/agents/{agentId}", use: updateAgent)
        routes.admins.delete("/v1/agents/{agentId}", use: deleteAgent)
        routes.agents.get("/v1/apps", use: listApps)
        routes.admins.post("/v1/apps", use: createApp)
        routes.agents.get("/v1/apps/{appId}/keys", use: listKeys)
        routes.admins.post("/v1/apps/{appId}/keys", use: addKey)
    }

    @Sendable func brand(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<BrandDTO> {
        JSONResponse(.ok, try await identity.brand(context.requireAgent()))
    }

    @Sendable func listAgents(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AgentDTO>> {
        JSONResponse(.ok, ListResponse(items: try await identity.agents(context.requireAgent())))
    }

    @Sendable func createAgent(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(CreateAgentRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await identity.createAgent(admin, body))
    }

    @Sendable func updateAgent(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentDTO> {
        let admin = try context.requireAgent()
        let id = try context.id("agentId", as: AgentID.self, what: "Agent")
        let body = try await request.decodeJSON(UpdateAgentRequest.self, limit: configuration.maxJSONBodyBytes)
        let change = try await identity.updateAgent(admin, id: id, body, sessionTokenHash: context.sessionTokenHash)
        if change.endSessions {
            // Their open real-time connections end with their sessions, at once.
            hub.disconnect(agentId: id, keeping: change.keeping, code: RealtimeCloseCode.unauthorized, reason: "signed out by an admin")
        }
        return JSONResponse(.ok, change.agent)
    }

    @Sendable func deleteAgent(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let admin = try context.requireAgent()
        let id = try context.id("agentId", as: AgentID.self, what: "Agent")
        try await identity.deleteAgent(admin, id: id)
        hub.disconnect(agentId: id, code: RealtimeCloseCode.unauthorized, reason: "account removed")
        return Response(status: .noContent)
    }

    @Sendable func listApps(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AppDTO>> {
        JSONResponse(.ok, ListResponse(items: try await identity.apps(context.requireAgent())))
    }

    @Sendable func createApp(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AppDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(CreateAppRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await identity.createApp(admin, body))
    }

    @Sendable func listKeys(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AppKeyDTO>> {
        let admin = try context.requireAgent()
        let appId = try context.id("appId", as: AppID.self, what: "App")
        return JSONResponse(.ok, ListResponse(items: try await identity.appKeys(admin, appId: appId)))
    }

    @Sendable func addKey(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AppKeyDTO> {
        let admin = try context.requireAgent()
        let appId = try context.id("appId", as: AppID.self, what: "App")
        let body = try await request.decodeJSON(AddAppKeyRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await identity.addAppKey(admin, appId: appId, body))
    }
}
