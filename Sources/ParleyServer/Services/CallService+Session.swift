import Foundation
import ParleyAPI
import ParleyDomain

extension CallService {
    /// A live call on this node: its record, its state machine and the two connections bound to it.
    struct Session: Sendable {
        var call: CallDTO
        var machine: CallMachine
        var negotiation = CallNegotiation()
        let brandId: BrandID
        let consumerId: ConsumerID
        let agentId: AgentID
        let videoAllowed: Bool
        let agentConnection: ConnectionID
        var consumerConnection: ConnectionID?
        var timer: Task<Void, Never>?

        func party(of principal: Principal) -> CallParty? {
            switch principal {
            case .agent(let agent) where agent.brandId == brandId && agent.agentId == agentId: .agent
            case .consumer(let consumer) where consumer.brandId == brandId && consumer.consumerId == consumerId: .consumer
            default: nil
            }
        }

        func connection(of party: CallParty) -> ConnectionID? {
            party == .agent ? agentConnection : consumerConnection
        }

        /// Whether `party` has announced a shared screen (see `CallMediaState.sharingScreen`).
        func sharingScreen(_ party: CallParty) -> Bool {
            (party == .agent ? call.agentMedia : call.consumerMedia)?.sharingScreen == true
        }

        /// The call as clients see it, refreshed from the machine.
        mutating func refresh() {
            call.state = machine.state
            call.answeredAt = machine.answeredAt
            call.connectedAt = machine.connectedAt
            call.endedAt = machine.endedAt
            call.outcome = machine.outcome
            call.endReason = machine.endReason
            call.endedBy = machine.endedBy?.participantKind
            call.durationSeconds = machine.durationSeconds
            if machine.state != .ringing { call.ringsUntil = nil }
            // Only the live call says who may share (the stored record does not keep it).
            if machine.state == .ended { call.screenShare = nil }
            call.version += 1
        }
    }

    /// Who causes a transition.
    enum Actor: Sendable {
        case principal(Principal, connection: ConnectionID?)
        /// A timer or the server itself.
        case server
        /// A side whose connection closed.
        case departed(CallParty)
    }
}
