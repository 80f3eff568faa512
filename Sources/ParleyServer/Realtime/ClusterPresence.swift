import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ServiceLifecycle
import Synchronization

/// What a node tells the others of its connections: a change (an agent's or a consumer's first
/// connection here opened, or their last one closed), or all of them (`snapshot`, every
/// `ClusterPresence.snapshotInterval`, and when a node asks for them with `wantSnapshots`).
struct PresenceNotice: Codable, Sendable, Hashable {
    struct Agent: Codable, Sendable, Hashable {
        var brandId: BrandID
        var agentId: AgentID
        var connected: Bool
    }

    var snapshot = false
    var wantSnapshots = false
    var agents: [Agent] = []
    var consumers: [ConsumerID: Bool] = [:]
}

/// Who is connected anywhere in the cluster: this node's hub, and what the other nodes said over
/// the event bus. A node that has not been heard from for `expiry` (killed, cut off) is forgotten,
/// so its agents go offline everywhere.
///
/// An agent's connectivity is reported (to `WorkspaceService`, which publishes their presence) by
/// the node where it changed, and only when it changed for the cluster: a second device on another
/// node is not news. For a node that vanished, the surviving node with the lowest id reports.
public final class ClusterPresence: PresenceDirectory, Service {
    private struct View {
        var agents: [BrandID: Set<AgentID>] = [:]
        var principals: [AgentID: AgentPrincipal] = [:]
        var consumers: Set<ConsumerID> = []
        var heard: ContinuousClock.Instant
    }

    private let hub: RealtimeHub
    private let bus: ClusterEventBus
    private let logger: Logger
    private let snapshotInterval: Duration
    private let expiry: Duration
    private let nodes = Mutex<[String: View]>([:])
    private let started = ContinuousClock.now
    private let observer = Mutex<(@Sendable (AgentPrincipal, Bool) -> Void)?>(nil)

    public init(hub: RealtimeHub, bus: ClusterEventBus, snapshotInterval: Duration = .seconds(5), expiry: Duration = .seconds(15), logger: Logger) {
        (self.hub, self.bus, self.snapshotInterval, self.expiry, self.logger) = (hub, bus, snapshotInterval, expiry, logger)
        hub.onAgentConnectivity { [weak self] agent, connected in self?.localAgent(agent, connected: connected) }
        hub.onConsumerConnectivity { [weak self] consumer, connected in
            self?.bus.publish(presence: PresenceNotice(consumers: [consumer: connected]))
        }
        bus.subscribe(presence: { [weak self] node, notice in self?.heard(node, notice) })
        // A node that lost events may also have lost presence: everyone's state again.
        bus.onGap { [weak self] in self?.bus.publish(presence: PresenceNotice(wantSnapshots: true)) }
    }

    // MARK: PresenceDirectory

    public func connectedAgents(brandId: BrandID) -> Set<AgentID> {
        hub.connectedAgents(brandId: brandId).union(nodes.withLock { nodes in
            nodes.values.reduce(into: Set<AgentID>()) { $0.formUnion($1.agents[brandId] ?? []) }
        })
    }

    public func isConnected(consumerId: ConsumerID) -> Bool {
        hub.isConnected(consumerId: consumerId) || nodes.withLock { $0.values.contains { $0.consumers.contains(consumerId) } }
    }

    /// The nodes heard from within the expiry, this one included; nil until this node has listened
    /// for that long (before, a live node may not have been heard yet).
    func liveNodes(now: ContinuousClock.Instant = .now) -> Set<String>? {
        guard now - started >= expiry else { return nil }
        return nodes.withLock { nodes in Set(nodes.filter { now - $0.value.heard <= expiry }.keys) }.union([bus.node])
    }

    public func onAgentConnectivity(_ observer: @escaping @Sendable (AgentPrincipal, Bool) -> Void) {
        self.observer.withLock { $0 = observer }
    }

    // MARK: Changes

    private func connectedElsewhere(_ agentId: AgentID) -> Bool {
        nodes.withLock { $0.values.contains { $0.principals[agentId] != nil } }
    }

    private func localAgent(_ agent: AgentPrincipal, connected: Bool) {
        bus.publish(presence: PresenceNotice(agents: [.init(brandId: agent.brandId, agentId: agent.agentId, connected: connected)]))
        if !connectedElsewhere(agent.agentId) { observer.withLock { $0 }?(agent, connected) }
    }

    private func heard(_ node: String, _ notice: PresenceNotice) {
        let now = ContinuousClock.now
        nodes.withLock { nodes in
            var view = notice.snapshot ? View(heard: now) : (nodes[node] ?? View(heard: now))
            view.heard = now
            for entry in notice.agents {
                if entry.connected {
                    view.agents[entry.brandId, default: []].insert(entry.agentId)
                    view.principals[entry.agentId] = AgentPrincipal(agentId: entry.agentId, brandId: entry.brandId, role: .agent, permissions: [])
                } else {
                    view.agents[entry.brandId]?.remove(entry.agentId)
                    if view.agents[entry.brandId]?.isEmpty == true { view.agents[entry.brandId] = nil }
                    view.principals[entry.agentId] = nil
                }
            }
            for (consumer, connected) in notice.consumers {
                if connected { view.consumers.insert(consumer) } else { view.consumers.remove(consumer) }
            }
            nodes[node] = view
        }
        if notice.wantSnapshots { publishSnapshot() }
    }

    private func publishSnapshot() {
        let (agents, consumers) = hub.connectedPrincipals()
        bus.publish(presence: PresenceNotice(
            snapshot: true, agents: agents.map { .init(brandId: $0.brandId, agentId: $0.agentId, connected: true) },
            consumers: Dictionary(uniqueKeysWithValues: consumers.map { ($0, true) })))
    }

    /// Forgets nodes not heard from within `expiry`; returns the agents that went offline with them.
    func expire(now: ContinuousClock.Instant = .now) -> [AgentPrincipal] {
        let (gone, survivors) = nodes.withLock { nodes -> ([View], Set<String>) in
            let dead = nodes.filter { now - $0.value.heard > expiry }
            for key in dead.keys { nodes[key] = nil }
            return (Array(dead.values), Set(nodes.keys))
        }
        guard !gone.isEmpty else { return [] }
        logger.notice("forgot nodes that went silent", metadata: ["count": "\(gone.count)"])
        // One survivor speaks for the vanished node: the lowest id, this one included.
        guard survivors.allSatisfy({ bus.node < $0 }) else { return [] }
        var offline: [AgentPrincipal] = []
        for view in gone {
            for agent in view.principals.values where !hub.isConnected(agentId: agent.agentId) && !connectedElsewhere(agent.agentId) {
                offline.append(agent)
                observer.withLock { $0 }?(agent, false)
            }
        }
        return offline
    }

    public func run() async throws {
        bus.publish(presence: PresenceNotice(wantSnapshots: true))
        publishSnapshot()
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: self.snapshotInterval)
                self.publishSnapshot()
                _ = self.expire()
            }
        }
    }
}

/// Call frames cross nodes on the cluster's bus; the presence says which nodes are alive.
struct BusCallRelay: CallRelay {
    let bus: ClusterEventBus
    let presence: ClusterPresence

    var node: String { bus.node }

    func forward(_ call: ForwardedCall, to node: String?, timeout: Duration) async throws -> CallAnswer {
        try await bus.forward(call, to: node, timeout: timeout)
    }

    func serveCalls(_ handler: @escaping @Sendable (ForwardedCall) async -> CallAnswer?) {
        bus.serveCalls(handler)
    }

    func liveNodes() -> Set<String>? { presence.liveNodes() }
}
