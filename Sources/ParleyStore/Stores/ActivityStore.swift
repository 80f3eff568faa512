import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// A consumer's event as stored.
public struct ActivityEventRecord: Sendable, Hashable {
    public var id: String
    public var brandId: BrandID
    public var appId: AppID
    public var consumerId: ConsumerID
    public var clientEventId: String
    public var name: String
    public var properties: [String: ActivityValue]
    public var occurredAt: Date
    public var receivedAt: Date

    public init(
        id: String, brandId: BrandID, appId: AppID, consumerId: ConsumerID, clientEventId: String, name: String,
        properties: [String: ActivityValue], occurredAt: Date, receivedAt: Date
    ) {
        (self.id, self.brandId, self.appId, self.consumerId, self.clientEventId) = (id, brandId, appId, consumerId, clientEventId)
        (self.name, self.properties, self.occurredAt, self.receivedAt) = (name, properties, occurredAt, receivedAt)
    }

    public var dto: ActivityEventDTO {
        ActivityEventDTO(id: id, appId: appId, name: name, properties: properties, occurredAt: occurredAt)
    }
}

public protocol ActivityStore: Sendable {
    /// Stores the event unless the consumer sent one with its client id before; returns whether it was new.
    func insertActivityEvent(_ event: ActivityEventRecord) async throws -> Bool
    /// Deletes all but the consumer's `keep` most recent events.
    func pruneActivity(consumerId: ConsumerID, keep: Int) async throws
    /// The consumer's most recent events, newest first.
    func activity(brandId: BrandID, consumerId: ConsumerID, limit: Int) async throws -> [ActivityEventRecord]

    func insertEngagementRule(_ rule: EngagementRuleDTO, brandId: BrandID) async throws
    func updateEngagementRule(_ rule: EngagementRuleDTO, brandId: BrandID) async throws
    func deleteEngagementRule(brandId: BrandID, id: EngagementRuleID) async throws -> Bool
    func engagementRule(brandId: BrandID, id: EngagementRuleID) async throws -> EngagementRuleDTO?
    func engagementRules(brandId: BrandID) async throws -> [EngagementRuleDTO]
    func engagementRuleCount(brandId: BrandID) async throws -> Int
    /// When the rule last acted for the consumer.
    func lastFiring(ruleId: EngagementRuleID, consumerId: ConsumerID) async throws -> Date?
    func recordFiring(ruleId: EngagementRuleID, consumerId: ConsumerID, at: Date) async throws
}

extension SQLRepository: ActivityStore {
    public func insertActivityEvent(_ event: ActivityEventRecord) async throws -> Bool {
        let row = try ActivityEventRow(event)
        let inserted = try await db.raw(
            """
            INSERT INTO activity_events (id, brand_id, app_id, consumer_id, client_event_id, name, properties, occurred_at, received_at)
            VALUES (\(bind: row.id), \(bind: row.brandId), \(bind: row.appId), \(bind: row.consumerId), \(bind: row.clientEventId),
                \(bind: row.name), \(bind: row.properties), \(bind: row.occurredAt), \(bind: row.receivedAt))
            ON CONFLICT (consumer_id, client_event_id) DO NOTHING RETURNING id
            """
        ).first()
        return inserted != nil
    }

    public func pruneActivity(consumerId: ConsumerID, keep: Int) async throws {
        try await db.raw(
            """
            DELETE FROM activity_events WHERE consumer_id = \(bind: consumerId) AND id NOT IN (
                SELECT id FROM activity_events WHERE consumer_id = \(bind: consumerId) ORDER BY occurred_at DESC, id DESC LIMIT \(bind: keep))
            """
        ).run()
    }

    public func activity(brandId: BrandID, consumerId: ConsumerID, limit: Int) async throws -> [ActivityEventRecord] {
        try await db.raw(
            """
            SELECT * FROM activity_events WHERE consumer_id = \(bind: consumerId) AND brand_id = \(bind: brandId)
            ORDER BY occurred_at DESC, id DESC LIMIT \(bind: limit)
            """
        ).all(ActivityEventRow.self).map { try $0.record }
    }

    public func insertEngagementRule(_ rule: EngagementRuleDTO, brandId: BrandID) async throws {
        try await db.insert(EngagementRuleRow(rule, brandId: brandId))
    }

    public func updateEngagementRule(_ rule: EngagementRuleDTO, brandId: BrandID) async throws {
        try await db.update(EngagementRuleRow(rule, brandId: brandId), where: "id = \(bind: rule.id) AND brand_id = \(bind: brandId)").run()
    }

    public func deleteEngagementRule(brandId: BrandID, id: EngagementRuleID) async throws -> Bool {
        let row = try await db.raw("DELETE FROM engagement_rules WHERE id = \(bind: id) AND brand_id = \(bind: brandId) RETURNING id").first()
        if row != nil { try await db.raw("DELETE FROM engagement_firings WHERE rule_id = \(bind: id)").run() }
        return row != nil
    }

    public func engagementRule(brandId: BrandID, id: EngagementRuleID) async throws -> EngagementRuleDTO? {
        try await db.raw("SELECT * FROM engagement_rules WHERE id = \(bind: id) AND brand_id = \(bind: brandId)")
            .first(EngagementRuleRow.self)?.dto
    }

    public func engagementRules(brandId: BrandID) async throws -> [EngagementRuleDTO] {
        try await db.raw("SELECT * FROM engagement_rules WHERE brand_id = \(bind: brandId) ORDER BY created_at, id")
            .all(EngagementRuleRow.self).map(\.dto)
    }

    public func engagementRuleCount(brandId: BrandID) async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM engagement_rules WHERE brand_id = \(bind: brandId)").first()?
            .decode(column: "n", as: Int.self) ?? 0
    }

    public func lastFiring(ruleId: EngagementRuleID, consumerId: ConsumerID) async throws -> Date? {
        guard let row = try await db.raw(
            "SELECT fired_at FROM engagement_firings WHERE rule_id = \(bind: ruleId) AND consumer_id = \(bind: consumerId)"
        ).first() else { return nil }
        return StoredTime.date(try row.decode(column: "fired_at", as: Int64.self))
    }

    public func recordFiring(ruleId: EngagementRuleID, consumerId: ConsumerID, at date: Date) async throws {
        try await db.raw(
            """
            INSERT INTO engagement_firings (rule_id, consumer_id, fired_at) VALUES (\(bind: ruleId), \(bind: consumerId), \(bind: StoredTime.millis(date)))
            ON CONFLICT (rule_id, consumer_id) DO UPDATE SET fired_at = excluded.fired_at
            """
        ).run()
    }
}

struct ActivityEventRow: TableRow {
    static let table = "activity_events"
    var id: String
    var brandId: BrandID
    var appId: AppID
    var consumerId: ConsumerID
    var clientEventId: String
    var name: String
    /// The properties as JSON.
    var properties: String
    var occurredAt: Int64
    var receivedAt: Int64

    init(_ r: ActivityEventRecord) throws {
        (id, brandId, appId, consumerId, clientEventId, name) = (r.id, r.brandId, r.appId, r.consumerId, r.clientEventId, r.name)
        properties = String(decoding: try JSONEncoder().encode(r.properties), as: UTF8.self)
        occurredAt = StoredTime.millis(r.occurredAt)
        receivedAt = StoredTime.millis(r.receivedAt)
    }

    var record: ActivityEventRecord {
        get throws {
            ActivityEventRecord(
                id: id, brandId: brandId, appId: appId, consumerId: consumerId, clientEventId: clientEventId, name: name,
                properties: try JSONDecoder().decode([String: ActivityValue].self, from: Data(properties.utf8)),
                occurredAt: StoredTime.date(occurredAt), receivedAt: StoredTime.date(receivedAt))
        }
    }
}

struct EngagementRuleRow: TableRow {
    static let table = "engagement_rules"
    var id: EngagementRuleID
    var brandId: BrandID
    var name: String
    var appId: AppID?
    var event: String
    var property: String?
    var comparison: EngagementComparison?
    var value: String?
    var action: EngagementAction
    var body: String
    var cooldownHours: Int
    var enabled: Int
    var createdAt: Int64
    var updatedAt: Int64

    init(_ r: EngagementRuleDTO, brandId: BrandID) {
        (id, self.brandId, name, appId, event, property, comparison, value) = (r.id, brandId, r.name, r.appId, r.event, r.property, r.comparison, r.value)
        (action, body, cooldownHours, enabled) = (r.action, r.text, r.cooldownHours, r.enabled ? 1 : 0)
        createdAt = StoredTime.millis(r.createdAt)
        updatedAt = StoredTime.millis(r.updatedAt)
    }

    var dto: EngagementRuleDTO {
        EngagementRuleDTO(
            id: id, name: name, appId: appId, event: event, property: property, comparison: comparison, value: value, action: action, text: body,
            cooldownHours: cooldownHours, enabled: enabled != 0, createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt))
    }
}
