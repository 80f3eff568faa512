import Foundation
import Logging
import ParleyAPI
import ParleyDomain
@testable import ParleyServer
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A connection's writer for tests: keeps what is written; `completes: false` is a client that stopped reading.
final class CollectingWriter: RealtimeWriter {
    private let state = Mutex<(frames: [String], closed: Outbox.CloseReason?, aborted: Bool, heartbeats: Int)>(([], nil, false, 0))
    private let completes: Bool

    init(completes: Bool = true) { self.completes = completes }

    func write(_ frames: [String], written: @escaping @Sendable () -> Void) {
        state.withLock { $0.frames += frames }
        if completes { written() }
    }
    func close(_ reason: Outbox.CloseReason) { state.withLock { $0.closed = reason } }
    func abort() { state.withLock { $0.aborted = true } }
    func heartbeat() { state.withLock { $0.heartbeats += 1 } }

    var frames: [String] { state.withLock { $0.frames } }
    var closed: Outbox.CloseReason? { state.withLock { $0.closed } }
    var aborted: Bool { state.withLock { $0.aborted } }
    var heartbeats: Int { state.withLock { $0.heartbeats } }
}

@Suite("Real-time hub")
struct HubTests {
    let agent = Principal.agent(AgentPrincipal(agentId: "agt_a", brandId: "brd_a", role: .agent, permissions: []))
    let consumer = Principal.consumer(ConsumerPrincipal(consumerId: "csm_a", brandId: "brd_a", appId: "app_a"))
    let stranger = Principal.consumer(ConsumerPrincipal(consumerId: "csm_b", brandId: "brd_a", appId: "app_a"))
    let otherBrand = Principal.agent(AgentPrincipal(agentId: "agt_z", brandId: "brd_z", role: .admin, permissions: []))

    let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// What a connection's writer got, in order, until its close.
    func drain(_ outbox: Outbox, _ writer: CollectingWriter) async throws -> [String] {
        try await loop.submit {}.get()  // what is queued is written (a close drops what is still queued)
        outbox.close(code: 1000, text: "test")
        try await loop.submit {}.get()  // the outbox writes on the loop, in order
        #expect(writer.closed?.code == 1000)
        return writer.frames
    }

    func register(_ hub: RealtimeHub, _ principal: Principal, writer: CollectingWriter = CollectingWriter()) -> (Outbox, CollectingWriter) {
        (hub.register(principal, eventLoop: loop, writer: writer), writer)
    }

    @Test("frames built around an encoded message decode like the encoded frames")
    func preEncodedFrames() throws {
        let message = MessageDTO(
            id: "msg_1", conversationId: "cnv_1", seq: 3, senderKind: .consumer, senderId: "csm_a", clientMessageId: "c\"1",
            kind: .text, text: "Hi \"there\" \\ ünïcode", deliveryState: .sent, createdAt: Date(timeIntervalSince1970: 1_800_000_000.123))
        let conversation = ConversationDTO(
            id: "cnv_1", brandId: "brd_a", appId: "app_a", consumerId: "csm_a", channel: .web, state: .open, assigneeId: nil,
            lastSeq: 3, lastMessagePreview: "Hi", lastMessageAt: nil, createdAt: Date(timeIntervalSince1970: 0),
            updatedAt: Date(timeIntervalSince1970: 0))
        let json = try ParleyCoders.json(message)
        let decoder = ParleyJSON.makeDecoder()
        guard case .message(let decoded) = try decoder.decode(ServerFrame.self, from: Data(ParleyCoders.messageFrame(json: json).utf8)) else {
            Issue.record("not a message frame")
            return
        }
        #expect(decoded == message)
        for (id, withConversation) in [("s\"1\\", true), ("plain", false)] {
            let text = try ParleyCoders.sendAck(id: id, messageJSON: json, conversation: withConversation ? conversation : nil)
            guard case .ack(let ackId, let ackMessage, let ackConversation, let event) = try decoder.decode(ServerFrame.self, from: Data(text.utf8)) else {
                Issue.record("not an ack")
                return
            }
            #expect(ackId == id && ackMessage == message && event == nil)
            #expect(ackConversation == (withConversation ? conversation : nil))
        }
    }

    @Test("events reach the brand's agents and the conversation's consumer only")
    func routing() async throws {
        let bus = LocalEventBus()
        let hub = RealtimeHub(bus: bus, queueLimit: 16, metrics: ParleyMetrics(), logger: Logger(label: "test"))
        let (agentBox, agentWriter) = register(hub, agent), (consumerBox, consumerWriter) = register(hub, consumer)
        let (strangerBox, strangerWriter) = register(hub, stranger), (otherBox, otherWriter) = register(hub, otherBrand)
        await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "m1"))
        await bus.publish(RealtimeEvent(audience: .agents(brandId: "brd_a"), frame: "list"))
        await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "typing", excludingConnection: consumerBox.connectionId))
        #expect(try await drain(agentBox, agentWriter) == ["m1", "list", "typing"])
        #expect(try await drain(consumerBox, consumerWriter) == ["m1"])
        #expect(try await drain(strangerBox, strangerWriter) == [])
        #expect(try await drain(otherBox, otherWriter) == [])
        hub.unregister(agentBox)
        #expect(hub.connectionCount == 3)
    }

    @Test("a slow connection is closed with the resume code, never silently trimmed, and others go on")
    func slowConsumer() async throws {
        let bus = LocalEventBus()
        let metrics = ParleyMetrics()
        let hub = RealtimeHub(bus: bus, queueLimit: 8, metrics: metrics, logger: Logger(label: "test"))
        // The slow client's socket never takes what is written to it; the fast one's takes everything.
        let (slow, slowWriter) = register(hub, agent, writer: CollectingWriter(completes: false))
        let (fast, fastWriter) = register(hub, consumer)
        for index in 0..<20 {
            await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "e\(index)"))
            try await loop.submit {}.get()
        }
        #expect(slow.pendingClose?.code == RealtimeCloseCode.resume)
        #expect(slowWriter.closed?.code == RealtimeCloseCode.resume)
        #expect(slowWriter.frames.count == 8)  // what was handed to the socket before the queue filled
        #expect(fast.pendingClose == nil)
        #expect(fastWriter.frames.count == 20)
        #expect(metrics.render().contains("parley_realtime_overflows_total 1"))
    }

    @Test("the frame budget: frames that find the handling queue full count towards the 4008 close like frames over budget")
    func frameBudgetOverflow() {
        let start = ContinuousClock.now
        var limiter = FrameLimiter(perSecond: 20, now: start)  // 40 at once, closed after 40 refused in a row
        for _ in 0..<40 { #expect(limiter.take(now: start) == .allow) }
        // Tokens come back, but every admitted frame finds the queue full: the 40th such frame closes.
        var decisions: [FrameLimiter.Decision] = []
        for index in 1...40 {
            #expect(limiter.take(now: start + .milliseconds(50 * index)) == .allow)
            decisions.append(limiter.overflowed())
        }
        #expect(decisions.dropLast().allSatisfy { $0 == .refuse })
        #expect(decisions.last == .close)
        // A frame that is handled starts the count again.
        var fresh = FrameLimiter(perSecond: 20, now: start)
        #expect(fresh.take(now: start) == .allow)
        #expect(fresh.overflowed() == .refuse)
        #expect(fresh.take(now: start) == .allow)
        #expect(fresh.overflowed() == .refuse)
    }

    @Test("a flooder's cool-down: refused until it ends, then forgotten; other senders never refused")
    func floodCooldown() {
        let start = ContinuousClock.now
        let cooldown = FloodCooldown(duration: .seconds(10))
        #expect(cooldown.remaining("csm_a", now: start) == nil)
        cooldown.penalize("csm_a", now: start)
        #expect(cooldown.remaining("csm_a", now: start + .seconds(3)) == .seconds(7))
        #expect(cooldown.remaining("csm_b", now: start + .seconds(3)) == nil)
        #expect(cooldown.remaining("csm_a", now: start + .seconds(10)) == nil)
        #expect(cooldown.remaining("csm_a", now: start + .seconds(3)) == nil)  // forgotten once over
        // Off when the setting is 0.
        let off = FloodCooldown(duration: .zero)
        off.penalize("csm_a", now: start)
        #expect(off.remaining("csm_a", now: start) == nil)
        // Bounded: past its capacity, expired entries go first, then the oldest.
        for index in 0..<FloodCooldown.capacity {
            cooldown.penalize("csm_\(index)", now: start + .milliseconds(index))
        }
        cooldown.penalize("csm_new", now: start + .seconds(5))
        #expect(cooldown.remaining("csm_new", now: start + .seconds(5)) == .seconds(10))
        #expect(cooldown.remaining("csm_0", now: start + .seconds(5)) == nil)
        #expect(cooldown.remaining("csm_1", now: start + .seconds(5)) != nil)
    }
}
