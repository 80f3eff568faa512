import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Liveness, metrics, and the plain-HTTP answer of the real-time endpoint.
struct SystemController {
    let store: Store
    let metrics: ParleyMetrics

    struct Health: Codable, Sendable {
        var status: String
        var database: String
    }

    func addRoutes(to router: Router<ParleyRequestContext>) {
        router.get("/health", use: health)
        router.get("/metrics", use: prometheus)
        router.get(RouterPath(stringLiteral: RealtimeController.path), use: upgradeRequired)
    }

    @Sendable func health(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<Health> {
        _ = try await store.read { repo in try await repo.brandCount() }
        return JSONResponse(.ok, Health(status: "ok", database: store.flavor.rawValue))
    }

    @Sendable func prometheus(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: metrics.render())))
    }

    /// Reached when a request to the real-time endpoint was not upgraded: either it was plain HTTP, or the
    /// upgrade was refused because the token is missing or invalid (which is reported first).
    @Sendable func upgradeRequired(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        _ = try context.requirePrincipal()
        throw ParleyError(.badRequest, code: "upgrade_required", message: "This endpoint speaks WebSocket: send an Upgrade request.")
    }
}
