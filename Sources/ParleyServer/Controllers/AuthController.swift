import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Agent sign-in and sign-out, and consumer sessions.
struct AuthController {
    let identity: IdentityService
    let hub: RealtimeHub
    let configuration: ParleyConfiguration
    let limits: RateLimits

    func addRoutes(to routes: RouteGroups) {
        routes.anyone.post("/v1/auth/login", use: login)
        routes.anyone.post("/v1/auth/logout", use: logout)
        routes.agents.post("/v1/auth/logout-all", use: logoutEverywhere)
        routes.agents.post("/v1/me/password", use: changePassword)
        routes.agents.get("/v1/me", use: me)
        routes.anyone.post("/v1/consumer/session", use: consumerSession)
        routes.consumers.get("/v1/consumer/me", use: consumerMe)
        routes.consumers.delete("/v1/consumer/session", use: endConsumerSession)
    }

    @Sendable func login(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentSessionResponse> {
        // Limited before the password is checked: guessing costs the guesser time, not the server bcrypt.
        try await limits.loginsPerIP.check(context.clientIP(request, trustProxy: configuration.trustProxy), "sign-in attempts")
        let body = try await request.decodeJSON(LoginRequest.self, limit: configuration.maxJSONBodyBytes)
        try await limits.loginsPerEmail.check(IdentityRules.canonicalEmail(body.email), "sign-in attempts for this account")
        let (session, agent) = try await identity.login(email: body.email, password: body.password)
        let cookie = sessionCookie(session.token, expires: session.expiresAt)
        return JSONResponse(
            .ok, AgentSessionResponse(token: session.token, expiresAt: session.expiresAt, agent: agent),
            headers: [.setCookie: cookie.description])
    }

    @Sendable func logout(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        _ = try context.requirePrincipal()
        if let tokenHash = context.sessionTokenHash {
            try await identity.logout(tokenHash: tokenHash)
            // Real-time connections opened with this session stop at once; other devices go on.
            hub.disconnect(sessionTokenHash: tokenHash, code: RealtimeCloseCode.unauthorized, reason: "signed out")
        }
        return signedOut()
    }

    /// The session cookie as every route sets it (HttpOnly, SameSite=Lax, Secure behind HTTPS).
    private func sessionCookie(_ value: String, expires: Date) -> Cookie {
        Cookie(
            name: SessionTokens.cookieName, value: value, expires: expires, path: "/", secure: configuration.secureCookies,
            httpOnly: true, sameSite: .lax)
    }

    /// 204 with the session cookie cleared.
    private func signedOut() -> Response {
        Response(status: .noContent, headers: [.setCookie: sessionCookie("", expires: Date(timeIntervalSince1970: 0)).description])
    }

    /// Signs the agent out of every device (this one too) and closes all their real-time connections.
    @Sendable func logoutEverywhere(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let agent = try context.requireAgent()
        try await identity.logoutEverywhere(agent)
        hub.disconnect(agentId: agent.agentId, code: RealtimeCloseCode.unauthorized, reason: "signed out everywhere")
        return signedOut()
    }

    /// The agent's new password; every other session of theirs ends, this one goes on.
    @Sendable func changePassword(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let agent = try context.requireAgent()
        try await limits.loginsPerEmail.check("password:" + agent.agentId.rawValue, "password attempts")
        let body = try await request.decodeJSON(ChangePasswordRequest.self, limit: configuration.maxJSONBodyBytes)
        try await identity.changePassword(agent, body, sessionTokenHash: context.sessionTokenHash)
        hub.disconnect(
            agentId: agent.agentId, keeping: context.sessionTokenHash, code: RealtimeCloseCode.unauthorized, reason: "password changed")
        return Response(status: .noContent)
    }

    @Sendable func me(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<AgentDTO> {
        JSONResponse(.ok, try await identity.agent(context.requireAgent()))
    }

    @Sendable func consumerSession(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConsumerSessionResponse> {
        let ip = context.clientIP(request, trustProxy: configuration.trustProxy)
        try await limits.consumerSessions.check(ip, "new chat sessions from this address")
        try await limits.ipWrites.check(ip, "requests from this address")
        let body = try await request.decodeJSON(ConsumerSessionRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.created, try await identity.startConsumerSession(body, userAgent: request.headers[.userAgent]))
    }

    /// The app signs the consumer out (ParleyKit's `signOut`): this session's token is refused from
    /// now on and its real-time connections close, on every node (SessionRevocations). The
    /// consumer's other sessions (another device) go on.
    @Sendable func endConsumerSession(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        _ = try context.requireConsumer()
        if let tokenHash = context.sessionTokenHash {
            try await identity.logout(tokenHash: tokenHash)
            hub.disconnect(sessionTokenHash: tokenHash, code: RealtimeCloseCode.unauthorized, reason: "signed out")
        }
        return Response(status: .noContent)
    }

    @Sendable func consumerMe(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConsumerDTO> {
        JSONResponse(.ok, try await identity.consumer(context.requireConsumer()).ownView)
    }
}
