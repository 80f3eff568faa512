import Foundation
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyServer
import Testing

/// Transcripts: one conversation and a date range, as TXT, XML (valid against docs/transcript.xsd)
/// and JSON; voice notes, masked card numbers, ratings and closes as records; ranges streamed a page
/// at a time; who may export.
@Suite("Transcripts")
struct TranscriptTests {
    static let schema = TestServer.repositoryRoot.appendingPathComponent("docs/transcript.xsd")

    /// Validates an XML export against the checked-in schema with xmllint; returns its complaint, if any.
    static func validate(_ xml: String) throws -> String? {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("transcript-\(UUID().uuidString).xml")
        try Data(xml.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        // ProcessRunner (posix_spawn), not Foundation's Process (see PushTests.fcmAccount).
        let outcome = try ProcessRunner(executable: "/usr/bin/xmllint").runBlocking(["--noout", "--schema", schema.path, file.path], timeout: .seconds(60))
        return outcome.succeeded ? nil : outcome.stderrTail
    }

    @Test("one conversation as TXT, XML and JSON: texts with card numbers masked, a voice note with its link, the close and the rating")
    func oneConversation() async throws {
        try await TestServer.run(configure: { $0.publicURL = "https://chat.acme.test" }) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(cardMasking: .everyone))
            _ = try await server.request(.patch, "/v1/lifecycle", token: acme.adminToken, json: UpdateLifecycleRequest(survey: true))
            let (token, _) = try await acme.consumer(name: "Noor <Admin> & Co")
            let id = try await acme.send("My card 4111 1111 1111 1111 was charged twice", as: token).conversation.id
            let note = try AudioFixtures.files().data("note.webm")
            let voice = try await VoiceTests.upload(server, note, token: token, conversationId: id).decode(SendMessageResponse.self).message
            let processed = try await VoiceTests.processed(server, voice, token: acme.adminToken)
            try await acme.reply("Refunded the second charge.", in: id, as: acme.adminToken)
            _ = try await server.post("/v1/conversations/\(id)/resolve", token: acme.adminToken)
            _ = try await server.post("/v1/consumer/conversations/\(id)/rating", token: token, json: RateConversationRequest(score: 4, comment: "Quick & kind"))

            let txt = try await server.get("/v1/conversations/\(id)/transcript?format=txt", token: acme.adminToken)
            #expect(txt.status == .ok)
            #expect(txt.headers[.contentType] == "text/plain; charset=utf-8")
            #expect(txt.headers[.contentDisposition] == "attachment; filename=\"transcript-\(id).txt\"")
            let lines = txt.text.split(separator: "\n").map(String.init)
            #expect(lines[0] == "Conversation \(id) · web · Acme website")
            #expect(lines[1].hasPrefix("Customer: Noor <Admin> & Co (anonymous visitor)"))
            #expect(lines.contains("Rated 4/5: \"Quick & kind\""))
            #expect(!txt.text.contains("4111 1111 1111 1111"))
            #expect(lines.contains { $0.hasSuffix("Noor <Admin> & Co: My card •••• •••• •••• 1111 was charged twice") }, "\(lines)")
            let seconds = ((processed.voice?.durationMs ?? 0) + 500) / 1000
            let audioLine = "[audio message \(seconds / 60):\(String(format: "%02d", seconds % 60))] <https://chat.acme.test/v1/media/\(voice.id)/original>"
            #expect(lines.contains { $0.hasSuffix(audioLine) }, "\(lines)")
            #expect(lines.contains { $0.hasSuffix("Acme Admin: Refunded the second charge.") })
            #expect(lines.contains { $0.hasSuffix("— Acme Admin resolved the conversation") })
            #expect(lines.contains { $0.hasSuffix("— The customer rated it 4 out of 5: \"Quick & kind\"") })

            let xml = try await server.get("/v1/conversations/\(id)/transcript?format=xml", token: acme.adminToken)
            #expect(xml.headers[.contentType] == "application/xml; charset=utf-8")
            #expect(try Self.validate(xml.text) == nil)
            #expect(xml.text.contains("<customer id=\"\(try await server.get("/v1/conversations/\(id)", token: acme.adminToken).decode(ConversationDTO.self).consumerId)\" anonymous=\"true\">Noor &lt;Admin&gt; &amp; Co</customer>"))
            #expect(xml.text.contains("<rating score=\"4\""))
            #expect(xml.text.contains("kind=\"voice\" sender=\"consumer\""))

            let json = try await server.get("/v1/conversations/\(id)/transcript?format=json", token: acme.adminToken)
            struct Export: Decodable { var conversations: [Transcript.Conversation] }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let export = try decoder.decode(Export.self, from: Data(json.text.utf8))
            let record = try #require(export.conversations.first)
            #expect(record.id == id && record.rating?.score == 4)
            #expect(record.entries.map(\.kind) == [.text, .voice, .text, .event, .event])
            #expect(record.entries[1].durationSeconds == seconds && record.entries[1].href == "https://chat.acme.test/v1/media/\(voice.id)/original")

            // Bad format; another brand's agent; a consumer.
            #expect(try await server.get("/v1/conversations/\(id)/transcript?format=pdf", token: acme.adminToken).status == .badRequest)
            let globex = try await BrandScenario.make(server, name: "Globex")
            #expect(try await server.get("/v1/conversations/\(id)/transcript", token: globex.adminToken).status == .notFound)
            #expect(try await server.get("/v1/conversations/\(id)/transcript", token: token).status == .forbidden)
        }
    }

    @Test("a date range: only the conversations begun in it, oldest first, across pages; managers only; limits")
    func range() async throws {
        // 2026-11-01T00:00:00Z
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_793_491_200))
        try await TestServer.run(clock: clock, configure: { $0.rateConsumerSessions = 0; $0.rateIPWrites = 0 }) { server in
            let acme = try await BrandScenario.make(server)
            let (_, plainAgent) = try await acme.agent()
            // Three days; 120 conversations on the second (more than a page).
            var second: [ConversationID] = []
            for day in 0..<3 {
                for index in 0..<(day == 1 ? 120 : 2) {
                    let (token, _) = try await acme.consumer(name: "Day \(day) customer \(index)")
                    let id = try await acme.send("Question \(index) on day \(day)", as: token).conversation.id
                    if day == 1 { second.append(id) }
                    clock.advance(by: .seconds(60))
                }
                clock.advance(by: .seconds(86_400 - (day == 1 ? 120 : 2) * 60))
            }
            let admin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
                .decode(AgentSessionResponse.self).token
            let xml = try await server.get("/v1/transcripts?from=2026-11-02&to=2026-11-02&format=xml", token: admin)
            #expect(xml.status == .ok)
            #expect(xml.headers[.contentDisposition] == "attachment; filename=\"transcripts-2026-11-02-to-2026-11-02.xml\"")
            #expect(try Self.validate(xml.text) == nil)
            let ids = xml.text.components(separatedBy: "<conversation id=\"").dropFirst().map { String($0.prefix { $0 != "\"" }) }
            #expect(ids == second.map(\.rawValue))
            #expect(!xml.text.contains("on day 0") && !xml.text.contains("on day 2"))
            let txt = try await server.get("/v1/transcripts?from=2026-11-01T00:00:00Z&to=2026-11-04&format=txt", token: admin)
            #expect(txt.text.components(separatedBy: "Conversation cnv_").count - 1 == 124)
            let json = try await server.get("/v1/transcripts?from=2026-11-03&to=2026-11-03&format=json", token: admin)
            #expect(try JSONSerialization.jsonObject(with: Data(json.text.utf8)) is [String: Any])
            #expect(json.text.components(separatedBy: "\"channel\":\"web\"").count - 1 == 2)

            let agentToken = try await server.post("/v1/auth/login", json: LoginRequest(email: plainAgent.email, password: "a long password"))
                .decode(AgentSessionResponse.self).token
            #expect(try await server.get("/v1/transcripts?from=2026-11-02&to=2026-11-02", token: agentToken).status == .forbidden)
            #expect(try await server.get("/v1/transcripts?from=2026-11-02", token: admin).error.code == "missing_field")
            #expect(try await server.get("/v1/transcripts?from=yesterday&to=2026-11-02", token: admin).error.field == "from")
            // One strict reader for every date: junk after a time, a day that does not exist, hour 25.
            for (query, field) in [
                ("from=2026-11-24T00:00:00Zjunk&to=2026-11-25", "from"), ("from=2026-02-30&to=2026-03-05", "from"),
                ("from=2026-11-01&to=2026-11-24T25:00:00Z", "to"), ("from=2026-11-01&to=2026-11-31", "to"),
            ] {
                for path in ["/v1/transcripts", "/v1/reports"] {
                    let refused = try await server.get("\(path)?\(query)", token: admin)
                    #expect(refused.status == .badRequest, "\(path)?\(query)")
                    #expect(try refused.error.code == "invalid_date" && refused.error.field == field, "\(path)?\(query): \(refused.text)")
                }
            }
            #expect(try await server.get("/v1/transcripts?from=2026-11-03&to=2026-11-01", token: admin).error.field == "to")
            #expect(try await server.get("/v1/transcripts?from=2025-01-01&to=2026-11-01", token: admin).error.field == "to")

            // Two exports at once per brand: a third waits for one to be done with.
            let principal = try await server.services.identity.authenticate(token: admin).principal
            guard case .agent(let manager) = principal else { throw TestFailure("not an agent") }
            let day = (Date(timeIntervalSince1970: 1_793_577_600), Date(timeIntervalSince1970: 1_793_664_000))
            var first: TranscriptService.Export? = try await server.services.transcripts.range(manager, from: day.0, to: day.1, format: .txt)
            let another = try await server.services.transcripts.range(manager, from: day.0, to: day.1, format: .txt)
            let busy = await #expect(throws: ParleyError.self) { try await server.services.transcripts.range(manager, from: day.0, to: day.1, format: .txt) }
            #expect(busy?.code == "export_busy")
            #expect(first != nil)
            first = nil
            _ = try await server.services.transcripts.range(manager, from: day.0, to: day.1, format: .txt)
            _ = another
        }
    }
}
