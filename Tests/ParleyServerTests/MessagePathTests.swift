import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
import Testing

@testable import ParleyServer

/// What a message costs the database: the statements of its transaction, counted (a round trip
/// each on PostgreSQL), and that the ones taken out still do their work (a retry still answers
/// with its original).
@Suite("Message path")
struct MessagePathTests {
    /// The statements of the write that inserted a message.
    static func messageWrite(_ recorder: RecordingDatabase) throws -> [String] {
        let writes = recorder.recorded.filter { unit in unit.isWrite && unit.statements.contains(where: isMessageInsert) }
        guard writes.count == 1, let write = writes.first else {
            throw TestFailure("expected one transaction inserting a message, found \(writes.count): \(recorder.recorded)")
        }
        return write.statements
    }

    static func isMessageInsert(_ sql: String) -> Bool { sql.lowercased().replacingOccurrences(of: "\"", with: "").contains("insert into messages ") }

    /// Statements in a message's transaction (BEGIN and COMMIT are the client's): the conversation
    /// locked, then its update and the message, which are one statement on PostgreSQL.
    static func expected(_ server: TestServer) -> Int { server.onPostgres ? 2 : 3 }

    @Test("a customer's text in their open conversation: the conversation locked (with the brand's masking), its update, the message")
    func consumerText() async throws {
        let recording = RecordingDatabase()
        try await TestServer.run(recording: recording) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            recording.reset()
            let second = try await acme.send("My order has not arrived", as: token, conversationId: first.conversation.id)
            #expect(second.created)
            let statements = try Self.messageWrite(recording)
            // No look for an earlier message with this client message id: the unique index is that check.
            #expect(!statements.contains { $0.lowercased().contains("from \"messages\"") || $0.lowercased().contains("from messages") },
                "\(statements)")
            // The brand's card-masking setting comes with the conversation, not in a statement of its own.
            #expect(!statements.contains { $0.lowercased().hasPrefix("select * from brand_settings") }, "\(statements)")
            #expect(statements.count == Self.expected(server), "\(statements)")
        }
    }

    @Test("an agent's reply: the same statements")
    func agentReply() async throws {
        let recording = RecordingDatabase()
        try await TestServer.run(recording: recording) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            recording.reset()
            #expect(try await acme.reply("How can I help?", in: first.conversation.id, as: acme.adminToken).created)
            let statements = try Self.messageWrite(recording)
            #expect(statements.count == Self.expected(server), "\(statements)")
        }
    }

    @Test("the event bus sends a batch of notices as one statement, outside a transaction; a notice too large for NOTIFY goes in a transaction with its row")
    func busBatch() async throws {
        let recording = RecordingDatabase()
        let transport = try PostgresBusTransport(url: "postgres://parley@127.0.0.1:1/parley", database: recording, logger: .init(label: "test"))
        try await transport.send(["one", "two", "three"])
        #expect(recording.recorded.count == 1)
        #expect(recording.recorded.first?.isWrite == false)
        #expect(recording.recorded.first?.statements.count == 1)
        #expect(recording.recorded.first?.statements.first?.contains("pg_notify") == true)

        recording.reset()
        // The stub answers the INSERT with no id, so this send fails; what it tried is what counts.
        _ = try? await transport.send(["small", String(repeating: "x", count: PostgresBusTransport.inlineLimit + 1)])
        #expect(recording.recorded.first?.isWrite == true)
        #expect(recording.recorded.first?.statements.first?.contains("INSERT INTO bus_payloads") == true)
    }

    @Test("a retry answers with its original and adds nothing, also where the message would now be refused")
    func retries() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token, clientMessageId: "hello-1")
            let conversation = first.conversation.id

            // A plain retry.
            let again = try await acme.send("Hello", as: token, conversationId: conversation, clientMessageId: "hello-1")
            #expect(!again.created)
            #expect(again.message.id == first.message.id)

            // The same id for another text is refused, and changes nothing.
            let reused = try await server.post(
                "/v1/consumer/messages", token: token,
                json: SendMessageRequest(clientMessageId: "hello-1", text: "Something else", conversationId: conversation))
            #expect(reused.status == .conflict)
            #expect(try reused.error.code == "client_message_id_reused")

            // The agent's reply, retried after the conversation was resolved: the agent could not
            // write there now (conversation_resolved), but the retry gets its original.
            let reply = try await acme.reply("Sorted!", in: conversation, as: acme.adminToken, clientMessageId: "reply-1")
            #expect(try await server.post("/v1/conversations/\(conversation)/resolve", token: acme.adminToken).status == .ok)
            let replyAgain = try await acme.reply("Sorted!", in: conversation, as: acme.adminToken, clientMessageId: "reply-1")
            #expect(!replyAgain.created)
            #expect(replyAgain.message.id == reply.message.id)
            // A new reply there is still refused.
            let refused = try await server.post(
                "/v1/conversations/\(conversation)/messages", token: acme.adminToken,
                json: SendMessageRequest(clientMessageId: "reply-2", text: "One more thing"))
            #expect(try refused.error.code == "conversation_resolved")

            // The customer's retry naming the conversation closed since: the original, no new conversation.
            let retried = try await acme.send("Hello", as: token, conversationId: conversation, clientMessageId: "hello-1")
            #expect(!retried.created)
            #expect(retried.message.id == first.message.id)
            let listed = try await server.get("/v1/consumer/conversations", token: token).decode(Page<ConversationDTO>.self)
            #expect(listed.items.map(\.id) == [conversation])
            let history = try await server.get("/v1/consumer/conversations/\(conversation)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self)
            #expect(history.items.map(\.clientMessageId) == ["hello-1", "reply-1"])
        }
    }

    @Test("two sends of one message at the same moment store it once and answer both with it")
    func concurrentDuplicates() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            let answers = try await withThrowingTaskGroup(of: SendMessageResponse.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await acme.send("Same", as: token, conversationId: first.conversation.id, clientMessageId: "same-1") }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.filter(\.created).count == 1)
            #expect(Set(answers.map(\.message.id)).count == 1)
            let history = try await server.get("/v1/consumer/conversations/\(first.conversation.id)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self)
            #expect(history.items.filter { $0.clientMessageId == "same-1" }.count == 1)
        }
    }
}
