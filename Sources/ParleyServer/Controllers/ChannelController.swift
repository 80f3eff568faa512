import Foundation
import Hummingbird
import NIOCore
import ParleyAPI
import ParleyDomain

/// Messaging channels: admins connect an app to its provider; providers call the webhooks.
struct ChannelController {
    let whatsapp: WhatsAppChannel
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.admins.put("/v1/apps/{appId}/whatsapp", use: connectWhatsApp)
        routes.admins.get("/v1/apps/{appId}/whatsapp", use: whatsAppConnection)
        // Providers carry no session: the signature (or the verify token) is the authentication.
        routes.open.get("/v1/webhooks/whatsapp/{appId}", use: verifyWhatsApp)
        routes.open.post("/v1/webhooks/whatsapp/{appId}", use: receiveWhatsApp)
    }

    private func appId(_ context: ParleyRequestContext) throws -> AppID {
        try context.id("appId", as: AppID.self, what: "App")
    }

    @Sendable func connectWhatsApp(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectWhatsAppRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await whatsapp.connect(admin, appId: appId(context), body))
    }

    @Sendable func whatsAppConnection(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        JSONResponse(.ok, try await whatsapp.connection(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func verifyWhatsApp(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let challenge = try await whatsapp.verify(
            appId: appId(context), mode: query["hub.mode"].map(String.init), token: query["hub.verify_token"].map(String.init),
            challenge: query["hub.challenge"].map(String.init))
        return Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: challenge)))
    }

    @Sendable func receiveWhatsApp(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let id = try appId(context)
        var body = request.body
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: WhatsAppChannel.maxWebhookBytes)
        } catch {
            throw ParleyError(.payloadTooLarge, code: "body_too_large", message: "A webhook body is at most \(WhatsAppChannel.maxWebhookBytes) bytes.")
        }
        _ = try await whatsapp.receive(appId: id, signature: request.headers[.init("X-Hub-Signature-256")!], body: Data(buffer: buffer))
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
    }
}
