import ParleyAPI
import ParleyDomain
import Testing

@Suite("Conversation state machine")
struct ConversationRulesTests {
    typealias Action = ConversationRules.Action

    @Test("every allowed transition", arguments: [
        (ConversationState.open, Action.consumerWrites, ConversationState.open),
        (.open, .agentWrites, .open),
        (.open, .resolve, .resolved),
        (.resolved, .reopen, .reopened),
        (.reopened, .consumerWrites, .reopened),
        (.reopened, .agentWrites, .reopened),
        (.reopened, .resolve, .resolved),
    ])
    func allowed(from: ConversationState, action: Action, to: ConversationState) throws {
        #expect(try ConversationRules.transition(from: from, on: action) == to)
    }

    @Test("every refused transition has its own code", arguments: [
        (ConversationState.resolved, Action.agentWrites, "conversation_resolved"),
        (.resolved, .consumerWrites, "conversation_closed"),
        (.resolved, .resolve, "already_resolved"),
        (.open, .reopen, "not_resolved"),
        (.reopened, .reopen, "not_resolved"),
    ])
    func refused(from: ConversationState, action: Action, code: String) {
        let error = #expect(throws: ParleyError.self) { try ConversationRules.transition(from: from, on: action) }
        #expect(error?.code.rawValue == code)
        #expect(error?.kind == .conflict)
    }

    @Test("receipts report delivered or read, for sequences that exist")
    func receipts() throws {
        try ConversationRules.validateReceipt(ReceiptRequest(upToSeq: 3, state: .read), lastSeq: 3)
        #expect(throws: ParleyError.self) { try ConversationRules.validateReceipt(ReceiptRequest(upToSeq: 1, state: .sent), lastSeq: 3) }
        #expect(throws: ParleyError.self) { try ConversationRules.validateReceipt(ReceiptRequest(upToSeq: 0, state: .read), lastSeq: 3) }
        let error = #expect(throws: ParleyError.self) {
            try ConversationRules.validateReceipt(ReceiptRequest(upToSeq: 4, state: .delivered), lastSeq: 3)
        }
        #expect(error?.code == "sequence_out_of_range")
    }

    @Test("delivery states only move forward")
    func deliveryOrder() {
        #expect(DeliveryState.sent < .delivered)
        #expect(DeliveryState.delivered < .read)
        #expect(DeliveryState.allCases.map(\.rank).compactMap(DeliveryState.init(rank:)) == DeliveryState.allCases)
    }

    @Test("agents assign only themselves; managers and admins anyone")
    func assignment() {
        let agent = AgentPrincipal(agentId: "agt_a", brandId: "brd_1", role: .agent, permissions: [])
        #expect(agent.canAssign(to: "agt_a", currentAssignee: nil))
        #expect(!agent.canAssign(to: "agt_b", currentAssignee: nil))
        #expect(agent.canAssign(to: nil, currentAssignee: "agt_a"))
        #expect(!agent.canAssign(to: nil, currentAssignee: "agt_b"))
        let manager = AgentPrincipal(agentId: "agt_m", brandId: "brd_1", role: .manager, permissions: [])
        #expect(manager.canAssign(to: "agt_b", currentAssignee: "agt_a"))
        #expect(throws: ParleyError.self) { try agent.require(.manager) }
        #expect(throws: Never.self) { try manager.require(.agent) }
    }
}
