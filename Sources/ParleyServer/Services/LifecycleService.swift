import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// The lifecycle's durable jobs (ARCHITECTURE.md, "Durable jobs"): one close timer per open
/// conversation, and one job per automatic message. Both are written in the transaction that sets
/// them off (`ConversationAppend.write`), so none is lost and none is queued twice.
enum LifecycleJobs {
    /// Looks at an open conversation when its warning or its automatic close comes due.
    struct Timer: Codable, Sendable {
        static let kind = "conversation.lifecycle"
        var conversationId: ConversationID
        var brandId: BrandID
    }

    /// Writes one automatic message into a conversation, once (`key` names the occasion).
    struct Say: Codable, Sendable {
        static let kind = "conversation.say"
        var conversationId: ConversationID
        var brandId: BrandID
        var kind: AutomaticMessageKind
        var key: String
        var agentId: AgentID?
        var teamId: TeamID?
    }

    static let maxAttempts = 8

    /// The conversation's close timer; one per conversation (a second is not queued while one is kept).
    static func timer(for conversation: ConversationDTO, at now: Date) throws -> JobRecord {
        try record(Timer.kind, Timer(conversationId: conversation.id, brandId: conversation.brandId), brandId: conversation.brandId,
            lane: nil, dedupeKey: "lifecycle:\(conversation.id)", at: now)
    }

    /// An automatic message's job; one conversation's run in order.
    static func say(_ say: Say, at now: Date) throws -> JobRecord {
        try record(Say.kind, say, brandId: say.brandId, lane: "say:\(say.conversationId)", dedupeKey: "say:\(say.conversationId):\(say.key)", at: now)
    }

    private static func record<Payload: Encodable>(
        _ kind: String, _ payload: Payload, brandId: BrandID, lane: String?, dedupeKey: String, at now: Date
    ) throws -> JobRecord {
        JobRecord(
            brandId: brandId, kind: kind, lane: lane, payload: String(decoding: try JSONEncoder().encode(payload), as: UTF8.self),
            dedupeKey: dedupeKey, maxAttempts: maxAttempts, runAt: now, createdAt: now, requestId: RequestID.current)
    }
}

/// Conversations' lives after the first message: the brand's lifecycle settings and automatic
/// messages, closing conversations the customer has left (with a warning first), and ratings.
public struct LifecycleService: Sendable {
    let store: Store
    let conversations: ConversationService
    let bus: any EventBus
    let jobs: JobQueue
    let clock: any WallClock
    let logger: Logger

    /// Who writes automatic messages and closes conversations on their own.
    static let sender = ParticipantRef(kind: .system, id: "lifecycle")
    /// Open conversations swept per transaction when the brand turns automatic closing on.
    static let sweepBatch = 500

    // MARK: Settings

    public func settings(_ agent: AgentPrincipal) async throws -> LifecycleSettingsDTO {
        try await store.read { repo in try await repo.lifecycleSettings(brandId: agent.brandId) }
    }

    /// Changes the brand's settings. Conversations already open follow a new automatic close at once:
    /// each gets its timer (if it had none), and timers already set look again now.
    public func updateSettings(_ admin: AgentPrincipal, _ request: UpdateLifecycleRequest) async throws -> LifecycleSettingsDTO {
        try admin.require(.admin)
        let (before, after) = try await store.write { repo in
            let current = try await repo.lifecycleSettings(brandId: admin.brandId)
            let updated = try LifecycleRules.apply(request, to: current)
            try await repo.saveLifecycleSettings(updated, brandId: admin.brandId)
            return (current, updated)
        }
        if before.autoCloseMinutes != after.autoCloseMinutes || before.warningMinutes != after.warningMinutes {
            try await sweepTimers(brandId: admin.brandId, channels: Set(after.autoCloseMinutes.keys))
        }
        return after
    }

    private func sweepTimers(brandId: BrandID, channels: Set<String>) async throws {
        let now = clock.now()
        try await store.write { repo in try await repo.runJobsNow(brandId: brandId, kind: LifecycleJobs.Timer.kind, at: now) }
        var after: ConversationID?
        while true {
            let last = try await store.write { [after] repo -> ConversationID? in
                let ids = try await repo.unresolvedConversationIds(brandId: brandId, afterId: after, limit: Self.sweepBatch)
                for id in ids {
                    guard let conversation = try await repo.conversation(brandId: brandId, id: id, lock: false),
                        channels.contains(conversation.channel.rawValue)
                    else { continue }
                    try await repo.enqueueJob(try LifecycleJobs.timer(for: conversation, at: now))
                }
                return ids.count == Self.sweepBatch ? ids.last : nil
            }
            guard let last else { break }
            after = last
        }
        jobs.wake()
    }

    // MARK: Automatic messages

    /// Every kind in every language the brand wrote, plus its default language (with Parley's
    /// English where it wrote nothing).
    public func automaticMessages(_ agent: AgentPrincipal) async throws -> [AutomaticMessageDTO] {
        let (settings, stored) = try await store.read { repo in
            (try await repo.lifecycleSettings(brandId: agent.brandId), try await repo.automaticMessages(brandId: agent.brandId))
        }
        let languages = Set(stored.texts.values.flatMap(\.keys)).union([settings.defaultLanguage]).sorted()
        return AutomaticMessageKind.allCases.flatMap { kind in
            languages.map { language in
                let written = stored.texts[kind]?[language]
                return AutomaticMessageDTO(
                    kind: kind, language: language,
                    text: written ?? LifecycleRules.pickText(stored.texts[kind] ?? [:], language: language, defaultLanguage: "en", kind: kind),
                    enabled: stored.isEnabled(kind), isDefault: written == nil)
            }
        }
    }

    public func saveAutomaticMessage(
        _ admin: AgentPrincipal, kind rawKind: String, language rawLanguage: String, _ request: SaveAutomaticMessageRequest
    ) async throws -> AutomaticMessageDTO {
        try admin.require(.admin)
        let (kind, language) = try Self.parse(kind: rawKind, language: rawLanguage)
        guard request.text != nil || request.enabled != nil else { throw ParleyError.missingField("text") }
        let text = try request.text.map { text throws(ParleyError) in try LifecycleRules.validateAutomaticText(text) }
        try await store.write { repo in
            if let text { try await repo.saveAutomaticText(brandId: admin.brandId, kind: kind, language: language, text: text) }
            if let enabled = request.enabled { try await repo.switchAutomaticMessage(brandId: admin.brandId, kind: kind, enabled: enabled) }
        }
        return try await automaticMessages(admin).first { $0.kind == kind && $0.language == language }
            ?? AutomaticMessageDTO(kind: kind, language: language, text: text ?? "", enabled: request.enabled ?? true, isDefault: false)
    }

    /// Forgets the brand's text in that language (Parley's, or another language's, is used again).
    public func deleteAutomaticMessage(_ admin: AgentPrincipal, kind rawKind: String, language rawLanguage: String) async throws {
        try admin.require(.admin)
        let (kind, language) = try Self.parse(kind: rawKind, language: rawLanguage)
        try await store.write { repo in try await repo.saveAutomaticText(brandId: admin.brandId, kind: kind, language: language, text: nil) }
    }

    private static func parse(kind: String, language: String) throws -> (AutomaticMessageKind, String) {
        guard let kind = AutomaticMessageKind(rawValue: kind) else {
            throw ParleyError(
                .notFound, code: .automaticMessageNotFound,
                message: "There is no automatic message '\(kind)' (\(AutomaticMessageKind.allCases.map(\.rawValue).joined(separator: ", "))).")
        }
        return (kind, try LifecycleRules.validateLanguage(language, field: "language"))
    }

    // MARK: Ratings

    /// The customer rates their closed conversation (once: the same rating again is answered as it
    /// was, a different one is refused).
    public func rate(_ consumer: ConsumerPrincipal, conversationId: ConversationID, _ request: RateConversationRequest) async throws -> ConversationDTO {
        let rating = try LifecycleRules.validateRating(request)
        let actor = Principal.consumer(consumer).participant
        let rated = try await conversations.conversationLog.write { repo, appends -> ConversationDTO? in
            let conversation = try await ConversationService.authorizedConversation(.consumer(consumer), id: conversationId, in: repo, lock: true)
            if let existing = conversation.rating {
                guard existing.score == rating.score, existing.comment == rating.comment else {
                    throw ParleyError(.conflict, code: .alreadyRated, message: "This conversation has been rated already.")
                }
                return nil
            }
            guard conversation.state == .resolved, conversation.survey == .offered else {
                throw ParleyError(
                    .conflict, code: .ratingNotRequested, message: "Only a closed conversation whose rating was asked for can be rated.")
            }
            var log = ConversationAppend(conversation, now: clock.now())
            _ = log.logRating(rating, agent: try await Self.ratedAgent(conversation, in: repo), by: actor)
            try await appends.write(&log, in: repo)
            return log.conversation
        }.value
        guard let rated else { return try await conversations.conversation(.consumer(consumer), id: conversationId) }
        return rated
    }

    /// The agent a rating is for: the conversation's agent, or (nobody had it) the agent who wrote last.
    static func ratedAgent(_ conversation: ConversationDTO, in repo: any Repository) async throws -> AgentID? {
        if let assignee = conversation.assigneeId { return assignee }
        let recent = try await repo.messages(conversationId: conversation.id, afterSeq: max(0, conversation.lastSeq - 200), limit: 200)
        return recent.last { $0.senderKind == .agent }.map { AgentID(rawValue: $0.senderId) }
    }

    // MARK: Jobs

    var handlers: [any JobHandler] {
        [
            PayloadJobHandler<LifecycleJobs.Timer>(kind: LifecycleJobs.Timer.kind) { timer in try await self.tick(timer) },
            PayloadJobHandler<LifecycleJobs.Say>(kind: LifecycleJobs.Say.kind) { say in try await self.say(say) },
        ]
    }

    private enum Tick: Sendable {
        case done
        case wait(until: Date)
        case warned(closeAt: Date)
        case closed
    }

    /// An open conversation's timer: warns the customer when the warning is due, closes the
    /// conversation when its time has come, and otherwise waits (a message from the customer moved
    /// the time on). Ends once the conversation is resolved or the channel no longer closes.
    func tick(_ timer: LifecycleJobs.Timer) async throws {
        let now = clock.now()
        let outcome = try await conversations.conversationLog.write { repo, appends -> Tick in
            guard let conversation = try await repo.conversation(brandId: timer.brandId, id: timer.conversationId, lock: true),
                conversation.state != .resolved
            else { return .done }
            let settings = try await repo.lifecycleSettings(brandId: timer.brandId)
            guard let minutes = settings.autoCloseMinutes[conversation.channel.rawValue] else { return .done }
            let step = LifecycleRules.closeStep(
                lastActivity: conversation.lastConsumerMessageAt ?? conversation.createdAt, warnedAt: conversation.closeWarnedAt, now: now,
                closeAfterMinutes: minutes, warningMinutes: settings.warningMinutes)
            switch step {
            case .wait(let until):
                return .wait(until: until)
            case .warn(let closeAt):
                var log = ConversationAppend(conversation, now: now)
                log.markWarned()
                let left = max(1, Int((closeAt.timeIntervalSince(now) / 60).rounded()))
                let key = "warning:\(Int64(now.timeIntervalSince1970 * 1000))"
                let said = try await self.logAutomatic(
                    .closeWarning, key: key, values: ["minutes": "\(left)"], in: &log, repo: repo, appends: appends)
                if said == nil { try await appends.write(&log, in: repo) }
                return .warned(closeAt: closeAt)
            case .close:
                var log = ConversationAppend(conversation, now: now)
                try log.apply(.resolve, by: Self.sender)
                try await appends.write(&log, in: repo)
                return .closed
            }
        }.value
        switch outcome {
        case .done:
            return
        case .wait(let until):
            throw JobFailure.notYet(after: .seconds(max(1, until.timeIntervalSince(now))))
        case .warned(let closeAt):
            throw JobFailure.notYet(after: .seconds(max(1, closeAt.timeIntervalSince(now))))
        case .closed:
            return
        }
    }

    /// Writes one automatic message, unless it was written already, the brand turned it off, or it
    /// no longer applies (the agent who joined was replaced, the conversation left the queue).
    func say(_ say: LifecycleJobs.Say) async throws {
        let now = clock.now()
        try await conversations.conversationLog.write { repo, appends in
            guard let conversation = try await repo.conversation(brandId: say.brandId, id: say.conversationId, lock: true) else { return }
            var values: [String: String] = [:]
            switch say.kind {
            case .agentJoined, .transferred:
                if let agentId = say.agentId {
                    guard conversation.assigneeId == agentId, let agent = try await repo.agent(brandId: say.brandId, id: agentId) else { return }
                    values["agent"] = agent.agent.name
                } else if let teamId = say.teamId {
                    guard let team = try await repo.teams(brandId: say.brandId).first(where: { $0.id == teamId }) else { return }
                    values["agent"] = team.name
                    values["team"] = team.name
                }
            case .queuePosition:
                guard let entry = try await repo.queueEntry(conversation.id) else { return }
                let position = try await repo.queuePosition(of: entry, brandId: say.brandId)
                let waits = try await repo.recentWaits(brandId: say.brandId, teamId: entry.teamId, limit: RoutingRules.waitSample)
                values["position"] = "\(position)"
                values["wait"] = LifecycleRules.describeWait(seconds: RoutingRules.expectedWait(position: position, recentWaits: waits))
            default:
                break
            }
            var log = ConversationAppend(conversation, now: now)
            _ = try await self.logAutomatic(say.kind, key: say.key, values: values, in: &log, repo: repo, appends: appends)
        }
    }

    /// Logs the brand's automatic message of `kind` (in the customer's language) into `log` and
    /// writes it, with its delivery on a messaging channel. Nil (and nothing written) when the brand
    /// has it off, when it was written before (`key`), or when the channel's reply window has closed.
    func logAutomatic(
        _ kind: AutomaticMessageKind, key: String, values: [String: String], in log: inout ConversationAppend, repo: any Repository,
        appends: ConversationLog.Appends
    ) async throws -> MessageDTO? {
        let conversation = log.conversation
        let clientMessageId = "auto:\(conversation.id):\(key)"
        guard try await repo.message(senderId: Self.sender.id, clientMessageId: clientMessageId) == nil else { return nil }
        let stored = try await repo.automaticMessages(brandId: conversation.brandId)
        guard stored.isEnabled(kind) else { return nil }
        let rules = ChannelRules.of(conversation.channel)
        guard (try? rules.authorizeFreeForm(windowEndsAt: conversation.replyWindowEndsAt, now: log.now)) != nil else { return nil }
        let settings = try await repo.lifecycleSettings(brandId: conversation.brandId)
        let language = try await repo.consumer(brandId: conversation.brandId, id: conversation.consumerId)?.language
        let written = LifecycleRules.pickText(stored.texts[kind] ?? [:], language: language, defaultLanguage: settings.defaultLanguage, kind: kind)
        let text = try MessageRules.validateText(LifecycleRules.fill(written, values), channel: conversation.channel, sender: .agent)
        var message = log.log(
            MessageDTO(
                id: MessageID.make(), conversationId: conversation.id, seq: 0, senderKind: .system, senderId: Self.sender.id,
                clientMessageId: clientMessageId, kind: .text, text: text, deliveryState: .sent, createdAt: log.now),
            preview: MessageRules.preview(of: text))
        if conversation.channel.isMessagingApp {
            let job = try jobs.make(
                ChannelSendJob.kind, ChannelSendJob(messageId: message.id, brandId: conversation.brandId, template: nil),
                brandId: conversation.brandId, lane: "send:\(conversation.id)", dedupeKey: "send:\(message.id)")
            message = log.queueDelivery(job, template: nil)
        }
        try await appends.write(&log, in: repo)
        return message
    }
}
