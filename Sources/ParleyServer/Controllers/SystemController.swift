import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Liveness, metrics, and the plain-HTTP answer of the real-time endpoint.
struct SystemController {
    let store: Store
    let metrics: ParleyMetrics
    let configuration: ParleyConfiguration

    struct Health: Codable, Sendable {
        var status: String
        var database: String
    }

    func addRoutes(to routes: RouteGroups) {
        routes.open.get("/health", use: health)
        routes.open.get("/metrics", use: prometheus)
        routes.anyone.get(RouterPath(stringLiteral: RealtimeController.path), use: upgradeRequired)
    }

    @Sendable func health(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<Health> {
        _ = try await store.read { repo in try await repo.brandCount() }
        return JSONResponse(.ok, Health(status: "ok", database: store.flavor.rawValue))
    }

    /// The metrics count every brand's messages and failed sign-ins, so they are not public: they need
    /// `PARLEY_METRICS_TOKEN` as a bearer token, or without a token, a request from the loopback
    /// address that did not come through a proxy.
    @Sendable func prometheus(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        if let token = configuration.metricsToken {
            let presented = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let presented, SessionTokens.constantTimeEqual(presented, token) else {
                throw ParleyError(.unauthorized, code: "metrics_token_required", message: "Metrics need the metrics token as a bearer token.")
            }
        } else {
            let loopback = context.peerIP.map { $0 == "127.0.0.1" || $0 == "::1" || $0.hasPrefix("::ffff:127.") } ?? false
            guard loopback, !configuration.trustProxy else {
                throw ParleyError(
                    .forbidden, code: "metrics_forbidden",
                    message: "Metrics are served to the loopback address only; set PARLEY_METRICS_TOKEN to read them from elsewhere.")
            }
        }
        return Response(
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
