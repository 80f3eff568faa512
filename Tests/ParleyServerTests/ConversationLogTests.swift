import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization
import Testing

@testable import ParleyServer

/// The conversation log: who gets each kind of entry (without a server), and that a write
/// publishes only what committed, once, in sequence order, with typed domain events beside the frames.
@Suite("Conversation log")
struct ConversationLogTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let brand = BrandID(rawValue: "brd_aaaaaaaaaaaaaaaaaaaaaaaa")
    static let consumer = ConsumerID(rawValue: "con_aaaaaaaaaaaaaaaaaaaaaaaa")
    static let agent = AgentID(rawValue: "agt_aaaaaaaaaaaaaaaaaaaaaaaa")
    static let conversationId = ConversationID(rawValue: "cnv_aaaaaaaaaaaaaaaaaaaaaaaa")

    static func conversation(state: ConversationState = .open, assignee: AgentID? = nil, lastSeq: Int64 = 4) -> ConversationDTO {
        ConversationDTO(
            id: conversationId, brandId: brand, appId: AppID(rawValue: "app_aaaaaaaaaaaaaaaaaaaaaaaa"), consumerId: consumer, channel: .web,
            state: state, assigneeId: assignee, lastSeq: lastSeq, lastMessagePreview: nil, lastMessageAt: nil, createdAt: now, updatedAt: now)
    }

    static func message(from kind: ParticipantKind) -> MessageDTO {
        MessageDTO(
            id: MessageID.make(), conversationId: conversationId, seq: 0, senderKind: kind, senderId: kind == .agent ? agent.rawValue : consumer.rawValue,
            clientMessageId: UUID().uuidString, kind: .text, text: "Hello", deliveryState: .sent, createdAt: now)
    }

    static let consumerSide = ParticipantRef(kind: .consumer, id: consumer.rawValue)
    static let agentSide = ParticipantRef(kind: .agent, id: agent.rawValue)
    static let everyone = RealtimeEvent.Audience.conversation(brandId: brand, consumerId: consumer)
    static let agents = RealtimeEvent.Audience.agents(brandId: brand)

    /// The kinds of a plan, with their audiences: "event:note>agents", "message>conversation", "conversation>agents".
    static func describe(_ plan: [ConversationLog.Publication]) -> [String] {
        func name(_ audience: RealtimeEvent.Audience) -> String {
            switch audience {
            case .conversation: "conversation"
            case .participants: "participants"
            case .agents: "agents"
            case .managers: "managers"
            case .agent: "agent"
            case .consumer: "consumer"
            case .connection: "connection"
            }
        }
        return plan.map { publication in
            switch publication {
            case .event(let event, let audience, let exceptSender):
                "event:\(event.kind.rawValue)#\(event.seq)>\(name(audience))\(exceptSender ? " except sender" : "")"
            case .message(let message, let audience): "message#\(message.seq)>\(name(audience))"
            case .conversation(_, let audience): "conversation>\(name(audience))"
            }
        }
    }

    @Test("an agent reopening a resolved conversation with a message: the state change, then the message, in sequence order, then the list")
    func reopenThenMessage() throws {
        var log = ConversationAppend(Self.conversation(state: .resolved), now: Self.now)
        try log.apply(.reopen, by: Self.agentSide)
        log.log(Self.message(from: .agent), preview: "Hello")
        #expect(Self.describe(ConversationLog.plan(log)) == ["event:state_changed#5>conversation", "message#6>conversation", "conversation>agents"])
    }

    @Test("a message alone goes to the conversation and does not republish the list; a new conversation does")
    func messageAlone() throws {
        var log = ConversationAppend(Self.conversation(), now: Self.now)
        try log.apply(.agentWrites, by: Self.agentSide)
        log.log(Self.message(from: .agent), preview: "Hello")
        #expect(Self.describe(ConversationLog.plan(log)) == ["message#5>conversation"])

        var opened = ConversationAppend(Self.conversation(lastSeq: 0), isNew: true, now: Self.now)
        try opened.apply(.consumerWrites, by: Self.consumerSide)
        opened.log(Self.message(from: .consumer), preview: "Hello")
        #expect(Self.describe(ConversationLog.plan(opened)) == ["message#1>conversation", "conversation>agents"])
    }

    @Test("notes and delivery states go to agents only; receipts to the participants but not back to the sender; a rating logged after its message stays after it")
    func audiences() throws {
        var note = ConversationAppend(Self.conversation(), now: Self.now)
        _ = note.logNote("VIP customer", clientNoteId: "n1", by: Self.agentSide)
        #expect(Self.describe(ConversationLog.plan(note)) == ["event:note#5>agents"])

        var delivery = ConversationAppend(Self.conversation(), now: Self.now)
        _ = delivery.logDelivery(Self.message(from: .agent))
        #expect(Self.describe(ConversationLog.plan(delivery)) == ["event:delivery#5>agents"])

        var receipt = ConversationAppend(Self.conversation(assignee: Self.agent), now: Self.now)
        _ = receipt.logReceipt(upTo: 4, .read, by: Self.consumerSide)
        let plan = ConversationLog.plan(receipt)
        #expect(Self.describe(plan) == ["event:receipt#5>participants except sender"])
        guard case .event(_, .participants(_, _, let conversationId, let assigneeId), _) = plan.first else {
            Issue.record("a receipt goes to the participants")
            return
        }
        #expect(conversationId == Self.conversationId && assigneeId == Self.agent)

        var rated = ConversationAppend(Self.conversation(state: .resolved), now: Self.now)
        rated.log(Self.message(from: .consumer), preview: "5 great")
        _ = rated.logRating(RateConversationRequest(score: 5, comment: "great"), agent: Self.agent, by: Self.consumerSide)
        #expect(Self.describe(ConversationLog.plan(rated)) == ["message#5>conversation", "event:rated#6>conversation", "conversation>agents"])
    }

    @Test("assignment and resolution change the list; a transfer's note stays with the agents")
    func transfer() throws {
        var log = ConversationAppend(Self.conversation(), now: Self.now)
        log.assign(to: Self.agent, by: Self.agentSide)
        _ = log.logNote("Over to you", clientNoteId: "n2", by: Self.agentSide)
        #expect(Self.describe(ConversationLog.plan(log)) == ["event:assigned#5>conversation", "event:note#6>agents", "conversation>agents"])

        var resolved = ConversationAppend(Self.conversation(), now: Self.now)
        try resolved.apply(.resolve, by: Self.agentSide)
        #expect(Self.describe(ConversationLog.plan(resolved)) == ["event:state_changed#5>conversation", "conversation>agents"])
    }

    /// Every real-time and domain event a bus carries, in order.
    final class Recorder: Sendable {
        let frames = Mutex<[String]>([])
        let domain = Mutex<[DomainEvent]>([])
        let excluded = Mutex<[ConnectionID?]>([])

        init(_ bus: any EventBus) {
            bus.subscribe { [self] event in
                frames.withLock { $0.append(event.frame) }
                excluded.withLock { $0.append(event.excludingConnection) }
            }
            bus.subscribe(domain: { [self] event in domain.withLock { $0.append(event) } })
        }

        func clear() {
            frames.withLock { $0 = [] }
            domain.withLock { $0 = [] }
            excluded.withLock { $0 = [] }
        }
    }

    @Test("a transaction that throws writes and publishes nothing; one that commits publishes each append once, with its domain events and the sender left out")
    func commitThenPublish() async throws {
        try await TestServer.run { server in
            let scenario = try await BrandScenario.make(server)
            let (token, _) = try await scenario.consumer()
            let first = try await scenario.send("Hi", as: token)
            let conversationId = first.message.conversationId
            // The brand's greeting (a job) is written and published before the recorder listens.
            try await server.jobsSettled()
            let services = server.services
            let lastSeq = { try await services.store.read { repo in try await repo.conversation(brandId: scenario.brand.id, id: conversationId, lock: false) }?.lastSeq }
            let before = try #require(try await lastSeq())
            let recorder = Recorder(services.bus)
            let log = services.conversations.conversationLog
            struct Refused: Error {}

            // Logged, written, then the transaction fails: nothing is stored or published.
            await #expect(throws: Refused.self) {
                try await log.write { repo, appends in
                    guard let conversation = try await repo.conversation(brandId: scenario.brand.id, id: conversationId, lock: true) else { return }
                    var append = ConversationAppend(conversation, now: Date())
                    _ = append.logNote("never seen", clientNoteId: "rolled-back", by: ParticipantRef(kind: .agent, id: scenario.admin.id.rawValue))
                    try await appends.write(&append, in: repo)
                    throw Refused()
                }
            }
            // (Reports and routing may publish frames of their own meanwhile, as below: only the log's kinds count.)
            let logKinds = [#""type":"event""#, #""type":"conversation""#, #""type":"message""#]
            let logFrames = { recorder.frames.withLock { $0 }.filter { frame in logKinds.contains { frame.contains($0) } } }
            #expect(logFrames().isEmpty, "\(recorder.frames.withLock { $0 }.map { $0.prefix(60) })")
            #expect(recorder.domain.withLock { $0 }.isEmpty)
            #expect(try await lastSeq() == before)

            // Two appends in one transaction: the note, then an assignment; published in that order,
            // the assignment's domain event after its frames.
            let connection = ConnectionID(rawValue: "c_test")
            let committed = try await log.write(excluding: connection) { repo, appends -> Int in
                guard let conversation = try await repo.conversation(brandId: scenario.brand.id, id: conversationId, lock: true) else { return 0 }
                let actor = ParticipantRef(kind: .agent, id: scenario.admin.id.rawValue)
                var note = ConversationAppend(conversation, now: Date())
                _ = note.logNote("checked the order", clientNoteId: "kept", by: actor)
                try await appends.write(&note, in: repo)
                var assign = ConversationAppend(note.conversation, now: Date())
                assign.assign(to: scenario.admin.id, by: actor)
                try await appends.write(&assign, in: repo)
                return 2
            }
            #expect(committed.value == 2 && committed.logs.count == 2 && committed.messageJSON == nil)
            let frames = logFrames()
            #expect(frames.count == 3)
            #expect(frames.first?.contains(#""kind":"note""#) == true)
            #expect(frames.dropFirst().first?.contains(#""kind":"assigned""#) == true)
            #expect(frames.last?.contains(#""type":"conversation""#) == true, "\(frames.map { $0.prefix(60) })")
            // Only a message or a receipt leaves its sender out.
            #expect(recorder.excluded.withLock { $0 }.allSatisfy { $0 == nil })
            guard case .conversationChanged(let changed)? = recorder.domain.withLock({ $0 }).last else {
                Issue.record("the assignment is a domain event")
                return
            }
            #expect(changed.assigneeId == scenario.admin.id && changed.lastSeq == before + 2)

            // A message from a connection: every other connection gets the frame, the domain event
            // carries the message, and the sender's ack reuses the published JSON.
            recorder.clear()
            let reply = try await services.conversations.sendEncoded(
                .agent(AgentPrincipal(agentId: scenario.admin.id, brandId: scenario.brand.id, role: .admin, permissions: [], name: "Admin")),
                SendMessageRequest(clientMessageId: UUID().uuidString, text: "Still there?", conversationId: conversationId),
                content: .text("Still there?"), fromConnection: connection)
            #expect(reply.messageJSON?.contains("Still there?") == true)
            let messageFrames = recorder.frames.withLock { $0 }.enumerated().filter { $0.element.hasPrefix(#"{"type":"message""#) }
            #expect(messageFrames.count == 1)
            #expect(recorder.excluded.withLock { $0 }[messageFrames[0].offset] == connection)
            #expect(recorder.domain.withLock { $0 }.contains { event in
                if case .messageLogged(let message, _, _) = event { message.text == "Still there?" } else { false }
            })

            // A retry of the same message logs and publishes nothing.
            recorder.clear()
            _ = try await services.conversations.send(
                .consumer(ConsumerPrincipal(consumerId: ConsumerID(rawValue: first.message.senderId), brandId: scenario.brand.id, appId: scenario.app.id)),
                SendMessageRequest(clientMessageId: first.message.clientMessageId, text: "Hi"))
            #expect(recorder.frames.withLock { $0 }.isEmpty && recorder.domain.withLock { $0 }.isEmpty)
        }
    }
}
