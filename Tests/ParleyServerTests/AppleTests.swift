import CompressNIO
import Foundation
import HTTPTypes
import NIOCore
import ParleyAPI
import ParleyMedia
@testable import ParleyServer
import Testing

/// Apple Messages for Business against a local gateway that follows Apple's Business Chat REST API
/// and sample code (`FakeApple`): gzipped, JWT-signed messages in; encrypted attachments both ways.
@Suite("Apple Messages for Business: JWTs, gzip, encrypted attachments, messages both ways")
struct AppleTests {
    static let secretBytes = Data((0..<32).map { UInt8($0 * 7 % 256) })
    static let secrets = ConnectAppleRequest(
        businessId: "3c5e1f52-7a0b-4f7e-9b8d-1e2f3a4b5c6d", mspId: "parley-msp-0001", secret: secretBytes.base64EncodedString())

    static func run(
        clock: ManualClock = ManualClock(), configure: @escaping @Sendable (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, BrandScenario, AppDTO, FakeApple) async throws -> Void
    ) async throws {
        let fake = try await FakeApple.start(mspId: secrets.mspId, secret: secretBytes, businessId: secrets.businessId)
        fake.state.withLock { $0.now = { clock.now() } }
        do {
            try await TestServer.run(clock: clock) {
                $0.appleAPIURL = fake.baseURL
                $0.appleMediaHosts = [fake.origin]
                $0.agentSessionTTL = 30 * 24 * 3600
                configure(&$0)
            } _: { server in
                let acme = try await BrandScenario.make(server)
                let app = try await acme.app(channel: .apple, name: "Acme Apple Messages")
                let connected = try await server.request(.put, "/v1/apps/\(app.id)/apple", token: acme.adminToken, json: secrets)
                #expect(connected.status == .ok, "\(connected.text)")
                try await body(server, acme, app, fake)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    static func fixture(_ name: String, _ replacements: [String: String] = [:]) throws -> Data {
        var text = String(decoding: try FakeApple.fixture(name), as: UTF8.self).replacingOccurrences(of: "BUSINESS_ID", with: secrets.businessId)
        for (placeholder, value) in replacements { text = text.replacingOccurrences(of: placeholder, with: value) }
        return Data(text.utf8)
    }

    static func gzip(_ data: Data) throws -> Data {
        var buffer = ByteBuffer(data: data)
        return Data(buffer: try buffer.compress(with: .gzip()))
    }

    /// Posts as Apple's gateway does: gzipped, the JWT, the business as destination-id.
    static func post(
        _ server: TestServer, _ app: AppDTO, _ json: Data, token: String?, destination: String = secrets.businessId, path: String? = nil
    ) async throws -> TestServer.Reply {
        var headers: HTTPFields = [.contentType: "application/json", .contentEncoding: "gzip"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        headers[HTTPField.Name("destination-id")!] = destination
        headers[HTTPField.Name("source-id")!] = "urn:mbid:AQAAY63"
        headers[HTTPField.Name("device-agent")!] = "iPhone OS"
        return try await server.request(.post, path ?? "/v1/webhooks/apple/\(app.id)/message", data: try gzip(json), headers: headers)
    }

    @Test("connect (never the secret), test, a gzipped text with Apple's JWT; wrong JWTs, another business, replays and gzip bombs store nothing")
    func inbound() async throws {
        try await Self.run { server, acme, app, fake in
            let connection = try await server.get("/v1/apps/\(app.id)/apple", token: acme.adminToken)
            #expect(try connection.decode(ChannelConnectionDTO.self).externalId == Self.secrets.businessId)
            #expect(!connection.text.contains(Self.secrets.secret))
            let test = try await server.request(.post, "/v1/apps/\(app.id)/apple/test", token: acme.adminToken).decode(ChannelTestDTO.self)
            #expect(test.ok, "\(test.message)")
            var bad = Self.secrets
            bad.secret = "not base64!"
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/apple", token: acme.adminToken, json: bad).error.field == "secret")
            bad = Self.secrets
            bad.businessId = "urn biz with spaces"
            #expect(try await server.request(.put, "/v1/apps/\(app.id)/apple", token: acme.adminToken, json: bad).error.field == "businessId")

            let text = try Self.fixture("text-message.json")
            let before = try await HTTPErrorTests.rowCounts(server)
            #expect(try await Self.post(server, app, text, token: nil).status == .unauthorized)
            #expect(try await Self.post(server, app, text, token: try await fake.token(secret: Data(repeating: 1, count: 32))).status == .unauthorized)
            #expect(try await Self.post(server, app, text, token: try await fake.token(audience: "another-msp")).status == .unauthorized)
            // Signed with the right secret, but stale: expired a year ago, issued ten minutes ago, or in the future.
            for (issuedAt, expires) in [(-366 * 86_400.0, -365 * 86_400.0), (-600, nil), (-600, 3_600), (600, nil), (-30, -120)] as [(TimeInterval, TimeInterval?)] {
                let stale = try await Self.post(server, app, text, token: try await fake.token(issuedAt: issuedAt, expires: expires))
                #expect(stale.status == .unauthorized, "iat \(issuedAt), exp \(String(describing: expires))")
                #expect(try stale.error.code == "token_expired")
            }
            #expect(try await Self.post(server, app, text, token: try await fake.token(), destination: "another-business").status == .forbidden)
            // 2 MB of zeros compress to a few kilobytes: refused once decompression passes 1 MB.
            let bomb = try await Self.post(server, app, Data(repeating: 0x20, count: 2 * 1024 * 1024), token: try await fake.token())
            #expect(bomb.status == .contentTooLarge)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)

            // Within the leeway: a gateway whose clock is 30 s ahead, a token that expires in a minute.
            #expect(try await Self.post(server, app, text, token: try await fake.token(issuedAt: 30, expires: 60)).status == .ok)
            let messages = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .apple) { $0.count == 1 }
            #expect(messages.first?.text == "Hi! Is my order 42 on its way?")
            #expect(messages.first?.clientMessageId == "7e5d2c3e-6f4b-4b8a-9f0a-2d9c1b7a6e11")
            // Apple retries (and the registered address without /message works too).
            #expect(try await Self.post(server, app, text, token: try await fake.token(), path: "/v1/webhooks/apple/\(app.id)").status == .ok)
            try await server.jobsSettled()
            #expect(try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .apple) { _ in true }.count == 1)
        }
    }

    @Test("a customer's voice note: preDownload with the signature, the encrypted file from MMCS, AES-256-CTR, then the voice pipeline")
    func inboundVoice() async throws {
        let audio = try AudioFixtures.files()
        try await Self.run { server, acme, app, fake in
            let placeholders = try fake.addAttachment(try audio.data("note.m4a"), mimeType: "audio/x-m4a")
            #expect(try await Self.post(server, app, try Self.fixture("audio-message.json", placeholders), token: try await fake.token()).status == .ok)
            let messages = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .apple) { $0.first?.kind == .voice }
            let voice = try #require(messages.first)
            #expect((voice.voice?.durationMs ?? 0) > 500)
            #expect(voice.voice?.waveform.isEmpty == false)
            #expect(voice.clientMessageId == "0b4c6f0e-2a7d-4b6e-8c1f-5e9a3d2b7c44")
            #expect(fake.state.withLock { $0.preDownloads } == 1)

            // A wrong key decrypts to noise: the pipeline refuses it and the agent gets a line.
            var wrong = try fake.addAttachment(try audio.data("note.m4a"), mimeType: "audio/x-m4a")
            wrong["DECRYPTION_KEY"] = "00" + String(repeating: "ab", count: 32)
            let other = String(decoding: try Self.fixture("audio-message.json", wrong), as: UTF8.self)
                .replacingOccurrences(of: "0b4c6f0e-2a7d-4b6e-8c1f-5e9a3d2b7c44", with: "1b4c6f0e-2a7d-4b6e-8c1f-5e9a3d2b7c45")
            #expect(try await Self.post(server, app, Data(other.utf8), token: try await fake.token()).status == .ok)
            let lines = try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .apple) { $0.count == 2 }
            #expect(lines.last?.text.hasPrefix("[Apple Messages voice message not accepted") == true, "\(lines.map(\.text))")
        }
    }

    @Test("agents' text and voice go out gzipped with the JWT; the voice note is encrypted and uploaded to MMCS as AAC; a retry keeps the message id")
    func outbound() async throws {
        let audio = try AudioFixtures.files()
        let clock = ManualClock()
        try await Self.run(clock: clock) { server, acme, app, fake in
            #expect(try await Self.post(server, app, try Self.fixture("text-message.json"), token: try await fake.token()).status == .ok)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, channel: .apple) { $0.count == 1 }
            let conversation = try #require(try await server.get("/v1/conversations?channel=apple", token: acme.adminToken)
                .decode(Page<ConversationDTO>.self).items.first)

            // 503 first: retried with the same id, so Apple can tell it is the same message.
            fake.script([503])
            let reply = SendMessageRequest(clientMessageId: "a-1", text: "Yes! It arrives tomorrow.", conversationId: conversation.id)
            #expect(try await server.request(.post, "/v1/conversations/\(conversation.id)/messages", token: acme.adminToken, json: reply).status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, within: 60, moving: clock) {
                $0.last?.channelDelivery?.state == .sent
            }
            #expect(fake.sent.count == 2)
            #expect(fake.sent[0].headers["id"] == fake.sent[1].headers["id"])
            #expect(fake.sent[1].body == "Yes! It arrives tomorrow." && fake.sent[1].headers["auto-reply"] == "false")
            #expect(fake.sent[1].message["destinationId"] as? String == "urn:mbid:AQAAY63/TIJe/3nF4EvsJeiA+WeopPR92ycuqyjDzc/14u/PdDhLVjieuzb5nPPwFB9u8jXUS/um2flw2Jr5SKGpDHHGstPdM9TyV0Ml5lldZ/nanUpHWMbBn5AwD3FpoqWhOP0t+5oCWvZaMCtdIPNsgFIaZEA=")

            let voice = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversation.id)
            #expect(voice.status == .created)
            try await WhatsAppDeliveryTests.messages(server, acme.adminToken, in: conversation.id, moving: clock) {
                $0.last?.kind == .voice && $0.last?.channelDelivery?.state == .sent
            }
            let sent = try #require(fake.sent.last)
            #expect(sent.body == "\u{FFFC}" && sent.attachmentType == "audio/m4a")
            #expect(try SMSTests.probe(sent.attachment ?? Data()) == "aac,1")
        }
    }
}
