import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

/// Co-browse: an agent sees the customer's page on the brand's site, with the customer's yes.
///
/// A session is a row (`cobrowse_sessions`) that every change rewrites over the version it read,
/// so two nodes cannot both move it; the row names the agent's connection that offered it and the
/// customer's connection whose page is shared. Every node keeps the sessions that are not over in
/// memory, from `cobrowseChanged` domain events (which cross nodes on the cluster's bus), so that
/// a page's frames are checked and relayed without a database read: the page goes to the agent's
/// connection only, the agent's pointer to the customer's only, through the bus, whichever nodes
/// they are on. Nothing of the page is stored; when a session ends its record goes into the
/// conversation's log, for agents.
public final class CobrowseService: Service, Sendable {
    typealias Stores = any CobrowseStore & ConversationStore & IdentityStore

    let store: StoreAccess<Stores>
    let hub: RealtimeHub
    let bus: any EventBus
    /// Several nodes: sessions are not this node's alone.
    var clustered: Bool { liveNodes != nil }
    /// This node's name, written in the sessions whose connections are here.
    let node: String
    /// The nodes heard from lately (nil on one node, and while this node is too new to know).
    let liveNodes: (@Sendable () -> Set<String>?)?
    let conversations: ConversationService
    let configuration: ParleyConfiguration
    let clock: any WallClock
    let logger: Logger
    /// Sessions not over, as the last change published them (every node).
    private let live = Mutex<[CobrowseID: CobrowseSessionRecord]>([:])
    /// The page's byte budgets of sessions shared from a connection on this node.
    private let budgets = Mutex<[CobrowseID: PageBudget]>([:])
    /// Offer and return deadlines started on this node.
    private let timers = Mutex<[CobrowseID: Task<Void, Never>]>([:])
    /// The agent's clicks and typing per session (`cobrowseInputsPerSecond`), on the node with
    /// the agent's connection (the only one that takes its frames).
    private let inputs = LocalTokenBuckets()

    init(
        store: Store, hub: RealtimeHub, bus: any EventBus, conversations: ConversationService, configuration: ParleyConfiguration,
        clock: any WallClock, cluster: (node: String, liveNodes: @Sendable () -> Set<String>?)?, logger: Logger
    ) {
        self.node = cluster?.node ?? "node_" + Identifier.random(12)
        self.liveNodes = cluster?.liveNodes
        self.store = store.access { $0 as Stores }
        self.hub = hub
        self.bus = bus
        self.conversations = conversations
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        bus.subscribe(domain: { [weak self] event in
            if case .cobrowseChanged(let record) = event { self?.remember(record) }
        })
    }

    /// Sessions not over, known to this node.
    public var liveCount: Int { live.withLock { $0.count } }

    // MARK: Offer and answer

    /// The agent offers co-browse from the workspace connection `connection`; the page will go there.
    func offer(_ agent: AgentPrincipal, conversationId: ConversationID, connection: ConnectionID) async throws -> CobrowseSessionDTO {
        try CobrowseRules.requirePermission(agent)
        // The agent's own earlier session (their page reloaded, their connection changed) gives way.
        // Every node knows the sessions under way (memory); the write below checks the database.
        if let earlier = live.withLock({ $0.values.first { $0.session.conversationId == conversationId } }),
            earlier.brandId == agent.brandId, earlier.session.agentId == agent.agentId
        {
            _ = try? await transition(earlier.session.id, brandId: agent.brandId, actor: ParticipantRef(kind: .agent, id: agent.agentId.rawValue)) {
                machine, _, _ throws(ParleyError) in try machine.apply(.stop(.agent), now: self.clock.now())
            }
        }
        let now = clock.now()
        let record = try await store.write { repo in
            let conversation = try await ConversationService.authorizedConversation(.agent(agent), id: conversationId, in: repo, lock: true)
            let settings = try await repo.brandSettings(brandId: agent.brandId)
            try CobrowseRules.authorizeOffer(settings: settings, channel: conversation.channel, conversationState: conversation.state)
            if try await repo.liveCobrowse(conversationId: conversation.id) != nil {
                throw ParleyError(
                    .conflict, code: .cobrowseInProgress, message: "This conversation already has a co-browse session. End it before offering another.")
            }
            let name = try await repo.agent(brandId: agent.brandId, id: agent.agentId)?.agent.name ?? "An agent"
            let record = CobrowseSessionRecord(
                session: CobrowseSessionDTO(
                    id: CobrowseID.make(), conversationId: conversation.id, state: .offered, version: 1, agentId: agent.agentId,
                    agentName: name, offeredAt: now, maskSelectors: settings.cobrowseMaskSelectors),
                brandId: agent.brandId, consumerId: conversation.consumerId, agentConnection: connection, agentNode: self.node)
            try await repo.insertCobrowse(record)
            return record
        }
        await published(record)
        schedule(.expire, for: record, after: CobrowseRules.offerSeconds)
        logger.info("co-browse offered", metadata: ["cobrowse": "\(record.session.id)"])
        return record.session
    }

    /// The customer accepts on the page of `connection` (which is then the one shared), or declines.
    func answer(
        _ consumer: ConsumerPrincipal, sessionId: CobrowseID, accept: Bool, origin: String?, connection: ConnectionID
    ) async throws -> CobrowseSessionDTO {
        let origin = origin.map { String($0.prefix(300)).lowercased() }
        let record = try await transition(sessionId, brandId: consumer.brandId, actor: ParticipantRef(kind: .consumer, id: consumer.consumerId.rawValue)) {
            machine, record, settings throws(ParleyError) in
            guard record.consumerId == consumer.consumerId else { throw Self.notFound }
            guard accept else { return try machine.apply(.decline, now: self.clock.now()) }
            guard (try? CobrowseRules.authorizeOrigin(origin, settings: settings)) != nil else {
                // Not on this site (or turned off): the session ends, and the page is told why below.
                return try machine.apply(.notAllowed, now: self.clock.now())
            }
            try machine.apply(.accept(origin: origin), now: self.clock.now())
            record.consumerConnection = connection
            record.consumerNode = self.node
        }
        if accept, record.session.endReason == .notAllowed {
            throw ParleyError(.forbidden, code: .cobrowseDisabled, message: "Co-browse is not allowed on this site.")
        }
        if record.session.state == .active {
            cancelTimer(sessionId)
            budgets.withLock { $0[sessionId] = PageBudget(perSecond: configuration.cobrowseBytesPerSecond, at: .now) }
        }
        return record.session
    }

    /// Either side stops the session (the agent's own offer, the customer's own page).
    func end(_ principal: Principal, sessionId: CobrowseID) async throws -> CobrowseSessionDTO {
        try await transition(sessionId, brandId: principal.brandId, actor: principal.participant) { machine, record, _ throws(ParleyError) in
            switch principal {
            case .agent(let agent): guard record.session.agentId == agent.agentId else { throw Self.notFound }
            case .consumer(let consumer): guard record.consumerId == consumer.consumerId else { throw Self.notFound }
            }
            try machine.apply(.stop(principal.participant.kind), now: self.clock.now())
        }.session
    }

    // MARK: The page and the pointer

    /// A part of the page from the customer's shared connection, relayed to the agent's as it is.
    func data(
        _ consumer: ConsumerPrincipal, sessionId: CobrowseID, seq: Int64, kind: CobrowseDataKind, last: Bool, payload: String,
        connection: ConnectionID
    ) async throws {
        let record = try await liveRecord(sessionId, brandId: consumer.brandId)
        guard record.consumerId == consumer.consumerId else { throw Self.notFound }
        guard record.session.state == .active else { throw Self.notActive }
        guard record.consumerConnection == connection else { throw Self.otherPage }
        let bytes = payload.utf8.count
        let verdict = budgets.withLock { budgets -> PageBudget.Verdict in
            var budget = budgets[sessionId] ?? PageBudget(perSecond: configuration.cobrowseBytesPerSecond, at: .now)
            let verdict = budget.take(kind, bytes: bytes, last: last, snapshotLimit: configuration.cobrowseSnapshotBytes, at: .now)
            budgets[sessionId] = budget
            return verdict
        }
        switch verdict {
        case .relay:
            await bus.publish(
                .cobrowseData(sessionId: sessionId, seq: seq, kind: kind, last: last, payload: payload), to: .connection(record.agentConnection),
                logger: logger)
        case .dropAndResync:
            await bus.publish(.cobrowseResync(sessionId: sessionId, reason: "budget"), to: .connection(connection), logger: logger)
        case .drop:
            break
        case .tooLarge:
            _ = try? await transition(sessionId, brandId: consumer.brandId, actor: Self.server) {
                machine, _, _ throws(ParleyError) in try machine.apply(.pageTooLarge, now: self.clock.now())
            }
            throw ParleyError(
                .payloadTooLarge, code: .payloadTooLarge,
                message: "This page is larger than co-browse can show (\(configuration.cobrowseSnapshotBytes / 1_048_576) MB at most).")
        }
    }

    /// The agent's pointer or highlight, relayed to the customer's shared page.
    func point(_ agent: AgentPrincipal, sessionId: CobrowseID, payload: String, connection: ConnectionID) async throws {
        let record = try await agentsLive(agent, sessionId: sessionId, connection: connection)
        guard payload.utf8.count <= CobrowseRules.maxPointBytes else {
            throw ParleyError.invalidField("payload", "A pointer is at most \(CobrowseRules.maxPointBytes) bytes.")
        }
        guard let page = record.consumerConnection, record.session.consumerConnected else { return }
        await bus.publish(.cobrowsePoint(sessionId: sessionId, payload: payload), to: .connection(page), logger: logger)
    }

    // MARK: Control

    /// Control of the page: the agent requests or releases it; the customer grants or denies a
    /// request (from the shared page, where the question is asked) or takes control back.
    func control(_ principal: Principal, sessionId: CobrowseID, action: CobrowseControlAction, connection: ConnectionID) async throws -> CobrowseSessionDTO {
        let now = clock.now()
        switch principal {
        case .agent(let agent):
            guard action == .request || action == .release else {
                throw ParleyError.invalidField("action", "An agent requests or releases control; the customer grants or denies it.")
            }
            if action == .request { try CobrowseRules.requireControlPermission(agent) }
            return try await transition(sessionId, brandId: agent.brandId, actor: principal.participant) { machine, record, _ throws(ParleyError) in
                guard record.session.agentId == agent.agentId else { throw Self.notFound }
                guard record.agentConnection == connection else { throw Self.otherPage }
                try machine.apply(action == .request ? .requestControl : .releaseControl, now: now)
            }.session
        case .consumer(let consumer):
            guard action != .request else {
                throw ParleyError.invalidField("action", "The customer grants, denies or takes back control; only the agent requests it.")
            }
            return try await transition(sessionId, brandId: consumer.brandId, actor: principal.participant) { machine, record, _ throws(ParleyError) in
                guard record.consumerId == consumer.consumerId else { throw Self.notFound }
                switch action {
                case .grant:
                    // Asked and answered on the page that is shared: the customer sees what they allow.
                    guard record.consumerConnection == connection else { throw Self.otherPage }
                    try machine.apply(.answerControl(true), now: now)
                case .deny: try machine.apply(.answerControl(false), now: now)
                case .release, .request: try machine.apply(.releaseControl, now: now)
                }
            }.session
        }
    }

    /// The agent's click or typing, relayed to the customer's shared page while control is granted.
    /// The page carries it out only on elements it does not mask.
    func input(_ agent: AgentPrincipal, sessionId: CobrowseID, payload: String, connection: ConnectionID) async throws {
        let record = try await agentsLive(agent, sessionId: sessionId, connection: connection)
        guard record.session.control == .granted else {
            throw ParleyError(
                .conflict, code: .cobrowseControlNotGranted, message: "The customer has not let you click and type on their page.")
        }
        guard payload.utf8.count <= CobrowseRules.maxInputBytes else {
            throw ParleyError.invalidField("payload", "An input is at most \(CobrowseRules.maxInputBytes) bytes.")
        }
        if let wait = inputs.take(sessionId.rawValue, limit: configuration.cobrowseInputsPerSecond, per: .seconds(1), now: .now) {
            throw ParleyError.rateLimited("clicks and typing on the customer's page", retryAfter: wait)
        }
        guard let page = record.consumerConnection, record.session.consumerConnected else { return }
        await bus.publish(.cobrowseInput(sessionId: sessionId, payload: payload), to: .connection(page), logger: logger)
    }

    /// The agent's view asks the page for a whole snapshot.
    func resync(_ agent: AgentPrincipal, sessionId: CobrowseID, connection: ConnectionID) async throws {
        let record = try await agentsLive(agent, sessionId: sessionId, connection: connection)
        guard let page = record.consumerConnection, record.session.consumerConnected else { return }
        await bus.publish(.cobrowseResync(sessionId: sessionId, reason: "agent"), to: .connection(page), logger: logger)
    }

    private func agentsLive(_ agent: AgentPrincipal, sessionId: CobrowseID, connection: ConnectionID) async throws -> CobrowseSessionRecord {
        let record = try await liveRecord(sessionId, brandId: agent.brandId)
        guard record.session.agentId == agent.agentId else { throw Self.notFound }
        guard record.session.state == .active else { throw Self.notActive }
        guard record.agentConnection == connection else { throw Self.otherPage }
        return record
    }

    // MARK: Connections

    /// The sessions a customer's page should know of when it connects: an offer waiting, or a
    /// session it may take over (the customer moved to another page of the site).
    func sessions(for consumer: ConsumerPrincipal) async -> [CobrowseSessionDTO] {
        let known = live.withLock { live in
            live.values.filter { $0.brandId == consumer.brandId && $0.consumerId == consumer.consumerId }.map(\.session)
        }
        return known.sorted { $0.offeredAt < $1.offeredAt }
    }

    /// A connection on this node closed: the agent's ends the sessions it offered; the customer's
    /// leaves its session waiting for the next page (`CobrowseRules.returnSeconds`).
    func connectionClosed(_ connection: ConnectionID) async {
        let (agents, pages) = live.withLock { live in
            (live.values.filter { $0.agentConnection == connection }, live.values.filter { $0.consumerConnection == connection })
        }
        guard !agents.isEmpty || !pages.isEmpty else { return }
        for record in agents { await agentLeft(record) }
        for record in pages where !agents.contains(where: { $0.session.id == record.session.id }) {
            await pageLeft(record, connection: connection)
        }
    }

    /// The agent's connection is gone (closed, or its node is): the session ends.
    private func agentLeft(_ record: CobrowseSessionRecord) async {
        _ = try? await transition(record.session.id, brandId: record.brandId, actor: Self.server) { machine, _, _ throws(ParleyError) in
            try machine.apply(.agentLeft, now: self.clock.now())
        }
    }

    /// The shared page's connection is gone: the session waits for the customer's next page
    /// (`CobrowseRules.returnSeconds`), unless another page took it over meanwhile.
    private func pageLeft(_ record: CobrowseSessionRecord, connection: ConnectionID) async {
        let moved = try? await transition(record.session.id, brandId: record.brandId, actor: Self.server) { machine, stored, _ throws(ParleyError) in
            guard stored.consumerConnection == connection else { throw Self.otherPage }
            machine.pageLeft()
        }
        if let moved, moved.session.state == .active {
            budgets.withLock { $0[moved.session.id] = nil }
            schedule(.consumerLeft, for: moved, after: CobrowseRules.returnSeconds)
        }
    }

    /// Who changes a session when no side does (timers, departures, shutdown).
    private static let server = ParticipantRef(kind: .system, id: "cobrowse")

    /// How often a node of several looks for sessions whose connections' node has gone.
    static let orphanSweep = Duration.seconds(30)

    /// Start-up and shutdown. On one node, sessions a stopped server left open end at start (their
    /// connections are gone). On several, the node learns the sessions begun before it started (a
    /// page connecting here must hear of them), and now and then ends those whose agent's node has
    /// gone and leaves waiting those whose page's node has. At shutdown the sessions of this
    /// node's connections end.
    public func run() async throws {
        if clustered {
            await adoptLive()
            try? await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try await self.clock.sleep(for: Self.orphanSweep)
                    await self.endOrphaned()
                }
            }
        } else {
            // Every session a stopped server left open: its connections are gone.
            await adoptLive()
            await end(live.withLock { Array($0.values) })
            try? await gracefulShutdown()
        }
        let hub = hub
        await end(live.withLock { live in
            live.values.filter { record in
                hub.principal(ofConnection: record.agentConnection) != nil
                    || record.consumerConnection.map { hub.principal(ofConnection: $0) != nil } == true
            }
        })
    }

    /// The sessions not over, from the database (those begun before this node started, or on one
    /// node those a stopped server left open).
    func adoptLive() async {
        do {
            for record in try await store.read({ repo in try await repo.liveCobrowses(limit: 10_000) }) { remember(record) }
        } catch {
            logger.warning("could not read the co-browse sessions under way", metadata: ["error": "\(error)"])
        }
    }

    /// Sessions whose agent's node is gone end (`agent_left`: the connection went with it); those
    /// whose shared page's node is gone wait for the customer's next page, as when a page closes.
    /// Every node sweeps; each change is written over the version read, so one of them wins.
    func endOrphaned() async {
        guard let alive = liveNodes?() else { return }  // too new to know who is alive
        for record in live.withLock({ Array($0.values) }) {
            if let agentNode = record.agentNode, !alive.contains(agentNode) {
                await agentLeft(record)
                logger.notice("co-browse ended: the agent's server has gone", metadata: ["cobrowse": "\(record.session.id)", "node": "\(agentNode)"])
            } else if let pageNode = record.consumerNode, !alive.contains(pageNode), record.session.state == .active, record.session.consumerConnected,
                let page = record.consumerConnection
            {
                await pageLeft(record, connection: page)
            }
        }
    }

    private func end(_ records: [CobrowseSessionRecord]) async {
        for record in records {
            _ = try? await transition(record.session.id, brandId: record.brandId, actor: Self.server) {
                machine, _, _ throws(ParleyError) in try machine.apply(.shutdown, now: self.clock.now())
            }
        }
    }

    // MARK: State

    /// Reads the session, applies `change` to its machine (and record), writes it over the version
    /// read, and publishes it; an ended session's record goes into the conversation's log in the
    /// same transaction. Retried when another node changed the session first.
    @discardableResult
    private func transition(
        _ id: CobrowseID, brandId: BrandID, actor: ParticipantRef,
        _ change: @escaping @Sendable (inout CobrowseMachine, inout CobrowseSessionRecord, BrandSettingsDTO) throws(ParleyError) -> Void
    ) async throws -> CobrowseSessionRecord {
        guard CobrowseID.isWellFormed(id) else { throw Self.notFound }
        for _ in 0..<3 {
            let read = try await store.read { repo -> (CobrowseSessionRecord, BrandSettingsDTO)? in
                guard let record = try await repo.cobrowse(brandId: brandId, id: id) else { return nil }
                return (record, try await repo.brandSettings(brandId: brandId))
            }
            guard let read else { throw Self.notFound }
            var record = read.0
            let settings = read.1
            let previous = record.session.version
            var machine = CobrowseMachine(record.session)
            try change(&machine, &record, settings)
            guard machine.session.version != previous else { return record }  // nothing changed
            record.session = machine.session
            record.session.maskSelectors = settings.cobrowseMaskSelectors
            let written: Bool
            if record.session.state == .ended {
                let final = record
                written = try await conversations.conversationLog.write { repo, appends -> Bool in
                    guard let conversation = try await repo.conversation(brandId: brandId, id: final.session.conversationId, lock: true) else { return false }
                    guard try await repo.updateCobrowse(final, previousVersion: previous) else { return false }
                    var log = ConversationAppend(conversation, now: self.clock.now())
                    let event = log.logCobrowse(final.session, by: actor)
                    try await appends.write(&log, in: repo)
                    try await repo.setCobrowseEventSeq(id: final.session.id, seq: event.seq)
                    return true
                }.value
            } else {
                let changed = record
                written = try await store.write { repo in try await repo.updateCobrowse(changed, previousVersion: previous) }
            }
            if written {
                await published(record)
                return record
            }
        }
        throw ParleyError(.conflict, code: .cobrowseNotActive, message: "This co-browse session changed meanwhile. Try again.")
    }

    /// Tells this node's memory, the other nodes (domain event) and both sides (frames).
    private func published(_ record: CobrowseSessionRecord) async {
        remember(record)
        if record.session.state == .ended {
            cancelTimer(record.session.id)
            budgets.withLock { $0[record.session.id] = nil }
        }
        await bus.publish(.cobrowseChanged(record))
        await bus.publish(.cobrowse(record.session), to: .consumer(record.consumerId), logger: logger)
        await bus.publish(.cobrowse(record.session), to: .agent(record.session.agentId), logger: logger)
    }

    /// Keeps the newest version of a session that is not over; forgets an ended one.
    private func remember(_ record: CobrowseSessionRecord) {
        live.withLock { live in
            if let known = live[record.session.id], known.session.version >= record.session.version { return }
            live[record.session.id] = record.session.state == .ended ? nil : record
        }
    }

    /// The session from memory, or (a node that started after it began) from the database.
    private func liveRecord(_ id: CobrowseID, brandId: BrandID) async throws -> CobrowseSessionRecord {
        if let record = live.withLock({ $0[id] }) {
            guard record.brandId == brandId else { throw Self.notFound }
            return record
        }
        guard CobrowseID.isWellFormed(id), let record = try await store.read({ repo in try await repo.cobrowse(brandId: brandId, id: id) }) else {
            throw Self.notFound
        }
        remember(record)
        return record
    }

    private enum Deadline { case expire, consumerLeft }

    private func schedule(_ deadline: Deadline, for record: CobrowseSessionRecord, after seconds: Int) {
        let (clock, id, brandId, version) = (clock, record.session.id, record.brandId, record.session.version)
        let task = Task { [weak self] in
            try? await clock.sleep(for: .seconds(seconds))
            guard !Task.isCancelled, let self else { return }
            _ = try? await self.transition(id, brandId: brandId, actor: Self.server) {
                machine, _, _ throws(ParleyError) in
                // Only if nothing happened since the deadline was set.
                guard machine.session.version == version else { return }
                try machine.apply(deadline == .expire ? .expire : .consumerLeft, now: self.clock.now())
            }
        }
        timers.withLock { timers in
            timers[id]?.cancel()
            timers[id] = task
        }
    }

    private func cancelTimer(_ id: CobrowseID) {
        timers.withLock { $0.removeValue(forKey: id) }?.cancel()
    }

    static let notFound = ParleyError(.notFound, code: .cobrowseNotFound, message: "There is no co-browse session with this id.")
    static let notActive = ParleyError(
        .conflict, code: .cobrowseNotActive, message: "This co-browse session is not running (not accepted yet, or over).")
    static let otherPage = ParleyError(.conflict, code: .cobrowseOnOtherPage, message: "This co-browse session is shared from another page or tab.")
}

/// How many bytes of a page one session may relay: a snapshot's parts together at most the
/// snapshot limit; changes at most `perSecond`, with a second's worth at once. Changes over the
/// budget are dropped and the page asked, once, for a new snapshot; until it sends one the
/// changes after the gap are dropped too (they would not apply).
struct PageBudget: Sendable {
    enum Verdict: Equatable { case relay, drop, dropAndResync, tooLarge }

    let perSecond: Double
    private var tokens: Double
    private var updated: ContinuousClock.Instant
    private var snapshotBytes = 0
    /// Changes were dropped: the page was asked for a snapshot, and changes wait for it.
    private var awaitingSnapshot = false

    init(perSecond: Int, at now: ContinuousClock.Instant) {
        self.perSecond = Double(perSecond)
        tokens = Double(perSecond)
        updated = now
    }

    mutating func take(_ kind: CobrowseDataKind, bytes: Int, last: Bool, snapshotLimit: Int, at now: ContinuousClock.Instant) -> Verdict {
        switch kind {
        case .snapshot:
            snapshotBytes += bytes
            if snapshotBytes > snapshotLimit { return .tooLarge }
            if last {
                snapshotBytes = 0
                awaitingSnapshot = false
            }
            return .relay
        case .changes:
            if awaitingSnapshot { return .drop }
            let elapsed = now - updated
            tokens = min(perSecond, tokens + elapsed.seconds * perSecond)
            updated = now
            guard Double(bytes) <= tokens else {
                awaitingSnapshot = true
                return .dropAndResync
            }
            tokens -= Double(bytes)
            return .relay
        }
    }
}
