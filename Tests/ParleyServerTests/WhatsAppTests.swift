import Crypto
import Foundation
import HTTPTypes
import ParleyAPI
import ParleyServer
import Testing

@Suite("WhatsApp Cloud API: connecting and inbound text")
struct WhatsAppTests {
    static let secrets = ConnectWhatsAppRequest(
        phoneNumberId: "106540352242922", verifyToken: "verify-me-please", appSecret: "test-app-secret-0123456789",
        accessToken: "EAAG-test-access-token")

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/whatsapp/\(name)"))
    }

    /// Signed as Meta signs: `sha256=` and the hex HMAC-SHA256 of the raw body with the app secret.
    static func signature(_ body: Data, secret: String = secrets.appSecret) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        return "sha256=" + code.map { String(format: "%02x", $0) }.joined()
    }

    static func connected(_ server: TestServer) async throws -> (BrandScenario, AppDTO) {
        let acme = try await BrandScenario.make(server)
        let app = try await acme.app(channel: .whatsapp, name: "Acme WhatsApp")
        let reply = try await server.request(.put, "/v1/apps/\(app.id)/whatsapp", token: acme.adminToken, json: secrets)
        #expect(reply.status == .ok, "\(reply.text)")
        return (acme, app)
    }

    static func post(_ server: TestServer, app: AppDTO, _ body: Data, signature: String?) async throws -> TestServer.Reply {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let signature { headers[HTTPField.Name("X-Hub-Signature-256")!] = signature }
        return try await server.request(.post, "/v1/webhooks/whatsapp/\(app.id)", data: body, headers: headers)
    }

    @Test("an admin connects a WhatsApp app; the secrets are sealed at rest and never returned")
    func connect() async throws {
        try await TestServer.run { server in
            let (acme, app) = try await Self.connected(server)
            let shown = try await server.get("/v1/apps/\(app.id)/whatsapp", token: acme.adminToken)
            let connection = try shown.decode(ChannelConnectionDTO.self)
            #expect(connection.externalId == "106540352242922")
            #expect(connection.webhookPath == "/v1/webhooks/whatsapp/\(app.id)")
            for secret in [Self.secrets.appSecret, Self.secrets.accessToken, Self.secrets.verifyToken] {
                #expect(!shown.text.contains(secret))
            }
            let stored = try await server.services.store.database.read { db in
                try await db.raw("SELECT sealed_secrets FROM channel_connections").first()?.decode(column: "sealed_secrets", as: String.self) ?? ""
            }
            #expect(stored.hasPrefix("v1:"))
            for secret in [Self.secrets.appSecret, Self.secrets.accessToken, Self.secrets.verifyToken] { #expect(!stored.contains(secret)) }
            // A plain agent may not; a web app cannot be connected; another brand's app is not found.
            let (agentToken, _) = try await acme.agent()
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp", token: agentToken, json: Self.secrets).status == .forbidden)
            let web = try await server.request(.put, "/v1/apps/\(acme.app.id)/whatsapp", token: acme.adminToken, json: Self.secrets)
            #expect(try web.error.code == "app_not_whatsapp")
            let globex = try await BrandScenario.make(server, name: "Globex")
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp", token: globex.adminToken, json: Self.secrets).status == .notFound)
            #expect(try await server.get("/v1/apps/\(app.id)/whatsapp", token: globex.adminToken).status == .notFound)
            let bad = ConnectWhatsAppRequest(phoneNumberId: "not digits", verifyToken: "x", appSecret: "y", accessToken: "z")
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp", token: acme.adminToken, json: bad).status == .badRequest)
        }
    }

    @Test("the verification handshake answers the challenge only with the app's verify token")
    func verification() async throws {
        try await TestServer.run { server in
            let (_, app) = try await Self.connected(server)
            let path = "/v1/webhooks/whatsapp/\(app.id)"
            let good = try await server.get("\(path)?hub.mode=subscribe&hub.verify_token=verify-me-please&hub.challenge=1158201444")
            #expect(good.status == .ok && good.text == "1158201444")
            for query in ["hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1", "hub.mode=unsubscribe&hub.verify_token=verify-me-please&hub.challenge=1", ""] {
                #expect(try await server.get("\(path)?\(query)").status == .forbidden, "\(query)")
            }
            #expect(try await server.get("/v1/webhooks/whatsapp/app_unknown?hub.mode=subscribe&hub.verify_token=verify-me-please&hub.challenge=1").status == .forbidden)
        }
    }

    @Test("Meta's documented text message becomes the customer's message; retries are not stored twice; bad signatures store nothing")
    func inboundText() async throws {
        try await TestServer.run { server in
            let (acme, app) = try await Self.connected(server)
            let body = try Self.fixture("text-message.json")
            let before = try await HTTPErrorTests.rowCounts(server)
            // Unsigned, signed with another secret, or altered after signing: 401, nothing stored.
            for (signature, data) in [
                (nil, body), (Self.signature(body, secret: "another-secret"), body), ("sha256=zz", body),
                (Self.signature(body), body + Data(" ".utf8)),
            ] as [(String?, Data)] {
                let refused = try await Self.post(server, app: app, data, signature: signature)
                #expect(refused.status == .unauthorized)
                #expect(try refused.error.code == "invalid_signature")
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)

            let accepted = try await Self.post(server, app: app, body, signature: Self.signature(body))
            #expect(accepted.status == .ok, "\(accepted.text)")
            let again = try await Self.post(server, app: app, body, signature: Self.signature(body))  // Meta retries
            #expect(again.status == .ok)
            // Processed after the 200 (a job): wait for it.
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken) { $0.count == 1 }
            try await server.jobsSettled()
            let conversations = try await server.get("/v1/conversations?channel=whatsapp", token: acme.adminToken).decode(Page<ConversationDTO>.self).items
            #expect(conversations.count == 1)
            let conversation = try #require(conversations.first)
            #expect(conversation.appId == app.id && conversation.channel == .whatsapp)
            let messages = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(messages.map(\.text) == ["Does it come in another color?"])
            #expect(messages.first?.clientMessageId == "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=")
            let customer = try await server.get("/v1/consumers/\(conversation.consumerId)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(customer.displayName == "Sheena Nelson")
            #expect(customer.phone == "+16505551234")
            #expect(customer.externalId == "whatsapp:16505551234")

            // Not JSON, or too large.
            let garbage = Data("not json".utf8)
            #expect(try await Self.post(server, app: app, garbage, signature: Self.signature(garbage)).status == .badRequest)
            let huge = Data(repeating: 0x20, count: 1024 * 1024 + 1)
            #expect(try await Self.post(server, app: app, huge, signature: Self.signature(huge)).status == .contentTooLarge)
        }
    }
}
