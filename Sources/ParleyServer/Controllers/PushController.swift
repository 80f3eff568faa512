import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Push notifications: consumers' devices register; admins give an app's APNs credentials.
struct PushController {
    let push: PushService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.consumers.post("/v1/consumer/push", use: register)
        routes.consumers.delete("/v1/consumer/push", use: unregister)
        routes.admins.put("/v1/apps/{appId}/push/apns", use: connectAPNs)
        routes.admins.put("/v1/apps/{appId}/push/fcm", use: connectFCM)
        routes.admins.get("/v1/push-connections", use: connections)
        // The widget subscribes with it (the applicationServerKey); it is public by design.
        routes.open.get("/v1/push/web-key", use: webKey)
    }

    @Sendable func register(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<PushRegistrationDTO> {
        let consumer = try context.requireConsumer()
        let body = try await request.decodeJSON(RegisterPushRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await push.register(consumer, body))
    }

    @Sendable func unregister(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let consumer = try context.requireConsumer()
        let body = try await request.decodeJSON(RegisterPushRequest.self, limit: configuration.maxJSONBodyBytes)
        try await push.unregister(consumer, body)
        return Response(status: .noContent)
    }

    @Sendable func connectAPNs(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<PushConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectAPNsRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await push.connectAPNs(admin, appId: try context.id("appId", as: AppID.self, what: "App"), body))
    }

    @Sendable func connectFCM(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<PushConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectFCMRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await push.connectFCM(admin, appId: try context.id("appId", as: AppID.self, what: "App"), body))
    }

    struct WebKey: Codable, Sendable {
        /// The server's VAPID public key, base64url (uncompressed P-256 point).
        var publicKey: String
    }

    @Sendable func webKey(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<WebKey> {
        JSONResponse(.ok, WebKey(publicKey: push.vapidPublicKey))
    }

    @Sendable func connections(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<PushConnectionDTO>> {
        JSONResponse(.ok, ListResponse(items: try await push.connections(context.requireAgent())))
    }
}
