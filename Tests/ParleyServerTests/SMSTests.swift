import Foundation
import HTTPTypes
import ParleyAPI
import ParleyMedia
@testable import ParleyServer
import Testing

/// SMS and MMS against a local endpoint that follows Twilio's documentation (`FakeTwilio`): the
/// documented webhook parameters in (signed as Twilio signs them), the Messages resource out.
@Suite("SMS/MMS through Twilio: signatures, webhooks, MMS media, the Messages resource, links")
struct SMSTests {
    static let secrets = ConnectSMSRequest(
        accountSid: "ACaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", authToken: "twilio-auth-token-0123456789abcdef", phoneNumber: "+1 555 712 2661")
    static let customer = "+15558675310"

    // MARK: Twilio's own signature vectors

    static let vectorURL = "https://mycompany.com/myapp.php?foo=1&bar=2"
    static let vectorParameters = [
        ("CallSid", "CA1234567890ABCDE"), ("Digits", "1234"), ("From", "+14158675309"), ("To", "+18005551212"), ("Caller", "+14158675309"),
    ]

    @Test("X-Twilio-Signature: Twilio's validator vectors, with the port added or removed, repeated keys, and tampering")
    func signatureVectors() {
        #expect(TwilioSignature.compute(url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "12345") == "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
        #expect(TwilioSignature.isValid("RSOYDt4T1cUTdK1PDd93/VVr8B8=", url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "12345"))
        // Signed with the port, received without it, and the other way round.
        let withPort = Self.vectorURL.replacingOccurrences(of: ".com", with: ".com:1234")
        #expect(TwilioSignature.isValid("RSOYDt4T1cUTdK1PDd93/VVr8B8=", url: withPort, parameters: Self.vectorParameters, authToken: "12345"))
        #expect(TwilioSignature.isValid("kvajT1Ptam85bY51eRf/AJRuM3w=", url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "12345"))
        let httpWithPort = withPort.replacingOccurrences(of: "https", with: "http")
        #expect(TwilioSignature.isValid("Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", url: httpWithPort, parameters: Self.vectorParameters, authToken: "12345"))
        let repeated = [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678"), ("Digits", "1234")]
        #expect(TwilioSignature.compute(url: Self.vectorURL, parameters: repeated, authToken: "12345") == "IK+Dwps556ElfBT0I3Rgjkr1wJU=")
        // Any change is refused: a value, the URL, the token, an empty or absurd header.
        var changed = Self.vectorParameters
        changed[1].1 = "9999"
        #expect(!TwilioSignature.isValid("RSOYDt4T1cUTdK1PDd93/VVr8B8=", url: Self.vectorURL, parameters: changed, authToken: "12345"))
        #expect(!TwilioSignature.isValid("RSOYDt4T1cUTdK1PDd93/VVr8B8=", url: Self.vectorURL + "&x=1", parameters: Self.vectorParameters, authToken: "12345"))
        #expect(!TwilioSignature.isValid("RSOYDt4T1cUTdK1PDd93/VVr8B8=", url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "54321"))
        #expect(!TwilioSignature.isValid("", url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "12345"))
        #expect(!TwilioSignature.isValid(String(repeating: "A", count: 500), url: Self.vectorURL, parameters: Self.vectorParameters, authToken: "12345"))
        // The form decoder: + is a space, percent escapes, empty values kept.
        let form = FormBody.parse(Data("Body=Hi%21+there&ToCity=&To=%2B15557122661".utf8))
        #expect(form.map { "\($0.0)=\($0.1)" } == ["Body=Hi! there", "ToCity=", "To=+15557122661"])
    }

    // MARK: Helpers

    static func run(
        clock: ManualClock = ManualClock(), transcriber: (any Transcriber)? = nil,
        configure: @escaping @Sendable (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, BrandScenario, AppDTO, FakeTwilio) async throws -> Void
    ) async throws {
        let fake = try await FakeTwilio.start(accountSid: secrets.accountSid, authToken: secrets.authToken)
        do {
            try await TestServer.run(clock: clock, transcriber: transcriber) {
                $0.twilioAPIURL = fake.baseURL
                $0.twilioMediaHosts = [fake.origin, fake.cdnOrigin]
                $0.agentSessionTTL = 30 * 24 * 3600
                configure(&$0)
            } _: { server in
                let acme = try await BrandScenario.make(server)
                let app = try await acme.app(channel: .sms, name: "Acme SMS")
                // The admin's browser is on the server's address: Twilio is given that address.
                let connected = try await server.request(
                    .put, "/v1/apps/\(app.id)/sms", token: acme.adminToken, json: secrets, headers: [.origin: "http://127.0.0.1:\(server.port)"])
                #expect(connected.status == .ok, "\(connected.text)")
                try await body(server, acme, app, fake)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    static func form(_ name: String, _ replacements: [String: String] = [:]) throws -> Data {
        var text = String(decoding: try FakeTwilio.fixture(name), as: UTF8.self)
        for (placeholder, value) in replacements { text = text.replacingOccurrences(of: placeholder, with: value) }
        return Data(text.utf8)
    }

    /// Posts a form as Twilio would: signed over the URL it was given and the parameters.
    static func post(
        _ server: TestServer, _ app: AppDTO, _ body: Data, status: Bool = false, token: String = secrets.authToken, sign: Bool = true
    ) async throws -> TestServer.Reply {
        let path = status ? "/v1/webhooks/sms/\(app.id)/status" : "/v1/webhooks/sms/\(app.id)"
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if sign {
            headers[HTTPField.Name("X-Twilio-Signature")!] = TwilioSignature.compute(
                url: "http://127.0.0.1:\(server.port)\(path)", parameters: FormBody.parse(body), authToken: token)
        }
        return try await server.request(.post, path, data: body, headers: headers)
    }

    static func deliver(_ server: TestServer, _ app: AppDTO, _ body: Data, status: Bool = false) async throws {
        let reply = try await post(server, app, body, status: status)
        #expect(reply.status == .ok, "\(reply.text)")
        #expect(reply.text.contains("<Response></Response>"))
    }

    static func conversation(_ server: TestServer, _ acme: BrandScenario) async throws -> ConversationDTO {
        try #require(try await server.get("/v1/conversations?channel=sms", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first)
    }

    // MARK: Tests

    @Test("connect (the number, the URL to paste, never the token), test (the number's MMS capability), a signed SMS; bad signatures and replays store nothing")
    func inbound() async throws {
        try await Self.run { server, acme, app, fake in
            let connection = try await server.get("/v1/apps/\(app.id)/sms", token: acme.adminToken)
            let dto = try connection.decode(ChannelConnectionDTO.self)
            #expect(dto.externalId == "+15557122661")
            #expect(dto.webhookURL == "http://127.0.0.1:\(server.port)/v1/webhooks/sms/\(app.id)")
            #expect(!connection.text.contains(Self.secrets.authToken))
            let test = try await server.request(.post, "/v1/apps/\(app.id)/sms/test", token: acme.adminToken).decode(ChannelTestDTO.self)
            #expect(test.ok && test.message.contains("SMS and MMS"), "\(test.message)")
            #expect(try await server.get("/v1/apps/\(app.id)/sms", token: acme.adminToken).decode(ChannelConnectionDTO.self).mms == true)

            // Bad input at connect: changes nothing.
            var bad = Self.secrets
            bad.accountSid = "AC123"
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/sms", token: acme.adminToken, json: bad).error.field == "accountSid")
            bad = Self.secrets
            bad.phoneNumber = "5557122661"
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/sms", token: acme.adminToken, json: bad).error.field == "phoneNumber")

            let sms = try Self.form("incoming-sms.form")
            let before = try await HTTPErrorTests.rowCounts(server)
            #expect(try await Self.post(server, app, sms, sign: false).status == .unauthorized)
            #expect(try await Self.post(server, app, sms, token: "another-token-0000000000000000").status == .unauthorized)
            // Signed, then changed on the way: the signature no longer matches.
            var tampered = try await Self.post(server, app, sms).status
            #expect(tampered == .ok)
            let altered = Data(String(decoding: sms, as: UTF8.self).replacingOccurrences(of: "has+not", with: "has").utf8)
            var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            headers[HTTPField.Name("X-Twilio-Signature")!] = TwilioSignature.compute(
                url: "http://127.0.0.1:\(server.port)/v1/webhooks/sms/\(app.id)", parameters: FormBody.parse(sms), authToken: Self.secrets.authToken)
            tampered = try await server.request(.post, "/v1/webhooks/sms/\(app.id)", data: altered, headers: headers).status
            #expect(tampered == .unauthorized)
            let messages = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { $0.count == 1 }
            #expect(messages.first?.text == "Hi! My order #42 has not arrived yet")
            #expect(messages.first?.clientMessageId == "SMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1")
            let after = try await HTTPErrorTests.rowCounts(server)
            #expect(after["messages"] == (before["messages"] ?? 0) + 1)

            // Twilio retries: nothing is stored twice.
            try await Self.deliver(server, app, sms)
            try await server.jobsSettled()
            #expect(try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { _ in true }.count == 1)
            let conversation = try await Self.conversation(server, acme)
            let consumer = try await server.get("/v1/consumers/\(conversation.consumerId)", token: acme.adminToken).decode(ConsumerDTO.self)
            #expect(consumer.displayName == "+1 555 867 5310" && consumer.phone == Self.customer)

            // An oversized body is refused before it is read as a form.
            let huge = Data(repeating: UInt8(ascii: "a"), count: SMSChannel.maxWebhookBytes + 1)
            #expect(try await Self.post(server, app, huge).status == .contentTooLarge)
            _ = fake
        }
    }

    @Test("an MMS voice note: the media URL with Basic auth, the redirect to the CDN without it, then the voice pipeline and its transcript; a foreign host is refused")
    func inboundMedia() async throws {
        let audio = try AudioFixtures.files()
        try await Self.run(transcriber: ScriptedTranscriber(words: "where is my order")) { server, acme, app, fake in
            #expect(try await TranscriptionTests.enable(server, acme, .init(transcription: true)).status == .ok)
            let url = fake.addMedia("MEaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", data: try audio.data("note.amr"), mime: "audio/amr")
            try await Self.deliver(server, app, try Self.form("incoming-mms.form", ["MEDIA_URL": url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, "MEDIA_TYPE": "audio%2Famr"]))
            let messages = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { $0.first?.kind == .voice }
            let voice = try #require(messages.first)
            #expect((voice.voice?.durationMs ?? 0) > 500)
            #expect(voice.voice?.waveform.isEmpty == false)
            #expect(voice.clientMessageId == "MMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2")
            #expect(fake.state.withLock { ($0.mediaRequests, $0.cdnRequests, $0.cdnCredentialLeaks) } == (1, 1, 0))
            // A channel's note is transcribed like the widget's.
            #expect(try await TranscriptionTests.transcribed(server, voice, token: acme.adminToken).transcript?.text == "where is my order")
        }
        // The CDN is not on the allow-list: the redirect is not followed.
        try await Self.run(configure: { _ in }) { server, acme, app, fake in
            let url = fake.addMedia("MEaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", data: try audio.data("note.amr"), mime: "audio/amr")
            let foreign = url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            try await Self.deliver(server, app, try Self.form("incoming-mms.form", ["MEDIA_URL": foreign.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, "MEDIA_TYPE": "audio%2Famr"]))
            let lines = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { $0.count == 1 }
            #expect(lines.first?.text.contains("not on Twilio's media host") == true, "\(lines.map(\.text))")
            #expect(fake.state.withLock { $0.mediaRequests } == 0)
        }
    }

    @Test("agents' text goes out through the Messages resource; status callbacks become ticks or a failure with Twilio's code; STOP is final; 429 is retried")
    func outbound() async throws {
        let clock = ManualClock()
        try await Self.run(clock: clock) { server, acme, app, fake in
            try await Self.deliver(server, app, try Self.form("incoming-sms.form"))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { $0.count == 1 }
            let conversation = try await Self.conversation(server, acme)
            #expect(conversation.replyWindowEndsAt == nil)

            let reply = SendMessageRequest(clientMessageId: "s-1", text: "Sorry! It ships today.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: reply).status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) { $0.last?.channelDelivery?.state == .sent }
            let text = try #require(fake.sent.first)
            #expect(text.field("To") == Self.customer && text.field("From") == "+15557122661" && text.field("Body") == "Sorry! It ships today.")
            #expect(text.field("StatusCallback") == "http://127.0.0.1:\(server.port)/v1/webhooks/sms/\(app.id)/status")

            // 1,601 characters: more than a Twilio body; refused before anything is stored.
            let long = SendMessageRequest(clientMessageId: "s-long", text: String(repeating: "a", count: 1601), conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: long).error.code == "message_too_long")

            let sid = "SM00000000000000000000000000000001"
            try await Self.deliver(server, app, try Self.form("status-delivered.form", ["MESSAGE_SID": sid]), status: true)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) {
                $0.first { $0.clientMessageId == "s-1" }?.deliveryState == .delivered
            }
            // A status callback with a bad signature changes nothing.
            #expect(try await Self.post(server, app, try Self.form("status-undelivered.form", ["MESSAGE_SID": sid]), status: true, sign: false).status == .unauthorized)
            // Undelivered later (the phone is off): the failure and Twilio's code show, with retry.
            try await Self.deliver(server, app, try Self.form("status-undelivered.form", ["MESSAGE_SID": sid]), status: true)
            let undelivered = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id) {
                $0.first { $0.clientMessageId == "s-1" }?.channelDelivery?.state == .failed
            }
            let failure = try #require(undelivered.first { $0.clientMessageId == "s-1" }?.channelDelivery)
            #expect(failure.errorCode == "30003" && failure.retryable == true && failure.errorMessage?.contains("switched off") == true)

            // 429 first (retried after back-off), then STOP: final, no retry button.
            fake.script([(429, try FakeTwilio.fixture("error-too-many-requests.json")), (400, try FakeTwilio.fixture("error-unsubscribed.json"))])
            let late = SendMessageRequest(clientMessageId: "s-2", text: "Anything else?", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: late).status == .created)
            let stopped = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, within: 60, moving: clock) {
                $0.last?.channelDelivery?.state == .failed
            }
            #expect(stopped.last?.channelDelivery?.errorCode == "21610")
            #expect(stopped.last?.channelDelivery?.retryable == false)
            #expect(stopped.last?.channelDelivery?.errorMessage?.contains("STOP") == true)
            #expect(fake.sent.count == 3)
            let retry = try await server.request(.post, "/v1/messages/\(try #require(stopped.last?.id))/retry", token: acme.adminToken)
            #expect(try retry.error.code == "not_retryable")
        }
    }

    @Test("an agent's voice note: MMS audio (AAC) Twilio fetches from a signed link when the number sends MMS; otherwise a text with a link to a player page, which expires")
    func outboundVoice() async throws {
        let audio = try AudioFixtures.files()
        let clock = ManualClock()
        try await Self.run(clock: clock, configure: { $0.sharedLinkHours = 72 }) { server, acme, app, fake in
            try await Self.deliver(server, app, try Self.form("incoming-sms.form"))
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .sms) { $0.count == 1 }
            let conversation = try await Self.conversation(server, acme)

            // Not tested yet: MMS unknown, so the note goes as a link.
            let first = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(first.status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, moving: clock) {
                $0.last?.kind == .voice && $0.last?.channelDelivery?.state == .sent
            }
            let linkText = try #require(fake.sent.last?.field("Body"))
            #expect(linkText.hasPrefix("Voice message from \(acme.brand.name) (0:0"), "\(linkText)")
            #expect(fake.sent.last?.field("MediaUrl") == nil)
            let link = try #require(linkText.split(separator: " ").last.map(String.init))
            let path = String(link.dropFirst("http://127.0.0.1:\(server.port)".count))
            #expect(path.hasPrefix("/l/"))
            let page = try await server.get(path)
            #expect(page.status == .ok && page.text.contains("<audio controls") && page.text.contains("Voice message"))
            let media = try await server.get(path + "/media")
            #expect(media.status == .ok && media.headers[.contentType] == "audio/mp4")
            #expect(try Self.probe(media.body) == "aac,1")
            // A link for another message, or a changed one, leads nowhere.
            #expect(try await server.get(String(path.dropLast(2)) + "xx").status == .notFound)
            #expect(try await server.get(path.replacingOccurrences(of: "/l/\(acme.brand.id)", with: "/l/brd_other")).status == .notFound)

            // The connection test finds MMS: the next note goes as MMS audio Twilio fetches.
            #expect(try await server.request(.post, "/v1/apps/\(app.id)/sms/test", token: acme.adminToken).decode(ChannelTestDTO.self).ok)
            let second = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(second.status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, moving: clock) {
                $0.last?.kind == .voice && $0.last?.channelDelivery?.state == .sent && $0.filter { $0.kind == .voice }.count == 2
            }
            let mms = try #require(fake.sent.last)
            #expect(mms.field("MediaUrl")?.hasSuffix("/media") == true && mms.field("Body") == nil)
            #expect(mms.mediaType == "audio/mp4")
            #expect(try Self.probe(mms.media ?? Data()) == "aac,1")
            #expect((mms.media?.count ?? 0) <= SMSChannel.maxMMSAudioBytes)

            // 73 hours later the link has expired: a page that says so, and no audio.
            clock.advance(by: .seconds(73 * 3600))
            let expired = try await server.get(path)
            #expect(expired.status == .gone && expired.text.contains("expired"))
            #expect(try await server.get(path + "/media").status == .gone)
        }
    }

    static func probe(_ data: Data) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sms-\(UUID().uuidString).m4a")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let probed = try ProcessRunner(executable: ProcessRunner.locate("ffprobe") ?? "/usr/bin/ffprobe").runBlocking(
            ["-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0", file.path], timeout: .seconds(30))
        return String(decoding: probed.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
