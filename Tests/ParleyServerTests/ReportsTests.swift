import Foundation
import ParleyAPI
import ParleyServer
import Testing

/// Reports: a period's numbers per day, agent and channel from what happened on a moved clock
/// (first response and resolution percentiles, ratings, voice notes, calls), CSV, who sees what;
/// and the live report over the WebSocket.
@Suite("Reports")
struct ReportsTests {
    @Test("a period per day and per agent: new and resolved, first response and resolution (median, p90), ratings, voice notes and calls; automatic messages are not replies")
    func history() async throws {
        // Monday 2026-11-23 09:00 UTC.
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_795_424_400))
        try await TestServer.run(clock: clock, configure: { $0.consumerSessionTTL = 90 * 86_400; $0.agentSessionTTL = 90 * 86_400 }) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(.patch, "/v1/lifecycle", token: acme.adminToken, json: UpdateLifecycleRequest(survey: true))
            _ = try await server.request(.put, "/v1/automatic-messages/welcome/en", token: acme.adminToken, json: SaveAutomaticMessageRequest(enabled: true))
            let (samToken, sam) = try await acme.agent()
            let (kimToken, kim) = try await acme.agent()

            // Day 1: Ana answered by Sam after 2 minutes, resolved after 10, rated 5; Ben taken and
            // answered by Kim after 10 minutes, resolved after an hour. Ben sent a voice note (counted
            // for the conversation's agent); Kim called him.
            let (anaToken, _) = try await acme.consumer(name: "Ana")
            let ana = try await acme.send("Where is my order?", as: anaToken).conversation.id
            let (benToken, _) = try await acme.consumer(name: "Ben")
            let ben = try await acme.send("My card was declined", as: benToken).conversation.id
            // The automatic welcome each got is not an agent's reply.
            try await LifecycleTests.eventually("the welcomes", { try await LifecycleTests.messages(server, samToken, ben) }) { $0.count == 2 }
            clock.advance(by: .seconds(120))
            try await acme.reply("On its way.", in: ana, as: samToken)
            let note = try AudioFixtures.files().data("note.webm")
            let voice = try await VoiceTests.upload(server, note, token: benToken, conversationId: ben).decode(SendMessageResponse.self).message
            let processed = try await VoiceTests.processed(server, voice, token: acme.adminToken)
            clock.advance(by: .seconds(480))
            _ = try await server.post("/v1/conversations/\(ben)/assign", token: kimToken, json: AssignRequest(agentId: kim.id))
            try await acme.reply("Let me look.", in: ben, as: kimToken)
            _ = try await server.post("/v1/conversations/\(ana)/resolve", token: samToken)
            _ = try await server.post("/v1/consumer/conversations/\(ana)/rating", token: anaToken, json: RateConversationRequest(score: 5))
            try await server.services.store.write { repo in
                try await repo.insertCall(
                    CallDTO(
                        id: CallID.make(), conversationId: ben, media: .voice, state: .ended, version: 3, invitedBy: kim.id.rawValue, inviterName: kim.name,
                        invitedAt: clock.now(), connectedAt: clock.now(), endedAt: clock.now().addingTimeInterval(150), outcome: .completed,
                        durationSeconds: 150),
                    brandId: acme.brand.id)
            }
            clock.advance(by: .seconds(3000))
            _ = try await server.post("/v1/conversations/\(ben)/resolve", token: kimToken)
            // Day 2: Cy writes; nobody answers.
            clock.advance(by: .seconds(86_400))
            let (cyToken, _) = try await acme.consumer(name: "Cy")
            _ = try await acme.send("Hello?", as: cyToken)

            let byDay = try await server.get("/v1/reports?from=2026-11-23&to=2026-11-25&groupBy=day", token: acme.adminToken).decode(ReportDTO.self)
            #expect(byDay.rows.map(\.key) == ["2026-11-23", "2026-11-24", "2026-11-25"])
            let monday = byDay.rows[0]
            #expect(monday.newConversations == 2 && monday.resolved == 2)
            #expect(monday.firstResponseMedianSeconds == 120 && monday.firstResponseP90Seconds == 600)
            #expect(monday.resolutionMedianSeconds == 600 && monday.resolutionP90Seconds == 3600)
            #expect(monday.ratings == 1 && monday.csatAverage == 5 && monday.csatPositivePercent == 100)
            let seconds = ((processed.voice?.durationMs ?? 0) + 500) / 1000
            #expect(monday.voiceNotesIn == 1 && monday.voiceNotesOut == 0 && monday.voiceSecondsIn == seconds)
            #expect(monday.calls == 1 && monday.callMinutes == 3)
            #expect(byDay.rows[1].newConversations == 1 && byDay.rows[1].firstResponseMedianSeconds == nil)
            #expect(byDay.rows[2].newConversations == 0)
            #expect(byDay.total.newConversations == 3 && byDay.total.resolved == 2 && byDay.total.ratings == 1)

            let byAgent = try await server.get("/v1/reports?from=2026-11-23&to=2026-11-24&groupBy=agent", token: acme.adminToken).decode(ReportDTO.self)
            let samRow = try #require(byAgent.rows.first { $0.key == sam.id.rawValue })
            let kimRow = try #require(byAgent.rows.first { $0.key == kim.id.rawValue })
            #expect(samRow.label == sam.name && samRow.newConversations == 1 && samRow.firstResponseMedianSeconds == 120 && samRow.ratings == 1)
            #expect(kimRow.newConversations == 1 && kimRow.firstResponseMedianSeconds == 600 && kimRow.calls == 1 && kimRow.voiceNotesIn == 1)
            #expect(byAgent.rows.first { $0.key == "none" }?.newConversations == 1)  // Cy, whom nobody answered

            let byChannel = try await server.get("/v1/reports?from=2026-11-23&to=2026-11-24&groupBy=channel&channel=whatsapp", token: acme.adminToken)
                .decode(ReportDTO.self)
            #expect(byChannel.rows.isEmpty && byChannel.total.newConversations == 0)

            // An agent sees their own numbers only.
            let own = try await server.get("/v1/reports?from=2026-11-23&to=2026-11-24&groupBy=day", token: samToken).decode(ReportDTO.self)
            #expect(own.total.newConversations == 1 && own.total.ratings == 1 && own.total.calls == 0)
            #expect(try await server.get("/v1/reports?from=2026-11-23&to=2026-11-24&agentId=\(kim.id)", token: samToken).status == .forbidden)

            // CSV: a chart's columns, a line per day and the total.
            let csv = try await server.get("/v1/reports?from=2026-11-23&to=2026-11-24&groupBy=day&format=csv&chart=csat", token: acme.adminToken)
            #expect(csv.headers[.contentType] == "text/csv; charset=utf-8")
            #expect(csv.headers[.contentDisposition] == "attachment; filename=\"report-csat-by-day-2026-11-23-to-2026-11-24.csv\"")
            #expect(csv.text == "day,label,ratings,csatAverage,csatPositivePercent\r\n2026-11-23,2026-11-23,1,5.00,100\r\n2026-11-24,2026-11-24,0,,\r\ntotal,Total,1,5.00,100\r\n")
            for query in ["from=2026-11-23", "from=2026-11-23&to=2026-11-22", "from=2026-11-23&to=2026-11-24&groupBy=week", "from=2026-11-23&to=2026-11-24&chart=pie",
                          "from=2025-01-01&to=2026-11-24", "from=2026-11-23&to=2026-11-24&format=xml"] {
                #expect(try await server.get("/v1/reports?\(query)", token: acme.adminToken).status == .badRequest, "\(query)")
            }
        }
    }

    @Test("the live report: managers get the whole contact centre as it changes, an agent their own row")
    func live() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (managerToken, _) = try await acme.agent(role: .manager)
            let (agentToken, agent) = try await acme.agent()
            let manager = try await RealtimeProbe.connect(port: server.port, token: managerToken)
            let own = try await RealtimeProbe.connect(port: server.port, token: agentToken)
            let (token, _) = try await acme.consumer(name: "Waiting Wanda")
            try await acme.send("Anyone?", as: token)
            let frame = try await manager.next(within: 10) { frame in
                if case .report(let report) = frame { return report.waiting == 1 }
                return false
            }
            guard case .report(let report) = frame else { throw TestFailure("no report") }
            #expect(report.agents.count == 3 && report.online >= 2)
            #expect(report.agents.first { $0.agentId == agent.id }?.connected == true)
            let mine = try await own.next(within: 10) { frame in
                if case .report(let report) = frame { return report.waiting == 1 }
                return false
            }
            guard case .report(let agentView) = mine else { throw TestFailure("no report") }
            #expect(agentView.agents.map(\.agentId) == [agent.id])
            let viaHTTP = try await server.get("/v1/reports/live", token: agentToken).decode(LiveReportDTO.self)
            #expect(viaHTTP.agents.map(\.agentId) == [agent.id] && viaHTTP.waiting == 1)
            #expect(try await server.get("/v1/reports/live", token: managerToken).decode(LiveReportDTO.self).agents.count == 3)
            _ = await manager.close()
            _ = await own.close()
        }
    }
}
