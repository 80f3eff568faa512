import Foundation
import ParleyAPI
import ParleyDomain
import ParleyServer
import Testing

@Suite("Conversations and messages over HTTP")
struct MessagingTests {
    @Test("the consumer's first message opens a conversation; later ones continue it")
    func firstMessageOpens() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, consumer) = try await acme.consumer()
            // Agents have nothing to open a conversation with: they need an id.
            let agentOpen = try await server.post(
                "/v1/conversations/cnv_doesnotexist/messages", token: acme.adminToken,
                json: SendMessageRequest(clientMessageId: "a", text: "hi"))
            #expect(agentOpen.status == .notFound)

            let first = try await acme.send("Hello, my order is late", as: token)
            #expect(first.created)
            #expect(first.message.seq == 1)
            #expect(first.message.deliveryState == .sent)
            #expect(first.conversation.state == .open)
            #expect(first.conversation.channel == .web)
            #expect(first.conversation.consumerId == consumer.id)
            let second = try await acme.send("Order 1234", as: token)
            #expect(second.conversation.id == first.conversation.id)
            #expect(second.message.seq == 2)
            #expect(second.conversation.lastMessagePreview == "Order 1234")
            #expect(second.conversation.lastMessageKind == .text)
        }
    }

    @Test("a retry with the same client message id returns the original and stores nothing")
    func idempotentRetry() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("once", as: token, clientMessageId: "retry-me")
            let retry = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "retry-me", text: "once"))
            #expect(retry.status == .ok)
            let replay = try retry.decode(SendMessageResponse.self)
            #expect(!replay.created)
            #expect(replay.message == first.message)
            let history = try await server.get("/v1/consumer/conversations/\(first.conversation.id)/messages", token: token)
            #expect(try history.decode(ListResponse<MessageDTO>.self).items == [first.message])

            let reused = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "retry-me", text: "different"))
            #expect(reused.status == .conflict)
            #expect(try reused.error.code == "client_message_id_reused")

            // Many retries at once still make one message.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await acme.send("burst", as: token, clientMessageId: "burst-1") }
                }
                try await group.waitForAll()
            }
            let all = try await server.get("/v1/consumer/conversations/\(first.conversation.id)/messages", token: token)
            #expect(try all.decode(ListResponse<MessageDTO>.self).items.filter { $0.clientMessageId == "burst-1" }.count == 1)
        }
    }

    @Test("per-channel limits apply to each side")
    func channelLimits() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let messengerApp = try await server.post(
                "/v1/apps", token: acme.adminToken, json: CreateAppRequest(name: "Messenger page", channel: .messenger)
            ).decode(AppDTO.self)
            let session = try await server.post("/v1/consumer/session", json: ConsumerSessionRequest(appId: messengerApp.id))
                .decode(ConsumerSessionResponse.self)
            // A consumer may write 5000 characters on Messenger...
            let long = try await acme.send(String(repeating: "c", count: 5000), as: session.token)
            #expect(long.conversation.channel == .messenger)
            // ...an agent only 640.
            let tooLong = try await server.post(
                "/v1/conversations/\(long.conversation.id)/messages", token: acme.adminToken,
                json: SendMessageRequest(clientMessageId: "a1", text: String(repeating: "a", count: 641)))
            #expect(tooLong.status == .unprocessableContent)
            #expect(try tooLong.error.code == "message_too_long")
            #expect(try tooLong.error.message.contains("640"))
            try await acme.reply(String(repeating: "a", count: 640), in: long.conversation.id, as: acme.adminToken)
        }
    }

    @Test("the channel is the app's: a web visitor cannot open an Apple conversation or a second conversation")
    func channelFromApp() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let before = try await HTTPErrorTests.rowCounts(server)
            // Apple allows 10,000 characters, the web 2,000: choosing the channel would lift the limit.
            let apple = try await server.post(
                "/v1/consumer/messages", token: token,
                json: SendMessageRequest(clientMessageId: "c1", text: String(repeating: "x", count: 9000), channel: .apple))
            #expect(apple.status == .unprocessableContent)
            #expect(try apple.error.code == "channel_not_allowed")
            #expect(try apple.error.field == "channel")
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            // Naming the app's own channel is fine; every first message without a conversation id
            // lands in the consumer's one conversation for the app, whatever channel is named.
            let first = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "c2", text: "hi", channel: .web))
            let firstConversation = try first.decode(SendMessageResponse.self).conversation
            #expect(firstConversation.channel == .web)
            for (index, channel) in [Channel.sms, .whatsapp, .messenger, .inApp].enumerated() {
                let other = try await server.post(
                    "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "o\(index)", text: "hi", channel: channel))
                #expect(try other.error.code == "channel_not_allowed")
            }
            let again = try await acme.send("again", as: token)
            #expect(again.conversation.id == firstConversation.id)
            let mine = try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self).items
            #expect(mine.map(\.id) == [firstConversation.id])
        }
    }

    @Test("a new conversation only while the brand's open-conversation limit allows; the default is one")
    func openConversationLimit() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await acme.send("first", as: token)
            // The default, one open conversation: asking for another is refused and changes nothing.
            let before = try await HTTPErrorTests.rowCounts(server)
            let refused = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "n1", text: "another", newConversation: true))
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "conversation_limit")
            #expect(try refused.error.field == "newConversation")
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            // Combined with a conversation id: a clear 400 naming the field.
            let both = try await server.post(
                "/v1/consumer/messages", token: token,
                json: SendMessageRequest(clientMessageId: "n2", text: "x", conversationId: first.conversation.id, newConversation: true))
            #expect(both.status == .badRequest)
            #expect(try both.error.field == "newConversation")
            // Once the one conversation is resolved, the consumer may open a new one.
            #expect(try await server.post("/v1/conversations/\(first.conversation.id)/resolve", token: acme.adminToken).status == .ok)
            let fresh = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "n3", text: "new topic", newConversation: true))
            let second = try fresh.decode(SendMessageResponse.self).conversation
            #expect(second.id != first.conversation.id)
            #expect(second.state == .open)
            // The brand allows three: two more open, the fourth is refused; plain sends continue the latest.
            let settings = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(openConversationsPerConsumer: 3))
            #expect(try settings.decode(BrandSettingsDTO.self).openConversationsPerConsumer == 3)
            let tooMany = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(openConversationsPerConsumer: 21))
            #expect(try tooMany.error.field == "openConversationsPerConsumer")
            var opened = [second.id]
            for index in 0..<2 {
                let reply = try await server.post(
                    "/v1/consumer/messages", token: token,
                    json: SendMessageRequest(clientMessageId: "m\(index)", text: "topic \(index)", newConversation: true))
                opened.append(try reply.decode(SendMessageResponse.self).conversation.id)
            }
            #expect(Set(opened).count == 3)
            let fourth = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "m9", text: "one more", newConversation: true))
            #expect(try fourth.error.code == "conversation_limit")
            #expect(try fourth.error.message.contains("3 open conversations"))
            let plain = try await acme.send("carry on", as: token)
            #expect(plain.conversation.id == opened.last)
            // A retry of a message that opened a conversation returns it, and opens nothing.
            let retry = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "m0", text: "topic 0", newConversation: true))
            #expect(try retry.decode(SendMessageResponse.self).created == false)
            let mine = try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self).items
            #expect(mine.count == 4)
        }
    }

    @Test("resolve; the consumer writing again starts a new, linked conversation; agents cannot write to a resolved one but may reopen it")
    func lifecycle() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let opened = try await acme.send("help", as: token)
            let id = opened.conversation.id
            let resolved = try await server.post("/v1/conversations/\(id)/resolve", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(resolved.state == .resolved)
            #expect(try await server.post("/v1/conversations/\(id)/resolve", token: acme.adminToken).error.code == "already_resolved")
            let refused = try await server.post(
                "/v1/conversations/\(id)/messages", token: acme.adminToken, json: SendMessageRequest(clientMessageId: "r", text: "hi"))
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "conversation_resolved")

            let again = try await acme.send("it broke again", as: token)
            #expect(again.conversation.id != id)
            #expect(again.conversation.previousConversationId == id)
            #expect(again.conversation.state == .open)
            #expect(again.message.seq == 1)
            // The closed conversation is as it was: seq 1 message, 2 resolved.
            let events = try await server.get("/v1/conversations/\(id)/events", token: acme.adminToken).decode(ListResponse<ConversationEventDTO>.self).items
            #expect(events.map(\.seq) == [2])
            #expect(events.map(\.state) == [.resolved])
            let reopened = try await server.post("/v1/conversations/\(id)/reopen", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(reopened.state == .reopened && reopened.lastSeq == 3)
        }
    }

    @Test("receipts from the recipient move delivery states forward")
    func receipts() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let question = try await acme.send("question", as: token)
            let id = question.conversation.id
            let answer = try await acme.reply("answer", in: id, as: acme.adminToken)

            // The consumer reads the agent's answer.
            let read = try await server.post(
                "/v1/consumer/conversations/\(id)/receipts", token: token, json: ReceiptRequest(upToSeq: answer.message.seq, state: .read))
            #expect(read.status == .ok)
            let event = try #require(try read.decode(ReceiptResponse.self).event)
            #expect(event.kind == .receipt)
            #expect(event.deliveryState == .read)
            // Repeating it changes nothing and stores nothing.
            let repeated = try await server.post(
                "/v1/consumer/conversations/\(id)/receipts", token: token, json: ReceiptRequest(upToSeq: answer.message.seq, state: .delivered))
            #expect(try repeated.decode(ReceiptResponse.self).event == nil)

            let messages = try await server.get("/v1/conversations/\(id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(messages.map(\.deliveryState) == [.sent, .read])  // the consumer's own message is untouched

            let outOfRange = try await server.post(
                "/v1/conversations/\(id)/receipts", token: acme.adminToken, json: ReceiptRequest(upToSeq: 99, state: .read))
            #expect(try outOfRange.error.code == "sequence_out_of_range")
            let sentState = try await server.post(
                "/v1/conversations/\(id)/receipts", token: acme.adminToken, json: ReceiptRequest(upToSeq: 1, state: .sent))
            #expect(sentState.status == .badRequest)
        }
    }

    @Test("assignment follows roles; lists filter by assignee, state and channel")
    func assignmentAndLists() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, agent) = try await acme.agent()
            let (otherToken, other) = try await acme.agent()
            var conversationIds: [ConversationID] = []
            for index in 0..<3 {
                let (token, _) = try await acme.consumer()
                conversationIds.append(try await acme.send("hello \(index)", as: token).conversation.id)
            }
            // An agent takes a conversation for themselves, not for someone else.
            let mine = try await server.post("/v1/conversations/\(conversationIds[0])/assign", token: agentToken, json: AssignRequest(agentId: agent.id))
            #expect(try mine.decode(ConversationDTO.self).assigneeId == agent.id)
            let forOther = try await server.post("/v1/conversations/\(conversationIds[1])/assign", token: agentToken, json: AssignRequest(agentId: other.id))
            #expect(forOther.status == .forbidden)
            let steal = try await server.post("/v1/conversations/\(conversationIds[0])/assign", token: otherToken, json: AssignRequest(agentId: nil))
            #expect(steal.status == .forbidden)
            // Admins assign anyone; an unknown agent is refused.
            #expect(try await server.post("/v1/conversations/\(conversationIds[1])/assign", token: acme.adminToken, json: AssignRequest(agentId: other.id)).status == .ok)
            let ghost = try await server.post("/v1/conversations/\(conversationIds[2])/assign", token: acme.adminToken, json: AssignRequest(agentId: "agt_ghost"))
            #expect(try ghost.error.code == "agent_not_found")
            _ = try await server.post("/v1/conversations/\(conversationIds[2])/resolve", token: acme.adminToken)

            func list(_ query: String, _ token: String) async throws -> [ConversationID] {
                try await server.get("/v1/conversations\(query)", token: token).decode(Page<ConversationDTO>.self).items.map(\.id)
            }
            #expect(try await list("?assignee=me", agentToken) == [conversationIds[0]])
            #expect(try await list("?assignee=unassigned", agentToken) == [conversationIds[2]])
            #expect(try await list("?assignee=\(other.id)", agentToken) == [conversationIds[1]])
            #expect(try await list("?state=resolved", agentToken) == [conversationIds[2]])
            #expect(Set(try await list("?state=open,reopened", agentToken)) == Set(conversationIds[0...1]))
            #expect(try await list("?channel=sms", agentToken).isEmpty)
            #expect(try await server.get("/v1/conversations?state=closed", token: agentToken).status == .badRequest)

            // Paging walks every conversation once, newest activity first.
            let firstPage = try await server.get("/v1/conversations?limit=2", token: agentToken).decode(Page<ConversationDTO>.self)
            let cursor = try #require(firstPage.nextCursor)
            let secondPage = try await server.get("/v1/conversations?limit=2&cursor=\(cursor)", token: agentToken).decode(Page<ConversationDTO>.self)
            #expect(Set(firstPage.items.map(\.id) + secondPage.items.map(\.id)) == Set(conversationIds))
            #expect(secondPage.nextCursor == nil)
        }
    }

    @Test("history pages by sequence")
    func history() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            var id = ConversationID(rawValue: "")
            for index in 1...5 {
                id = try await acme.send("message \(index)", as: token).conversation.id
            }
            let page = try await server.get("/v1/conversations/\(id)/messages?after=2&limit=2", token: acme.adminToken).decode(ListResponse<MessageDTO>.self)
            #expect(page.items.map(\.seq) == [3, 4])
            #expect(page.items.map(\.text) == ["message 3", "message 4"])
        }
    }

    @Test("private notes: agents get them live, in history and in a resume; the consumer never does; a retry returns the stored note")
    func privateNotes() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let sent = try await acme.send("Hello, my order is late", as: token)
            let id = sent.conversation.id
            let agentSocket = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let path = "/v1/conversations/\(id)/notes"
            let body = AddNoteRequest(clientNoteId: "note-1", text: "VIP customer: refund approved by Sam")

            // MUT
            let reply = try await server.post(path, token: acme.adminToken, json: body)

            // validate: stored in the log at the next sequence number, and sent to the agents
            #expect(reply.status == .created)
            let note = try reply.decode(ConversationEventDTO.self)
            #expect(note.kind == .note && note.text == body.text && note.clientNoteId == "note-1" && note.seq == 2)
            #expect(note.actorId == acme.admin.id.rawValue)
            let live = try await agentSocket.next { if case .event(let event) = $0 { event.kind == .note } else { false } }
            guard case .event(let liveNote) = live else { throw TestFailure("expected the note") }
            #expect(liveNote.seq == note.seq)
            // A retry returns it; the same id with other text is refused.
            let again = try await server.post(path, token: acme.adminToken, json: body)
            #expect(again.status == .ok)
            #expect(try again.decode(ConversationEventDTO.self).seq == note.seq)
            let reused = try await server.post(path, token: acme.adminToken, json: AddNoteRequest(clientNoteId: "note-1", text: "other"))
            #expect(reused.status == .conflict)
            #expect(try reused.error.code == "client_note_id_reused")
            // Bad notes change nothing.
            for (text, code) in [("   ", "empty_note"), (String(repeating: "n", count: MessageRules.maxNoteLength + 1), "note_too_long")] {
                let refused = try await server.post(path, token: acme.adminToken, json: AddNoteRequest(clientNoteId: UUID().uuidString, text: text))
                #expect(refused.status == .unprocessableContent)
                #expect(try refused.error.code.rawValue == code)
            }
            // Agents see it in history; the consumer sees neither the note nor its route.
            let agentEvents = try await server.get("/v1/conversations/\(id)/events", token: acme.adminToken).decode(ListResponse<ConversationEventDTO>.self)
            #expect(agentEvents.items.map(\.kind) == [.note])
            let consumerEvents = try await server.get("/v1/consumer/conversations/\(id)/events", token: token).decode(ListResponse<ConversationEventDTO>.self)
            #expect(consumerEvents.items.isEmpty)
            #expect(try await server.post(path, token: token, json: body).status == .forbidden)
            let consumerSocket = try await RealtimeProbe.connect(port: server.port, token: token)
            try consumerSocket.send(.resume(id: "r", cursors: [id.rawValue: 0]))
            var replayed: [ServerFrame] = []
            while true {
                let frame = try await consumerSocket.next()
                if case .resumed = frame { break }
                replayed.append(frame)
            }
            #expect(replayed.count == 1)  // the message, and no note
            #expect(!replayed.contains { if case .event(let event) = $0 { event.kind == .note } else { false } })
            await consumerSocket.close()
            await agentSocket.close()
        }
    }

}
