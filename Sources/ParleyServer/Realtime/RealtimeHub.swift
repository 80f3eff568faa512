import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ServiceLifecycle
import Synchronization

/// Knows every open real-time connection of this node and hands each event to the ones allowed to
/// see it. A `Service`: on shutdown it closes every connection with the resume code.
public final class RealtimeHub: Service {
    private struct State {
        var connections: [String: Outbox] = [:]
        var agentsByBrand: [String: Set<String>] = [:]
        var byConsumer: [String: Set<String>] = [:]
    }

    private let state = Mutex(State())
    private let queueLimit: Int
    private let logger: Logger
    private let metrics: ParleyMetrics

    public init(bus: any EventBus, queueLimit: Int, metrics: ParleyMetrics, logger: Logger) {
        self.queueLimit = queueLimit
        self.logger = logger
        self.metrics = metrics
        bus.subscribe { [weak self] event in self?.deliver(event) }
    }

    /// Adds a connection; events for its principal start arriving in its outbox at once.
    public func register(_ principal: Principal, sessionTokenHash: String? = nil, expiresAt: Date? = nil) -> Outbox {
        let outbox = Outbox(
            connectionId: Identifier.make(.connection), principal: principal, sessionTokenHash: sessionTokenHash, expiresAt: expiresAt,
            limit: queueLimit)
        state.withLock { state in
            state.connections[outbox.connectionId] = outbox
            switch principal {
            case .agent(let agent): state.agentsByBrand[agent.brandId, default: []].insert(outbox.connectionId)
            case .consumer(let consumer): state.byConsumer[consumer.consumerId, default: []].insert(outbox.connectionId)
            }
        }
        metrics.realtimeConnections.increment()
        return outbox
    }

    public func unregister(_ outbox: Outbox) {
        let removed = state.withLock { state -> Bool in
            guard state.connections.removeValue(forKey: outbox.connectionId) != nil else { return false }
            switch outbox.principal {
            case .agent(let agent):
                state.agentsByBrand[agent.brandId]?.remove(outbox.connectionId)
                if state.agentsByBrand[agent.brandId]?.isEmpty == true { state.agentsByBrand[agent.brandId] = nil }
            case .consumer(let consumer):
                state.byConsumer[consumer.consumerId]?.remove(outbox.connectionId)
                if state.byConsumer[consumer.consumerId]?.isEmpty == true { state.byConsumer[consumer.consumerId] = nil }
            }
            return true
        }
        if removed { metrics.realtimeConnections.decrement() }
    }

    /// Closes every connection opened with one session, e.g. after its logout.
    public func disconnect(sessionTokenHash: String, code: UInt16, reason: String) {
        let targets = state.withLock { state in
            state.connections.values.filter { $0.sessionTokenHash == sessionTokenHash }
        }
        for outbox in targets { outbox.close(code: code, text: reason) }
    }

    public var connectionCount: Int { state.withLock { $0.connections.count } }

    /// Who holds an open connection of this node.
    public func principal(ofConnection id: String) -> Principal? {
        state.withLock { $0.connections[id]?.principal }
    }

    func deliver(_ event: RealtimeEvent) {
        let targets: [Outbox] = state.withLock { state in
            var ids: [String] = []
            switch event.audience {
            case .conversation(let brandId, let consumerId):
                if let agents = state.agentsByBrand[brandId] { ids.append(contentsOf: agents) }
                if let consumers = state.byConsumer[consumerId] { ids.append(contentsOf: consumers) }
            case .agents(let brandId):
                if let agents = state.agentsByBrand[brandId] { ids.append(contentsOf: agents) }
            case .connection(let id):
                ids.append(id)
            }
            return ids.compactMap { id in id == event.excludingConnection ? nil : state.connections[id] }
        }
        for outbox in targets where !outbox.send(event.frame) {
            if outbox.pendingClose?.code == RealtimeCloseCode.resume {
                metrics.realtimeOverflows.increment()
                logger.notice("closed a slow real-time connection", metadata: ["connection": "\(outbox.connectionId)"])
            }
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

    public func run() async throws {
        // Delivery happens on the publishers' tasks; this service sweeps expired sessions until shutdown.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .milliseconds(500))
                self.closeExpired()
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
