import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Liveness, readiness, metrics, and the plain-HTTP answer of the real-time endpoint.
struct SystemController {
    let store: Store
    let blobs: any BlobStore
    let drain: Drain
    /// Whether the event bus is receiving from the other nodes (always, on one node).
    let busConnected: @Sendable () -> Bool
    let metrics: ParleyMetrics
    let configuration: ParleyConfiguration

    struct Health: Codable, Sendable {
        var status: String
        var database: String
        var version: String
        var commit: String?
    }

    /// What `/ready` found: each part "ok" or why not.
    struct Readiness: Codable, Sendable {
        var status: String
        var database: String
        var media: String
        var bus: String
        var draining: Bool
    }

    /// Longest each part of `/ready` may take: a load balancer's check must answer in time.
    static let readyTimeout: Duration = .seconds(2)

    func addRoutes(to routes: RouteGroups) {
        routes.open.get("/health", use: health)
        routes.open.get("/ready", use: ready)
        routes.open.get("/metrics", use: prometheus)
        routes.anyone.get(RouterPath(stringLiteral: RealtimeController.path), use: upgradeRequired)
    }

    @Sendable func health(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<Health> {
        _ = try await store.read { repo in try await repo.brandCount() }
        let build = BuildInfo.current
        return JSONResponse(.ok, Health(status: "ok", database: store.flavor.rawValue, version: build.version, commit: build.commit))
    }

    /// For the load balancer: 200 when this node should get clients (its database, media store and
    /// event bus answer, and it is not shutting down), else 503 saying which part is not ready.
    @Sendable func ready(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        async let database = Self.within(Self.readyTimeout) { _ = try await store.read { repo in try await repo.brandCount() } }
        async let media = Self.within(Self.readyTimeout) { try await blobs.check() }
        let bus = busConnected() ? "ok" : "not connected to the other nodes"
        let draining = drain.isDraining
        let readiness = Readiness(
            status: "", database: await database, media: await media, bus: bus, draining: draining)
        let isReady = !draining && [readiness.database, readiness.media, readiness.bus].allSatisfy { $0 == "ok" }
        var body = readiness
        body.status = isReady ? "ready" : draining ? "draining" : "not_ready"
        return Response(
            status: isReady ? .ok : .serviceUnavailable,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: try ParleyCoders.encoder.encode(body))))
    }

    /// "ok", "unavailable", or that it took too long.
    static func within(_ limit: Duration, _ check: @escaping @Sendable () async throws -> Void) async -> String {
        await withTaskGroup(of: String.self) { group in
            group.addTask {
                do {
                    try await check()
                    return "ok"
                } catch {
                    return "unavailable"  // what failed is in the node's log, not on an open route
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return "no answer within \(limit.components.seconds) s"
            }
            let first = await group.next() ?? "unknown"
            group.cancelAll()
            return first
        }
    }

    /// The metrics count every brand's messages and failed sign-ins, so they are not public: they need
    /// `PARLEY_METRICS_TOKEN` as a bearer token, or without a token, a request from the loopback
    /// address that did not come through a proxy.
    @Sendable func prometheus(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        if let token = configuration.metricsToken {
            let presented = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let presented, SessionTokens.constantTimeEqual(presented, token) else {
                throw ParleyError(.unauthorized, code: .metricsTokenRequired, message: "Metrics need the metrics token as a bearer token.")
            }
        } else {
            let loopback = context.peerIP.map { $0 == "127.0.0.1" || $0 == "::1" || $0.hasPrefix("::ffff:127.") } ?? false
            guard loopback, !configuration.trustProxy else {
                throw ParleyError(
                    .forbidden, code: .metricsForbidden,
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
        throw ParleyError(.badRequest, code: .upgradeRequired, message: "This endpoint speaks WebSocket: send an Upgrade request.")
    }
}
