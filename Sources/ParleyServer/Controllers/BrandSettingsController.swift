import Hummingbird
import ParleyAPI
import ParleyDomain

/// The brand's settings: agents read them, admins change them; the logo is one of them (its image
/// is made by the attachments pipeline, the setting written by `BrandSettingsService`).
struct BrandSettingsController {
    let settings: BrandSettingsService
    let attachments: AttachmentService

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/brand/settings", use: read)
        routes.admins.patch("/v1/brand/settings", use: update)
        routes.admins.put("/v1/brand/logo", use: setLogo)
        routes.admins.delete("/v1/brand/logo", use: removeLogo)
    }

    @Sendable func read(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<BrandSettingsDTO> {
        JSONResponse(.ok, try await settings.settings(brandId: context.requireAgent().brandId))
    }

    @Sendable func update(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<BrandSettingsDTO> {
        let admin = try context.requireAgent()
        let change = try await request.decodeJSON(UpdateBrandSettingsRequest.self, limit: 8192)
        return JSONResponse(.ok, try await settings.update(admin, change))
    }

    @Sendable func setLogo(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<BrandSettingsDTO> {
        let admin = try context.requireAgent()
        return JSONResponse(.ok, try await attachments.setLogo(admin, contentLength: request.headers[.contentLength].flatMap { Int($0) }, body: request.body))
    }

    @Sendable func removeLogo(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<BrandSettingsDTO> {
        JSONResponse(.ok, try await attachments.removeLogo(context.requireAgent()))
    }
}
