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
    /// The unit (a transaction, or a statement alone) that inserted a message.
    static func messageWrite(_ recorder: RecordingDatabase) throws -> RecordingDatabase.Unit {
        let writes = recorder.recorded.filter { unit in unit.kind != .read && unit.statements.contains(where: isMessageInsert) }
        guard writes.count == 1, let write = writes.first else {
            throw TestFailure("expected one write inserting a message, found \(writes.count): \(recorder.recorded)")
        }
        return write
    }

    static func isMessageInsert(_ sql: String) -> Bool { sql.lowercased().replacingOccurrences(of: "\"", with: "").contains("insert into messages ") }

    /// What a plain message into a named conversation costs. SQLite: one transaction of three
    /// statements (the conversation, its update, the message), in the group commit. PostgreSQL: two
    /// round trips and no transaction: the conversation read (with the brand's masking), then its
    /// update and the message in one statement that applies only if no entry came in between.
    static func expectPlainMessage(_ recording: RecordingDatabase, on server: TestServer) throws {
        let write = try messageWrite(recording)
        let lowered = write.statements.map { $0.lowercased() }
        // No look for an earlier message with this client message id: the unique index is that check.
        #expect(!lowered.contains { $0.contains("from messages") && !$0.hasPrefix("with ") }, "\(write)")
        // The brand's card-masking setting comes with the conversation, not in a statement of its own.
        #expect(!recording.recorded.contains { $0.statements.contains { $0.lowercased().hasPrefix("select * from brand_settings") } }, "\(recording.recorded)")
        if server.onPostgres {
            #expect(write.kind == .alone, "\(write)")
            #expect(write.statements.count == 1, "\(write)")
            #expect(lowered.first?.contains("last_seq = $") == true, "applies only if no entry came in between: \(write)")
            let reads = recording.recorded.filter { $0.kind == .read && $0.statements.contains { $0.contains("AS brand_card_masking") } }
            #expect(reads.count == 1, "\(recording.recorded)")
        } else {
            #expect(write.kind == .write, "\(write)")
            #expect(write.statements.count == 3, "\(write)")
        }
    }

    @Test("a customer's text in their open conversation: the conversation (with the brand's masking), its update, the message")
    func consumerText() async throws {
        let recording = RecordingDatabase()
        try await TestServer.run(recording: recording) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            recording.reset()
            let second = try await acme.send("My order has not arrived", as: token, conversationId: first.conversation.id)
            #expect(second.created)
            #expect(second.message.seq == first.message.seq + 1)
            try Self.expectPlainMessage(recording, on: server)
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
            let reply = try await acme.reply("How can I help?", in: first.conversation.id, as: acme.adminToken)
            #expect(reply.created)
            #expect(reply.conversation.firstReplyAt != nil)
            try Self.expectPlainMessage(recording, on: server)
        }
    }

    @Test("a message written alone applies only to the conversation as it was read: a stale read writes nothing")
    func staleRead() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            let read = first.conversation
            // Another entry lands after `read` was taken.
            try await acme.reply("Hi!", in: read.id, as: acme.adminToken)
            var staleWrite = read
            staleWrite.lastSeq += 1
            let stale = staleWrite
            let message = MessageDTO(
                id: MessageID.make(), conversationId: read.id, seq: stale.lastSeq, senderKind: .consumer, senderId: first.message.senderId,
                clientMessageId: "stale-1", kind: .text, text: "Late", deliveryState: .sent, createdAt: read.createdAt)
            let store = server.services.store
            #expect(try await store.alone { repo in try await repo.appendMessage(message, to: stale, from: read) } == false)
            #expect(try await store.read { repo in try await repo.message(senderId: first.message.senderId, clientMessageId: "stale-1") } == nil)
            let now = try #require(try await store.read { repo in try await repo.conversation(brandId: acme.brand.id, id: read.id, lock: false) })
            #expect(now.lastSeq == read.lastSeq + 1)
            // From the conversation as it is now, it applies.
            var freshWrite = now
            freshWrite.lastSeq += 1
            var currentMessage = message
            currentMessage.seq = freshWrite.lastSeq
            let (fresh, current) = (freshWrite, currentMessage)
            #expect(try await store.alone { repo in try await repo.appendMessage(current, to: fresh, from: now) })
            #expect(try await store.read { repo in try await repo.message(senderId: first.message.senderId, clientMessageId: "stale-1") } != nil)
        }
    }

    @Test("sends racing into one conversation from both sides get consecutive sequence numbers, each message once")
    func racingSends() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("Hello", as: token)
            let conversation = first.conversation.id
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    group.addTask { try await acme.send("c\(index)", as: token, conversationId: conversation, clientMessageId: "c\(index)") }
                    group.addTask { try await acme.reply("a\(index)", in: conversation, as: acme.adminToken, clientMessageId: "a\(index)") }
                }
                try await group.waitForAll()
            }
            let history = try await server.get("/v1/consumer/conversations/\(conversation)/messages?limit=100", token: token)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(history.count == 25)
            #expect(history.map(\.seq) == Array(1...25).map(Int64.init))
            #expect(Set(history.map(\.clientMessageId)).count == 25)
            let shown = try await server.get("/v1/conversations/\(conversation)", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(shown.lastSeq == 25)
        }
    }

    @Test("the event bus sends a batch of notices as one statement, outside a transaction; a notice too large for NOTIFY goes in a transaction with its row")
    func busBatch() async throws {
        let recording = RecordingDatabase()
        let transport = try PostgresBusTransport(url: "postgres://parley@127.0.0.1:1/parley", database: recording, logger: .init(label: "test"))
        try await transport.send(["one", "two", "three"])
        #expect(recording.recorded.count == 1)
        #expect(recording.recorded.first?.kind == .alone)
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
