import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Consumers' activity (ParleyKit's `report`), what agents see of it, and engagement rules.
struct ActivityController {
    let activity: ActivityService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.consumers.post("/v1/consumer/activity", use: report)
        routes.agents.get("/v1/consumers/{consumerId}/activity", use: consumerActivity)
        routes.agents.get("/v1/engagement-rules", use: rules)
        routes.admins.post("/v1/engagement-rules", use: createRule)
        routes.admins.patch("/v1/engagement-rules/{ruleId}", use: updateRule)
        routes.admins.delete("/v1/engagement-rules/{ruleId}", use: deleteRule)
    }

    @Sendable func report(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ReportActivityResponse> {
        let consumer = try context.requireConsumer()
        let body = try await request.decodeJSON(ReportActivityRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await activity.report(consumer, body))
    }

    @Sendable func consumerActivity(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<ActivityEventDTO>> {
        let agent = try context.requireAgent()
        let id = try context.id("consumerId", as: ConsumerID.self, what: "Consumer")
        let limit = try request.queryInt("limit", default: 50, range: 1...ActivityRules.keptPerConsumer)
        return JSONResponse(.ok, ListResponse(items: try await activity.activity(agent, consumerId: id, limit: limit)))
    }

    @Sendable func rules(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<EngagementRuleDTO>> {
        JSONResponse(.ok, ListResponse(items: try await activity.rules(context.requireAgent())))
    }

    @Sendable func createRule(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<EngagementRuleDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(SaveEngagementRuleRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await activity.createRule(admin, body))
    }

    @Sendable func updateRule(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<EngagementRuleDTO> {
        let admin = try context.requireAgent()
        let id = try context.id("ruleId", as: EngagementRuleID.self, what: "Engagement rule")
        let body = try await request.decodeJSON(SaveEngagementRuleRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await activity.updateRule(admin, id: id, body))
    }

    @Sendable func deleteRule(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await activity.deleteRule(context.requireAgent(), id: try context.id("ruleId", as: EngagementRuleID.self, what: "Engagement rule"))
        return Response(status: .noContent)
    }
}
