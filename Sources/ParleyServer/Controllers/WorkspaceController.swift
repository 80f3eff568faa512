import Hummingbird
import ParleyAPI
import ParleyDomain

/// Saved replies, search and presence for agents; availability, agents' names and visits for the widget.
struct WorkspaceController {
    let workspace: WorkspaceService
    let brandSettings: BrandSettingsService
    let identity: IdentityService
    let limits: RateLimits
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/saved-replies", use: savedReplies)
        routes.admins.post("/v1/saved-replies", use: createSavedReply)
        routes.admins.patch("/v1/saved-replies/{replyId}", use: updateSavedReply)
        routes.admins.delete("/v1/saved-replies/{replyId}", use: deleteSavedReply)
        routes.agents.get("/v1/search", use: search)
        routes.agents.get("/v1/presence", use: presence)
        routes.agents.put("/v1/me/presence", use: setPresence)
        routes.consumers.get("/v1/consumer/settings", use: consumerSettings)
        routes.consumers.get("/v1/consumer/agents/{agentId}", use: agent)
        routes.consumers.post("/v1/consumer/visits", use: visit)
    }

    // MARK: Saved replies

    @Sendable func savedReplies(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<SavedReplyDTO>> {
        JSONResponse(.ok, ListResponse(items: try await workspace.savedReplies(context.requireAgent())))
    }

    @Sendable func createSavedReply(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SavedReplyDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(SaveReplyRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await workspace.createSavedReply(admin, body))
    }

    @Sendable func updateSavedReply(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SavedReplyDTO> {
        let admin = try context.requireAgent()
        let id = try context.id("replyId", as: SavedReplyID.self, what: "Saved reply")
        let body = try await request.decodeJSON(SaveReplyRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await workspace.updateSavedReply(admin, id: id, body))
    }

    @Sendable func deleteSavedReply(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let admin = try context.requireAgent()
        try await workspace.deleteSavedReply(admin, id: context.id("replyId", as: SavedReplyID.self, what: "Saved reply"))
        return Response(status: .noContent)
    }

    // MARK: Search and presence

    @Sendable func search(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<SearchHitDTO>> {
        let agent = try context.requireAgent()
        guard let query = request.queryString("q") else { throw ParleyError.missingField("q") }
        let limit = try request.queryInt("limit", default: 20, range: 1...WorkspaceRules.maxSearchResults)
        return JSONResponse(.ok, ListResponse(items: try await workspace.search(agent, query: query, limit: limit)))
    }

    @Sendable func presence(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AgentPresenceDTO>> {
        JSONResponse(.ok, ListResponse(items: try await workspace.presence(context.requireAgent())))
    }

    @Sendable func setPresence(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentPresenceDTO> {
        let agent = try context.requireAgent()
        let body = try await request.decodeJSON(SetPresenceRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await workspace.setPresence(agent, body))
    }

    // MARK: Consumers

    @Sendable func consumerSettings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConsumerSettingsDTO> {
        let consumer = try context.requireConsumer()
        let settings = try await brandSettings.settings(brandId: consumer.brandId)
        let brand = try await identity.brandName(consumer.brandId)
        let available = try await workspace.agentsAvailable(brandId: consumer.brandId)
        var answer = ConsumerSettingsDTO(
            voiceEnabled: settings.voiceFromConsumers, voiceMaxSeconds: settings.voiceMaxSeconds, brandName: brand,
            widgetColor: settings.widgetColor, agentsAvailable: available, availability: available ? settings.availableText : settings.awayText,
            attachmentGroups: settings.attachmentGroups, attachmentMaxMegabytes: settings.attachmentMaxMegabytes,
            previewOrigins: settings.previewOrigins, logoUrl: settings.logoUrl)
        answer.voiceMinSeconds = settings.voiceMinSeconds
        return JSONResponse(.ok, answer)
    }

    @Sendable func agent(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<PublicAgentDTO> {
        let consumer = try context.requireConsumer()
        return JSONResponse(.ok, try await workspace.agent(consumer, id: context.id("agentId", as: AgentID.self, what: "Agent")))
    }

    @Sendable func visit(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let consumer = try context.requireConsumer()
        try await limits.ipWrites.check(context.clientIP(request, trustProxy: configuration.trustProxy), "requests from this address")
        let body = try await request.decodeJSON(ConsumerVisitRequest.self, limit: configuration.maxJSONBodyBytes)
        try await workspace.recordVisit(consumer, body, userAgent: request.headers[.userAgent])
        return Response(status: .noContent)
    }
}
