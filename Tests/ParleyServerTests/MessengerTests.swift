import Crypto
import Foundation
import HTTPTypes
import ParleyAPI
import ParleyMedia
import ParleyServer
import Testing

/// Messenger against a local endpoint that follows the Messenger Platform's documentation
/// (`FakeMessenger`): Meta's documented webhook events in, the Send API out.
@Suite("Messenger Platform: connecting, webhooks, the Send API, deliveries and reads")
struct MessengerTests {
    static let secrets = ConnectMessengerRequest(
        pageId: "682498302938465", verifyToken: "messenger-verify-me", appSecret: "messenger-app-secret-0123", pageAccessToken: "EAAP-page-token")
    static let psid = "1254459154682919"

    static func signature(_ body: Data, secret: String = secrets.appSecret) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        return "sha256=" + code.map { String(format: "%02x", $0) }.joined()
    }

    static func post(_ server: TestServer, _ app: AppDTO, _ body: Data, signature: String?) async throws -> TestServer.Reply {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let signature { headers[HTTPField.Name("X-Hub-Signature-256")!] = signature }
        return try await server.request(.post, "/v1/webhooks/messenger/\(app.id)", data: body, headers: headers)
    }

    static func deliver(_ server: TestServer, _ app: AppDTO, _ body: Data) async throws {
        let reply = try await post(server, app, body, signature: signature(body))
        #expect(reply.status == .ok, "\(reply.text)")
    }

    static func fixture(_ name: String, _ replacements: [String: String] = [:]) throws -> Data {
        var text = String(decoding: try FakeMessenger.fixture(name), as: UTF8.self)
        for (placeholder, value) in replacements { text = text.replacingOccurrences(of: placeholder, with: value) }
        return Data(text.utf8)
    }

    static func run(
        clock: ManualClock = ManualClock(), configure: @escaping @Sendable (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, BrandScenario, AppDTO, FakeMessenger) async throws -> Void
    ) async throws {
        let fake = try await FakeMessenger.start(token: secrets.pageAccessToken, pageId: secrets.pageId)
        do {
            try await TestServer.run(clock: clock) {
                $0.messengerAPIURL = fake.baseURL
                $0.messengerMediaHosts = [fake.origin]
                $0.agentSessionTTL = 30 * 24 * 3600
                configure(&$0)
            } _: { server in
                let acme = try await BrandScenario.make(server)
                let app = try await acme.app(channel: .messenger, name: "Acme Messenger")
                let connected = try await server.request(.put, "/v1/apps/\(app.id)/messenger", token: acme.adminToken, json: secrets)
                #expect(connected.status == .ok, "\(connected.text)")
                try await body(server, acme, app, fake)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    @Test("connect, verify, signed text with the customer's profile name, a voice note from the CDN; echoes and bad signatures store nothing")
    func inbound() async throws {
        let audio = try AudioFixtures.files()
        try await Self.run { server, acme, app, fake in
            let connection = try await server.get("/v1/apps/\(app.id)/messenger", token: acme.adminToken)
            #expect(try connection.decode(ChannelConnectionDTO.self).webhookPath == "/v1/webhooks/messenger/\(app.id)")
            #expect(!connection.text.contains(Self.secrets.pageAccessToken) && !connection.text.contains(Self.secrets.appSecret))
            let test = try await server.request(.post, "/v1/apps/\(app.id)/messenger/test", token: acme.adminToken).decode(ChannelTestDTO.self)
            #expect(test.ok && test.message == "Connected to Acme Store.")
            let path = "/v1/webhooks/messenger/\(app.id)"
            #expect(try await server.get("\(path)?hub.mode=subscribe&hub.verify_token=messenger-verify-me&hub.challenge=77").text == "77")
            #expect(try await server.get("\(path)?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=77").status == .forbidden)

            let text = try Self.fixture("text-message.json")
            let before = try await HTTPErrorTests.rowCounts(server)
            #expect(try await Self.post(server, app, text, signature: nil).status == .unauthorized)
            #expect(try await Self.post(server, app, text, signature: Self.signature(text, secret: "other-secret-000")).status == .unauthorized)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)

            try await Self.deliver(server, app, text)
            try await Self.deliver(server, app, text)  // Meta retries
            try await Self.deliver(server, app, try Self.fixture("echo-message.json"))  // the Page's own message: not the customer's
            let url = fake.addAttachment("voice.ogg", data: try audio.data("note.ogg"), mime: "audio/ogg")
            try await Self.deliver(server, app, try Self.fixture("audio-message.json", ["ATTACHMENT_URL": url]))
            let messages = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .messenger) { $0.count == 2 }
            #expect(messages.first?.text == "hello, world!")
            #expect(messages.first?.clientMessageId == "mid.1457764197618:41d102a3e1ae206a38")
            let voice = try #require(messages.last)
            #expect(voice.kind == .voice && (voice.voice?.durationMs ?? 0) > 500)
            let conversation = try #require(try await server.get("/v1/conversations?channel=messenger", token: acme.adminToken)
                .decode(Page<ConversationDTO>.self).items.first)
            let customer = try await server.get("/v1/consumers/\(conversation.consumerId)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(customer.displayName == "Peter Chang")
            #expect(customer.externalId == "messenger:\(Self.psid)")

            // An attachment elsewhere than the CDN is never fetched.
            let fetches = fake.state.withLock { $0.cdnFetches }
            let foreign = try Self.fixture("audio-message.json", ["ATTACHMENT_URL": "http://127.0.0.1:1/internal", "mid.$cAAJdkrCd2ORnva8ErFhjGm0X_Q_c": "mid.foreign"])
            try await Self.deliver(server, app, foreign)
            let lines = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .messenger) { $0.count == 3 }
            #expect(lines.last?.text.contains("not on Messenger's media host") == true, "\(lines.map(\.text))")
            #expect(fake.state.withLock { $0.cdnFetches } == fetches)
        }
    }

    @Test("agents' text, voice (AAC) and photo go out through the Send API; deliveries and reads become ticks; outside the window the refusal shows")
    func outbound() async throws {
        let audio = try AudioFixtures.files()
        let images = try ImageFixtures.files()
        let clock = ManualClock()
        try await Self.run(clock: clock) { server, acme, app, fake in
            try await Self.deliver(server, app, try Self.fixture("text-message.json"))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .messenger) { $0.count == 1 }
            let conversation = try #require(try await server.get("/v1/conversations?channel=messenger", token: acme.adminToken)
                .decode(Page<ConversationDTO>.self).items.first)
            #expect(conversation.replyWindowEndsAt != nil)

            let reply = SendMessageRequest(clientMessageId: "m-1", text: "Hi Peter, how can I help?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: reply).status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            let text = try #require(fake.sent.first)
            #expect(text.fields["recipient"]?.contains(Self.psid) == true)
            #expect(text.fields["message"]?.contains("Hi Peter, how can I help?") == true)

            // 641 characters: more than Messenger takes; refused before anything is stored.
            let long = SendMessageRequest(clientMessageId: "m-long", text: String(repeating: "a", count: 641), conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: long).error.code == "message_too_long")

            let voice = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(voice.status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, moving: clock) {
                $0.last?.kind == .voice && $0.last?.channelDelivery?.state == .sent
            }
            let sentVoice = try #require(fake.sent.last)
            #expect(sentVoice.fields["message"]?.contains("\"type\":\"audio\"") == true)
            #expect(sentVoice.fileType == "audio/mp4")
            let probe = FileManager.default.temporaryDirectory.appendingPathComponent("ms-\(UUID().uuidString).m4a")
            try (sentVoice.file ?? Data()).write(to: probe)
            defer { try? FileManager.default.removeItem(at: probe) }
            let probed = try ProcessRunner(executable: ProcessRunner.locate("ffprobe") ?? "/usr/bin/ffprobe").runBlocking(
                ["-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0", probe.path], timeout: .seconds(30))
            #expect(String(decoding: probed.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "aac,1")

            let photo = try await AttachmentTests.upload(server, try images.data("photo.jpg"), token: acme.adminToken, name: "p.jpg", agentConversation: conversation.id)
            #expect(photo.status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) {
                $0.last?.kind == .attachment && $0.last?.channelDelivery?.state == .sent
            }
            #expect(fake.sent.last?.fields["message"]?.contains("\"type\":\"image\"") == true)

            // Delivered by mid, then read by watermark (everything sent before it).
            try await Self.deliver(server, app, try Self.fixture("delivery.json", ["MID": "m_test1"]))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { messages in
                messages.first { $0.clientMessageId == "m-1" }?.deliveryState == .delivered
            }
            let watermark = Int64((clock.now().timeIntervalSince1970 + 1) * 1000)
            try await Self.deliver(server, app, try Self.fixture("read.json", ["\"watermark\": 0": "\"watermark\": \(watermark)"]))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { messages in
                messages.filter { $0.senderKind == .agent }.allSatisfy { $0.deliveryState == .read }
            }

            // Meta says the window has closed (its clock may differ from ours): the refusal shows.
            fake.script([(400, try FakeMessenger.fixture("error-outside-window.json"))])
            let late = SendMessageRequest(clientMessageId: "m-late", text: "Still there?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: late).status == .created)
            let failed = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .failed }
            #expect(failed.last?.channelDelivery?.errorCode == "10")
            #expect(failed.last?.channelDelivery?.errorMessage?.contains("24 hours") == true)

            // 25 hours later Parley refuses before asking Messenger.
            clock.advance(by: .seconds(25 * 3600))
            let after = SendMessageRequest(clientMessageId: "m-after", text: "Hello?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: after).error.code == "reply_window_closed")
        }
    }

    @Test("with the Human Agent window on, agents answer up to 7 days later (MESSAGE_TAG, HUMAN_AGENT); off again, the 24-hour window is back for open conversations")
    func humanAgent() async throws {
        let clock = ManualClock()
        try await Self.run(clock: clock) { server, acme, app, fake in
            let (agentToken, _) = try await acme.agent()
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/messenger/settings", token: agentToken, json: MessengerSettingsRequest(humanAgent: true)).status == .forbidden)
            let on = try await server.request(.put, "/v1/apps/\(app.id)/messenger/settings", token: acme.adminToken, json: MessengerSettingsRequest(humanAgent: true))
            #expect(try on.decode(ChannelConnectionDTO.self).humanAgent == true)

            try await Self.deliver(server, app, try Self.fixture("text-message.json"))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .messenger) { $0.count == 1 }
            let conversation = try #require(try await server.get("/v1/conversations?channel=messenger", token: acme.adminToken)
                .decode(Page<ConversationDTO>.self).items.first)
            let last = try #require(conversation.lastConsumerMessageAt)
            #expect(conversation.replyWindowEndsAt == last.addingTimeInterval(7 * 24 * 3600))

            // Within 24 hours: RESPONSE. After them: the HUMAN_AGENT tag.
            let early = SendMessageRequest(clientMessageId: "h-1", text: "Looking into it.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: early).status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            #expect(fake.sent.last?.fields["messaging_type"] == "RESPONSE" && fake.sent.last?.fields["tag"] == nil)
            clock.advance(by: .seconds(3 * 24 * 3600))
            let late = SendMessageRequest(clientMessageId: "h-2", text: "Your replacement ships tomorrow.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: late).status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            #expect(fake.sent.last?.fields["messaging_type"] == "MESSAGE_TAG" && fake.sent.last?.fields["tag"] == "HUMAN_AGENT")

            // Turned off: the open conversation's window is 24 hours again, so it has closed.
            let off = try await server.request(.put, "/v1/apps/\(app.id)/messenger/settings", token: acme.adminToken, json: MessengerSettingsRequest(humanAgent: false))
            #expect(try off.decode(ChannelConnectionDTO.self).humanAgent == false)
            let closed = try await server.get("/v1/conversations/\(conversation.id)", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(closed.replyWindowEndsAt == last.addingTimeInterval(24 * 3600))
            let refused = SendMessageRequest(clientMessageId: "h-3", text: "Hello?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: refused).error.code == "reply_window_closed")

            // On again, and 8 days after the customer wrote: closed even so.
            _ = try await server.request(.put, "/v1/apps/\(app.id)/messenger/settings", token: acme.adminToken, json: MessengerSettingsRequest(humanAgent: true))
            clock.advance(by: .seconds(5 * 24 * 3600))
            let tooLate = SendMessageRequest(clientMessageId: "h-4", text: "Hello?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: tooLate).error.code == "reply_window_closed")
        }
    }
}
