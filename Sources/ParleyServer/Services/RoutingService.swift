import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization

/// Routing: conversations without an agent wait in a queue (new ones, reopened ones, ones an agent
/// gave back) and are offered to the available agent of the right team with the most room
/// (`RoutingRules.choose`), oldest first. "Available" is online by choice and connected. An agent
/// who goes away or offline has their open conversations put back in the queue after the brand's
/// grace period (a durable `routing.requeue` job). Consumers hear their place in the queue.
///
/// Routing runs for a brand whenever the brand's agents are told of a conversation or a presence
/// change (it watches the event bus), under a per-brand lock, so two nodes never hand one
/// conversation to two agents nor an agent more than their room.
public final class RoutingService: Sendable {
    let store: Store
    let presence: any PresenceDirectory
    let bus: any EventBus
    let jobs: JobQueue
    let clock: any WallClock
    let logger: Logger
    private let pending = Mutex<(brands: Set<BrandID>, running: Bool)>(([], false))
    /// The place each waiting consumer was last told, per brand: a pass tells only what changed.
    private let told = Mutex<[BrandID: [ConversationID: QueuePositionDTO]]>([:])

    static let requeueJob = "routing.requeue"
    /// Conversations looked at per routing pass (the rest wait for the next).
    static let passSize = 200
    static let router = ParticipantRef(kind: .system, id: "router")

    init(store: Store, presence: any PresenceDirectory, bus: any EventBus, jobs: JobQueue, clock: any WallClock, logger: Logger) {
        (self.store, self.presence, self.bus, self.jobs, self.clock, self.logger) = (store, presence, bus, jobs, clock, logger)
    }

    var conversationLog: ConversationLog { ConversationLog(store: store, bus: bus, jobs: jobs, logger: logger) }

    // MARK: Settings, teams, capacity

    public func settings(_ agent: AgentPrincipal) async throws -> RoutingSettingsDTO {
        try await store.read { repo in try await repo.routingSettings(brandId: agent.brandId) }
    }

    public func updateSettings(_ admin: AgentPrincipal, _ request: UpdateRoutingRequest) async throws -> RoutingSettingsDTO {
        try admin.require(.admin)
        try RoutingRules.validate(request)
        let settings = try await store.write { repo in
            var settings = try await repo.routingSettings(brandId: admin.brandId)
            if let value = request.mode { settings.mode = value }
            if let value = request.maxConversations { settings.maxConversations = value }
            if let value = request.requeueGraceSeconds { settings.requeueGraceSeconds = value }
            try await repo.saveRoutingSettings(settings, brandId: admin.brandId)
            return settings
        }
        wake(admin.brandId)
        return settings
    }

    public func teams(_ agent: AgentPrincipal) async throws -> [TeamDTO] {
        try await store.read { repo in try await repo.teams(brandId: agent.brandId) }
    }

    public func createTeam(_ admin: AgentPrincipal, _ request: SaveTeamRequest) async throws -> TeamDTO {
        try admin.require(.admin)
        guard let name = request.name else { throw ParleyError.missingField("name") }
        try RoutingRules.validateTeamName(name)
        let team = TeamDTO(id: .make(), name: name, memberIds: request.memberIds ?? [], appIds: request.appIds ?? [], createdAt: clock.now())
        do {
            try await store.write { repo in
                if try await repo.teams(brandId: admin.brandId).count >= RoutingRules.maxTeamsPerBrand {
                    throw ParleyError(.conflict, code: .teamLimit, message: "A brand has at most \(RoutingRules.maxTeamsPerBrand) teams.")
                }
                try await Self.checkMembersAndApps(team, brandId: admin.brandId, in: repo)
                try await repo.insertTeam(team, brandId: admin.brandId)
            }
        } catch where isUniqueViolation(error) {
            throw Self.nameTaken(name)
        }
        return team
    }

    public func updateTeam(_ admin: AgentPrincipal, id: TeamID, _ request: SaveTeamRequest) async throws -> TeamDTO {
        try admin.require(.admin)
        if let name = request.name { try RoutingRules.validateTeamName(name) }
        do {
            let team = try await store.write { repo in
                guard var team = try await repo.teams(brandId: admin.brandId).first(where: { $0.id == id }) else { throw ParleyError.notFound("Team") }
                if let name = request.name { team.name = name }
                if let members = request.memberIds { team.memberIds = members }
                if let apps = request.appIds { team.appIds = apps }
                try await Self.checkMembersAndApps(team, brandId: admin.brandId, in: repo)
                try await repo.updateTeam(team, brandId: admin.brandId)
                return team
            }
            wake(admin.brandId)
            return team
        } catch where isUniqueViolation(error) {
            throw Self.nameTaken(request.name ?? "")
        }
    }

    public func deleteTeam(_ admin: AgentPrincipal, id: TeamID) async throws {
        try admin.require(.admin)
        guard try await store.write({ repo in try await repo.deleteTeam(brandId: admin.brandId, id: id) }) else { throw ParleyError.notFound("Team") }
        wake(admin.brandId)
    }

    public func setCapacity(_ admin: AgentPrincipal, agentId: AgentID, _ request: AgentCapacityRequest) async throws -> AgentLoadDTO {
        try admin.require(.admin)
        try RoutingRules.validateCapacity(request.maxConversations)
        try await store.write { repo in
            guard try await repo.agent(brandId: admin.brandId, id: agentId) != nil else { throw ParleyError.notFound("Agent") }
            try await repo.setAgentCapacity(brandId: admin.brandId, agentId: agentId, request.maxConversations)
        }
        wake(admin.brandId)
        guard let load = try await loads(admin).first(where: { $0.agentId == agentId }) else { throw ParleyError.notFound("Agent") }
        return load
    }

    /// The brand's agents as routing sees them: available or not, open conversations and room.
    public func loads(_ agent: AgentPrincipal) async throws -> [AgentLoadDTO] {
        let connected = presence.connectedAgents(brandId: agent.brandId)
        return try await store.read { repo in
            let (settings, capacities, teams) = (
                try await repo.routingSettings(brandId: agent.brandId), try await repo.agentCapacities(brandId: agent.brandId),
                try await repo.teams(brandId: agent.brandId)
            )
            return try await repo.presence(brandId: agent.brandId, agentId: nil).map { member in
                AgentLoadDTO(
                    agentId: member.agentId, name: member.name, available: member.presence == .online && connected.contains(member.agentId),
                    openConversations: member.openConversations, maxConversations: capacities[member.agentId] ?? settings.maxConversations,
                    ownLimit: capacities[member.agentId], teamIds: teams.filter { $0.memberIds.contains(member.agentId) }.map(\.id))
            }
        }
    }

    private static func checkMembersAndApps(_ team: TeamDTO, brandId: BrandID, in repo: any Repository) async throws {
        for member in team.memberIds where try await repo.agent(brandId: brandId, id: member) == nil {
            throw ParleyError(.unprocessable, code: .agentNotFound, message: "There is no such agent in this brand.", field: "memberIds")
        }
        for app in team.appIds {
            guard let found = try await repo.app(id: app), found.brandId == brandId else {
                throw ParleyError(.unprocessable, code: .appNotFound, message: "There is no such app in this brand.", field: "appIds")
            }
        }
    }

    private static func nameTaken(_ name: String) -> ParleyError {
        ParleyError(.conflict, code: .teamNameTaken, message: "Another team is called '\(name)'.", field: "name")
    }

    // MARK: Transfer

    /// A manager hands the conversation to an agent, or back to the queue of a team, with a private
    /// note for whoever takes it next.
    public func transfer(_ manager: AgentPrincipal, conversationId: ConversationID, _ request: TransferRequest) async throws -> ConversationDTO {
        try manager.require(.manager)
        switch (request.agentId, request.teamId) {
        case (nil, nil): throw ParleyError.missingField("agentId")
        case (.some, .some): throw ParleyError.invalidField("teamId", "Transfer to an agent or to a team, not both.")
        default: break
        }
        let note = request.note?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let note, note.count > RoutingRules.maxTransferNoteLength {
            throw ParleyError.invalidField("note", "'note' is at most \(RoutingRules.maxTransferNoteLength) characters.")
        }
        let actor = ParticipantRef(kind: .agent, id: manager.agentId.rawValue)
        let transferred = try await conversationLog.write { repo, appends -> ConversationDTO in
            let conversation = try await ConversationService.authorizedConversation(.agent(manager), id: conversationId, in: repo, lock: true)
            if conversation.state == .resolved {
                throw ParleyError(.conflict, code: .conversationResolved, message: "This conversation is resolved. Reopen it before transferring it.")
            }
            var log = ConversationAppend(conversation, now: self.clock.now())
            if let agentId = request.agentId {
                guard let agent = try await repo.agent(brandId: manager.brandId, id: agentId), agent.disabledAt == nil else {
                    throw ParleyError(.unprocessable, code: .agentNotFound, message: "There is no such agent in this brand.", field: "agentId")
                }
                log.assign(to: agentId, by: actor)
                log.announceTransfer(agent: agentId, team: nil)
            } else if let teamId = request.teamId {
                guard try await repo.teams(brandId: manager.brandId).contains(where: { $0.id == teamId }) else {
                    throw ParleyError(.unprocessable, code: .teamNotFound, message: "There is no such team in this brand.", field: "teamId")
                }
                log.assign(to: nil, by: actor)
                log.enqueue(team: teamId)
                log.announceTransfer(agent: nil, team: teamId)
            }
            if let note, !note.isEmpty { _ = log.logNote(note, clientNoteId: UUID().uuidString, by: actor) }
            try await appends.write(&log, in: repo)
            return log.conversation
        }.value
        // A conversation moved to another team's queue logs nothing, yet may now be routable.
        wake(manager.brandId)
        return transferred
    }

    /// A manager moves a waiting conversation up (or back) the queue; routing looks again at once.
    public func setPriority(_ manager: AgentPrincipal, conversationId: ConversationID, _ request: SetPriorityRequest) async throws -> QueuePositionDTO {
        try manager.require(.manager)
        guard RoutingRules.priorityRange.contains(request.priority) else {
            throw ParleyError.invalidField("priority", "A priority is 0 (normal) to 9 (first).")
        }
        let place = try await store.write { repo -> QueuePositionDTO in
            let conversation = try await ConversationService.authorizedConversation(.agent(manager), id: conversationId, in: repo, lock: true)
            guard try await repo.setQueuePriority(conversation.id, brandId: manager.brandId, priority: request.priority),
                let entry = try await repo.queueEntry(conversation.id)
            else {
                throw ParleyError(.conflict, code: .notWaiting, message: "Only a conversation waiting for an agent has a place in the queue.")
            }
            let position = try await repo.queuePosition(of: entry, brandId: manager.brandId)
            let waits = try await repo.recentWaits(brandId: manager.brandId, teamId: entry.teamId, limit: RoutingRules.waitSample)
            return QueuePositionDTO(
                conversationId: conversation.id, position: position, expectedWaitSeconds: RoutingRules.expectedWait(position: position, recentWaits: waits))
        }
        wake(manager.brandId)
        return place
    }

    // MARK: The queue, as consumers see it

    public func queuePosition(_ consumer: ConsumerPrincipal, conversationId: ConversationID) async throws -> QueuePositionDTO {
        try await store.read { repo in
            _ = try await ConversationService.authorizedConversation(.consumer(consumer), id: conversationId, in: repo, lock: false)
            guard let entry = try await repo.queueEntry(conversationId) else {
                return QueuePositionDTO(conversationId: conversationId, position: nil, expectedWaitSeconds: nil)
            }
            let position = try await repo.queuePosition(of: entry, brandId: consumer.brandId)
            let waits = try await repo.recentWaits(brandId: consumer.brandId, teamId: entry.teamId, limit: RoutingRules.waitSample)
            return QueuePositionDTO(conversationId: conversationId, position: position, expectedWaitSeconds: RoutingRules.expectedWait(position: position, recentWaits: waits))
        }
    }

    // MARK: Routing

    /// Runs routing for the brand soon (once, however often it is asked meanwhile).
    func wake(_ brandId: BrandID) {
        let start = pending.withLock { state -> Bool in
            state.brands.insert(brandId)
            if state.running { return false }
            state.running = true
            return true
        }
        guard start else { return }
        Task {
            while let brand = pending.withLock({ state -> BrandID? in
                guard let next = state.brands.popFirst() else {
                    state.running = false
                    return nil
                }
                return next
            }) {
                do {
                    try await dispatch(brand)
                } catch {
                    logger.warning("routing failed", metadata: ["brand": "\(brand)", "error": "\(error)"])
                }
            }
        }
    }

    /// One routing pass for a brand: each waiting conversation, highest priority then oldest first,
    /// to the available agent of its team with the most room. Returns the assignments made.
    @discardableResult
    public func dispatch(_ brandId: BrandID) async throws -> [(ConversationID, AgentID)] {
        let connected = presence.connectedAgents(brandId: brandId)
        // A read first: with manual routing, nobody available or nobody waiting, there is nothing to
        // write (SQLite has one writer; a pass that cannot assign must not take its turn).
        let (settings, waiting) = try await store.read { repo in
            (try await repo.routingSettings(brandId: brandId), try await repo.queued(brandId: brandId, limit: Self.passSize))
        }
        guard settings.mode == .automatic, !waiting.isEmpty, !connected.isEmpty else {
            await publishPositions(brandId: brandId, queue: waiting)
            return []
        }
        let outcome = try await conversationLog.write { repo, appends -> ([ConversationAppend], [QueuedConversation]) in
            try await repo.lockRouting(brandId: brandId)
            let settings = try await repo.routingSettings(brandId: brandId)
            let queue = try await repo.queued(brandId: brandId, limit: Self.passSize)
            guard settings.mode == .automatic, !queue.isEmpty else { return ([], queue) }
            let capacities = try await repo.agentCapacities(brandId: brandId)
            let teams = try await repo.teams(brandId: brandId)
            var candidates = try await repo.presence(brandId: brandId, agentId: nil)
                .filter { $0.presence == .online && connected.contains($0.agentId) }
                .map { member in
                    RoutingRules.Candidate(
                        agentId: member.agentId, teams: Set(teams.filter { $0.memberIds.contains(member.agentId) }.map(\.id)),
                        capacity: capacities[member.agentId] ?? settings.maxConversations, load: member.openConversations)
                }
            var logs: [ConversationAppend] = []
            var waiting: [QueuedConversation] = []
            for entry in queue {
                guard let agentId = RoutingRules.choose(for: entry.teamId, among: candidates),
                    let conversation = try await repo.conversation(brandId: brandId, id: entry.conversationId, lock: true),
                    conversation.assigneeId == nil, conversation.state != .resolved
                else {
                    waiting.append(entry)
                    continue
                }
                var log = ConversationAppend(conversation, now: self.clock.now())
                log.assign(to: agentId, by: Self.router)
                try await appends.write(&log, in: repo)
                logs.append(log)
                if let index = candidates.firstIndex(where: { $0.agentId == agentId }) { candidates[index].load += 1 }
            }
            return (logs, waiting)
        }.value
        await publishPositions(brandId: brandId, queue: outcome.1)
        return outcome.0.compactMap { log in log.conversation.assigneeId.map { (log.conversation.id, $0) } }
    }

    /// Tells each waiting consumer whose place (or expected wait) changed where they are now.
    private func publishPositions(brandId: BrandID, queue: [QueuedConversation]) async {
        var byTeam: [TeamID?: Int] = [:]
        var waits: [TeamID?: [TimeInterval]] = [:]
        var places: [ConversationID: QueuePositionDTO] = [:]
        var consumers: [ConversationID: ConsumerID] = [:]
        for entry in queue {
            let position = (byTeam[entry.teamId] ?? 0) + 1
            byTeam[entry.teamId] = position
            if waits[entry.teamId] == nil {
                waits[entry.teamId] = (try? await store.read { repo in
                    try await repo.recentWaits(brandId: brandId, teamId: entry.teamId, limit: RoutingRules.waitSample)
                }) ?? []
            }
            places[entry.conversationId] = QueuePositionDTO(
                conversationId: entry.conversationId, position: position,
                expectedWaitSeconds: RoutingRules.expectedWait(position: position, recentWaits: waits[entry.teamId] ?? []))
            consumers[entry.conversationId] = entry.consumerId
        }
        let changed = told.withLock { told -> [QueuePositionDTO] in
            let before = told[brandId] ?? [:]
            told[brandId] = places.isEmpty ? nil : places
            return places.values.filter { before[$0.conversationId] != $0 }
        }
        for place in changed {
            guard let consumer = consumers[place.conversationId] else { continue }
            await bus.publish(.queue(place), to: .consumer(consumer), logger: logger)
        }
    }

    // MARK: Presence: handing back an absent agent's conversations

    struct Requeue: Codable, Sendable {
        var brandId: BrandID
        var agentId: AgentID
    }

    /// Follows the brand's agents: a conversation or presence change runs routing; an agent who is
    /// not available any more gets a `routing.requeue` job after the brand's grace period.
    func watch(_ bus: any EventBus) {
        bus.subscribe(domain: { [self] event in
            switch event {
            case .conversationChanged(let conversation):
                wake(conversation.brandId)
            case .presenceChanged(let presence, let brandId):
                if presence.presence == .online {
                    wake(brandId)
                } else if presence.openConversations > 0 {
                    Task { await self.scheduleRequeue(brandId: brandId, presence: presence) }
                }
            case .messageLogged, .callRinging, .cobrowseChanged:
                break
            }
        })
    }

    private func scheduleRequeue(brandId: BrandID, presence: AgentPresenceDTO) async {
        do {
            let grace = try await store.read { repo in try await repo.routingSettings(brandId: brandId) }.requeueGraceSeconds
            let job = try jobs.make(
                Self.requeueJob, Requeue(brandId: brandId, agentId: presence.agentId), brandId: brandId, lane: "routing:\(brandId)",
                dedupeKey: "requeue:\(presence.agentId):\(StoredTime.millis(clock.now()) / 1000)", after: TimeInterval(grace))
            _ = try await store.write { repo in try await repo.enqueueJob(job) }
            jobs.wake()
        } catch {
            logger.warning("could not schedule a requeue", metadata: ["agent": "\(presence.agentId)", "error": "\(error)"])
        }
    }

    /// The `routing.requeue` job: if the agent is still not available, their open conversations go
    /// back to the queue (and routing runs).
    func requeue(_ payload: Requeue) async throws {
        let connected = presence.connectedAgents(brandId: payload.brandId).contains(payload.agentId)
        let logs = try await conversationLog.write { repo, appends -> [ConversationAppend] in
            try await repo.lockRouting(brandId: payload.brandId)
            guard let member = try await repo.presence(brandId: payload.brandId, agentId: payload.agentId).first else { return [] }
            if member.presence == .online && connected { return [] }
            var logs: [ConversationAppend] = []
            for id in try await repo.openAssigned(brandId: payload.brandId, agentId: payload.agentId) {
                guard let conversation = try await repo.conversation(brandId: payload.brandId, id: id, lock: true) else { continue }
                var log = ConversationAppend(conversation, now: self.clock.now())
                log.assign(to: nil, by: Self.router)
                try await appends.write(&log, in: repo)
                logs.append(log)
            }
            return logs
        }.logs
        if !logs.isEmpty { logger.info("conversations back in the queue", metadata: ["agent": "\(payload.agentId)", "count": "\(logs.count)"]) }
    }
}
