import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// What consumers' apps report (ParleyKit's `report`): stored per consumer for agents to see in the
/// details pane (the most recent `ActivityRules.keptPerConsumer`), and matched against the brand's
/// engagement rules, which write an automatic message into the consumer's conversation or hand the
/// app a prompt to show, at most once per consumer per rule's cool-down.
public struct ActivityService: Sendable {
    /// What consumers' apps report and the brand's engagement rules, and the consumers they are about.
    typealias Stores = any ActivityStore & IdentityStore

    let store: StoreAccess<Stores>
    let conversations: ConversationService
    let limits: RateLimits
    let clock: any WallClock
    let logger: Logger

    // MARK: Consumers' apps

    /// Stores a batch. Events the consumer sent before (the same client event id: a retried batch)
    /// are stored once and act on no rule again.
    public func report(_ consumer: ConsumerPrincipal, _ request: ReportActivityRequest) async throws -> ReportActivityResponse {
        try ActivityRules.validateBatch(request.events)
        let now = clock.now()
        var checked: [Date] = []
        for event in request.events { checked.append(try ActivityRules.validate(event, now: now)) }
        let times = checked
        try await limits.consumerActivity.check(consumer.consumerId.rawValue, "activity reports")
        let (accepted, prompts) = try await conversations.conversationLog.write { repo, appends in
            var accepted = 0
            var prompts: [EngagementPromptDTO] = []
            var rules: [EngagementRuleDTO]?
            for (event, occurredAt) in zip(request.events, times) {
                let record = ActivityEventRecord(
                    id: "act_" + Identifier.random(24), brandId: consumer.brandId, appId: consumer.appId, consumerId: consumer.consumerId,
                    clientEventId: event.clientEventId, name: event.name, properties: event.properties, occurredAt: occurredAt, receivedAt: now)
                guard try await repo.insertActivityEvent(record) else { continue }
                accepted += 1
                if rules == nil { rules = try await repo.engagementRules(brandId: consumer.brandId) }
                for rule in rules ?? [] where ActivityRules.matches(rule, name: event.name, properties: event.properties, appId: consumer.appId) {
                    if let last = try await repo.lastFiring(ruleId: rule.id, consumerId: consumer.consumerId),
                        now < last.addingTimeInterval(TimeInterval(rule.cooldownHours) * 3600)
                    {
                        continue
                    }
                    try await repo.recordFiring(ruleId: rule.id, consumerId: consumer.consumerId, at: now)
                    switch rule.action {
                    case .prompt:
                        prompts.append(EngagementPromptDTO(ruleId: rule.id, text: rule.text, clientEventId: event.clientEventId, occurredAt: occurredAt))
                    case .message:
                        _ = try await conversations.appendAutomatic(
                            rule.text, for: consumer, clientMessageId: "\(rule.id.rawValue):\(record.id)", in: repo, appends: appends)
                    }
                }
            }
            if accepted > 0 { try await repo.pruneActivity(consumerId: consumer.consumerId, keep: ActivityRules.keptPerConsumer) }
            return (accepted, prompts)
        }.value
        return ReportActivityResponse(accepted: accepted, prompts: prompts)
    }

    // MARK: Agents

    /// A consumer's most recent events, newest first.
    public func activity(_ agent: AgentPrincipal, consumerId: ConsumerID, limit: Int) async throws -> [ActivityEventDTO] {
        try await store.read { repo in
            guard try await repo.consumer(brandId: agent.brandId, id: consumerId) != nil else { throw ParleyError.notFound("Consumer") }
            return try await repo.activity(brandId: agent.brandId, consumerId: consumerId, limit: min(max(limit, 1), ActivityRules.keptPerConsumer))
                .map(\.dto)
        }
    }

    // MARK: Engagement rules (admins write, agents read)

    public func rules(_ agent: AgentPrincipal) async throws -> [EngagementRuleDTO] {
        try await store.read { repo in try await repo.engagementRules(brandId: agent.brandId) }
    }

    public func createRule(_ admin: AgentPrincipal, _ request: SaveEngagementRuleRequest) async throws -> EngagementRuleDTO {
        try admin.require(.admin)
        guard let name = request.name else { throw ParleyError.missingField("name") }
        guard let event = request.event else { throw ParleyError.missingField("event") }
        guard let action = request.action else { throw ParleyError.missingField("action") }
        guard let text = request.text else { throw ParleyError.missingField("text") }
        let now = clock.now()
        let rule = EngagementRuleDTO(
            id: .make(), name: name, appId: request.appId, event: event, property: request.property, comparison: request.comparison,
            value: request.value, action: action, text: text, cooldownHours: request.cooldownHours ?? 24, enabled: request.enabled ?? true,
            createdAt: now, updatedAt: now)
        try ActivityRules.validate(rule)
        try await store.write { repo in
            try await Self.checkApp(rule.appId, of: admin, in: repo)
            if try await repo.engagementRuleCount(brandId: admin.brandId) >= ActivityRules.maxRulesPerBrand {
                throw ParleyError(
                    .conflict, code: .engagementRuleLimit, message: "A brand has at most \(ActivityRules.maxRulesPerBrand) engagement rules; delete one first.")
            }
            try await repo.insertEngagementRule(rule, brandId: admin.brandId)
        }
        return rule
    }

    /// Changes what the request names; a condition is replaced whole (property, comparison and
    /// value together), and `property: ""` removes it.
    public func updateRule(_ admin: AgentPrincipal, id: EngagementRuleID, _ request: SaveEngagementRuleRequest) async throws -> EngagementRuleDTO {
        try admin.require(.admin)
        let now = clock.now()
        return try await store.write { repo in
            guard var rule = try await repo.engagementRule(brandId: admin.brandId, id: id) else { throw ParleyError.notFound("Engagement rule") }
            if let name = request.name { rule.name = name }
            if let appId = request.appId { rule.appId = appId }
            if let event = request.event { rule.event = event }
            if let property = request.property {
                (rule.property, rule.comparison, rule.value) = property.isEmpty ? (nil, nil, nil) : (property, request.comparison, request.value)
            }
            if let action = request.action { rule.action = action }
            if let text = request.text { rule.text = text }
            if let hours = request.cooldownHours { rule.cooldownHours = hours }
            if let enabled = request.enabled { rule.enabled = enabled }
            rule.updatedAt = now
            try ActivityRules.validate(rule)
            try await Self.checkApp(rule.appId, of: admin, in: repo)
            try await repo.updateEngagementRule(rule, brandId: admin.brandId)
            return rule
        }
    }

    public func deleteRule(_ admin: AgentPrincipal, id: EngagementRuleID) async throws {
        try admin.require(.admin)
        let deleted = try await store.write { repo in try await repo.deleteEngagementRule(brandId: admin.brandId, id: id) }
        if !deleted { throw ParleyError.notFound("Engagement rule") }
    }

    private static func checkApp(_ appId: AppID?, of admin: AgentPrincipal, in repo: any IdentityStore) async throws {
        guard let appId else { return }
        guard let app = try await repo.app(id: appId), app.brandId == admin.brandId else {
            throw ParleyError(.unprocessable, code: .appNotFound, message: "There is no such app in this brand.", field: "appId")
        }
    }
}
