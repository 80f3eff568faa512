import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// What agents work with beside the conversation itself: saved replies, search, presence; and what
/// the widget learns about them (whether anyone is there, who answered) and tells them (the page).
public struct WorkspaceService: Sendable {
    let store: Store
    let presence: any PresenceDirectory
    let bus: any EventBus
    let clock: any WallClock
    let logger: Logger

    init(store: Store, presence: any PresenceDirectory, bus: any EventBus, clock: any WallClock, logger: Logger) {
        self.store = store
        self.presence = presence
        self.bus = bus
        self.clock = clock
        self.logger = logger
        let service = self
        // An agent's presence as others see it changes when they connect or lose their last
        // connection, as well as when they choose.
        presence.onAgentConnectivity { agent, _ in
            Task { await service.publishPresence(brandId: agent.brandId, agentId: agent.agentId) }
        }
    }

    // MARK: Saved replies

    public func savedReplies(_ agent: AgentPrincipal) async throws -> [SavedReplyDTO] {
        try await store.read { repo in try await repo.savedReplies(brandId: agent.brandId) }
    }

    public func createSavedReply(_ admin: AgentPrincipal, _ request: SaveReplyRequest) async throws -> SavedReplyDTO {
        try admin.require(.admin)
        guard let shortcut = request.shortcut else { throw ParleyError.missingField("shortcut") }
        guard let text = request.text else { throw ParleyError.missingField("text") }
        try WorkspaceRules.validateShortcut(shortcut)
        try WorkspaceRules.validateSavedReplyText(text)
        let now = clock.now()
        let reply = SavedReplyDTO(id: .make(), shortcut: shortcut, text: text, createdAt: now, updatedAt: now)
        do {
            try await store.write { repo in
                if try await repo.savedReplyCount(brandId: admin.brandId) >= WorkspaceRules.maxSavedReplies {
                    throw ParleyError(
                        .conflict, code: .savedReplyLimit,
                        message: "A brand has at most \(WorkspaceRules.maxSavedReplies) saved replies; delete one first.")
                }
                try await repo.insertSavedReply(reply, brandId: admin.brandId, createdBy: admin.agentId)
            }
        } catch where isUniqueViolation(error) {
            throw Self.shortcutTaken(shortcut)
        }
        return reply
    }

    public func updateSavedReply(_ admin: AgentPrincipal, id: SavedReplyID, _ request: SaveReplyRequest) async throws -> SavedReplyDTO {
        try admin.require(.admin)
        if let shortcut = request.shortcut { try WorkspaceRules.validateShortcut(shortcut) }
        if let text = request.text { try WorkspaceRules.validateSavedReplyText(text) }
        let now = clock.now()
        do {
            return try await store.write { repo in
                guard var reply = try await repo.savedReply(brandId: admin.brandId, id: id) else { throw ParleyError.notFound("Saved reply") }
                if let shortcut = request.shortcut { reply.shortcut = shortcut }
                if let text = request.text { reply.text = text }
                reply.updatedAt = now
                try await repo.updateSavedReply(reply, brandId: admin.brandId)
                return reply
            }
        } catch where isUniqueViolation(error) {
            throw Self.shortcutTaken(request.shortcut ?? "")
        }
    }

    public func deleteSavedReply(_ admin: AgentPrincipal, id: SavedReplyID) async throws {
        try admin.require(.admin)
        let deleted = try await store.write { repo in try await repo.deleteSavedReply(brandId: admin.brandId, id: id) }
        if !deleted { throw ParleyError.notFound("Saved reply") }
    }

    private static func shortcutTaken(_ shortcut: String) -> ParleyError {
        ParleyError(.conflict, code: .shortcutTaken, message: "Another saved reply has the shortcut '/\(shortcut)'.", field: "shortcut")
    }

    // MARK: Search

    /// Conversations of the agent's brand by message text (every word, as a prefix) or by the
    /// customer's name or email. Agents see every conversation of their brand, and so their search does.
    public func search(_ agent: AgentPrincipal, query: String, limit: Int) async throws -> [SearchHitDTO] {
        let (terms, phrase) = try WorkspaceRules.searchTerms(query)
        // What the background indexer has not reached yet (at most a moment's messages) first, so
        // that a search always sees every message written before it.
        try await SearchIndexer.catchUp(store.access { $0 })
        return try await store.read { repo in
            var hits: [SearchHitDTO] = []
            var names: [ConsumerID: String] = [:]
            for match in try await repo.search(brandId: agent.brandId, terms: terms, phrase: phrase, limit: limit) {
                let consumerId = match.conversation.consumerId
                if names[consumerId] == nil {
                    names[consumerId] = try await repo.consumer(brandId: agent.brandId, id: consumerId)?.displayName ?? "Customer"
                }
                hits.append(SearchHitDTO(conversation: match.conversation, consumerName: names[consumerId]!, message: match.message))
            }
            return hits
        }
    }

    // MARK: Presence

    public func presence(_ agent: AgentPrincipal) async throws -> [AgentPresenceDTO] {
        let stored = try await store.read { repo in try await repo.presence(brandId: agent.brandId, agentId: nil) }
        let connected = presence.connectedAgents(brandId: agent.brandId)
        return stored.map { Self.dto($0, connected: connected.contains($0.agentId)) }
    }

    public func setPresence(_ agent: AgentPrincipal, _ request: SetPresenceRequest) async throws -> AgentPresenceDTO {
        let automatic = request.automatic ?? false
        if automatic && request.presence != .away {
            throw ParleyError.invalidField("automatic", "Only 'away' can be automatic.")
        }
        try await store.write { repo in
            try await repo.setPresence(brandId: agent.brandId, agentId: agent.agentId, request.presence, automatic: automatic, at: clock.now())
        }
        guard let presence = await publishPresence(brandId: agent.brandId, agentId: agent.agentId) else {
            throw ParleyError.notFound("Agent")
        }
        return presence
    }

    /// Tells the brand's agents how one agent's presence looks now.
    @discardableResult
    func publishPresence(brandId: BrandID, agentId: AgentID) async -> AgentPresenceDTO? {
        do {
            guard let agent = try await store.read({ repo in try await repo.presence(brandId: brandId, agentId: agentId) }).first else { return nil }
            let presence = Self.dto(agent, connected: presence.connectedAgents(brandId: brandId).contains(agentId))
            await bus.publish(.presence(presence), to: .agents(brandId: brandId), logger: logger)
            await bus.publish(.presenceChanged(presence, brandId: brandId))
            return presence
        } catch {
            logger.warning("could not publish an agent's presence", metadata: ["agent": "\(agentId)", "error": "\(error)"])
            return nil
        }
    }

    private static func dto(_ stored: StoredPresence, connected: Bool) -> AgentPresenceDTO {
        AgentPresenceDTO(
            agentId: stored.agentId, name: stored.name, presence: connected ? stored.presence : .offline, chosen: stored.presence,
            automatic: stored.automatic, connected: connected, openConversations: stored.openConversations, since: stored.since)
    }

    /// Whether at least one of the brand's agents chose online and is connected.
    public func agentsAvailable(brandId: BrandID) async throws -> Bool {
        let connected = presence.connectedAgents(brandId: brandId)
        if connected.isEmpty { return false }
        let online = try await store.read { repo in try await repo.agentsChoosingOnline(brandId: brandId) }
        return !online.isDisjoint(with: connected)
    }

    // MARK: For consumers

    /// The name and initials of an agent of the consumer's brand (who answered them).
    public func agent(_ consumer: ConsumerPrincipal, id: AgentID) async throws -> PublicAgentDTO {
        guard let record = try await store.read({ repo in try await repo.agent(brandId: consumer.brandId, id: id) }),
            record.deletedAt == nil
        else { throw ParleyError.notFound("Agent") }
        return PublicAgentDTO(id: record.agent.id, name: record.agent.name, initials: WorkspaceRules.initials(record.agent.name))
    }

    /// The page the widget is on and the browser (its User-Agent), for the agent's details pane.
    public func recordVisit(_ consumer: ConsumerPrincipal, _ visit: ConsumerVisitRequest, userAgent: String?) async throws {
        try WorkspaceRules.validateVisit(visit)
        let browser = userAgent.map { String($0.prefix(WorkspaceRules.maxBrowserLength)) }
        try await store.write { repo in
            try await repo.recordVisit(
                brandId: consumer.brandId, consumerId: consumer.consumerId, pageUrl: visit.pageUrl, pageTitle: visit.pageTitle,
                browser: browser, at: clock.now())
        }
    }
}
