import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Records: how long a brand keeps conversations and how far back customers see theirs, legal
/// holds, the retention job and its audit log, and a customer's data exported or erased on request
/// (GDPR articles 15 and 17).
public struct RecordsService: Sendable {
    let store: Store
    let blobs: any BlobStore
    let hub: RealtimeHub
    let clock: any WallClock
    /// How often each brand's retention runs.
    let interval: TimeInterval
    let logger: Logger

    static let retentionJob = "records.retention"
    /// Rows per deleting transaction: short, so that writers never wait long behind a purge.
    static let conversationBatch = 50
    static let messageBatch = 500
    static let eventBatch = 1_000
    static let maxHoldReason = 500
    static let maxHolds = 10_000

    struct RetentionPayload: Codable, Sendable {
        var brandId: BrandID
    }

    /// The brand's retention job, due after `delay` (one per brand: its dedupe key). It is the
    /// server's upkeep, not the brand's work: it has no brand of its own (admins' job list skips it).
    static func retentionJob(brandId: BrandID, at now: Date, after delay: TimeInterval = 0, maxAttempts: Int = 8) throws -> JobRecord {
        JobRecord(
            brandId: nil, kind: retentionJob, payload: String(decoding: try JSONEncoder().encode(RetentionPayload(brandId: brandId)), as: UTF8.self),
            dedupeKey: "retention:\(brandId)", maxAttempts: maxAttempts, runAt: now.addingTimeInterval(delay), createdAt: now, requestId: RequestID.current)
    }

    // MARK: Settings

    public func settings(_ agent: AgentPrincipal) async throws -> RecordsSettingsDTO {
        try agent.require(.manager)
        return try await store.read { repo in try await repo.recordsSettings(brandId: agent.brandId) }
    }

    public func updateSettings(_ admin: AgentPrincipal, _ request: UpdateRecordsRequest) async throws -> RecordsSettingsDTO {
        try admin.require(.admin)
        return try await store.write { repo in
            var settings = try await repo.recordsSettings(brandId: admin.brandId)
            if let months = request.retentionMonths {
                guard (1...120).contains(months) else { throw ParleyError.invalidField("retentionMonths", "Records are kept 1 to 120 months.") }
                settings.retentionMonths = months
            }
            if let months = request.historyMonths {
                guard (1...120).contains(months) else { throw ParleyError.invalidField("historyMonths", "Customers see 1 to 120 months of history.") }
                settings.historyMonths = months
            }
            if let states = request.historyStates {
                guard !states.isEmpty else { throw ParleyError.invalidField("historyStates", "Customers see conversations of at least one state.") }
                settings.historyStates = ConversationState.allCases.filter(states.contains)
            }
            try await repo.saveRecordsSettings(settings, brandId: admin.brandId)
            return settings
        }
    }

    // MARK: Legal holds

    public func holds(_ agent: AgentPrincipal) async throws -> [LegalHoldDTO] {
        try agent.require(.manager)
        return try await store.read { repo in try await repo.legalHolds(brandId: agent.brandId) }
    }

    public func hold(_ admin: AgentPrincipal, _ request: CreateLegalHoldRequest) async throws -> LegalHoldDTO {
        try admin.require(.admin)
        let reason = request.reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !reason.isEmpty, reason.count <= Self.maxHoldReason else {
            throw ParleyError.invalidField("reason", "A hold says why, in 1 to \(Self.maxHoldReason) characters.")
        }
        guard (request.conversationId == nil) != (request.consumerId == nil) else {
            throw ParleyError.invalidField("conversationId", "A hold is on a conversation or on a customer: one of the two.")
        }
        let hold = LegalHoldDTO(
            id: LegalHoldID.make(), conversationId: request.conversationId, consumerId: request.consumerId, reason: reason,
            createdBy: admin.agentId, createdAt: clock.now())
        try await store.write { repo in
            if let id = hold.conversationId {
                _ = try await ConversationService.authorizedConversation(.agent(admin), id: id, in: repo, lock: false)
            }
            if let id = hold.consumerId {
                guard ConsumerID.isWellFormed(id), try await repo.consumer(brandId: admin.brandId, id: id) != nil else { throw ParleyError.notFound("Consumer") }
            }
            guard try await repo.legalHolds(brandId: admin.brandId).count < Self.maxHolds else {
                throw ParleyError(.conflict, code: .holdLimit, message: "A brand keeps at most \(Self.maxHolds) legal holds.")
            }
            try await repo.insertLegalHold(hold, brandId: admin.brandId)
        }
        return hold
    }

    public func release(_ admin: AgentPrincipal, id: LegalHoldID) async throws {
        try admin.require(.admin)
        guard try await store.write({ repo in try await repo.deleteLegalHold(brandId: admin.brandId, id: id) }) else {
            throw ParleyError.notFound("Legal hold")
        }
    }

    public func purges(_ admin: AgentPrincipal, limit: Int) async throws -> [PurgeDTO] {
        try admin.require(.admin)
        return try await store.read { repo in try await repo.purges(brandId: admin.brandId, limit: limit) }
    }

    // MARK: Retention

    /// The cut-off for a brand keeping `months`: the same day and time that many months ago (UTC).
    static func cutoff(now: Date, months: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(byAdding: .month, value: -months, to: now) ?? now
    }

    /// The retention job: purges what is older than the brand's period, then comes back after the interval.
    func runRetention(_ payload: RetentionPayload) async throws {
        try await purgeExpired(brandId: payload.brandId)
        throw JobFailure.notYet(after: .seconds(interval))
    }

    /// Deletes the brand's conversations last active before the cut-off, then older messages and
    /// events of the rest, none held, in short transactions; removes their media files after each
    /// commit; logs what went. Returns the log entry (nil when nothing was old enough).
    @discardableResult
    public func purgeExpired(brandId: BrandID) async throws -> PurgeDTO? {
        let started = clock.now()
        let settings = try await store.read { repo in try await repo.recordsSettings(brandId: brandId) }
        let cutoff = Self.cutoff(now: started, months: settings.retentionMonths)
        var deleted = DeletedRecords()
        var files = 0
        while true {
            let batch = try await store.write { repo -> DeletedRecords in
                let ids = try await repo.expiredConversations(brandId: brandId, before: cutoff, limit: Self.conversationBatch)
                return try await repo.deleteConversations(ids, brandId: brandId)
            }
            files += await removeMedia(batch.mediaMessages, brandId: brandId)
            deleted += batch
            if batch.conversations < Self.conversationBatch { break }
        }
        while true {
            let batch = try await store.write { repo -> DeletedRecords in
                let ids = try await repo.expiredMessages(brandId: brandId, before: cutoff, limit: Self.messageBatch)
                return try await repo.deleteMessages(ids, brandId: brandId)
            }
            files += await removeMedia(batch.mediaMessages, brandId: brandId)
            deleted += batch
            if batch.messages < Self.messageBatch { break }
        }
        while true {
            let count = try await store.write { repo in try await repo.deleteExpiredEvents(brandId: brandId, before: cutoff, limit: Self.eventBatch) }
            deleted.events += count
            if count < Self.eventBatch { break }
        }
        guard deleted.conversations + deleted.messages + deleted.events > 0 else { return nil }
        let purge = PurgeDTO(
            id: PurgeID.make(), kind: .retention, cutoff: cutoff, subject: nil, actor: "retention", conversations: deleted.conversations,
            messages: deleted.messages, events: deleted.events, voiceNotes: deleted.voiceNotes, attachments: deleted.attachments, files: files,
            startedAt: started, finishedAt: clock.now())
        try await store.write { repo in try await repo.insertPurge(purge, brandId: brandId) }
        logger.notice(
            "retention purged old records",
            metadata: ["brand": "\(brandId)", "conversations": "\(purge.conversations)", "messages": "\(purge.messages)", "files": "\(files)"])
        return purge
    }

    /// Media files go after their rows' commit; a crash in between leaves files the media janitor
    /// removes (no row refers to them).
    private func removeMedia(_ messages: [MessageID], brandId: BrandID) async -> Int {
        var count = 0
        for id in messages {
            count += (try? await blobs.removeMessageMedia(brandId: brandId.rawValue, messageId: id.rawValue)) ?? 0
        }
        return count
    }

    // MARK: A customer's data (GDPR)

    /// Everything Parley keeps about one customer (article 15).
    public func export(_ admin: AgentPrincipal, consumerId: ConsumerID) async throws -> ConsumerExportDTO {
        try admin.require(.admin)
        guard ConsumerID.isWellFormed(consumerId) else { throw ParleyError.notFound("Consumer") }
        return try await store.read { repo in
            guard let consumer = try await repo.consumer(brandId: admin.brandId, id: consumerId) else { throw ParleyError.notFound("Consumer") }
            let conversations = try await repo.conversations(consumerId: consumerId, brandId: admin.brandId, limit: 100_000)
            var messages: [MessageDTO] = []
            for conversation in conversations {
                var after: Int64 = 0
                while true {
                    let page = try await repo.messages(conversationId: conversation.id, afterSeq: after, limit: 500)
                    messages += page
                    guard page.count == 500, let last = page.last?.seq else { break }
                    after = last
                }
            }
            let activity = try await repo.activity(brandId: admin.brandId, consumerId: consumerId, limit: 1_000).map(\.dto)
            let devices = try await repo.pushRegistrations(consumerId: consumerId).count
            return ConsumerExportDTO(
                consumer: consumer, conversations: conversations, messages: messages, activity: activity, pushRegistrations: devices,
                exportedAt: clock.now())
        }
    }

    /// Erases a customer (article 17): their conversations with everything in them, their media,
    /// sessions, devices and activity, and the customer. Refused while a legal hold covers them or
    /// one of their conversations. The audit log keeps the counts and their id, nothing else.
    public func erase(_ admin: AgentPrincipal, consumerId: ConsumerID) async throws -> PurgeDTO {
        try admin.require(.admin)
        guard ConsumerID.isWellFormed(consumerId) else { throw ParleyError.notFound("Consumer") }
        let started = clock.now()
        try await store.read { repo in
            guard try await repo.consumer(brandId: admin.brandId, id: consumerId) != nil else { throw ParleyError.notFound("Consumer") }
            let conversations = Set(try await repo.conversations(consumerId: consumerId, brandId: admin.brandId, limit: 100_000).map(\.id))
            let held = try await repo.legalHolds(brandId: admin.brandId).contains { hold in
                hold.consumerId == consumerId || hold.conversationId.map(conversations.contains) == true
            }
            if held {
                throw ParleyError(.conflict, code: .legalHold, message: "A legal hold covers this customer or one of their conversations; lift it first.")
            }
        }
        var deleted = DeletedRecords()
        var files = 0
        while true {
            let batch = try await store.write { repo -> DeletedRecords in
                let ids = try await repo.conversations(consumerId: consumerId, brandId: admin.brandId, limit: Self.conversationBatch).map(\.id)
                return try await repo.deleteConversations(ids, brandId: admin.brandId)
            }
            files += await removeMedia(batch.mediaMessages, brandId: admin.brandId)
            deleted += batch
            if batch.conversations < Self.conversationBatch { break }
        }
        let purge = PurgeDTO(
            id: PurgeID.make(), kind: .erasure, cutoff: nil, subject: consumerId.rawValue, actor: admin.agentId.rawValue,
            conversations: deleted.conversations, messages: deleted.messages, events: deleted.events, voiceNotes: deleted.voiceNotes,
            attachments: deleted.attachments, files: files, startedAt: started, finishedAt: clock.now())
        try await store.write { repo in
            try await repo.deleteConsumer(brandId: admin.brandId, id: consumerId)
            try await repo.insertPurge(purge, brandId: admin.brandId)
        }
        hub.disconnect(consumerId: consumerId, code: RealtimeCloseCode.unauthorized, reason: "the customer was erased")
        return purge
    }
}
