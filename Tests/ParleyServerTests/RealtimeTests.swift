import Foundation
import NIOWebSocket
import ParleyAPI
import ParleyServer
import Testing

@Suite("Real-time over WebSocket")
struct RealtimeTests {
    static func message(_ frame: ServerFrame) -> MessageDTO? {
        if case .message(let message) = frame { return message }
        return nil
    }

    static func ack(_ frame: ServerFrame, id: String) -> Bool {
        if case .ack(let ackId, _, _, _) = frame { return ackId == id }
        return false
    }

    @Test("two consumers and an agent: each message reaches exactly its participants")
    func delivery() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, ana) = try await acme.consumer(name: "Ana")
            let (benToken, _) = try await acme.consumer(name: "Ben")
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let anaSocket = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            let benSocket = try await RealtimeProbe.connect(port: server.port, token: benToken)

            // Ana sends over the socket: she gets an ack, the agent gets the message, Ben gets nothing.
            try anaSocket.send(.send(id: "f1", SendMessageRequest(clientMessageId: "ana-1", text: "Hi, I need help")))
            guard case .ack(_, let acked?, let conversation?, _) = try await anaSocket.next(where: { Self.ack($0, id: "f1") }) else {
                throw TestFailure("ack without message and new conversation")
            }
            #expect(acked.senderId == ana.id.rawValue)
            #expect(acked.seq == 1)
            #expect(conversation.consumerId == ana.id)
            let atAgent = try await agent.next(where: { Self.message($0) != nil })
            #expect(Self.message(atAgent) == acked)
            // The agent's list learns about the new conversation.
            _ = try await agent.next { frame in
                if case .conversation(let c) = frame { return c.id == conversation.id }
                return false
            }
            #expect(try await benSocket.expectSilence() == nil)
            // Ana's own socket does not get her message echoed back (the ack carries it).
            #expect(try await anaSocket.expectSilence() == nil)

            // The agent answers over HTTP: Ana's socket gets it, Ben's does not.
            let answer = try await acme.reply("Hello Ana, how can I help?", in: conversation.id, as: acme.adminToken)
            #expect(Self.message(try await anaSocket.next()) == answer.message)
            #expect(Self.message(try await agent.next(where: { Self.message($0) != nil })) == answer.message)
            #expect(try await benSocket.expectSilence() == nil)

            await agent.close()
            await anaSocket.close()
            await benSocket.close()
        }
    }

    @Test("receipts: the consumer reads, the agent sees it; typing is relayed, not stored")
    func receiptsAndTyping() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, _) = try await acme.consumer()
            let opened = try await acme.send("hello", as: anaToken)
            let id = opened.conversation.id
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let ana = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            // Receipts and typing go to the agents who have the conversation open (and its assignee).
            try agent.send(.view(conversationId: id))

            try agent.send(.typing(conversationId: id, isTyping: true))
            guard case .typing(let typingIn, let who, true) = try await ana.next() else { throw TestFailure("expected typing") }
            #expect(typingIn == id)
            #expect(who == ParticipantRef(kind: .agent, id: acme.admin.id.rawValue))

            try agent.send(.send(id: "a1", SendMessageRequest(clientMessageId: "agent-1", text: "Hi!", conversationId: id)))
            let answer = try #require(Self.message(try await ana.next(where: { Self.message($0) != nil })))
            try ana.send(.receipt(id: "r1", conversationId: id, ReceiptRequest(upToSeq: answer.seq, state: .delivered)))
            try ana.send(.receipt(id: "r2", conversationId: id, ReceiptRequest(upToSeq: answer.seq, state: .read)))
            guard case .ack(_, nil, nil, let delivered?) = try await ana.next(where: { Self.ack($0, id: "r1") }) else { throw TestFailure("receipt ack") }
            #expect(delivered.deliveryState == .delivered)

            var states: [DeliveryState] = []
            while states.count < 2 {
                if case .event(let event) = try await agent.next(), event.kind == .receipt {
                    #expect(event.actorKind == .consumer)
                    #expect(event.upToSeq == answer.seq)
                    states.append(event.deliveryState!)
                }
            }
            #expect(states == [.delivered, .read])
            let stored = try await server.get("/v1/conversations/\(id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(stored.last?.deliveryState == .read)
            // Typing left no trace in the conversation's sequence.
            let events = try await server.get("/v1/conversations/\(id)/events", token: acme.adminToken).decode(ListResponse<ConversationEventDTO>.self).items
            #expect(events.map(\.kind) == [.receipt, .receipt])
            await agent.close()
            await ana.close()
        }
    }

    @Test("after a disconnect, resume delivers exactly what was missed, in order")
    func resume() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, _) = try await acme.consumer()
            let first = try await acme.send("before", as: anaToken)
            let id = first.conversation.id
            let lastSeen = first.message.seq

            // While Ana is away: three answers, a receipt from the agent, a resolve.
            var missed: [Int64] = []
            for index in 1...3 {
                missed.append(try await acme.reply("answer \(index)", in: id, as: acme.adminToken).message.seq)
            }
            let receipt = try await server.post("/v1/conversations/\(id)/receipts", token: acme.adminToken, json: ReceiptRequest(upToSeq: 1, state: .read))
            missed.append(try #require(try receipt.decode(ReceiptResponse.self).event).seq)
            missed.append(try await server.post("/v1/conversations/\(id)/resolve", token: acme.adminToken).decode(ConversationDTO.self).lastSeq)

            let ana = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            try ana.send(.resume(id: "res", cursors: [id.rawValue: lastSeen]))
            var replayed: [Int64] = []
            var texts: [String] = []
            while true {
                let frame = try await ana.next()
                switch frame {
                case .message(let message):
                    replayed.append(message.seq)
                    texts.append(message.text)
                case .event(let event):
                    replayed.append(event.seq)
                case .resumed(let resumeId, let cursors, let complete):
                    #expect(resumeId == "res")
                    #expect(cursors == [id.rawValue: missed.last!])
                    #expect(complete)
                default:
                    throw TestFailure("unexpected frame \(frame)")
                }
                if case .resumed = frame { break }
            }
            #expect(replayed == missed)
            #expect(texts == ["answer 1", "answer 2", "answer 3"])
            // Nothing more: the replay was exact.
            #expect(try await ana.expectSilence() == nil)
            await ana.close()
        }
    }

    @Test("a long gap is replayed in bounded pieces")
    func boundedResume() async throws {
        try await TestServer.run(configure: { $0.realtimeQueueLimit = 8 }) { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, _) = try await acme.consumer()
            let id = try await acme.send("start", as: anaToken).conversation.id
            for index in 1...10 {
                try await acme.reply("answer \(index)", in: id, as: acme.adminToken)
            }
            let ana = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            var cursor: Int64 = 1
            var seen: [Int64] = []
            var rounds = 0
            while true {
                rounds += 1
                try ana.send(.resume(id: "r\(rounds)", cursors: [id.rawValue: cursor]))
                var done = false
                while true {
                    let frame = try await ana.next()
                    if let message = Self.message(frame) { seen.append(message.seq) }
                    if case .resumed(_, let cursors, let complete) = frame {
                        cursor = cursors[id.rawValue]!
                        done = complete
                        break
                    }
                }
                if done { break }
            }
            #expect(seen == Array(2...11))
            #expect(rounds == 3)  // 4 per round (half the queue), then the rest
            await ana.close()
        }
    }

    @Test("a retried send frame never makes a second message")
    func idempotentOverSocket() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, _) = try await acme.consumer()
            let ana = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            try ana.send(.send(id: "1", SendMessageRequest(clientMessageId: "dup", text: "only once")))
            guard case .ack(_, let original?, _, _) = try await ana.next(where: { Self.ack($0, id: "1") }) else { throw TestFailure("ack") }
            // Ana's connection drops before she saw the ack; she reconnects and retries.
            await ana.close()
            let again = try await RealtimeProbe.connect(port: server.port, token: anaToken)
            try again.send(.send(id: "2", SendMessageRequest(clientMessageId: "dup", text: "only once")))
            guard case .ack(_, let retried?, _, _) = try await again.next(where: { Self.ack($0, id: "2") }) else { throw TestFailure("ack") }
            #expect(retried == original)
            // The agent saw the message once.
            #expect(Self.message(try await agent.next(where: { Self.message($0) != nil })) == original)
            let more = try await agent.expectSilence(for: 0.4)
            #expect(more.flatMap(Self.message) == nil)
            let history = try await server.get("/v1/conversations/\(original.conversationId)/messages", token: acme.adminToken)
            #expect(try history.decode(ListResponse<MessageDTO>.self).items.count == 1)
            await again.close()
            await agent.close()
        }
    }

    @Test("frames are checked: bad JSON, unknown types, other people's conversations")
    func frameErrors() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (anaToken, _) = try await acme.consumer()
            let (benToken, _) = try await acme.consumer()
            let acmeConversation = try await acme.send("Acme only", as: anaToken).conversation.id

            let intruder = try await RealtimeProbe.connect(port: server.port, token: globex.adminToken)
            let ben = try await RealtimeProbe.connect(port: server.port, token: benToken)
            let attempts: [(RealtimeProbe, ClientFrame, String)] = [
                (intruder, .send(id: "x1", SendMessageRequest(clientMessageId: "x", text: "hi", conversationId: acmeConversation)), "not_found"),
                (intruder, .receipt(id: "x2", conversationId: acmeConversation, ReceiptRequest(upToSeq: 1, state: .read)), "not_found"),
                (intruder, .resume(id: "x3", cursors: [acmeConversation.rawValue: 0]), "not_found"),
                (ben, .send(id: "b1", SendMessageRequest(clientMessageId: "b", text: "hi", conversationId: acmeConversation)), "not_found"),
                (ben, .resume(id: "b2", cursors: [acmeConversation.rawValue: 0]), "not_found"),
                (ben, .send(id: "b3", SendMessageRequest(clientMessageId: "b", text: String(repeating: "x", count: 2001))), "message_too_long"),
            ]
            for (probe, frame, code) in attempts {
                try probe.send(frame)
                guard case .error(_, let error) = try await probe.next() else { throw TestFailure("expected an error for \(frame)") }
                #expect(error.code.rawValue == code, "\(frame)")
            }
            ben.sendRaw("{not json")
            guard case .error(nil, let invalid) = try await ben.next() else { throw TestFailure("expected an error") }
            #expect(invalid.code == "invalid_json")
            ben.sendRaw(#"{"type":"launch","id":"z9"}"#)
            guard case .error("z9", let unknown) = try await ben.next() else { throw TestFailure("expected an error with the frame id") }
            #expect(unknown.code == "invalid_field")
            ben.sendRaw(#"{"type":"send","id":"z10","clientMessageId":7,"text":"x"}"#)
            guard case .error("z10", let wrongType) = try await ben.next() else { throw TestFailure("expected an error") }
            #expect(wrongType.field == "clientMessageId")
            // Nothing of it reached Acme's conversation, and Globex heard nothing of Acme.
            let messages = try await server.get("/v1/conversations/\(acmeConversation)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self)
            #expect(messages.items.count == 1)
            #expect(try await intruder.expectSilence() == nil)
            await intruder.close()
            await ben.close()
        }
    }

    @Test("no token, a bad token or a revoked session: no connection")
    func authentication() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            for token in ["", "garbage"] {
                await #expect(throws: (any Error).self) { try await RealtimeProbe.connect(port: server.port, token: token) }
            }
            let plain = try await server.get("/v1/realtime", token: acme.adminToken)
            #expect(try plain.error.code == "upgrade_required")
            let anonymous = try await server.get("/v1/realtime")
            #expect(anonymous.status == .unauthorized)

            // Signing out closes the agent's open connections with the unauthorized code.
            let (token, _) = try await acme.agent()
            let socket = try await RealtimeProbe.connect(port: server.port, token: token)
            #expect(try await server.post("/v1/auth/logout", token: token).status == .noContent)
            let close = try await socket.closedByServer()
            #expect(close?.closeCode == .unknown(RealtimeCloseCode.unauthorized))
            await #expect(throws: (any Error).self) { try await RealtimeProbe.connect(port: server.port, token: token) }
        }
    }

    @Test("signing out on one device leaves the other devices connected")
    func logoutIsPerSession() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (consumerToken, _) = try await acme.consumer()
            let laptopLogin = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
            let laptopToken = try laptopLogin.decode(AgentSessionResponse.self).token
            let laptop = try await RealtimeProbe.connect(port: server.port, token: laptopToken)
            let phone = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            #expect(try await server.post("/v1/auth/logout", token: laptopToken).status == .noContent)
            #expect(try await laptop.closedByServer()?.closeCode == .unknown(RealtimeCloseCode.unauthorized))
            let sent = try await acme.send("still there?", as: consumerToken)
            #expect(Self.message(try await phone.next(where: { Self.message($0) != nil })) == sent.message)
            await phone.close()
        }
    }

    @Test("a connection ends when its session expires")
    func sessionExpiry() async throws {
        // Long enough to connect on a busy machine, short enough to wait for. On a machine so busy that
        // the session expires before the socket says hello (CI runs every suite at once on two cores),
        // the server rightly refuses the connection; that attempt proves nothing, so a new consumer
        // tries again.
        try await TestServer.run(configure: { $0.consumerSessionTTL = 6 }) { server in
            let acme = try await BrandScenario.make(server)
            var connected: RealtimeProbe?
            for _ in 0..<5 where connected == nil {
                let (token, _) = try await acme.consumer()
                connected = try? await RealtimeProbe.connect(port: server.port, token: token)
            }
            let socket = try #require(connected, "no attempt connected before its session expired")
            #expect(try await socket.closedByServer()?.closeCode == .unknown(RealtimeCloseCode.unauthorized))
        }
    }

    @Test("permessage-deflate is negotiated and frames still arrive intact")
    func compression() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (anaToken, _) = try await acme.consumer()
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken, compression: true)
            let text = String(repeating: "compressible text ", count: 100)
            let sent = try await acme.send(text, as: anaToken)
            #expect(Self.message(try await agent.next(where: { Self.message($0) != nil }))?.text == text)
            #expect(sent.message.text == text)
            await agent.close()
        }
    }

    @Test("shutting down closes connections with the resume code")
    func shutdown() async throws {
        let (probes, continuation) = AsyncStream<RealtimeProbe>.makeStream()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            continuation.yield(try await RealtimeProbe.connect(port: server.port, token: acme.adminToken))
            continuation.finish()
        }
        var iterator = probes.makeAsyncIterator()
        let close = try await iterator.next()?.closedByServer()
        #expect(close?.closeCode == .unknown(RealtimeCloseCode.resume))
    }
}
