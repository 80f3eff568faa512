import Foundation
import ParleyAPI
import ParleyServer
import Testing

/// A brand as a test needs it: an admin signed in, a web app, and helpers to add people.
struct BrandScenario: Sendable {
    let server: TestServer
    let brand: BrandDTO
    let app: AppDTO
    let admin: AgentDTO
    let adminPassword: String
    let adminToken: String

    /// Brands start with automatic routing; a scenario keeps manual "take" unless a test asks for
    /// routing (RoutingTests), so that the other suites' conversations stay unassigned as they expect.
    static func make(_ server: TestServer, name: String = "Acme", routing: RoutingMode = .manual) async throws -> BrandScenario {
        let created = try await server.services.identity.createBrand(
            name: name, adminEmail: "admin-\(UUID().uuidString.prefix(8).lowercased())@\(name.lowercased()).test",
            adminName: "\(name) Admin", appName: "\(name) website")
        let login = try await server.post(
            "/v1/auth/login", json: LoginRequest(email: created.admin.email, password: created.adminPassword))
        #expect(login.status == .ok)
        let token = try login.decode(AgentSessionResponse.self).token
        if routing != .automatic {
            #expect(try await server.request(.patch, "/v1/routing", token: token, json: UpdateRoutingRequest(mode: routing)).status == .ok)
        }
        return BrandScenario(
            server: server, brand: created.brand, app: created.app, admin: created.admin, adminPassword: created.adminPassword,
            adminToken: token)
    }

    /// An anonymous visitor of the brand's web app.
    func consumer(name: String? = nil, appId: AppID? = nil) async throws -> (token: String, consumer: ConsumerDTO) {
        let reply = try await server.post("/v1/consumer/session", json: ConsumerSessionRequest(appId: appId ?? app.id, displayName: name))
        #expect(reply.status == .created)
        let session = try reply.decode(ConsumerSessionResponse.self)
        return (session.token, session.consumer)
    }

    /// Another app of the brand, on `channel`.
    func app(channel: Channel, name: String = "Another app") async throws -> AppDTO {
        try await server.post("/v1/apps", token: adminToken, json: CreateAppRequest(name: name, channel: channel)).decode()
    }

    /// An agent created by the admin and signed in.
    func agent(role: AgentRole = .agent, permissions: [AgentPermission] = []) async throws -> (token: String, agent: AgentDTO) {
        let email = "agent-\(UUID().uuidString.prefix(8).lowercased())@\(brand.name.lowercased()).test"
        let created = try await server.post(
            "/v1/agents", token: adminToken,
            json: CreateAgentRequest(email: email, name: "Agent \(email.prefix(14))", password: "a long password", role: role, permissions: permissions))
        #expect(created.status == .created)
        let login = try await server.post("/v1/auth/login", json: LoginRequest(email: email, password: "a long password"))
        let session = try login.decode(AgentSessionResponse.self)
        return (session.token, session.agent)
    }

    /// The consumer writes; returns the stored message and its conversation.
    @discardableResult
    func send(_ text: String, as token: String, conversationId: ConversationID? = nil, clientMessageId: String = UUID().uuidString) async throws -> SendMessageResponse {
        let reply = try await server.post(
            "/v1/consumer/messages", token: token,
            json: SendMessageRequest(clientMessageId: clientMessageId, text: text, conversationId: conversationId))
        guard reply.status == .created || reply.status == .ok else { throw TestFailure("send failed: \(reply.status) \(reply.text)") }
        return try reply.decode()
    }

    @discardableResult
    func reply(_ text: String, in conversationId: ConversationID, as token: String, clientMessageId: String = UUID().uuidString) async throws -> SendMessageResponse {
        let reply = try await server.post(
            "/v1/conversations/\(conversationId)/messages", token: token,
            json: SendMessageRequest(clientMessageId: clientMessageId, text: text))
        guard reply.status == .created || reply.status == .ok else { throw TestFailure("reply failed: \(reply.status) \(reply.text)") }
        return try reply.decode()
    }
}
