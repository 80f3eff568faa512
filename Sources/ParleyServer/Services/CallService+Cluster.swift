import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

// Calls on several nodes (docs/cluster.md, "Calls").
//
// A live call is held by one node: the one with the inviting agent's real-time connection (its
// timers, state machine and offer/answer negotiation live there, as on one node). The calls table
// names that node. A frame about the call that arrives on another node (the consumer's socket is
// on node A, the agent's on node B) is forwarded to it over the event bus, and its answer comes
// back the same way; signalling then reaches the other side's connection on whichever node holds
// it, as every frame for a connection does. The forwarding node remembers the connections it
// forwarded an answer for, so that when one of them closes the call's node hears it.
//
// A node that went away (SIGKILL) takes its calls with it: every node sweeps, now and then, the
// records of calls held by nodes the cluster's presence has not heard from, and ends them.

/// A call frame as a value, for the node that holds the call.
enum CallCommand: Codable, Sendable, Equatable {
    /// Starting a call on the node that holds the agent's connection (an HTTP request may land on any node).
    case start(conversationId: ConversationID, StartCallRequest)
    case accept
    case reject
    case hangUp
    case signal(CallSignal)
    case media(CallMediaState)
    case report(CallConnectionReport, reason: CallEndReason?)
    /// The connection bound to the call closed on the forwarding node.
    case left
}

/// A forwarded frame: who sent it, on which connection, about which call.
struct ForwardedCall: Codable, Sendable, Equatable {
    var principal: Principal
    var callId: CallID?
    var connection: ConnectionID
    var command: CallCommand
}

/// The holding node's answer: the call as it is now (with this side's ICE settings for a start or
/// an accept), or the refusal a client gets.
struct CallAnswer: Codable, Sendable, Equatable {
    var call: CallDTO?
    var ice: IceConfigurationDTO?
    var error: ParleyError?
}

/// Carries forwarded call frames between nodes (`ClusterEventBus`).
protocol CallRelay: Sendable {
    /// This node's name, as stored in the calls it holds.
    var node: String { get }
    /// Sends `call` to `node` (nil: to every node; the one holding the connection answers) and
    /// returns its answer, or throws `ParleyError` `call_node_unavailable` after `timeout`.
    func forward(_ call: ForwardedCall, to node: String?, timeout: Duration) async throws -> CallAnswer
    /// Answers frames other nodes forward; `handler` returns nil for those this node does not hold
    /// (it stays silent; the holder answers).
    func serveCalls(_ handler: @escaping @Sendable (ForwardedCall) async -> CallAnswer?)
    /// The nodes heard from lately, this one included; nil while this node is too new to know.
    func liveNodes() -> Set<String>?
}

extension ParleyError {
    static let callNodeUnavailable = ParleyError(
        .unavailable, code: .callNodeUnavailable, message: "The server holding this call did not answer. Try again, or end the call.")
}

extension CallService {
    /// A record that names no node was written by a node of the version before schema 26: on
    /// several nodes it is ended only this long after its invitation (that node may still hold it).
    static let unnamedCallAge: TimeInterval = 4 * 3600

    /// How long a node waits for another's answer to a forwarded frame.
    static let forwardTimeout = Duration.seconds(5)

    /// A frame about a call this node does not hold, sent to the node that does; nil when this node
    /// should answer itself (no cluster, the call is here, or its record says it is not live).
    func forwarded(_ principal: Principal, callId: CallID, connection: ConnectionID, _ command: CallCommand) async throws -> CallAnswer? {
        guard let relay, CallID.isWellFormed(callId), !holds(callId) else { return nil }
        let record = try await store.read { repo in try await repo.callAndNode(brandId: principal.brandId, id: callId) }
        guard let record, record.call.state != .ended, let node = record.node, node != relay.node else { return nil }
        let answer = try await relay.forward(
            ForwardedCall(principal: principal, callId: callId, connection: connection, command: command), to: node, timeout: Self.forwardTimeout)
        if let error = answer.error { throw error }
        if command == .accept, answer.call != nil {
            // This node holds the consumer's connection: when it closes, the call's node hears it.
            remoteBindings.withLock { $0[connection] = RemoteBinding(callId: callId, node: node, principal: principal) }
        }
        return answer
    }

    /// Whether this node holds the live call.
    func holds(_ callId: CallID) -> Bool {
        sessions.withLock { $0[callId] != nil }
    }

    /// Runs a frame another node forwarded. A start goes to every node: only the one with the
    /// agent's connection answers it.
    func answer(_ forwarded: ForwardedCall) async -> CallAnswer? {
        let (principal, connection) = (forwarded.principal, forwarded.connection)
        switch forwarded.command {
        case .start(let conversationId, let request):
            guard case .agent(let agent) = principal, hub.principal(ofConnection: request.connectionId) != nil else { return nil }
            return await Self.capture { let session = try await self.startHere(agent, conversationId: conversationId, request); return (session.call, session.ice) }
        default:
            break
        }
        // Sent to this node by name: it answers, held or not (an ended call gets its record or a
        // refusal, as on one node).
        guard let callId = forwarded.callId else { return CallAnswer(error: Self.callNotFound) }
        return await Self.capture { () async throws -> (CallDTO?, IceConfigurationDTO?) in
            switch forwarded.command {
            case .start: preconditionFailure("answered above")
            case .accept:
                let session = try await self.acceptHere(principal, callId: callId, connection: connection)
                return (session.call, session.ice)
            case .reject: return (try await self.transition(callId, .reject, actor: .principal(principal, connection: connection)), nil)
            case .hangUp: return (try await self.transition(callId, .hangUp, actor: .principal(principal, connection: connection)), nil)
            case .signal(let signal): return (try await self.signalHere(principal, callId: callId, signal, connection: connection), nil)
            case .media(let state): return (try await self.mediaHere(principal, callId: callId, state, connection: connection), nil)
            case .report(let report, let reason):
                return (try await self.reportHere(principal, callId: callId, report, reason: reason, connection: connection), nil)
            case .left:
                await self.connectionClosedHere(connection)
                return (nil, nil)
            }
        }
    }

    private static func capture(_ body: () async throws -> (CallDTO?, IceConfigurationDTO?)) async -> CallAnswer {
        do {
            let (call, ice) = try await body()
            return CallAnswer(call: call, ice: ice)
        } catch let error as ParleyError {
            return CallAnswer(error: error)
        } catch {
            return CallAnswer(error: ParleyError(.internalError, code: .internalError, message: "Something went wrong on our side. Try again."))
        }
    }

    /// Tells the nodes holding calls this connection was bound to that it closed.
    func remoteConnectionClosed(_ connection: ConnectionID) async {
        guard let relay, let binding = remoteBindings.withLock({ $0.removeValue(forKey: connection) }) else { return }
        _ = try? await relay.forward(
            ForwardedCall(principal: binding.principal, callId: binding.callId, connection: connection, command: .left), to: binding.node,
            timeout: Self.forwardTimeout)
    }

    /// Calls ringing for the consumer on other nodes (a device connecting here rings too).
    func ringingElsewhere(for consumer: ConsumerPrincipal) async -> [CallDTO] {
        guard relay != nil else { return [] }
        let stored = (try? await store.read { repo in try await repo.ringingCalls(brandId: consumer.brandId, consumerId: consumer.consumerId) }) ?? []
        return stored.filter { !holds($0.call.id) }.map { record in
            var call = record.call
            call.version = max(call.version, 1)
            call.ringsUntil = call.invitedAt.addingTimeInterval(TimeInterval(configuration.callRingSeconds))
            return call
        }
    }

    /// Ends the records of calls held by nodes that are gone (no node has heard from them lately):
    /// their agent's connection went with them. Records of this node's own live calls, and of
    /// nodes still heard from, are left alone. On one node every other name is a process that
    /// ended, so at start-up this closes what a crash left open.
    public func endOrphanedCalls() async {
        let alive: Set<String>
        if let relay {
            guard let heard = relay.liveNodes() else { return }  // too new to know who is alive
            alive = heard.union([relay.node])
        } else {
            alive = [node]
        }
        do {
            let open = try await store.read { repo in try await repo.unfinishedCalls(limit: 1000) }
            var closed = 0
            let now = clock.now()
            for (brandId, record, holder) in open where !holds(record.id) {
                if let holder {
                    if alive.contains(holder) { continue }
                } else if relay != nil, now.timeIntervalSince(record.invitedAt) < Self.unnamedCallAge {
                    continue  // held by a node of the previous version (a rolling upgrade), which names no node
                }
                var call = record
                call.state = .ended
                call.endedAt = clock.now()
                call.outcome = call.answeredAt == nil ? .cancelled : .failed
                call.endReason = .serverShutdown
                call.durationSeconds = call.answeredAt.map { max(0, Int(call.endedAt!.timeIntervalSince($0).rounded())) } ?? 0
                if try await storeEnd(&call, brandId: brandId, actor: ParticipantRef(kind: .system, id: "calls")) != nil {
                    closed += 1
                }
            }
            if closed > 0 {
                logger.notice("ended call records whose server has gone", metadata: ["count": "\(closed)"])
            }
        } catch {
            logger.error("could not end call records whose server has gone", metadata: ["error": "\(error)"])
        }
    }
}

extension CallService {
    /// A connection on this node bound to a call another node holds.
    struct RemoteBinding: Sendable {
        var callId: CallID
        var node: String
        var principal: Principal
    }
}
