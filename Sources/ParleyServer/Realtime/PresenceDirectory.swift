import ParleyAPI
import ParleyDomain

/// Who is connected: on this node (`RealtimeHub`), or, with several nodes, on any of them. Routing,
/// presence, the live report and push ask this, never a hub: an agent connected to another node is
/// online here too.
public protocol PresenceDirectory: Sendable {
    /// The brand's agents with at least one live connection.
    func connectedAgents(brandId: BrandID) -> Set<AgentID>
    /// Whether the consumer has a live connection.
    func isConnected(consumerId: ConsumerID) -> Bool
    /// Calls `observer` when an agent's first connection opens (true) or their last one closes (false).
    func onAgentConnectivity(_ observer: @escaping @Sendable (AgentPrincipal, Bool) -> Void)
}

extension RealtimeHub: PresenceDirectory {}
