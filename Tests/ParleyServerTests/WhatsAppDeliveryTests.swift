import Foundation
import HTTPTypes
import ParleyAPI
import ParleyMedia
@testable import ParleyServer
import Testing

/// WhatsApp end to end against a local endpoint that follows the Cloud API's documentation
/// (`FakeWhatsApp`): Meta's documented webhooks in, the documented calls out.
@Suite("WhatsApp Cloud API: media, outbound delivery, statuses, the 24-hour window")
struct WhatsAppDeliveryTests {
    static let customerWaId = "16505551234"

    /// A server whose WhatsApp API and media host are the fake; an app connected to it; the fake.
    static func run(
        clock: ManualClock? = nil, transcriber: (any Transcriber)? = nil,
        configure: @escaping @Sendable (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, BrandScenario, AppDTO, FakeWhatsApp) async throws -> Void
    ) async throws {
        let fake = try await FakeWhatsApp.start(token: WhatsAppTests.secrets.accessToken, phoneNumberId: WhatsAppTests.secrets.phoneNumberId)
        do {
            try await TestServer.run(clock: clock ?? ManualClock(), transcriber: transcriber) {
                $0.whatsappAPIURL = fake.baseURL
                $0.whatsappMediaHosts = [fake.origin]
                configure(&$0)
            } _: { server in
                let (acme, app) = try await WhatsAppTests.connected(server)
                try await body(server, acme, app, fake)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    /// Posts a fixture, signed, and expects 200.
    static func deliver(_ server: TestServer, _ app: AppDTO, _ body: Data) async throws {
        let reply = try await WhatsAppTests.post(server, app: app, body, signature: WhatsAppTests.signature(body))
        #expect(reply.status == .ok, "\(reply.text)")
    }

    /// Waits (real time, short polls) until `check` passes on the conversation's messages. A bound
    /// on arriving at all, not a measure of speed: media go through jobs and the upload pipelines,
    /// and inside the PostgreSQL suite (300 tests on two cores) `inboundMedia` has needed 25-100 s
    /// in all; its six messages once took longer than the 30 s this bound used to be.
    @discardableResult
    static func messages(
        _ server: TestServer, _ token: String, in conversationId: ConversationID? = nil, channel: Channel = .whatsapp, within seconds: Double = 90,
        moving clock: ManualClock? = nil, until check: ([MessageDTO]) -> Bool
    ) async throws -> [MessageDTO] {
        let deadline = Date().addingTimeInterval(seconds)
        var last: [MessageDTO] = []
        while Date() < deadline {
            clock?.advance(by: .seconds(2))
            var id = conversationId
            if id == nil {
                id = try await server.get("/v1/conversations?channel=\(channel.rawValue)", token: token).decode(Page<ConversationDTO>.self).items.first?.id
            }
            if let id {
                last = try await server.get("/v1/conversations/\(id)/messages", token: token).decode(ListResponse<MessageDTO>.self).items
                if check(last) { return last }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // What the jobs were doing, so that a job put back for a retry (due on a clock that does not move) shows.
        var seen: [String] = []
        for state in ["queued", "running", "failed"] {
            let listed = try? await Self.jobs(server, token: token, state: state)
            seen += (listed ?? []).map { "\($0.kind) \($0.state) attempts \($0.attempts) \($0.lastError ?? "")" }
        }
        throw TestFailure(
            "the messages did not get there within \(seconds) s: \(last.map { "\($0.kind) \($0.text) \(String(describing: $0.channelDelivery))" }); jobs: \(seen)")
    }

    /// The brand's kept jobs in `state` (`GET /v1/jobs`).
    static func jobs(_ server: TestServer, token: String, state: String) async throws -> [JobDTO] {
        try await server.get("/v1/jobs?state=\(state)", token: token).decode(ListResponse<JobDTO>.self).items
    }

    /// The customer's WhatsApp conversation, opened by their documented text message.
    static func customerWrote(_ server: TestServer, _ acme: BrandScenario, _ app: AppDTO) async throws -> ConversationDTO {
        try await deliver(server, app, try WhatsAppTests.fixture("text-message.json"))
        try await messages(server, acme.adminToken) { $0.count == 1 }
        return try #require(try await server.get("/v1/conversations?channel=whatsapp", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first)
    }

    static func status(_ name: String, wamid: String) throws -> Data {
        Data(String(decoding: try WhatsAppTests.fixture(name), as: UTF8.self).replacingOccurrences(of: "WAMID", with: wamid).utf8)
    }

    @Test("a customer's Ogg/Opus voice note, a photo and a PDF are fetched with the token and go through the upload pipelines; the note is transcribed")
    func inboundMedia() async throws {
        let audio = try AudioFixtures.files()
        let images = try ImageFixtures.files()
        try await Self.run(transcriber: ScriptedTranscriber(words: "the lid arrived scratched")) { server, acme, app, fake in
            #expect(try await TranscriptionTests.enable(server, acme, .init(transcription: true)).status == .ok)
            fake.addMedia(id: "1003383421387256", data: try audio.data("note.ogg"), mime: "audio/ogg")
            fake.addMedia(id: "1232349591549226", data: try images.data("photo.jpg"), mime: "image/jpeg")
            fake.addMedia(id: "1074393247913592", data: try images.data("invoice.pdf"), mime: "application/pdf")
            for name in ["audio-message.json", "image-message.json", "document-message.json", "unsupported-message.json"] {
                try await Self.deliver(server, app, try WhatsAppTests.fixture(name))
            }
            let all = try await Self.messages(server, acme.adminToken) { $0.count == 6 }
            let voice = try #require(all.first { $0.kind == .voice })
            // Duration and waveform on arrival, as for a note recorded in the browser.
            #expect((voice.voice?.durationMs ?? 0) > 500)
            #expect(voice.voice?.waveform.isEmpty == false)
            #expect(voice.clientMessageId == "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzRjc0OUE2QjI1NzM5NjM4RUYA")
            #expect(try await VoiceTests.processed(server, voice, token: acme.adminToken).voice?.state == .ready)
            // A WhatsApp note is transcribed like the widget's, in the brand's language.
            let transcribed = try await TranscriptionTests.transcribed(server, voice, token: acme.adminToken)
            #expect(transcribed.transcript?.text == "the lid arrived scratched")
            #expect(transcribed.transcript?.language == "en")
            let photo = try #require(all.first { $0.attachment?.type == .jpeg })
            #expect(photo.attachment?.width == 1200)
            #expect(all.contains { $0.attachment?.type == .pdf && $0.attachment?.fileName == "receipt.pdf" })
            #expect(all.contains { $0.text == "The scratch on the lid" })
            #expect(all.contains { $0.text == "My receipt" })
            #expect(all.contains { $0.text == "[unsupported WhatsApp message: unsupported]" })
            #expect(Set(all.map(\.conversationId)).count == 1)
            #expect(fake.state.withLock { $0.refusedAuth } == 0)

            // Meta retries the whole notification: nothing is fetched or stored twice.
            let fetches = fake.state.withLock { $0.mediaFetches }
            try await Self.deliver(server, app, try WhatsAppTests.fixture("audio-message.json"))
            try await server.jobsSettled()
            #expect(try await Self.messages(server, acme.adminToken) { _ in true }.count == 6)
            #expect(fake.state.withLock { $0.mediaFetches } == fetches)
        }
    }

    @Test("a customer's media that come while their other files are still being taken in wait for a slot: not refused, no attempt spent, no backoff")
    func mediaWaitForTheCustomersSlot() async throws {
        let images = try ImageFixtures.files()
        // The clock never moves: a media job that was refused and put back for a retry would never run again.
        try await Self.run { server, acme, app, fake in
            let conversation = try await Self.customerWrote(server, acme, app)
            fake.addMedia(id: "1074393247913592", data: try images.data("invoice.pdf"), mime: "application/pdf")
            // The customer's other files, still being taken in: every upload slot they have is held.
            let gate = server.services.voice.uploads
            let (held, release) = await UploadGateTests.hold(gate, consumer: conversation.consumerId.rawValue, count: gate.perConsumer)

            try await Self.deliver(server, app, try WhatsAppTests.fixture("document-message.json"))
            // The media job has fetched the file and found no slot free (it is running, or on today's
            // main: back in the queue for a retry, its attempt spent).
            let deadline = Date().addingTimeInterval(30)
            func mediaJob(_ state: String) async throws -> JobDTO? {
                try await Self.jobs(server, token: acme.adminToken, state: state).first { $0.kind == "whatsapp.media" }
            }
            while try await mediaJob("running") == nil, try await mediaJob("queued").map({ $0.attempts == 0 }) ?? true {
                guard Date() < deadline else { throw TestFailure("the media job did not start") }
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await mediaJob("queued") == nil, "the job was refused and put back for a retry")
            release.finish()
            try await held.value

            let all = try await Self.messages(server, acme.adminToken, in: conversation.id, within: 30) { $0.count == 3 }
            #expect(all.contains { $0.attachment?.type == .pdf && $0.attachment?.fileName == "receipt.pdf" })
            #expect(all.contains { $0.text == "My receipt" })
            try await server.jobsSettled()
            #expect(try await mediaJob("failed") == nil)
        }
    }

    @Test("hostile media: a URL on another host is never fetched; too large is refused before download; the agent sees a line")
    func hostileMedia() async throws {
        let audio = try AudioFixtures.files()
        // The media host allow-list does not include the fake's origin: its URLs are "foreign".
        try await Self.run(configure: { $0.whatsappMediaHosts = ["lookaside.fbsbx.com"] }) { server, acme, app, fake in
            fake.addMedia(id: "1003383421387256", data: try audio.data("note.ogg"), mime: "audio/ogg")
            try await Self.deliver(server, app, try WhatsAppTests.fixture("audio-message.json"))
            let lines = try await Self.messages(server, acme.adminToken) { $0.count == 1 }
            #expect(lines.first?.text.contains("not on WhatsApp's media host") == true, "\(lines.map(\.text))")
            #expect(fake.state.withLock { $0.mediaFetches } == 0)
        }
        try await Self.run(configure: { $0.maxVoiceBytes = 2048 }) { server, acme, app, fake in
            fake.addMedia(id: "1003383421387256", data: try audio.data("note.ogg"), mime: "audio/ogg")
            try await Self.deliver(server, app, try WhatsAppTests.fixture("audio-message.json"))
            let lines = try await Self.messages(server, acme.adminToken) { $0.count == 1 }
            #expect(lines.first?.text.contains("larger than") == true, "\(lines.map(\.text))")
            #expect(fake.state.withLock { $0.mediaFetches } == 0)
        }
    }

    @Test("a media download that stalls is cut at the provider timeout, retried, and after the last attempt the agent gets a line")
    func stalledMedia() async throws {
        let clock = ManualClock()
        try await Self.run(clock: clock, configure: { $0.providerTimeoutSeconds = 2; $0.jobMaxAttempts = 2 }) { server, acme, app, fake in
            fake.addMedia(id: "1003383421387256", data: Data("OggS".utf8), mime: "audio/ogg")
            fake.state.withLock { _ = $0.stalled.insert("1003383421387256") }
            try await Self.deliver(server, app, try WhatsAppTests.fixture("audio-message.json"))
            let lines = try await Self.messages(server, acme.adminToken, within: 60, moving: clock) { $0.count == 1 }
            #expect(lines.first?.text.contains("could not be fetched") == true, "\(lines.map(\.text))")
            // Two attempts, each cut at the timeout. (The fake counts the requests that reached it: on a
            // loaded machine the second may be cut before it connects, so the job's count is the proof.)
            #expect((1...2).contains(fake.state.withLock { $0.mediaFetches }))
            let jobs = try await Self.jobs(server, token: acme.adminToken, state: "failed")
            #expect(jobs.first?.kind == "whatsapp.media")
            #expect(jobs.first?.attempts == 2)
        }
    }

    @Test("agents' text, voice note and photo go out as the Cloud API documents; statuses become ticks; a failure shows and can be retried")
    func outbound() async throws {
        let audio = try AudioFixtures.files()
        let images = try ImageFixtures.files()
        // The send job waits for the voice note's renditions on the injected clock: the test moves it.
        let clock = ManualClock()
        try await Self.run(clock: clock, configure: { $0.agentSessionTTL = 30 * 24 * 3600 }) { server, acme, app, fake in
            let conversation = try await Self.customerWrote(server, acme, app)
            // Text.
            let text = try await server.request(
                .post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken,
                json: SendMessageRequest(clientMessageId: "reply-1", text: "Yes: blue and green.", conversationId: conversation.id))
            #expect(text.status == .created)
            #expect(try text.decode(SendMessageResponse.self).message.channelDelivery?.state == .queued)
            try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            let first = try #require(fake.sent.first)
            #expect(first["to"] as? String == Self.customerWaId && first["type"] as? String == "text")
            #expect((first["text"] as? [String: Any])?["body"] as? String == "Yes: blue and green.")
            #expect(first["recipient_type"] as? String == "individual")

            // A voice note: uploaded as Ogg/Opus mono, then sent as a voice message.
            let voice = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(voice.status == .created, "\(voice.text)")
            try await Self.messages(server, acme.adminToken, in: conversation.id, moving: clock) {
                $0.last?.kind == .voice && $0.last?.channelDelivery?.state == .sent
            }
            let upload = try #require(fake.uploads.first)
            #expect(upload.type == "audio/ogg")
            let probe = FileManager.default.temporaryDirectory.appendingPathComponent("wa-\(UUID().uuidString).ogg")
            try upload.data.write(to: probe)
            defer { try? FileManager.default.removeItem(at: probe) }
            let probed = try ProcessRunner(executable: ProcessRunner.locate("ffprobe") ?? "/usr/bin/ffprobe").runBlocking(
                ["-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0", probe.path], timeout: .seconds(30))
            #expect(String(decoding: probed.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "opus,1")
            #expect(upload.data.count <= 512 * 1024)
            let audioMessage = try #require(fake.sent.last)
            #expect(audioMessage["type"] as? String == "audio")
            #expect((audioMessage["audio"] as? [String: Any])?["voice"] as? Bool == true)
            #expect((audioMessage["audio"] as? [String: Any])?["id"] as? String != nil)

            // A photo: uploaded with its type, sent as an image.
            let photo = try await AttachmentTests.upload(server, try images.data("photo.png"), token: acme.adminToken, name: "colours.png", agentConversation: conversation.id)
            #expect(photo.status == .created, "\(photo.text)")
            try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.kind == .attachment && $0.last?.channelDelivery?.state == .sent }
            #expect(fake.uploads.last?.type == "image/png")
            #expect(fake.sent.last?["type"] as? String == "image")

            // Statuses: read moves every earlier message of the agent to read (the same ticks as on the web).
            try await Self.deliver(server, app, try Self.status("status-read.json", wamid: "wamid.test2"))
            let read = try await Self.messages(server, acme.adminToken, in: conversation.id) { messages in
                messages.filter { $0.senderKind == .agent }.prefix(2).allSatisfy { $0.deliveryState == .read }
            }
            #expect(read.last?.deliveryState == .sent)
            // A failure: the provider's code and a sentence, retryable; the retry sends it again.
            try await Self.deliver(server, app, try Self.status("status-failed.json", wamid: "wamid.test3"))
            let failed = try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .failed }
            let delivery = try #require(failed.last?.channelDelivery)
            #expect(delivery.errorCode == "131053" && delivery.retryable == true)
            #expect(delivery.errorMessage?.contains("media") == true)
            let events = try await server.get("/v1/conversations/\(conversation.id)/events", token: acme.adminToken).decode(ListResponse<ConversationEventDTO>.self).items
            #expect(events.contains { $0.kind == .delivery && $0.message?.channelDelivery?.errorCode == "131053" })
            let retried = try await server.request(.post, "/v1/messages/\(try #require(failed.last?.id))/retry", token: acme.adminToken)
            #expect(retried.status == .ok, "\(retried.text)")
            try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            #expect(fake.sent.filter { $0["type"] as? String == "image" }.count == 2)
            // Not failed: nothing to retry.
            #expect(try await server.request(.post, "/v1/messages/\(try #require(failed.last?.id))/retry", token: acme.adminToken).error.code == "not_retryable")
            // Another brand cannot retry it.
            let globex = try await BrandScenario.make(server, name: "Globex")
            #expect(try await server.request(.post, "/v1/messages/\(try #require(failed.last?.id))/retry", token: globex.adminToken).status == .notFound)
        }
    }

    @Test("429 is retried after Retry-After without sending twice; 131047 fails with its sentence; jobs that give up are listed for admins")
    func providerErrors() async throws {
        let clock = ManualClock()
        try await Self.run(clock: clock, configure: { $0.jobMaxAttempts = 3 }) { server, acme, app, fake in
            let conversation = try await Self.customerWrote(server, acme, app)
            var throttled = try WhatsAppTests.fixture("error-130429.json")
            fake.script([(429, throttled)])
            let reply = SendMessageRequest(clientMessageId: "after-429", text: "One moment please.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: reply).status == .created)
            try await Self.messages(server, acme.adminToken, in: conversation.id, moving: clock) { $0.last?.channelDelivery?.state == .sent }
            let attempts = fake.sent.filter { ($0["text"] as? [String: Any])?["body"] as? String == "One moment please." }
            #expect(attempts.count == 2)
            #expect(attempts.filter { $0["_refused"] == nil }.count == 1)

            fake.script([(400, try WhatsAppTests.fixture("error-131047.json"))])
            let late = SendMessageRequest(clientMessageId: "re-engage", text: "Are you still there?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: late).status == .created)
            let failed = try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .failed }
            #expect(failed.last?.channelDelivery?.errorCode == "131047")
            #expect(failed.last?.channelDelivery?.retryable == false)
            #expect(failed.last?.channelDelivery?.errorMessage?.contains("24 hours") == true)

            // Server errors every time: three attempts, then the job is given up, kept for admins,
            // and the message says so.
            throttled = Data(#"{"error":{"message":"Service temporarily unavailable","type":"OAuthException","code":2,"fbtrace_id":"A1"}}"#.utf8)
            fake.script([(503, throttled), (503, throttled), (503, throttled)])
            let doomed = SendMessageRequest(clientMessageId: "doomed", text: "This one will not make it.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: doomed).status == .created)
            let gaveUp = try await Self.messages(server, acme.adminToken, in: conversation.id, within: 60, moving: clock) {
                $0.last?.channelDelivery?.state == .failed
            }
            #expect(gaveUp.last?.channelDelivery?.errorCode == "not_sent")
            #expect(gaveUp.last?.channelDelivery?.retryable == true)
            let jobs = try await Self.jobs(server, token: acme.adminToken, state: "failed")
            #expect(jobs.count == 1 && jobs.first?.kind == "channel.send" && jobs.first?.attempts == 3)
            #expect(jobs.first?.lastError?.contains("503") == true)
            let (agentToken, _) = try await acme.agent()
            #expect(try await server.get("/v1/jobs", token: agentToken).status == .forbidden)
            #expect(try await server.get("/v1/jobs?state=bogus", token: acme.adminToken).status == .badRequest)
        }
    }

    @Test("25 hours after the customer's last message only a template can be sent; templates are managed by admins")
    func window() async throws {
        let clock = ManualClock()
        // Agents' sessions outlast the 25 hours the clock moves.
        try await Self.run(clock: clock, configure: { $0.agentSessionTTL = 30 * 24 * 3600 }) { server, acme, app, fake in
            let conversation = try await Self.customerWrote(server, acme, app)
            #expect(conversation.replyWindowEndsAt != nil)
            let rules = try await server.get("/v1/channels", token: acme.adminToken).decode(ListResponse<ChannelRulesDTO>.self).items
            #expect(rules.first { $0.channel == .whatsapp }?.replyWindowHours == 24)
            #expect(rules.first { $0.channel == .web }?.replyWindowHours == nil)

            let templates = WhatsAppTemplatesRequest(templates: [
                WhatsAppTemplateDTO(name: "order_update", language: "en_US", body: "Hello {{1}}, your order {{2}} has an update. Reply to continue.")
            ])
            let saved = try await server.request(.put, "/v1/apps/\(app.id)/whatsapp/templates", token: acme.adminToken, json: templates)
            #expect(try saved.decode(ChannelConnectionDTO.self).templates.count == 1)
            let (agentToken, _) = try await acme.agent()
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp/templates", token: agentToken, json: templates).status == .forbidden)
            let badName = WhatsAppTemplatesRequest(templates: [WhatsAppTemplateDTO(name: "Order Update!", language: "en_US", body: "x")])
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp/templates", token: acme.adminToken, json: badName).status == .badRequest)

            clock.advance(by: .seconds(25 * 3600))
            let late = SendMessageRequest(clientMessageId: "too-late", text: "Hello?", conversationId: conversation.id)
            let refused = try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: late)
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "reply_window_closed")
            let voice = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(try voice.error.code == "reply_window_closed")

            let wrongCount = SendTemplateRequest(clientMessageId: "t0", name: "order_update", language: "en_US", parameters: ["Sheena"])
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/template", token: acme.adminToken, json: wrongCount).status == .badRequest)
            let unknown = SendTemplateRequest(clientMessageId: "t1", name: "nope", language: "en_US", parameters: [])
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/template", token: acme.adminToken, json: unknown).error.code == "template_not_found")
            let good = SendTemplateRequest(clientMessageId: "t2", name: "order_update", language: "en_US", parameters: ["Sheena", "#1234"])
            let sent = try await server.request(.post, "/v1/conversations/\(conversation.id)/template", token: acme.adminToken, json: good)
            #expect(sent.status == .created, "\(sent.text)")
            #expect(try sent.decode(SendMessageResponse.self).message.text == "Hello Sheena, your order #1234 has an update. Reply to continue.")
            try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            let template = try #require(fake.sent.last?["template"] as? [String: Any])
            #expect(template["name"] as? String == "order_update")
            #expect((template["language"] as? [String: Any])?["code"] as? String == "en_US")
            let parameters = ((template["components"] as? [[String: Any]])?.first?["parameters"] as? [[String: Any]])?.compactMap { $0["text"] as? String }
            #expect(parameters == ["Sheena", "#1234"])
            // A retry of the same template returns the stored message, sends nothing more.
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/template", token: acme.adminToken, json: good).status == .ok)

            // The customer writes again: the window opens again.
            let text = try WhatsAppTests.fixture("text-message.json")
            let again = Data(String(decoding: text, as: UTF8.self).replacingOccurrences(of: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", with: "wamid.again").utf8)
            try await Self.deliver(server, app, again)
            try await Self.messages(server, acme.adminToken, in: conversation.id) { $0.contains { $0.clientMessageId == "wamid.again" } }
            let open = SendMessageRequest(clientMessageId: "open-again", text: "Welcome back!", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: open).status == .created)
        }
    }

    @Test("test connection shows the number's verified name, or the provider's reason")
    func testConnection() async throws {
        try await Self.run { server, acme, app, fake in
            let ok = try await server.request(.post, "/v1/apps/\(app.id)/whatsapp/test", token: acme.adminToken).decode(ChannelTestDTO.self)
            #expect(ok.ok && ok.message.contains("Acme Support"))
            var wrong = WhatsAppTests.secrets
            wrong.accessToken = "EAAG-revoked-token"
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/whatsapp", token: acme.adminToken, json: wrong).status == .ok)
            let refused = try await server.request(.post, "/v1/apps/\(app.id)/whatsapp/test", token: acme.adminToken).decode(ChannelTestDTO.self)
            #expect(!refused.ok && refused.errorCode == "190")
            #expect(refused.message.contains("reconnect"))
            let globex = try await BrandScenario.make(server, name: "Globex")
            #expect(try await server.request(.post, "/v1/apps/\(app.id)/whatsapp/test", token: globex.adminToken).status == .notFound)
        }
    }

    @Test("key rotation: secrets sealed with the old key still open next to the new one, and re-sealing moves them to the new key")
    func keyRotation() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-rotation-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await TestDatabase.make()
        defer { Task { await database.drop() } }
        let old = Data(repeating: 1, count: 32).base64EncodedString()
        let new = Data(repeating: 2, count: 32).base64EncodedString()
        let (apps, continuation) = AsyncStream<AppID>.makeStream()
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path; $0.secretKey = old }) { server in
            let (_, app) = try await WhatsAppTests.connected(server)
            continuation.yield(app.id)
            continuation.finish()
        }
        var iterator = apps.makeAsyncIterator()
        let appId = try #require(await iterator.next())
        let body = try WhatsAppTests.fixture("text-message.json")
        try await TestServer.run(database: database, configure: {
            $0.dataDirectory = directory.path; $0.secretKey = new; $0.previousSecretKeys = [old]
        }) { server in
            let reply = try await server.request(
                .post, "/v1/webhooks/whatsapp/\(appId)", data: body,
                headers: [.contentType: "application/json", HTTPField.Name("X-Hub-Signature-256")!: WhatsAppTests.signature(body)])
            #expect(reply.status == .ok)
            #expect(try await server.services.resealSecrets() == 1)
            #expect(try await server.services.resealSecrets() == 0)
        }
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path; $0.secretKey = new }) { server in
            let reply = try await server.request(
                .post, "/v1/webhooks/whatsapp/\(appId)", data: body,
                headers: [.contentType: "application/json", HTTPField.Name("X-Hub-Signature-256")!: WhatsAppTests.signature(body)])
            #expect(reply.status == .ok, "the re-sealed secret opens with the new key alone")
        }
    }
}
