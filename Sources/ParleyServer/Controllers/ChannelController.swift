import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Messaging channels: admins connect an app to its provider; providers call the webhooks.
struct ChannelController {
    let whatsapp: WhatsAppChannel
    let messenger: MessengerChannel
    let sms: SMSChannel
    let apple: AppleChannel
    let conversations: ConversationService
    let store: Store
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.admins.put("/v1/apps/{appId}/whatsapp", use: connectWhatsApp)
        routes.admins.get("/v1/apps/{appId}/whatsapp", use: whatsAppConnection)
        routes.admins.put("/v1/apps/{appId}/whatsapp/templates", use: setTemplates)
        routes.admins.post("/v1/apps/{appId}/whatsapp/test", use: testWhatsApp)
        routes.admins.get("/v1/jobs", use: jobs)
        routes.admins.get("/v1/channel-connections", use: connections)
        routes.agents.get("/v1/channels", use: channels)
        routes.agents.post("/v1/conversations/{conversationId}/template", use: sendTemplate)
        routes.agents.get("/v1/conversations/{conversationId}/templates", use: templates)
        routes.agents.post("/v1/messages/{messageId}/retry", use: retry)
        // Providers carry no session: the signature (or the verify token) is the authentication.
        routes.open.get("/v1/webhooks/whatsapp/{appId}", use: verifyWhatsApp)
        routes.open.post("/v1/webhooks/whatsapp/{appId}", use: receiveWhatsApp)
        routes.admins.put("/v1/apps/{appId}/messenger", use: connectMessenger)
        routes.admins.get("/v1/apps/{appId}/messenger", use: messengerConnection)
        routes.admins.post("/v1/apps/{appId}/messenger/test", use: testMessenger)
        routes.admins.put("/v1/apps/{appId}/messenger/settings", use: configureMessenger)
        routes.open.get("/v1/webhooks/messenger/{appId}", use: verifyMessenger)
        routes.open.post("/v1/webhooks/messenger/{appId}", use: receiveMessenger)
        routes.admins.put("/v1/apps/{appId}/sms", use: connectSMS)
        routes.admins.get("/v1/apps/{appId}/sms", use: smsConnection)
        routes.admins.post("/v1/apps/{appId}/sms/test", use: testSMS)
        routes.open.post("/v1/webhooks/sms/{appId}", use: receiveSMS)
        routes.open.post("/v1/webhooks/sms/{appId}/status", use: receiveSMSStatus)
        routes.admins.put("/v1/apps/{appId}/apple", use: connectApple)
        routes.admins.get("/v1/apps/{appId}/apple", use: appleConnection)
        routes.admins.post("/v1/apps/{appId}/apple/test", use: testApple)
        routes.open.post("/v1/webhooks/apple/{appId}", use: receiveApple)
        // Apple posts to the registered MSP address followed by /message.
        routes.open.post("/v1/webhooks/apple/{appId}/message", use: receiveApple)
    }

    @Sendable func connectApple(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectAppleRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await apple.connect(admin, appId: appId(context), body))
    }

    @Sendable func appleConnection(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        JSONResponse(.ok, try await apple.connection(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func testApple(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelTestDTO> {
        JSONResponse(.ok, try await apple.test(context.requireAgent(), appId: appId(context)))
    }

    /// Apple's gateway: a JWT in Authorization, the business in destination-id, a gzipped JSON body.
    @Sendable func receiveApple(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let id = try appId(context)
        let body = try await Self.webhookBody(request, limit: AppleChannel.maxWebhookBytes)
        try await apple.receive(
            appId: id, authorization: request.headers[.authorization], destinationId: request.headers[HTTPField.Name("destination-id")!],
            gzip: request.headers[.contentEncoding]?.lowercased().contains("gzip") == true || body.starts(with: [0x1f, 0x8b]), body: body)
        return Response(status: .ok)
    }

    @Sendable func connectSMS(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectSMSRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await sms.connect(admin, appId: appId(context), body, origin: Self.origin(of: request)))
    }

    /// Where the admin reached this server: the page's origin (browsers send it with every PUT),
    /// or the Host header.
    static func origin(of request: Request) -> String {
        if let origin = request.headers[.origin], let url = URLComponents(string: origin), url.scheme != nil, url.host != nil {
            return origin
        }
        let scheme = request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https" ? "https" : "http"
        return "\(scheme)://\(request.head.authority ?? "localhost")"
    }

    @Sendable func smsConnection(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        JSONResponse(.ok, try await sms.connection(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func testSMS(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelTestDTO> {
        JSONResponse(.ok, try await sms.test(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func receiveSMS(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await receiveTwilio(request, context, isStatus: false)
    }

    @Sendable func receiveSMSStatus(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        try await receiveTwilio(request, context, isStatus: true)
    }

    /// Twilio waits for TwiML: an empty `<Response/>` (no automatic reply).
    private func receiveTwilio(_ request: Request, _ context: ParleyRequestContext, isStatus: Bool) async throws -> Response {
        let id = try appId(context)
        let body = try await Self.webhookBody(request, limit: SMSChannel.maxWebhookBytes)
        try await sms.receive(
            appId: id, path: request.uri.path, query: request.uri.query, signature: request.headers[HTTPField.Name("X-Twilio-Signature")!], body: body,
            isStatus: isStatus)
        return Response(
            status: .ok, headers: [.contentType: "text/xml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>")))
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

    @Sendable func setTemplates(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(WhatsAppTemplatesRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await whatsapp.setTemplates(admin, appId: appId(context), body))
    }

    @Sendable func testWhatsApp(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelTestDTO> {
        JSONResponse(.ok, try await whatsapp.test(context.requireAgent(), appId: appId(context)))
    }

    /// The brand's jobs in one state (`failed` by default): what could not be delivered or fetched.
    @Sendable func jobs(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<JobDTO>> {
        let admin = try context.requireAgent()
        try admin.require(.admin)
        let raw = request.uri.queryParameters["state"].map(String.init) ?? "failed"
        guard let state = JobState(rawValue: raw) else {
            throw ParleyError.invalidField("state", "'state' is queued, running or failed.")
        }
        let jobs = try await store.read { repo in try await repo.jobs(brandId: admin.brandId, state: state, limit: 200) }
        return JSONResponse(.ok, ListResponse(items: jobs.map {
            JobDTO(
                id: $0.seq, kind: $0.kind, state: $0.state.rawValue, attempts: $0.attempts, lastError: $0.lastError, runAt: $0.runAt,
                createdAt: $0.createdAt, updatedAt: $0.updatedAt)
        }))
    }

    @Sendable func connections(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<ChannelConnectionDTO>> {
        JSONResponse(.ok, ListResponse(items: try await whatsapp.connections(context.requireAgent())))
    }

    /// What each channel can carry (ParleyDomain's channel rules).
    @Sendable func channels(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<ChannelRulesDTO>> {
        _ = try context.requireAgent()
        return JSONResponse(.ok, ListResponse(items: Channel.allCases.map { ChannelRules.of($0).dto }))
    }

    @Sendable func sendTemplate(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SendMessageResponse> {
        let agent = try context.requireAgent()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let body = try await request.decodeJSON(SendTemplateRequest.self, limit: configuration.maxJSONBodyBytes)
        let response = try await whatsapp.sendTemplate(agent, conversationId: id, body)
        return JSONResponse(response.created ? .created : .ok, response)
    }

    @Sendable func templates(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<WhatsAppTemplateDTO>> {
        let agent = try context.requireAgent()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        return JSONResponse(.ok, ListResponse(items: try await whatsapp.templates(agent, conversationId: id)))
    }

    @Sendable func retry(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<MessageDTO> {
        let agent = try context.requireAgent()
        let id = try context.id("messageId", as: MessageID.self, what: "Message")
        return JSONResponse(.ok, try await conversations.retryDelivery(agent, messageId: id))
    }

    @Sendable func connectMessenger(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(ConnectMessengerRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await messenger.connect(admin, appId: appId(context), body))
    }

    @Sendable func messengerConnection(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        JSONResponse(.ok, try await messenger.connection(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func configureMessenger(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelConnectionDTO> {
        let admin = try context.requireAgent()
        let body = try await request.decodeJSON(MessengerSettingsRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await messenger.configure(admin, appId: appId(context), body))
    }

    @Sendable func testMessenger(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ChannelTestDTO> {
        JSONResponse(.ok, try await messenger.test(context.requireAgent(), appId: appId(context)))
    }

    @Sendable func verifyMessenger(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let challenge = try await messenger.verify(
            appId: appId(context), mode: query["hub.mode"].map(String.init), token: query["hub.verify_token"].map(String.init),
            challenge: query["hub.challenge"].map(String.init))
        return Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: challenge)))
    }

    @Sendable func receiveMessenger(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let id = try appId(context)
        let body = try await Self.webhookBody(request, limit: MessengerChannel.maxWebhookBytes)
        try await messenger.receive(appId: id, signature: request.headers[.init("X-Hub-Signature-256")!], body: body)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
    }

    /// A provider's webhook body, at most `limit` bytes.
    static func webhookBody(_ request: Request, limit: Int) async throws -> Data {
        let body = request.body
        do {
            return Data(buffer: try await body.collect(upTo: limit))
        } catch {
            throw ParleyError(.payloadTooLarge, code: .bodyTooLarge, message: "A webhook body is at most \(limit) bytes.")
        }
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
        let body = try await Self.webhookBody(request, limit: WhatsAppChannel.maxWebhookBytes)
        try await whatsapp.receive(appId: id, signature: request.headers[.init("X-Hub-Signature-256")!], body: body)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
    }
}
