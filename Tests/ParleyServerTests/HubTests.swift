import Foundation
import Logging
import ParleyAPI
import ParleyDomain
@testable import ParleyServer
import Testing

@Suite("Real-time hub")
struct HubTests {
    let agent = Principal.agent(AgentPrincipal(agentId: "agt_a", brandId: "brd_a", role: .agent, permissions: []))
    let consumer = Principal.consumer(ConsumerPrincipal(consumerId: "csm_a", brandId: "brd_a", appId: "app_a"))
    let stranger = Principal.consumer(ConsumerPrincipal(consumerId: "csm_b", brandId: "brd_a", appId: "app_a"))
    let otherBrand = Principal.agent(AgentPrincipal(agentId: "agt_z", brandId: "brd_z", role: .admin, permissions: []))

    func drain(_ outbox: Outbox) async -> [String] {
        outbox.close(code: 1000, text: "test")
        var frames: [String] = []
        for await frame in outbox.stream { frames.append(frame) }
        return frames
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
    func routing() async {
        let bus = LocalEventBus()
        let hub = RealtimeHub(bus: bus, queueLimit: 16, metrics: ParleyMetrics(), logger: Logger(label: "test"))
        let agentBox = hub.register(agent), consumerBox = hub.register(consumer)
        let strangerBox = hub.register(stranger), otherBox = hub.register(otherBrand)
        await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "m1"))
        await bus.publish(RealtimeEvent(audience: .agents(brandId: "brd_a"), frame: "list"))
        await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "typing", excludingConnection: consumerBox.connectionId))
        #expect(await drain(agentBox) == ["m1", "list", "typing"])
        #expect(await drain(consumerBox) == ["m1"])
        #expect(await drain(strangerBox) == [])
        #expect(await drain(otherBox) == [])
        hub.unregister(agentBox)
        #expect(hub.connectionCount == 3)
    }

    @Test("a slow connection is closed with the resume code, never silently trimmed, and others go on")
    func slowConsumer() async {
        let bus = LocalEventBus()
        let metrics = ParleyMetrics()
        let hub = RealtimeHub(bus: bus, queueLimit: 8, metrics: metrics, logger: Logger(label: "test"))
        let slow = hub.register(agent)
        let fast = hub.register(consumer)
        var fastSeen: [String] = []
        var iterator = fast.stream.makeAsyncIterator()
        for index in 0..<20 {
            await bus.publish(RealtimeEvent(audience: .conversation(brandId: "brd_a", consumerId: "csm_a"), frame: "e\(index)"))
            // The fast reader keeps up.
            if let frame = await iterator.next() { fastSeen.append(frame) }
        }
        #expect(slow.pendingClose?.code == RealtimeCloseCode.resume)
        #expect(fast.pendingClose == nil)
        #expect(fastSeen.count == 20)
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
