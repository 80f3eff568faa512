import Foundation
import Logging
import NIOCore
import ParleyAPI
import ParleyDomain
import ServiceLifecycle
import Synchronization

/// Knows every open real-time connection of this node and hands each event to the ones allowed to
/// see it. A `Service`: it sweeps expired sessions and stuck writers, and on shutdown it closes every
/// connection with the resume code.
public final class RealtimeHub: Service {
    private struct State {
        var connections: [ConnectionID: Outbox] = [:]
        var agentsByBrand: [BrandID: Set<ConnectionID>] = [:]
        var byConsumer: [ConsumerID: Set<ConnectionID>] = [:]
        var byAgent: [AgentID: Set<ConnectionID>] = [:]
        /// Agent connections that have a conversation open, by conversation, and the other way round.
        var viewers: [ConversationID: Set<ConnectionID>] = [:]
        var viewing: [ConnectionID: ConversationID] = [:]
    }

    private let state = Mutex(State())
    private let queueLimit: Int
    /// Longest one socket write may wait (a client that stopped reading) before the socket is closed.
    private let writeTimeout: Duration
    private let logger: Logger
    private let metrics: ParleyMetrics
    /// Told when an agent's first connection opens (true) or their last one closes (false), outside the lock.
    private let agentConnectivity = Mutex<(@Sendable (AgentPrincipal, Bool) -> Void)?>(nil)
    /// The same for consumers (a directory shared by several nodes follows both).
    private let consumerConnectivity = Mutex<(@Sendable (ConsumerID, Bool) -> Void)?>(nil)

    public init(bus: any EventBus, queueLimit: Int, writeTimeout: Duration = .seconds(10), metrics: ParleyMetrics, logger: Logger) {
        self.queueLimit = queueLimit
        self.writeTimeout = writeTimeout
        self.logger = logger
        self.metrics = metrics
        bus.subscribe { [weak self] event in self?.deliver(event) }
    }

    /// Adds a connection; events for its principal start arriving in its outbox at once.
    func register(
        _ principal: Principal, sessionTokenHash: String? = nil, expiresAt: Date? = nil, eventLoop: any EventLoop, writer: any RealtimeWriter
    ) -> Outbox {
        let outbox = Outbox(
            connectionId: ConnectionID.make(), principal: principal, sessionTokenHash: sessionTokenHash, expiresAt: expiresAt,
            limit: queueLimit, eventLoop: eventLoop, writer: writer)
        let first = state.withLock { state -> Bool in
            state.connections[outbox.connectionId] = outbox
            switch principal {
            case .agent(let agent):
                state.agentsByBrand[agent.brandId, default: []].insert(outbox.connectionId)
                state.byAgent[agent.agentId, default: []].insert(outbox.connectionId)
                return state.byAgent[agent.agentId]?.count == 1
            case .consumer(let consumer):
                state.byConsumer[consumer.consumerId, default: []].insert(outbox.connectionId)
                return state.byConsumer[consumer.consumerId]?.count == 1
            }
        }
        metrics.realtimeConnections.increment()
        if first {
            switch principal {
            case .agent(let agent): agentConnectivity.withLock { $0 }?(agent, true)
            case .consumer(let consumer): consumerConnectivity.withLock { $0 }?(consumer.consumerId, true)
            }
        }
        return outbox
    }

    /// Removes a connection from every index; a second call for the same connection does nothing.
    public func unregister(_ outbox: Outbox) {
        let id = outbox.connectionId
        let (removed, last) = state.withLock { state -> (Bool, Bool) in
            guard state.connections.removeValue(forKey: id) != nil else { return (false, false) }
            var last = false
            switch outbox.principal {
            case .agent(let agent):
                Self.remove(id, from: &state.agentsByBrand, key: agent.brandId)
                Self.remove(id, from: &state.byAgent, key: agent.agentId)
                last = state.byAgent[agent.agentId] == nil
            case .consumer(let consumer):
                Self.remove(id, from: &state.byConsumer, key: consumer.consumerId)
                last = state.byConsumer[consumer.consumerId] == nil
            }
            if let conversation = state.viewing.removeValue(forKey: id) {
                Self.remove(id, from: &state.viewers, key: conversation)
            }
            return (true, last)
        }
        if removed { metrics.realtimeConnections.decrement() }
        if last {
            switch outbox.principal {
            case .agent(let agent): agentConnectivity.withLock { $0 }?(agent, false)
            case .consumer(let consumer): consumerConnectivity.withLock { $0 }?(consumer.consumerId, false)
            }
        }
    }

    private static func remove<Key: Hashable>(_ id: ConnectionID, from index: inout [Key: Set<ConnectionID>], key: Key) {
        index[key]?.remove(id)
        if index[key]?.isEmpty == true { index[key] = nil }
    }

    /// An agent connection opened a conversation (or closed it, with nil).
    func view(connectionId: ConnectionID, conversationId: ConversationID?) {
        state.withLock { state in
            guard state.connections[connectionId] != nil else { return }
            if let previous = state.viewing.removeValue(forKey: connectionId) {
                Self.remove(connectionId, from: &state.viewers, key: previous)
            }
            if let conversationId {
                state.viewing[connectionId] = conversationId
                state.viewers[conversationId, default: []].insert(connectionId)
            }
        }
    }

    /// Closes every connection opened with one session, e.g. after its logout.
    public func disconnect(sessionTokenHash: String, code: UInt16, reason: String) {
        let targets = state.withLock { state in
            state.connections.values.filter { $0.sessionTokenHash == sessionTokenHash }
        }
        for outbox in targets { outbox.close(code: code, text: reason) }
    }

    /// Closes every connection of one agent, except those opened with `keeping` (the session that
    /// changed its own password stays signed in).
    public func disconnect(agentId: AgentID, keeping sessionTokenHash: String? = nil, code: UInt16, reason: String) {
        let targets = state.withLock { state in
            (state.byAgent[agentId] ?? []).compactMap { state.connections[$0] }
                .filter { sessionTokenHash == nil || $0.sessionTokenHash != sessionTokenHash }
        }
        for outbox in targets { outbox.close(code: code, text: reason) }
    }

    /// Closes every connection of one consumer (their data was erased).
    public func disconnect(consumerId: ConsumerID, code: UInt16, reason: String) {
        let targets = state.withLock { state in
            state.connections.values.filter { outbox in
                if case .consumer(let consumer) = outbox.principal { return consumer.consumerId == consumerId }
                return false
            }
        }
        for outbox in targets { outbox.close(code: code, text: reason) }
    }

    public var connectionCount: Int { state.withLock { $0.connections.count } }

    /// The brand's agents with at least one open connection to this node.
    /// Whether any agent of the brand has a connection to this node (cheap: no set is built).
    public func hasAgents(brandId: BrandID) -> Bool {
        state.withLock { $0.agentsByBrand[brandId]?.isEmpty == false }
    }

    public func connectedAgents(brandId: BrandID) -> Set<AgentID> {
        state.withLock { state in
            Set((state.agentsByBrand[brandId] ?? []).compactMap { id -> AgentID? in
                if case .agent(let agent) = state.connections[id]?.principal { return agent.agentId }
                return nil
            })
        }
    }

    /// Whether the consumer has a live real-time connection on this node (push notifications go to
    /// consumers who do not).
    public func isConnected(agentId: AgentID) -> Bool {
        state.withLock { !($0.byAgent[agentId] ?? []).isEmpty }
    }

    public func isConnected(consumerId: ConsumerID) -> Bool {
        state.withLock { !($0.byConsumer[consumerId] ?? []).isEmpty }
    }

    /// Sets who is told when an agent connects for the first time or loses their last connection.
    public func onAgentConnectivity(_ observer: @escaping @Sendable (AgentPrincipal, Bool) -> Void) {
        agentConnectivity.withLock { $0 = observer }
    }

    func onConsumerConnectivity(_ observer: @escaping @Sendable (ConsumerID, Bool) -> Void) {
        consumerConnectivity.withLock { $0 = observer }
    }

    /// Every agent and consumer with a connection here (a node's presence snapshot).
    func connectedPrincipals() -> (agents: [AgentPrincipal], consumers: [ConsumerID]) {
        state.withLock { state in
            var agents: [AgentID: AgentPrincipal] = [:]
            for id in state.byAgent.values.compactMap(\.first) {
                if case .agent(let agent) = state.connections[id]?.principal { agents[agent.agentId] = agent }
            }
            return (Array(agents.values), Array(state.byConsumer.keys))
        }
    }

    /// Tells every connection to reconnect and resume (close code 4000): this node may have missed
    /// events, and the conversation log has them.
    func resumeAll(reason: String) {
        let all = state.withLock { Array($0.connections.values) }
        for outbox in all { outbox.close(code: RealtimeCloseCode.resume, text: reason) }
    }

    /// Who holds an open connection of this node.
    public func principal(ofConnection id: ConnectionID) -> Principal? {
        state.withLock { $0.connections[id]?.principal }
    }

    func deliver(_ event: RealtimeEvent) {
        let targets: [Outbox] = state.withLock { state in
            var ids: [ConnectionID] = []
            switch event.audience {
            case .conversation(let brandId, let consumerId):
                if let agents = state.agentsByBrand[brandId] { ids.append(contentsOf: agents) }
                if let consumers = state.byConsumer[consumerId] { ids.append(contentsOf: consumers) }
            case .participants(_, let consumerId, let conversationId, let assigneeId):
                var agents = state.viewers[conversationId] ?? []
                if let assigneeId, let devices = state.byAgent[assigneeId] { agents.formUnion(devices) }
                ids.append(contentsOf: agents)
                if let consumers = state.byConsumer[consumerId] { ids.append(contentsOf: consumers) }
            case .agents(let brandId):
                if let agents = state.agentsByBrand[brandId] { ids.append(contentsOf: agents) }
            case .managers(let brandId):
                ids.append(contentsOf: (state.agentsByBrand[brandId] ?? []).filter { id in
                    if case .agent(let agent) = state.connections[id]?.principal { return agent.role >= .manager }
                    return false
                })
            case .agent(let agentId):
                if let devices = state.byAgent[agentId] { ids.append(contentsOf: devices) }
            case .consumer(let consumerId):
                if let consumers = state.byConsumer[consumerId] { ids.append(contentsOf: consumers) }
            case .connection(let id):
                ids.append(id)
            }
            return ids.compactMap { id in id == event.excludingConnection ? nil : state.connections[id] }
        }
        for outbox in targets where outbox.send(event.frame) == .overflowed {
            // Once per connection (later events find it closing and are dropped quietly). It stays
            // registered until its socket closes, so that the sweep can close a socket stuck on a full buffer.
            metrics.realtimeOverflows.increment()
            logger.notice("closed a slow real-time connection", metadata: ["connection": "\(outbox.connectionId)"])
        }
    }

    /// Closes (with 4001) every connection whose session has expired. One sweep for all connections
    /// instead of a timer task per connection, which would cost each idle connection its memory.
    func closeExpired(now: Date = Date()) {
        let expired = state.withLock { state in
            state.connections.values.filter { $0.expiresAt.map { $0 <= now } ?? false }
        }
        for outbox in expired { outbox.close(code: RealtimeCloseCode.unauthorized, text: "session expired") }
    }

    /// Closes the sockets of connections whose current write has waited longer than the write
    /// timeout: their client stopped reading, and a close frame would wait behind the same full buffer.
    func closeStuckWriters(now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        let stuck = state.withLock { state in
            state.connections.values.filter { ($0.writeWaiting(now: now) ?? .zero) > writeTimeout }
        }
        for outbox in stuck {
            let alreadyClosing = outbox.pendingClose != nil  // an overflow, counted and logged then
            unregister(outbox)
            outbox.abort()
            if !alreadyClosing {
                metrics.realtimeWriteTimeouts.increment()
                logger.notice("closed a real-time connection that stopped reading", metadata: ["connection": "\(outbox.connectionId)"])
            }
        }
    }

    /// Pings every connection; one that did not answer the previous ping is closed (its client is gone
    /// without closing, and TCP may not notice for a long time). One sweep for all connections instead
    /// of a timer per connection.
    func heartbeat() {
        let all = state.withLock { Array($0.connections.values) }
        for outbox in all { outbox.heartbeat() }
    }

    public func run() async throws {
        // Delivery happens on the publishers' tasks; this service sweeps until shutdown.
        try? await cancelWhenGracefulShutdown {
            var lastHeartbeat = ContinuousClock.now
            while !Task.isCancelled {
                try await Task.sleep(for: .milliseconds(500))
                self.closeExpired()
                self.closeStuckWriters()
                if ContinuousClock.now - lastHeartbeat >= .seconds(RealtimeController.heartbeatSeconds) {
                    lastHeartbeat = .now
                    self.heartbeat()
                }
            }
        }
        let all = state.withLock { Array($0.connections.values) }
        for outbox in all {
            outbox.close(code: RealtimeCloseCode.resume, text: "server shutting down: reconnect and resume")
        }
        // Give the close frames a moment to go out before the HTTP server stops.
        let deadline = ContinuousClock.now + .seconds(3)
        while connectionCount > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
