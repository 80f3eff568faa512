import Foundation
import ParleyAPI
import ParleyDomain
import ParleyMedia
import Testing

@testable import ParleyServer

/// `parley admin` as an operator runs it, beside a running server on the same database: list brands
/// and agents, disable and enable an agent, reset a password. What ends sessions closes the agent's
/// open connection on the running server (`SessionRevocations`), though the command is another process.
@Suite("parley admin: the operator's commands")
struct OperatorCommandsTests {
    /// Runs `parley admin ...` on the server's database; its exit status and output.
    static func admin(_ server: TestServer, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        var database: [String] = []
        if let url = server.services.configuration.databaseURL { database = ["--database-url", url] }
        let outcome = try await ProcessRunner(executable: StartupTests.binary).run(
            ["admin"] + arguments + ["--data-dir", server.dataDirectory.path] + database, timeout: .seconds(60))
        return (outcome.status, String(decoding: outcome.stdout, as: UTF8.self) + outcome.stderrTail)
    }

    @Test("list-brands, list-agents; disable closes the agent's socket on the running server and refuses sign-in; enable; reset-password prints a new one and ends the old sessions; the last admin is not disabled; an unknown email is refused")
    func operatorCommands() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, agent) = try await acme.agent()
            let socket = try await RealtimeProbe.connect(port: server.port, token: token)

            let brands = try await Self.admin(server, ["list-brands"])
            #expect(brands.status == 0, "\(brands.output)")
            #expect(brands.output.contains("BRAND") && brands.output.contains(acme.brand.id.rawValue) && brands.output.contains("Acme"))
            let agents = try await Self.admin(server, ["list-agents", "--brand", acme.brand.id.rawValue])
            let line = agents.output.split(separator: "\n").first { $0.contains(agent.email) }
            #expect(line?.contains("active") == true && line?.contains(agent.id.rawValue) == true, "\(agents.output)")

            // Disabled from another process: the socket on the running server closes (4001), sign-in is refused.
            let disabled = try await Self.admin(server, ["disable", "--email", agent.email.uppercased()])
            #expect(disabled.status == 0 && disabled.output.contains("disabled"), "\(disabled.output)")
            let closed = try await socket.closedByServer()
            #expect(closed?.closeCode == .unknown(RealtimeCloseCode.unauthorized))
            #expect(try await server.get("/v1/me", token: token).status == .unauthorized)
            let refused = try await server.post("/v1/auth/login", json: LoginRequest(email: agent.email, password: "a long password"))
            #expect(try refused.error.code == .agentDisabled)
            #expect(try await Self.admin(server, ["list-agents", "--brand", acme.brand.id.rawValue]).output
                .split(separator: "\n").first { $0.contains(agent.email) }?.contains("disabled") == true)

            // Enabled, then a new password: the old one no longer works, the new one does, old sessions end.
            #expect(try await Self.admin(server, ["enable", "--email", agent.email]).status == 0)
            let again = try await server.post("/v1/auth/login", json: LoginRequest(email: agent.email, password: "a long password"))
            let session = try again.decode(AgentSessionResponse.self)
            let reset = try await Self.admin(server, ["reset-password", "--email", agent.email])
            let password = try #require(reset.output.split(separator: "\n").first { $0.hasPrefix("password ") }?.dropFirst(9))
            #expect(password.count == 20)
            #expect(try await server.get("/v1/me", token: session.token).status == .unauthorized)
            #expect(try await server.post("/v1/auth/login", json: LoginRequest(email: agent.email, password: "a long password")).status == .unauthorized)
            #expect(try await server.post("/v1/auth/login", json: LoginRequest(email: agent.email, password: String(password))).status == .ok)

            // The brand's only admin stays enabled; an email nobody has is refused; both change nothing.
            let lastAdmin = try await Self.admin(server, ["disable", "--email", acme.admin.email])
            #expect(lastAdmin.status != 0 && lastAdmin.output.contains("last enabled admin"), "\(lastAdmin.output)")
            #expect(try await server.get("/v1/me", token: acme.adminToken).status == .ok)
            let nobody = try await Self.admin(server, ["reset-password", "--email", "nobody@nowhere.test"])
            #expect(nobody.status != 0 && nobody.output.contains("was not found"), "\(nobody.output)")
        }
    }

    @Test("SessionRevocations closes the connections of sessions revoked since its last look, and only those")
    func revocations() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, agent) = try await acme.agent()
            let (_, other) = try await acme.agent()
            _ = other
            let socket = try await RealtimeProbe.connect(port: server.port, token: token)
            let admins = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let before = server.services.clock.now()
            // Revoked by "another process": straight in the database, nothing told the hub.
            try await server.services.store.write { repo in
                try await repo.revokeSessions(subjectId: agent.id.rawValue, except: nil, at: server.services.clock.now())
            }
            let read = try await server.services.revocations.closeRevoked(since: before.addingTimeInterval(-1))
            #expect(read == 1)
            #expect(try await socket.closedByServer()?.closeCode == .unknown(RealtimeCloseCode.unauthorized))
            #expect(server.services.hub.isConnected(agentId: acme.admin.id))
            await admins.close()
        }
    }
}
