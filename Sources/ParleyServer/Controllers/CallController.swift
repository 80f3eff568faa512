import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Calls over HTTP: an agent starts one; agents and the conversation's consumer list them.
/// Everything during a call (accept, signalling, media state, hang-up) travels as real-time frames.
struct CallController {
    let calls: CallService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.post("/v1/conversations/{conversationId}/calls", use: start)
        routes.agents.get("/v1/conversations/{conversationId}/calls", use: list)
        routes.consumers.get("/v1/consumer/conversations/{conversationId}/calls", use: list)
    }

    @Sendable func start(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<CallSessionResponse> {
        let agent = try context.requireAgent()
        let conversationId = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let body = try await request.decodeJSON(StartCallRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await calls.start(agent, conversationId: conversationId, body))
    }

    @Sendable func list(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<CallDTO>> {
        let principal = try context.requirePrincipal()  // the route's group has refused the other kind
        let conversationId = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let limit = try request.queryInt("limit", default: 50, range: 1...ConversationService.maxPage)
        return JSONResponse(.ok, ListResponse(items: try await calls.calls(principal, conversationId: conversationId, limit: limit)))
    }
}
