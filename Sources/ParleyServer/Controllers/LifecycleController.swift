import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Conversations' lifecycle: the brand's settings (automatic close, the rating question, business
/// hours), its automatic messages per language, and customers' ratings.
struct LifecycleController {
    let lifecycle: LifecycleService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/lifecycle", use: settings)
        routes.admins.patch("/v1/lifecycle", use: updateSettings)
        routes.agents.get("/v1/automatic-messages", use: automaticMessages)
        routes.admins.put("/v1/automatic-messages/{kind}/{language}", use: saveAutomaticMessage)
        routes.admins.delete("/v1/automatic-messages/{kind}/{language}", use: deleteAutomaticMessage)
        routes.consumers.post("/v1/consumer/conversations/{conversationId}/rating", use: rate)
    }

    @Sendable func settings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<LifecycleSettingsDTO> {
        JSONResponse(.ok, try await lifecycle.settings(context.requireAgent()))
    }

    @Sendable func updateSettings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<LifecycleSettingsDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(UpdateLifecycleRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await lifecycle.updateSettings(admin, body))
    }

    @Sendable func automaticMessages(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<AutomaticMessageDTO>> {
        JSONResponse(.ok, ListResponse(items: try await lifecycle.automaticMessages(context.requireAgent())))
    }

    @Sendable func saveAutomaticMessage(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AutomaticMessageDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(SaveAutomaticMessageRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(
            .ok, try await lifecycle.saveAutomaticMessage(
                admin, kind: context.parameters.get("kind") ?? "", language: context.parameters.get("language") ?? "", body))
    }

    @Sendable func deleteAutomaticMessage(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await lifecycle.deleteAutomaticMessage(
            context.requireAgent(), kind: context.parameters.get("kind") ?? "", language: context.parameters.get("language") ?? "")
        return Response(status: .noContent)
    }

    @Sendable func rate(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        let consumer = try context.requireConsumer()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let body = try await request.decodeJSON(RateConversationRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await lifecycle.rate(consumer, conversationId: id, body))
    }
}
