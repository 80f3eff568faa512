import Foundation
import ParleyAPI
import ParleyServer
import SQLKit
import Testing

@Suite("Card number masking")
struct CardMaskingTests {
    static let card = "4242 4242 4242 4242"

    /// Every stored copy of the text: message bodies and conversation previews, straight from the
    /// database file (SQLite), or from those columns (PostgreSQL, whose files are not ours to read).
    static func databaseContains(_ server: TestServer, _ needle: String) async throws -> Bool {
        let spellings = [needle, needle.replacingOccurrences(of: " ", with: "")]
        if server.onPostgres {
            return try await server.services.store.database.read { db in
                var found = false
                for spelling in spellings {
                    let pattern = "%\(spelling)%"
                    let messages = try await db.raw("SELECT COUNT(*) AS n FROM messages WHERE body LIKE \(bind: pattern)").first()
                    let previews = try await db.raw(
                        "SELECT COUNT(*) AS n FROM conversations WHERE last_message_preview LIKE \(bind: pattern)"
                    ).first()
                    let count = try (messages?.decode(column: "n", as: Int.self) ?? 0) + (previews?.decode(column: "n", as: Int.self) ?? 0)
                    found = found || count > 0
                }
                return found
            }
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory.path).filter { $0.hasPrefix("parley.sqlite") }
        return try files.contains { name in
            let data = try Data(contentsOf: server.dataDirectory.appendingPathComponent(name))
            return data.range(of: Data(needle.utf8)) != nil || data.range(of: Data(needle.replacingOccurrences(of: " ", with: "").utf8)) != nil
        }
    }

    @Test("masked for everyone: the consumer's own copy, the agents' copy and everything stored")
    func everyone() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let setting = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(cardMasking: .everyone))
            #expect(try setting.decode(BrandSettingsDTO.self).cardMasking == .everyone)
            let (token, _) = try await acme.consumer()
            let sent = try await acme.send("My card is \(Self.card), expiry 12/29", as: token)
            #expect(sent.message.text == "My card is •••• •••• •••• 4242, expiry ••/••")
            #expect(sent.conversation.lastMessagePreview == "My card is •••• •••• •••• 4242, expiry ••/••")
            // Into the conversation by name (the masking setting is read with the conversation there).
            let named = try await acme.send("and \(Self.card) again", as: token, conversationId: sent.conversation.id)
            #expect(named.message.text == "and •••• •••• •••• 4242 again")
            let seen = try await server.get("/v1/conversations/\(sent.conversation.id)/messages", token: acme.adminToken)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(seen.map(\.text) == [sent.message.text, named.message.text])
            // Agents' own messages are theirs to write (and not a consumer's card).
            let reply = try await acme.reply("Thanks, we never need \(Self.card)", in: sent.conversation.id, as: acme.adminToken)
            #expect(reply.message.text.contains(Self.card))
            #expect(try await Self.databaseContains(server, "My card is \(Self.card)") == false)
        }
    }

    @Test("masked for agents: the sending device gets its own text back; nothing unmasked is stored")
    func agentsOnly() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(cardMasking: .agents))
            let (token, _) = try await acme.consumer()
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let sent = try await acme.send("pay with 5555-5555-5555-4444 please", as: token)
            #expect(sent.message.text == "pay with 5555-5555-5555-4444 please")
            guard case .message(let atAgent) = try await agent.next(where: { if case .message = $0 { return true } else { return false } }) else {
                throw TestFailure("no message")
            }
            #expect(atAgent.text == "pay with ••••-••••-••••-4444 please")
            let named = try await acme.send("or 5555-5555-5555-4444", as: token, conversationId: sent.conversation.id)
            #expect(named.message.text == "or 5555-5555-5555-4444")
            let history = try await server.get("/v1/consumer/conversations/\(sent.conversation.id)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(history.map(\.text) == ["pay with ••••-••••-••••-4444 please", "or ••••-••••-••••-4444"])
            #expect(try await Self.databaseContains(server, "5555-5555-5555-4444") == false)
            await agent.close()
        }
    }

    @Test("off by default: numbers are kept as sent")
    func off() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            #expect(try await acme.send("card \(Self.card)", as: token).message.text == "card \(Self.card)")
        }
    }
}
