import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Conversations and messages: the one set of operations behind both the HTTP routes and the
/// real-time frames. Every operation authorizes first, commits, then publishes.
public struct ConversationService: Sendable {
    let store: Store
    let bus: any EventBus
    let metrics: ParleyMetrics
    let limits: RateLimits
    let clock: any WallClock
    /// Where agents' messages on messaging channels are queued for delivery (in the message's transaction).
    let jobs: JobQueue
    let logger: Logger

    /// Where every conversation write goes: written in one transaction, published once committed.
    var conversationLog: ConversationLog { ConversationLog(store: store, bus: bus, jobs: jobs, logger: logger) }

    /// Largest page of a history or list request.
    static let maxPage = 200
    /// Most conversations one `resume` frame may name.
    static let maxResumeCursors = 200

    // MARK: Sending

    /// Stores a message and publishes it. A retry with the same client message id returns the
    /// original message (`created == false`) and publishes nothing.
    /// What a new message carries.
    enum Content: Sendable {
        case text(String)
        /// A stored, measured voice note; the record's message id is the new message's id.
        case voice(VoiceRecord)
        /// A stored, scanned image or file; the record's message id is the new message's id.
        case attachment(AttachmentRecord)
        /// An approved template (WhatsApp) with its parameters: the only agent message allowed
        /// outside a channel's reply window.
        case template(WhatsAppTemplateDTO, parameters: [String])
    }

    /// A text message from `principal` (from `address`, for the rate limits).
    public func send(
        _ principal: Principal, _ request: SendMessageRequest, from address: String? = nil, fromConnection connectionId: ConnectionID? = nil
    ) async throws -> SendMessageResponse {
        try await sendEncoded(principal, request, from: address, fromConnection: connectionId).response
    }

    func sendEncoded(
        _ principal: Principal, _ request: SendMessageRequest, from address: String? = nil, fromConnection connectionId: ConnectionID? = nil
    ) async throws -> (response: SendMessageResponse, messageJSON: String?) {
        try await limits.admitMessage(from: principal, address: address)
        return try await sendEncoded(principal, request, content: .text(request.text), fromConnection: connectionId)
    }

    func send(
        _ principal: Principal, _ request: SendMessageRequest, content: Content, fromConnection connectionId: ConnectionID? = nil
    ) async throws -> SendMessageResponse {
        try await sendEncoded(principal, request, content: content, fromConnection: connectionId).response
    }

    /// A send, with the sender's copy of the message already encoded as JSON when it was encoded
    /// for the other participants anyway (so the real-time ack does not encode it a second time).
    func sendEncoded(
        _ principal: Principal, _ request: SendMessageRequest, content: Content, fromConnection connectionId: ConnectionID? = nil
    ) async throws -> (response: SendMessageResponse, messageJSON: String?) {
        try MessageRules.validateClientMessageId(request.clientMessageId)
        if case .agent = principal, request.conversationId == nil {
            throw ParleyError.missingField("conversationId")
        }
        if let id = request.conversationId, !ConversationID.isWellFormed(id) {
            throw ParleyError.notFound("Conversation")
        }
        let sender = principal.participant
        let committed = try await writeOnce(request, by: sender) { lookFirst in
            if !lookFirst, let alone = try await self.appendAlone(request, content: content, by: principal, sender: sender, excluding: connectionId) {
                return alone
            }
            return try await self.conversationLog.write(excluding: connectionId) { repo, appends in
                try await self.append(request, content: content, by: principal, sender: sender, lookFirst: lookFirst, in: repo, appends: appends)
            }
        }
        let outcome = committed.value
        guard outcome.created else {
            metrics.idempotentReplays.increment()
            return (SendMessageResponse(message: outcome.message, conversation: outcome.conversation, created: false), nil)
        }
        (sender.kind == .agent ? metrics.messagesFromAgents : metrics.messagesFromConsumers).increment()
        var messageJSON = committed.messageJSON
        var own = outcome.message
        if let unmasked = outcome.unmaskedForSender {
            own.text = unmasked
            messageJSON = nil
        }
        return (SendMessageResponse(message: own, conversation: outcome.conversation, created: true), messageJSON)
    }

    /// The sender of the brand's automatic messages (engagement rules).
    static let automaticSender = ParticipantRef(kind: .system, id: "engagement")

    /// Appends the brand's automatic message (an engagement rule acted on the consumer's event) to the
    /// consumer's current conversation in their app, or to a new one when they have none open: it
    /// never reopens a conversation an agent resolved. `clientMessageId` makes it happen once.
    func appendAutomatic(
        _ text: String, for consumer: ConsumerPrincipal, clientMessageId: String, in repo: any Repository, appends: ConversationLog.Appends
    ) async throws -> AppendOutcome {
        let sender = Self.automaticSender
        let request = SendMessageRequest(clientMessageId: clientMessageId, text: text)
        if let original = try await Self.retried(request, content: .text(text), by: .consumer(consumer), sender: sender, in: repo) { return original }
        let now = clock.now()
        guard let app = try await repo.app(id: consumer.appId) else { throw ParleyError.notFound("App") }
        try await repo.lockConsumer(brandId: consumer.brandId, id: consumer.consumerId)
        var conversation: ConversationDTO
        var isNew = false
        if let latest = try await repo.latestConversation(consumerId: consumer.consumerId, appId: app.id, channel: app.channel, lock: true),
            latest.state != .resolved
        {
            conversation = latest
        } else {
            conversation = ConversationDTO(
                id: ConversationID.make(), brandId: consumer.brandId, appId: app.id, consumerId: consumer.consumerId,
                channel: app.channel, state: .open, assigneeId: nil, lastSeq: 0, lastMessagePreview: nil, lastMessageAt: nil,
                createdAt: now, updatedAt: now)
            isNew = true
        }
        let valid = try MessageRules.validateText(text, channel: conversation.channel, sender: .agent)
        var log = ConversationAppend(conversation, isNew: isNew, now: now)
        // A conversation the brand starts waits for an agent like one the customer starts.
        if isNew { log.enqueue() }
        let message = log.log(
            MessageDTO(
                id: MessageID.make(), conversationId: conversation.id, seq: 0, senderKind: sender.kind, senderId: sender.id,
                clientMessageId: clientMessageId, kind: .text, text: valid, deliveryState: .sent, createdAt: now),
            preview: MessageRules.preview(of: valid))
        try await appends.write(&log, in: repo)
        return AppendOutcome(message: message, conversation: log.conversation, created: true)
    }

    /// A message appended (or, `created == false`, the original of a retry), with its conversation.
    struct AppendOutcome: Sendable {
        var message: MessageDTO
        var conversation: ConversationDTO
        var created: Bool
        /// With card masking for agents only: the text as the consumer sent it, for their own copy.
        /// Never stored.
        var unmaskedForSender: String? = nil
    }

    /// Runs `write`, which appends `request`'s message, so that a retry of a message sent before
    /// answers with the original (`retried`), at one statement less for every message that is not a
    /// retry: the first attempt (`lookFirst == false`) does not look for an earlier message with the
    /// client message id. The unique index on (sender, client message id) is that check: a retry's
    /// insert fails, its transaction rolls back, and the next attempt looks first. An attempt that
    /// fails for another reason (a closed reply window, a conversation closed since, a full queue...)
    /// looks before it answers with the error, so a retry gets its original as when it looked first.
    private func writeOnce<Value>(
        _ request: SendMessageRequest, by sender: ParticipantRef, _ write: (_ lookFirst: Bool) async throws -> Value
    ) async throws -> Value {
        do {
            return try await write(false)
        } catch {
            var retry = isUniqueViolation(error)
            if !retry, error is ParleyError { retry = try await sentBefore(request, by: sender) }
            guard retry else { throw error }
            return try await withUniqueRetry { try await write(true) }
        }
    }

    /// Whether `sender` sent a message with `request`'s client message id before.
    private func sentBefore(_ request: SendMessageRequest, by sender: ParticipantRef) async throws -> Bool {
        try await store.read { repo in try await repo.message(senderId: sender.id, clientMessageId: request.clientMessageId) != nil }
    }

    /// Appends a new message to the conversation it goes to, or returns the original of a retry
    /// (looked for first when `lookFirst`; `writeOnce` says when it is not).
    private func append(
        _ request: SendMessageRequest, content: Content, by principal: Principal, sender: ParticipantRef, lookFirst: Bool,
        in repo: any Repository, appends: ConversationLog.Appends
    ) async throws -> AppendOutcome {
        if lookFirst, let original = try await Self.retried(request, content: content, by: principal, sender: sender, in: repo) {
            return original
        }
        let now = clock.now()
        if case .consumer(let consumer) = principal, case .text(let text) = content, request.conversationId == nil, request.newConversation != true,
            let rated = try await rateByText(text, request, by: consumer, sender: sender, in: repo, appends: appends, now: now)
        {
            return rated
        }
        let (conversation, isNew, known) = try await Self.conversationToWrite(request, by: principal, in: repo, now: now)
        var masking = known ?? .off
        if known == nil, sender.kind == .consumer, case .text = content {
            masking = try await repo.brandSettings(brandId: conversation.brandId).cardMasking
        }
        let (composed, message, unmasked) = try compose(
            request, content: content, by: principal, sender: sender, in: conversation, isNew: isNew, masking: masking, now: now)
        var log = consume composed  // an append is large: moved, not copied, on the message path
        try await appends.write(&log, in: repo)
        return AppendOutcome(message: message, conversation: log.conversation, created: true, unmaskedForSender: unmasked)
    }

    /// On PostgreSQL, a text into a conversation the sender names, when it makes a message alone
    /// (`ConversationAppend.isMessageAlone`): the conversation read with the brand's masking, then the
    /// message written only if no other entry came in between (`ConversationLog.writeAlone`), one
    /// statement each and no transaction: two round trips where the transaction takes four. Nil when
    /// it does not apply or another writer came in between: the caller writes in a transaction.
    /// Anything it refuses, it refuses as the transaction would (the same `compose`).
    private func appendAlone(
        _ request: SendMessageRequest, content: Content, by principal: Principal, sender: ParticipantRef, excluding connection: ConnectionID?
    ) async throws -> ConversationLog.Committed<AppendOutcome>? {
        guard store.flavor == .postgres, case .text = content, let id = request.conversationId, request.newConversation == nil,
            ConversationID.isWellFormed(id)
        else { return nil }
        let brandId = principal.brandId
        guard let found = try await store.read({ repo in try await repo.conversationAndCardMasking(brandId: brandId, id: id, lock: false) })
        else { return nil }
        let (conversation, masking) = found
        if case .consumer(let consumer) = principal, conversation.consumerId != consumer.consumerId { return nil }
        // A closed conversation, or a channel with reply windows and delivery jobs: the transaction's.
        guard conversation.state != .resolved, !conversation.channel.isMessagingApp else { return nil }
        let (log, message, unmasked) = try compose(
            request, content: content, by: principal, sender: sender, in: conversation, isNew: false, masking: masking, now: clock.now())
        // Not a message alone (`writeAlone` checks), or another writer came in between: the transaction's.
        guard let committed = try await conversationLog.writeAlone(log, excluding: connection) else { return nil }
        return ConversationLog.Committed(
            value: AppendOutcome(message: message, conversation: log.conversation, created: true, unmaskedForSender: unmasked),
            logs: committed.logs, messageJSON: committed.messageJSON)
    }

    /// The message `request` makes in `conversation`, logged in a new append: the channel's rules for
    /// agents, the text as stored (a consumer's masked as `masking` says), the state machine, and for
    /// an agent on a messaging channel the delivery job. Both ways of writing a message use it.
    private func compose(
        _ request: SendMessageRequest, content: Content, by principal: Principal, sender: ParticipantRef, in conversation: ConversationDTO,
        isNew: Bool, masking: CardMasking, now: Date
    ) throws -> (log: ConversationAppend, message: MessageDTO, unmaskedForSender: String?) {
        let rules = ChannelRules.of(conversation.channel)
        if sender.kind == .agent {
            if case .template = content {
                guard rules.templates else {
                    throw ParleyError(.unprocessable, code: .templatesNotSupported, message: "Templates are sent on WhatsApp only.")
                }
            } else {
                try rules.authorizeFreeForm(windowEndsAt: conversation.replyWindowEndsAt, now: now)
            }
        }
        let body = try Self.messageBody(content, sender: sender, in: conversation, masking: masking)
        var log = ConversationAppend(conversation, isNew: isNew, now: now)
        try log.apply(sender.kind == .consumer ? .consumerWrites : .agentWrites, by: sender)
        var message = MessageDTO(
            id: MessageID.make(), conversationId: conversation.id, seq: 0, senderKind: sender.kind, senderId: sender.id,
            clientMessageId: request.clientMessageId, kind: .text, text: body.text, deliveryState: .sent, createdAt: now)
        if case .agent(let agent) = principal, !agent.name.isEmpty { message.senderName = agent.name }
        var voice: VoiceRecord?
        var attachment: AttachmentRecord?
        if case .voice(let record) = content {
            message.id = record.messageId
            message.kind = .voice
            message.voice = record.dto
            voice = record
        }
        if case .attachment(let record) = content {
            message.id = record.messageId
            message.kind = .attachment
            message.attachment = record.dto
            attachment = record
        }
        message = log.log(message, preview: body.preview, voice: voice, attachment: attachment)
        if sender.kind == .agent, conversation.channel.isMessagingApp {
            // Out through the provider, as a durable job committed with the message: nothing the agent
            // saw acknowledged is lost, and the job's dedupe key makes sure it is queued once.
            var template: ChannelSendJob.Template?
            if case .template(let chosen, let parameters) = content {
                template = .init(name: chosen.name, language: chosen.language, parameters: parameters)
            }
            let job = try jobs.make(
                ChannelSendJob.kind, ChannelSendJob(messageId: message.id, brandId: conversation.brandId, template: template),
                brandId: conversation.brandId, lane: "send:\(conversation.id)", dedupeKey: "send:\(message.id)")
            message = log.queueDelivery(job, template: try template.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) })
        }
        return (log, message, body.unmaskedForSender)
    }

    /// On a messaging channel, a customer's answer to the rating question of their closed
    /// conversation ("4", "5 great"): logged in that conversation with the rating, and thanked. Nil
    /// when the text is not a rating or no question is waiting (it is then an ordinary message).
    private func rateByText(
        _ text: String, _ request: SendMessageRequest, by consumer: ConsumerPrincipal, sender: ParticipantRef, in repo: any Repository,
        appends: ConversationLog.Appends, now: Date
    ) async throws -> AppendOutcome? {
        guard let rating = LifecycleRules.parseRating(text), let app = try await repo.app(id: consumer.appId), app.channel.isMessagingApp
        else { return nil }
        try await repo.lockConsumer(brandId: consumer.brandId, id: consumer.consumerId)
        guard let latest = try await repo.latestConversation(consumerId: consumer.consumerId, appId: app.id, channel: app.channel, lock: true),
            latest.state == .resolved, latest.survey == .offered, now.timeIntervalSince(latest.updatedAt) < LifecycleRules.surveyAnswerWindow
        else { return nil }
        let valid = try MessageRules.validateText(text, channel: latest.channel, sender: .consumer)
        var log = ConversationAppend(latest, now: now)
        let message = log.log(
            MessageDTO(
                id: MessageID.make(), conversationId: latest.id, seq: 0, senderKind: .consumer, senderId: sender.id,
                clientMessageId: request.clientMessageId, kind: .text, text: valid, deliveryState: .sent, createdAt: now),
            preview: MessageRules.preview(of: valid))
        _ = log.logRating(rating, agent: try await LifecycleService.ratedAgent(latest, in: repo), by: sender)
        try await appends.write(&log, in: repo)
        if try await repo.automaticMessages(brandId: latest.brandId).isEnabled(.surveyThanks) {
            try await repo.enqueueJob(
                try LifecycleJobs.say(.init(conversationId: latest.id, brandId: latest.brandId, kind: .surveyThanks, key: "thanks"), at: now))
            appends.queuedJobs()
        }
        return AppendOutcome(message: message, conversation: log.conversation, created: true)
    }

    /// The stored text and list preview of a new message. Card numbers in consumers' texts are masked
    /// before anything is stored (the sender's own copy keeps them when the brand masks for agents only).
    /// `masking`: the brand's card masking (for consumers' texts).
    private static func messageBody(
        _ content: Content, sender: ParticipantRef, in conversation: ConversationDTO, masking: CardMasking
    ) throws -> (text: String, preview: String, unmaskedForSender: String?) {
        switch content {
        case .text(let raw):
            let valid = try MessageRules.validateText(raw, channel: conversation.channel, sender: sender.kind)
            guard sender.kind == .consumer else { return (valid, MessageRules.preview(of: valid), nil) }
            let masked = masking == .off ? nil : CardNumbers.mask(valid)
            guard let masked, masked.count > 0 else { return (valid, MessageRules.preview(of: valid), nil) }
            return (masked.text, MessageRules.preview(of: masked.text), masking == .agents ? valid : nil)
        case .voice(let voice) where voice.state == .blocked:
            return (VoiceRules.blockedTranscriptLine, VoiceRules.blockedPreview, nil)
        case .voice(let voice):
            return (VoiceRules.transcriptLine(durationMs: voice.durationMs), VoiceRules.preview(durationMs: voice.durationMs), nil)
        case .attachment(let file):
            return (AttachmentRules.transcriptLine(type: file.type, fileName: file.fileName), AttachmentRules.preview(type: file.type, fileName: file.fileName), nil)
        case .template(let template, let parameters):
            let text = template.filled(parameters)
            return (text, MessageRules.preview(of: text), nil)
        }
    }

    /// The original message when this client message id was used before by the sender (a retry),
    /// or nil. The same id for a different message is refused.
    private static func retried(
        _ request: SendMessageRequest, content: Content, by principal: Principal, sender: ParticipantRef, in repo: any Repository
    ) async throws -> AppendOutcome? {
        guard let existing = try await repo.message(senderId: sender.id, clientMessageId: request.clientMessageId) else { return nil }
        let sameContent: Bool
        switch content {
        case .text(let text): sameContent = existing.kind == .text && existing.text == text
        case .voice: sameContent = existing.kind == .voice
        case .attachment: sameContent = existing.kind == .attachment
        case .template(let template, let parameters): sameContent = existing.kind == .text && existing.text == template.filled(parameters)
        }
        guard sameContent, request.conversationId == nil || request.conversationId == existing.conversationId else {
            throw ParleyError(
                .conflict, code: .clientMessageIdReused,
                message: "This client message id was already used for a different message.", field: "clientMessageId")
        }
        guard let conversation = try await repo.conversation(brandId: principal.brandId, id: existing.conversationId, lock: false) else {
            throw StoreError.corrupt("message \(existing.id) without its conversation")
        }
        return AppendOutcome(message: existing, conversation: conversation, created: false)
    }

    /// The conversation a message goes to, whether it is new, and (where it was read with it) the
    /// brand's card masking. An agent names one.
    private static func conversationToWrite(
        _ request: SendMessageRequest, by principal: Principal, in repo: any Repository, now: Date
    ) async throws -> (ConversationDTO, isNew: Bool, masking: CardMasking?) {
        switch principal {
        case .consumer(let consumer):
            return try await conversationToWrite(request, by: consumer, in: repo, now: now)
        case .agent:
            if request.newConversation != nil {
                throw ParleyError.invalidField("newConversation", "Only a consumer opens a conversation.")
            }
            guard let id = request.conversationId else { throw ParleyError.missingField("conversationId") }
            return (try await authorizedConversation(principal, id: id, in: repo, lock: true), false, nil)
        }
    }

    /// The conversation a consumer's message goes to, and whether it is new: the one named; else a
    /// new one when asked for and the brand's `openConversationsPerConsumer` allows it; else their
    /// open one in the app; else a new one (only a consumer opens a conversation, with their first
    /// message). A closed conversation is never written to: the message starts a new one linked to it. The channel is the app's, never the client's choice:
    /// a web visitor cannot write as if from Apple Messages to get its longer messages.
    private static func conversationToWrite(
        _ request: SendMessageRequest, by consumer: ConsumerPrincipal, in repo: any Repository, now: Date
    ) async throws -> (ConversationDTO, isNew: Bool, masking: CardMasking?) {
        var previous: ConversationDTO?
        if let id = request.conversationId {
            if request.newConversation == true {
                throw ParleyError.invalidField("newConversation", "'newConversation' cannot be combined with 'conversationId'.")
            }
            guard ConversationID.isWellFormed(id), let (named, masking) = try await repo.conversationAndCardMasking(brandId: consumer.brandId, id: id, lock: true),
                named.consumerId == consumer.consumerId
            else { throw ParleyError.notFound("Conversation") }
            guard named.state == .resolved else { return (named, false, masking) }
            // Closed: the customer's message starts a new conversation that continues it.
            previous = named
        }
        guard let app = try await repo.app(id: consumer.appId) else { throw ParleyError.notFound("App") }
        if let requested = request.channel, requested != app.channel {
            throw ParleyError(
                .unprocessable, code: .channelNotAllowed,
                message: "This app's conversations are on the \(app.channel.rawValue) channel; a consumer cannot choose another.",
                field: "channel")
        }
        try await repo.lockConsumer(brandId: consumer.brandId, id: consumer.consumerId)
        if request.newConversation == true {
            let limit = try await repo.brandSettings(brandId: consumer.brandId).openConversationsPerConsumer
            let open = try await repo.openConversationCount(consumerId: consumer.consumerId, appId: app.id)
            try ConversationRules.validateNewConversation(openCount: open, limit: limit)
        } else if previous == nil, let latest = try await repo.latestConversation(
            consumerId: consumer.consumerId, appId: app.id, channel: app.channel, lock: true)
        {
            // Their open conversation, or (all are closed) a new one after the latest.
            guard latest.state == .resolved else { return (latest, false, nil) }
            previous = latest
        }
        var conversation = ConversationDTO(
            id: ConversationID.make(), brandId: consumer.brandId, appId: app.id, consumerId: consumer.consumerId,
            channel: app.channel, state: .open, assigneeId: nil, lastSeq: 0, lastMessagePreview: nil, lastMessageAt: nil,
            createdAt: now, updatedAt: now)
        conversation.previousConversationId = previous?.id
        return (conversation, true, nil)
    }

    // MARK: Receipts, typing

    /// Marks the other side's messages up to a sequence as delivered or read. Returns the stored event,
    /// or nil when nothing changed (a repeated receipt stores and publishes nothing).
    public func receipt(
        _ principal: Principal, conversationId: ConversationID, _ request: ReceiptRequest, fromConnection connectionId: ConnectionID? = nil
    ) async throws -> ConversationEventDTO? {
        let actor = principal.participant
        let event = try await conversationLog.write(excluding: connectionId) { repo, appends -> ConversationEventDTO? in
            let conversation = try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: true)
            try ConversationRules.validateReceipt(request, lastSeq: conversation.lastSeq)
            var log = ConversationAppend(conversation, now: clock.now())
            let changed = try await repo.raiseDeliveryState(
                conversationId: conversation.id, senderKind: ConversationRules.recipient(of: actor.kind),
                upToSeq: request.upToSeq, to: request.state, at: log.now)
            guard changed > 0 else { return nil }
            let event = log.logReceipt(upTo: request.upToSeq, request.state, by: actor)
            try await appends.write(&log, in: repo)
            return event
        }.value
        if event != nil { metrics.receipts.increment() }
        return event
    }

    /// Relays a typing indicator to the other participants. Not stored, not replayed.
    public func typing(_ principal: Principal, conversationId: ConversationID, isTyping: Bool, fromConnection connectionId: ConnectionID?) async throws {
        let conversation = try await store.read { repo in
            try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
        }
        await publish(
            .typing(conversationId: conversation.id, participant: principal.participant, isTyping: isTyping),
            to: Self.participants(of: conversation), excluding: connectionId)
    }

    /// The consumer, the assignee and the agents who have the conversation open: who typing and
    /// receipts are for. The rest of the brand's agents learn of receipts when they open it.
    static func participants(of conversation: ConversationDTO) -> RealtimeEvent.Audience {
        .participants(
            brandId: conversation.brandId, consumerId: conversation.consumerId, conversationId: conversation.id,
            assigneeId: conversation.assigneeId)
    }

    // MARK: Conversation management (agents)

    public func assign(_ agent: AgentPrincipal, conversationId: ConversationID, to assigneeId: AgentID?) async throws -> ConversationDTO {
        if let assigneeId, !AgentID.isWellFormed(assigneeId) {
            throw ParleyError(.unprocessable, code: .agentNotFound, message: "There is no such agent in this brand.", field: "agentId")
        }
        return try await change(agent, conversationId: conversationId) { log, repo in
            guard agent.canAssign(to: assigneeId, currentAssignee: log.conversation.assigneeId) else {
                throw ParleyError.forbidden("Agents can only assign conversations to themselves; managers and admins can assign anyone.")
            }
            if let assigneeId, try await repo.agent(brandId: agent.brandId, id: assigneeId) == nil {
                throw ParleyError(.unprocessable, code: .agentNotFound, message: "There is no such agent in this brand.", field: "agentId")
            }
            log.assign(to: assigneeId, by: Principal.agent(agent).participant)
        }
    }

    public func resolve(_ agent: AgentPrincipal, conversationId: ConversationID) async throws -> ConversationDTO {
        try await change(agent, conversationId: conversationId) { log, _ in try log.apply(.resolve, by: Principal.agent(agent).participant) }
    }

    public func reopen(_ agent: AgentPrincipal, conversationId: ConversationID) async throws -> ConversationDTO {
        try await change(agent, conversationId: conversationId) { log, _ in try log.apply(.reopen, by: Principal.agent(agent).participant) }
    }

    /// An agent's change to a conversation: logged, written and published (when it changed anything).
    private func change(
        _ agent: AgentPrincipal, conversationId: ConversationID,
        _ apply: @escaping @Sendable (inout ConversationAppend, any Repository) async throws -> Void
    ) async throws -> ConversationDTO {
        try await conversationLog.write { repo, appends -> ConversationDTO in
            var log = ConversationAppend(
                try await Self.authorizedConversation(.agent(agent), id: conversationId, in: repo, lock: true), now: clock.now())
            try await apply(&log, repo)
            if !log.isEmpty { try await appends.write(&log, in: repo) }
            return log.conversation
        }.value
    }

    // MARK: Reading

    public func conversation(_ principal: Principal, id: ConversationID) async throws -> ConversationDTO {
        try await store.read { repo in
            let conversation = try await Self.authorizedConversation(principal, id: id, in: repo, lock: false)
            guard case .consumer = principal else { return conversation }
            return try await Self.withUnread([conversation], repo: repo)[0]
        }
    }

    /// The customer's views of their conversations say how many of the agents' messages they have not read.
    static func withUnread(_ conversations: [ConversationDTO], repo: any ConversationStore) async throws -> [ConversationDTO] {
        let counts = try await repo.unreadCounts(conversationIds: conversations.map(\.id), senderKind: .agent)
        return conversations.map { conversation in
            var conversation = conversation
            conversation.unread = counts[conversation.id] ?? 0
            return conversation
        }
    }

    public func conversations(_ agent: AgentPrincipal, filter: ConversationFilter) async throws -> [ConversationDTO] {
        try await store.read { repo in try await repo.conversations(brandId: agent.brandId, filter: filter) }
    }

    /// The customer's conversations, newest activity first, as far back as the brand lets customers
    /// see (`historyMonths`) and in the states it shows (`historyStates`; open ones always); `before`
    /// continues a page.
    public func conversations(
        _ consumer: ConsumerPrincipal, limit: Int, before: (updatedAt: Int64, id: ConversationID)? = nil
    ) async throws -> [ConversationDTO] {
        try await store.read { repo in
            let records = try await repo.recordsSettings(brandId: consumer.brandId)
            // Conversations still open are the customer's current ones, never history: always shown.
            let states = ConversationState.allCases.filter { records.historyStates.contains($0) || $0 != .resolved }
            var filter = ConversationFilter(states: states, limit: limit, before: before)
            filter.consumerId = consumer.consumerId
            filter.activeSince = RecordsService.cutoff(now: clock.now(), months: records.historyMonths)
            return try await Self.withUnread(repo.conversations(brandId: consumer.brandId, filter: filter), repo: repo)
        }
    }

    public func messages(_ principal: Principal, conversationId: ConversationID, afterSeq: Int64, limit: Int) async throws -> [MessageDTO] {
        try await store.read { repo in
            let conversation = try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
            return try await repo.messages(conversationId: conversation.id, afterSeq: afterSeq, limit: limit)
        }
    }

    /// The `limit` messages just before `beforeSeq`, oldest first: a conversation read backwards
    /// from its end (a `beforeSeq` past the last message gives the latest ones).
    public func messages(_ principal: Principal, conversationId: ConversationID, beforeSeq: Int64, limit: Int) async throws -> [MessageDTO] {
        try await store.read { repo in
            let conversation = try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
            return try await repo.messages(conversationId: conversation.id, beforeSeq: beforeSeq, limit: limit)
        }
    }

    public func events(_ principal: Principal, conversationId: ConversationID, afterSeq: Int64, limit: Int) async throws -> [ConversationEventDTO] {
        try await store.read { repo in
            let conversation = try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
            return try await Self.withMessages(
                repo.events(conversationId: conversation.id, afterSeq: afterSeq, limit: limit, includeNotes: principal.isAgent),
                brandId: conversation.brandId, repo: repo)
        }
    }

    /// Voice events carry the message as it is now; call and co-browse events carry their record.
    static func withMessages(
        _ events: [ConversationEventDTO], brandId: BrandID, repo: any ConversationStore & CallStore & CobrowseStore
    ) async throws -> [ConversationEventDTO] {
        var result = events
        for index in result.indices {
            if result[index].kind == .voiceProcessed || result[index].kind == .delivery, let id = result[index].messageId {
                result[index].message = try await repo.message(brandId: brandId, id: id)
            }
            if result[index].kind == .call, let id = result[index].callId {
                result[index].call = try await repo.call(brandId: brandId, id: id)
            }
            if result[index].kind == .cobrowse, let id = result[index].cobrowseId {
                result[index].cobrowse = try await repo.cobrowse(brandId: brandId, id: id)?.session
            }
        }
        return result
    }

    /// Everything stored after `afterSeq` in a conversation, messages and events merged in sequence
    /// order, at most `limit` items.
    public func timeline(_ principal: Principal, conversationId: ConversationID, afterSeq: Int64, limit: Int) async throws -> [ServerFrame] {
        try await store.read { repo in
            let conversation = try await Self.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
            let messages = try await repo.messages(conversationId: conversation.id, afterSeq: afterSeq, limit: limit)
            let stored = try await repo.events(conversationId: conversation.id, afterSeq: afterSeq, limit: limit, includeNotes: principal.isAgent)
            let events = try await Self.withMessages(stored, brandId: conversation.brandId, repo: repo)
            var frames: [(Int64, ServerFrame)] = messages.map { ($0.seq, .message($0)) } + events.map { ($0.seq, .event($0)) }
            frames.sort { $0.0 < $1.0 }
            return frames.prefix(limit).map(\.1)
        }
    }

    // MARK: Authorization and publishing

    /// The conversation if the principal may see it: an agent of its brand, or its own consumer.
    /// Anything else, including another brand's conversation, is "not found".
    static func authorizedConversation(_ principal: Principal, id: ConversationID, in repo: any ConversationStore, lock: Bool) async throws -> ConversationDTO {
        guard ConversationID.isWellFormed(id),
            let conversation = try await repo.conversation(brandId: principal.brandId, id: id, lock: lock)
        else { throw ParleyError.notFound("Conversation") }
        if case .consumer(let consumer) = principal, conversation.consumerId != consumer.consumerId {
            throw ParleyError.notFound("Conversation")
        }
        return conversation
    }

    func publish(_ frame: ServerFrame, to audience: RealtimeEvent.Audience, excluding connectionId: ConnectionID? = nil) async {
        await bus.publish(frame, to: audience, excluding: connectionId, logger: logger)
    }
}

extension ConversationService {
    /// A retry of an upload (voice note or attachment) that was stored: the original message, with
    /// nothing read or stored. The same client id used for another kind of message is a conflict.
    func retriedUpload(_ principal: Principal, clientMessageId: String, kind: MessageKind) async throws -> SendMessageResponse? {
        guard let existing = try await store.read({ repo in
            try await repo.message(senderId: principal.participant.id, clientMessageId: clientMessageId)
        }) else { return nil }
        guard existing.kind == kind else {
            throw ParleyError(
                .conflict, code: .clientMessageIdReused,
                message: "This client message id was already used for a different message.", field: "clientMessageId")
        }
        let conversation = try await conversation(principal, id: existing.conversationId)
        return SendMessageResponse(message: existing, conversation: conversation, created: false)
    }
}
