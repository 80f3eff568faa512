import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// A brand's automatic messages as stored: the texts it wrote, per kind and language, and the kinds
/// it switched on or off (a kind it never touched has Parley's default).
public struct AutomaticMessageTexts: Sendable, Hashable {
    public var texts: [AutomaticMessageKind: [String: String]]
    public var switches: [AutomaticMessageKind: Bool]

    public func isEnabled(_ kind: AutomaticMessageKind) -> Bool { switches[kind] ?? LifecycleRules.defaultMessage(kind).enabled }
}

public protocol LifecycleStore: Sendable {
    func lifecycleSettings(brandId: BrandID) async throws -> LifecycleSettingsDTO
    func saveLifecycleSettings(_ settings: LifecycleSettingsDTO, brandId: BrandID) async throws
    func automaticMessages(brandId: BrandID) async throws -> AutomaticMessageTexts
    /// Writes (or with nil, removes) the brand's text of one kind in one language.
    func saveAutomaticText(brandId: BrandID, kind: AutomaticMessageKind, language: String, text: String?) async throws
    func switchAutomaticMessage(brandId: BrandID, kind: AutomaticMessageKind, enabled: Bool) async throws
    /// The brand's conversations that are not resolved, after `afterId` in id order (a page).
    func unresolvedConversationIds(brandId: BrandID, afterId: ConversationID?, limit: Int) async throws -> [ConversationID]
    /// Brings the queued jobs of one kind of the brand forward to `at` (their handlers look again).
    func runJobsNow(brandId: BrandID, kind: String, at: Date) async throws
}

extension SQLRepository: LifecycleStore {
    public func lifecycleSettings(brandId: BrandID) async throws -> LifecycleSettingsDTO {
        guard let row = try await db.raw("SELECT settings FROM lifecycle_settings WHERE brand_id = \(bind: brandId)").first() else {
            return .default
        }
        return try JSONDecoder().decode(LifecycleSettingsDTO.self, from: Data(try row.decode(column: "settings", as: String.self).utf8))
    }

    public func saveLifecycleSettings(_ settings: LifecycleSettingsDTO, brandId: BrandID) async throws {
        let json = String(decoding: try JSONEncoder.sorted.encode(settings), as: UTF8.self)
        try await db.raw(
            """
            INSERT INTO lifecycle_settings (brand_id, settings) VALUES (\(bind: brandId), \(bind: json))
            ON CONFLICT (brand_id) DO UPDATE SET settings = excluded.settings
            """
        ).run()
    }

    public func automaticMessages(brandId: BrandID) async throws -> AutomaticMessageTexts {
        var result = AutomaticMessageTexts(texts: [:], switches: [:])
        for row in try await db.raw("SELECT kind, language, text FROM automatic_messages WHERE brand_id = \(bind: brandId)").all() {
            guard let kind = AutomaticMessageKind(rawValue: try row.decode(column: "kind", as: String.self)) else { continue }
            result.texts[kind, default: [:]][try row.decode(column: "language", as: String.self)] = try row.decode(column: "text", as: String.self)
        }
        for row in try await db.raw("SELECT kind, enabled FROM automatic_message_switches WHERE brand_id = \(bind: brandId)").all() {
            guard let kind = AutomaticMessageKind(rawValue: try row.decode(column: "kind", as: String.self)) else { continue }
            result.switches[kind] = try row.decode(column: "enabled", as: Int.self) != 0
        }
        return result
    }

    public func saveAutomaticText(brandId: BrandID, kind: AutomaticMessageKind, language: String, text: String?) async throws {
        guard let text else {
            try await db.raw(
                "DELETE FROM automatic_messages WHERE brand_id = \(bind: brandId) AND kind = \(bind: kind.rawValue) AND language = \(bind: language)"
            ).run()
            return
        }
        try await db.raw(
            """
            INSERT INTO automatic_messages (brand_id, kind, language, text) VALUES (\(bind: brandId), \(bind: kind.rawValue), \(bind: language), \(bind: text))
            ON CONFLICT (brand_id, kind, language) DO UPDATE SET text = excluded.text
            """
        ).run()
    }

    public func switchAutomaticMessage(brandId: BrandID, kind: AutomaticMessageKind, enabled: Bool) async throws {
        try await db.raw(
            """
            INSERT INTO automatic_message_switches (brand_id, kind, enabled) VALUES (\(bind: brandId), \(bind: kind.rawValue), \(bind: enabled ? 1 : 0))
            ON CONFLICT (brand_id, kind) DO UPDATE SET enabled = excluded.enabled
            """
        ).run()
    }

    public func unresolvedConversationIds(brandId: BrandID, afterId: ConversationID?, limit: Int) async throws -> [ConversationID] {
        try await db.raw(
            """
            SELECT id FROM conversations WHERE brand_id = \(bind: brandId) AND state <> \(bind: ConversationState.resolved.rawValue)
                AND id > \(bind: afterId?.rawValue ?? "") ORDER BY id LIMIT \(bind: limit)
            """
        ).all().map { ConversationID(rawValue: try $0.decode(column: "id", as: String.self)) }
    }

    public func runJobsNow(brandId: BrandID, kind: String, at: Date) async throws {
        try await db.raw(
            """
            UPDATE jobs SET run_at = \(bind: StoredTime.millis(at))
            WHERE brand_id = \(bind: brandId) AND kind = \(bind: kind) AND state = \(bind: JobState.queued.rawValue) AND run_at > \(bind: StoredTime.millis(at))
            """
        ).run()
    }
}
