import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization

/// Reports: the contact centre now (live, over the WebSocket) and a period's numbers per day,
/// agent, team or channel (`GET /v1/reports`, JSON or CSV).
public struct ReportsService: Sendable {
    /// What reports read: the facts of conversations, calls, ratings and routing, and the brand's agents.
    typealias Stores = any ReportsStore & RoutingStore & CallStore & IdentityStore & LifecycleStore & WorkspaceStore

    let store: StoreAccess<Stores>
    let presence: any PresenceDirectory
    /// This node's connections: a report is computed only where somebody would get it.
    let hub: RealtimeHub
    let bus: any EventBus
    let clock: any WallClock
    let logger: Logger
    let live = LiveReports()

    /// Live reports are recomputed at most this often per brand, however busy it is.
    static let liveInterval: Duration = .milliseconds(500)

    // MARK: Now

    public func live(_ agent: AgentPrincipal) async throws -> LiveReportDTO {
        Self.view(try await snapshot(brandId: agent.brandId), for: agent.role >= .manager ? nil : agent.agentId)
    }

    /// What one agent sees of the report (nil: everything, for managers).
    static func view(_ report: LiveReportDTO, for agentId: AgentID?) -> LiveReportDTO {
        guard let agentId else { return report }
        var own = report
        own.agents = report.agents.filter { $0.agentId == agentId }
        return own
    }

    func snapshot(brandId: BrandID) async throws -> LiveReportDTO {
        let connected = presence.connectedAgents(brandId: brandId)
        let now = clock.now()
        return try await store.read { repo in
            let queue = try await repo.queued(brandId: brandId, limit: 100_000)
            let settings = try await repo.routingSettings(brandId: brandId)
            let capacities = try await repo.agentCapacities(brandId: brandId)
            let agents = try await repo.presence(brandId: brandId, agentId: nil).map { member in
                AgentLiveDTO(
                    agentId: member.agentId, name: member.name, presence: connected.contains(member.agentId) ? member.presence : .offline,
                    connected: connected.contains(member.agentId), openConversations: member.openConversations,
                    maxConversations: capacities[member.agentId] ?? settings.maxConversations)
            }
            let oldest = queue.map(\.queuedAt).min()
            return LiveReportDTO(
                waiting: queue.count, oldestWaitSeconds: oldest.map { max(0, Int(now.timeIntervalSince($0))) },
                online: agents.filter { $0.presence == .online }.count, away: agents.filter { $0.presence == .away }.count,
                offline: agents.filter { $0.presence == .offline }.count, agents: agents, at: now)
        }
    }

    /// Follows the brand's agents: any conversation or presence change makes a new live report, at
    /// most every `liveInterval`, sent to managers whole and to each agent as their own row, only
    /// when it changed.
    func watch(_ bus: any EventBus) {
        bus.subscribe(domain: { [self] event in
            switch event {
            case .conversationChanged, .presenceChanged:
                // Nobody connected to this node would get a report: nothing to compute.
                guard hub.hasAgents(brandId: event.brandId) else { return }
                wake(event.brandId)
            case .messageLogged, .callRinging, .cobrowseChanged:
                break
            }
        })
    }

    func wake(_ brandId: BrandID) {
        guard live.mark(brandId) else { return }
        Task {
            // One round per interval: a busy brand is reported twice a second, not after every message.
            repeat {
                try? await Task.sleep(for: Self.liveInterval)
                for brand in live.takeDue() { await publishLive(brandId: brand) }
            } while live.continueRunning()
        }
    }

    /// The report without what changes by itself (the time, the oldest wait's seconds: pages count
    /// those on), for telling whether anything happened.
    static func comparable(_ report: LiveReportDTO) -> LiveReportDTO {
        var report = report
        report.at = .distantPast
        report.oldestWaitSeconds = report.oldestWaitSeconds == nil ? nil : 0
        return report
    }

    func publishLive(brandId: BrandID) async {
        do {
            let report = try await snapshot(brandId: brandId)
            let previous = live.swap(brandId, report)
            if let previous, Self.comparable(previous) == Self.comparable(report) { return }
            await bus.publish(.report(report), to: .managers(brandId: brandId), logger: logger)
            for agent in report.agents where agent.connected {
                let mine = Self.comparable(Self.view(report, for: agent.agentId))
                if let previous, Self.comparable(Self.view(previous, for: agent.agentId)) == mine { continue }
                await bus.publish(.report(Self.view(report, for: agent.agentId)), to: .agent(agent.agentId), logger: logger)
            }
        } catch {
            logger.warning("the live report failed", metadata: ["brand": "\(brandId)", "error": "\(error)"])
        }
    }

    // MARK: History

    public struct Filter: Sendable, Hashable {
        public var channel: Channel?
        public var agentId: AgentID?
        public var teamId: TeamID?
        public init(channel: Channel? = nil, agentId: AgentID? = nil, teamId: TeamID? = nil) {
            (self.channel, self.agentId, self.teamId) = (channel, agentId, teamId)
        }
    }

    /// A period's numbers per group. Managers and admins see the brand; an agent sees their own.
    public func history(_ agent: AgentPrincipal, from: Date, to: Date, groupBy: ReportGrouping, filter requested: Filter) async throws -> ReportDTO {
        guard from < to else { throw ParleyError.invalidField("to", "'to' must be after 'from'.") }
        guard to.timeIntervalSince(from) <= Double(ReportRules.maxDays) * 86_400 else {
            throw ParleyError.invalidField("to", "A report covers at most \(ReportRules.maxDays) days.")
        }
        var filter = requested
        if agent.role < .manager {
            guard filter.agentId == nil || filter.agentId == agent.agentId else {
                throw ParleyError.forbidden("Agents see their own numbers; managers see everyone's.")
            }
            filter.agentId = agent.agentId
        }
        let brandId = agent.brandId
        let (facts, teams, agents, teamNames, zone) = try await store.read { repo in
            let facts = (
                begun: try await repo.begun(brandId: brandId, from: from, to: to),
                resolutions: try await repo.resolutions(brandId: brandId, from: from, to: to),
                ratings: try await repo.ratings(brandId: brandId, from: from, to: to),
                voice: try await repo.voiceNotes(brandId: brandId, from: from, to: to),
                calls: try await repo.calls(brandId: brandId, from: from, to: to))
            let names = Dictionary(try await repo.agents(brandId: brandId).map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            let teamNames = Dictionary(try await repo.teams(brandId: brandId).map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            return (facts, try await repo.appTeams(brandId: brandId), names, teamNames, try await repo.lifecycleSettings(brandId: brandId).timeZone)
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone) ?? TimeZone(identifier: "UTC")!

        func admits(_ channel: Channel, _ app: AppID, _ agentId: AgentID?) -> Bool {
            (filter.channel == nil || filter.channel == channel) && (filter.teamId == nil || teams[app] == filter.teamId)
                && (filter.agentId == nil || filter.agentId == agentId)
        }
        func key(_ at: Date, _ channel: Channel, _ app: AppID, _ agentId: AgentID?) -> (String, String) {
            switch groupBy {
            case .day:
                let day = ReportRules.day(at, in: calendar)
                return (day, day)
            case .agent:
                guard let agentId else { return ("none", "Nobody") }
                return (agentId.rawValue, agents[agentId] ?? "A former agent")
            case .team:
                guard let team = teams[app] else { return ("none", "No team") }
                return (team.rawValue, teamNames[team] ?? "A former team")
            case .channel:
                return (channel.rawValue, Self.channelNames[channel] ?? channel.rawValue)
            }
        }
        var groups: [String: ReportRules.Accumulator] = [:]
        var total = ReportRules.Accumulator(key: "total", label: "Total")
        func add(_ at: Date, _ channel: Channel, _ app: AppID, _ agentId: AgentID?, _ apply: (inout ReportRules.Accumulator) -> Void) {
            guard admits(channel, app, agentId) else { return }
            let (id, label) = key(at, channel, app, agentId)
            apply(&groups[id, default: ReportRules.Accumulator(key: id, label: label)])
            apply(&total)
        }
        for fact in facts.begun {
            let agentId = fact.firstReplyBy ?? fact.assigneeId
            add(fact.createdAt, fact.channel, fact.appId, agentId) { $0.begun(firstResponseSeconds: fact.firstReplyAt.map { $0.timeIntervalSince(fact.createdAt) }) }
        }
        for fact in facts.resolutions {
            add(fact.at, fact.channel, fact.appId, fact.agentId) { $0.resolved(afterSeconds: fact.at.timeIntervalSince(fact.conversationCreatedAt)) }
        }
        for fact in facts.ratings { add(fact.at, fact.channel, fact.appId, fact.agentId) { $0.rated(fact.score) } }
        for fact in facts.voice {
            add(fact.at, fact.channel, fact.appId, fact.agentId) {
                $0.voice(fromCustomer: fact.fromCustomer, durationMs: fact.durationMs, transcribed: fact.transcribed)
            }
        }
        for fact in facts.calls { add(fact.at, fact.channel, fact.appId, fact.agentId) { $0.call(connectedSeconds: fact.connectedSeconds) } }

        if groupBy == .day {
            // Every day of the period, quiet ones too (a chart's axis has no holes).
            var day = from
            while day < to {
                let id = ReportRules.day(day, in: calendar)
                if groups[id] == nil { groups[id] = ReportRules.Accumulator(key: id, label: id) }
                day = calendar.date(byAdding: .day, value: 1, to: day) ?? to
            }
        }
        let rows = groups.values.map { $0.finished() }.sorted { lhs, rhs in
            groupBy == .day ? lhs.key < rhs.key : (lhs.newConversations + lhs.resolved, rhs.label) > (rhs.newConversations + rhs.resolved, lhs.label)
        }
        return ReportDTO(from: from, to: to, groupBy: groupBy, timeZone: calendar.timeZone.identifier, rows: rows, total: total.finished())
    }

    static let channelNames: [Channel: String] = [
        .web: "Website chat", .inApp: "In-app", .whatsapp: "WhatsApp", .messenger: "Messenger", .apple: "Apple Messages", .sms: "SMS",
    ]
}

/// Which brands' live reports are due, and the last one sent per brand.
final class LiveReports: Sendable {
    private struct State {
        var due: Set<BrandID> = []
        var running = false
        var last: [BrandID: LiveReportDTO] = [:]
    }
    private let state = Mutex(State())

    init() {}

    /// Marks the brand due; true when no run is going (the caller starts one).
    func mark(_ brandId: BrandID) -> Bool {
        state.withLock { state in
            state.due.insert(brandId)
            if state.running { return false }
            state.running = true
            return true
        }
    }

    func takeDue() -> Set<BrandID> {
        state.withLock { state in
            defer { state.due = [] }
            return state.due
        }
    }

    /// False (and the run ends) when nothing became due during the last round.
    func continueRunning() -> Bool {
        state.withLock { state in
            if state.due.isEmpty { state.running = false }
            return state.running
        }
    }

    func swap(_ brandId: BrandID, _ report: LiveReportDTO) -> LiveReportDTO? {
        state.withLock { state in
            defer { state.last[brandId] = report }
            return state.last[brandId]
        }
    }
}
