import Foundation
import HTTPTypes
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Records: retention and history settings, legal holds, the purge log, and a customer's data
/// exported or erased (GDPR articles 15 and 17).
struct RecordsController {
    let records: RecordsService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/records", use: settings)
        routes.admins.patch("/v1/records", use: updateSettings)
        routes.agents.get("/v1/legal-holds", use: holds)
        routes.admins.post("/v1/legal-holds", use: hold)
        routes.admins.delete("/v1/legal-holds/{holdId}", use: release)
        routes.admins.get("/v1/purges", use: purges)
        routes.admins.get("/v1/consumers/{consumerId}/export", use: export)
        routes.admins.delete("/v1/consumers/{consumerId}", use: erase)
    }

    @Sendable func settings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<RecordsSettingsDTO> {
        JSONResponse(.ok, try await records.settings(context.requireAgent()))
    }

    @Sendable func updateSettings(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<RecordsSettingsDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(UpdateRecordsRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await records.updateSettings(admin, body))
    }

    @Sendable func holds(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<LegalHoldDTO>> {
        JSONResponse(.ok, ListResponse(items: try await records.holds(context.requireAgent())))
    }

    @Sendable func hold(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<LegalHoldDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(CreateLegalHoldRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await records.hold(admin, body))
    }

    @Sendable func release(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await records.release(context.requireAgent(), id: try context.id("holdId", as: LegalHoldID.self, what: "Legal hold"))
        return Response(status: .noContent)
    }

    @Sendable func purges(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<PurgeDTO>> {
        let limit = try request.queryInt("limit", default: 50, range: 1...200)
        return JSONResponse(.ok, ListResponse(items: try await records.purges(context.requireAgent(), limit: limit)))
    }

    @Sendable func export(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let id = try context.id("consumerId", as: ConsumerID.self, what: "Consumer")
        let export = try await records.export(context.requireAgent(), consumerId: id)
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentDisposition] = "attachment; filename=\"customer-\(id).json\""
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(data: try ParleyJSON.makeEncoder().encode(export))))
    }

    @Sendable func erase(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<PurgeDTO> {
        let id = try context.id("consumerId", as: ConsumerID.self, what: "Consumer")
        return JSONResponse(.ok, try await records.erase(context.requireAgent(), consumerId: id))
    }
}
