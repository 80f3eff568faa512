import Foundation
import ParleyAPI
import ParleyDomain
import Logging
import ParleyStore

/// One transaction's additions to one conversation's log, and the only code that allocates sequence
/// numbers, applies the conversation state machine and writes sequenced entries.
///
/// Every writer (messages, voice notes, receipts, assignment, state changes, call records, and the
/// channels, notes and system lines to come) works the same way inside its `store.write`: find the
/// conversation (locked), make a `ConversationAppend`, log entries with the named operations below,
/// then hand it to `ConversationLog.Appends.write`, which writes it and publishes what was logged
/// once the transaction has committed. Nobody else increments `lastSeq` or builds a sequenced event.
struct ConversationAppend: Sendable {
    private(set) var conversation: ConversationDTO
    /// The conversation as the transaction read it: `write` updates only the columns that differ.
    private let original: ConversationDTO
    /// True when the conversation is opened by this append (its row is inserted, not updated).
    let isNew: Bool
    /// The time every entry of this append is stamped with.
    let now: Date
    /// The sequenced events logged, in sequence order.
    private(set) var events: [ConversationEventDTO] = []
    /// The message logged, if any (one per append), and its voice note.
    private(set) var message: MessageDTO?
    private var voice: VoiceRecord?
    private var attachment: AttachmentRecord?
    /// The logged message's delivery through a messaging channel, and the job that sends it.
    private var delivery: (ChannelDeliveryRecord, JobRecord)?
    /// The customer wrote on a channel with a reply window: `write` sets when it now ends.
    private var windowOpened = false
    /// What this append does to the routing queue (`write` applies it).
    private(set) var queueChange: QueueChange?
    /// Lifecycle: the conversation was resolved or reopened by this append, and who the customer
    /// should hear about (an agent joined, a transfer). `write` turns them into timers and automatic
    /// messages, from the brand's settings.
    private var closing = false
    private var reopening = false
    private var announcements: [Announcement] = []
    /// `write` queued jobs (automatic messages, the close timer): wake the job runner after commit.
    private(set) var queuedJobs = false

    enum Announcement: Sendable, Equatable {
        case joined(AgentID)
        case transferred(agent: AgentID?, team: TeamID?)
    }

    enum QueueChange: Sendable, Equatable {
        /// Waits for an agent: of `team`, or of the team the app routes to.
        case enqueue(team: TeamID?)
        /// Leaves the queue: taken by an agent (its wait is recorded), or resolved.
        case dequeue(assigned: Bool)
    }

    init(_ conversation: ConversationDTO, isNew: Bool = false, now: Date) {
        self.conversation = conversation
        original = conversation
        self.isNew = isNew
        self.now = now
    }

    // MARK: Entries

    /// Applies `action` to the conversation's state; a change is logged as a `stateChanged` event.
    /// Throws (and logs nothing) when the state machine refuses the action.
    mutating func apply(_ action: ConversationRules.Action, by actor: ParticipantRef) throws(ParleyError) {
        let state = try ConversationRules.transition(from: conversation.state, on: action)
        // A new conversation, or one the customer reopened, waits for an agent unless it has one.
        if action == .consumerWrites, isNew, conversation.assigneeId == nil {
            queueChange = .enqueue(team: nil)
        }
        if action == .resolve {
            queueChange = .dequeue(assigned: false)
            closing = true
        }
        if action == .reopen { reopening = true }
        guard state != conversation.state else { return }
        conversation.state = state
        conversation.updatedAt = now
        append(event(.stateChanged, by: actor) { $0.state = state })
    }

    /// Assigns the conversation (nil: unassigns) and logs it; logs nothing when nothing changes.
    mutating func assign(to assigneeId: AgentID?, by actor: ParticipantRef) {
        guard conversation.assigneeId != assigneeId else { return }
        // Taken by an agent: out of the queue. Given up (unassigned) while open: back in it.
        if let assigneeId {
            queueChange = .dequeue(assigned: true)
            announcements = [.joined(assigneeId)]
        } else if conversation.state != .resolved {
            queueChange = .enqueue(team: nil)
        }
        conversation.assigneeId = assigneeId
        conversation.updatedAt = now
        append(event(.assigned, by: actor) { $0.assigneeId = assigneeId })
    }

    /// Logs a message (and its voice note, whose message id is the message's) at the next sequence
    /// number; it becomes the conversation's last message. Returns the message as stored.
    @discardableResult
    mutating func log(_ message: MessageDTO, preview: String, voice: VoiceRecord? = nil, attachment: AttachmentRecord? = nil) -> MessageDTO {
        precondition(self.message == nil, "one message per append")
        var message = message
        message.conversationId = conversation.id
        message.seq = nextSeq()
        message.createdAt = now
        conversation.lastMessagePreview = preview
        conversation.lastMessageKind = message.kind
        conversation.lastMessageAt = now
        conversation.updatedAt = now
        if message.senderKind == .agent, conversation.firstReplyAt == nil {
            conversation.firstReplyAt = now
            conversation.firstReplyBy = AgentID(rawValue: message.senderId)
        }
        if message.senderKind == .consumer {
            conversation.lastConsumerMessageAt = now
            windowOpened = ChannelRules.of(conversation.channel).replyWindowHours != nil
        }
        self.message = message
        self.voice = voice
        self.attachment = attachment
        return message
    }

    /// Queues the logged message for delivery through the conversation's messaging channel: its
    /// delivery row (`queued`) and its send job are written with it. Returns the message with its
    /// delivery.
    mutating func queueDelivery(_ job: JobRecord, template: String?) -> MessageDTO {
        guard var message else { preconditionFailure("log the message first") }
        let record = ChannelDeliveryRecord(
            messageId: message.id, brandId: conversation.brandId, conversationId: conversation.id, channel: conversation.channel,
            state: .queued, updatedAt: now, template: template)
        message.channelDelivery = record.dto
        self.message = message
        delivery = (record, job)
        return message
    }

    /// Logs a change of a message's channel delivery (a failure, or a retry queued); the event
    /// carries the message as it now is.
    mutating func logDelivery(_ message: MessageDTO) -> ConversationEventDTO {
        append(event(.delivery, by: ParticipantRef(kind: .system, id: "channel")) {
            $0.messageId = message.id
            $0.message = message
        })
    }

    /// Logs a receipt: the other side's messages up to `upToSeq` reached `state` (already raised).
    mutating func logReceipt(upTo upToSeq: Int64, _ state: DeliveryState, by actor: ParticipantRef) -> ConversationEventDTO {
        append(event(.receipt, by: actor) {
            $0.upToSeq = upToSeq
            $0.deliveryState = state
        })
    }

    /// The customer hears of a manager's transfer (to `agent`, or to `team`'s queue) rather than of
    /// an agent joining.
    mutating func announceTransfer(agent: AgentID?, team: TeamID?) {
        announcements = [.transferred(agent: agent, team: team)]
    }

    /// Logs a customer's rating of the closed conversation, attached to `agent` (`LifecycleService.ratedAgent`).
    mutating func logRating(_ rating: RateConversationRequest, agent: AgentID?, by actor: ParticipantRef) -> ConversationEventDTO {
        let stored = RatingDTO(score: rating.score, comment: rating.comment, agentId: agent, createdAt: now)
        conversation.rating = stored
        conversation.survey = .answered
        conversation.updatedAt = now
        return append(event(.rated, by: actor) { $0.rating = stored })
    }

    /// Marks that the customer was warned of the automatic close now.
    mutating func markWarned() {
        conversation.closeWarnedAt = now
    }

    /// Logs an agent's private note.
    mutating func logNote(_ text: String, clientNoteId: String, by actor: ParticipantRef) -> ConversationEventDTO {
        append(event(.note, by: actor) {
            $0.text = text
            $0.clientNoteId = clientNoteId
        })
    }

    /// Logs the end of a voice note's processing; the event carries the message as it now is.
    mutating func logVoiceProcessed(_ message: MessageDTO) -> ConversationEventDTO {
        append(event(.voiceProcessed, by: ParticipantRef(kind: .system, id: "media")) {
            $0.messageId = message.id
            $0.message = message
        })
    }

    /// Logs a call's final record; the call takes the event's sequence number.
    mutating func logCall(_ call: inout CallDTO, by actor: ParticipantRef) -> ConversationEventDTO {
        call.seq = conversation.lastSeq + 1
        let record = call
        return append(event(.call, by: actor) {
            $0.callId = record.id
            $0.call = record
            $0.createdAt = record.endedAt ?? $0.createdAt
        })
    }

    /// Logs a co-browse session's final record (agents only: `ConversationLog.audience`).
    mutating func logCobrowse(_ session: CobrowseSessionDTO, by actor: ParticipantRef) -> ConversationEventDTO {
        append(event(.cobrowse, by: actor) {
            $0.cobrowseId = session.id
            $0.cobrowse = session
            $0.createdAt = session.endedAt ?? $0.createdAt
        })
    }

    // MARK: Writing

    /// Puts the conversation in a queue: `team`'s (a transfer to a team; wherever it waited before),
    /// or the one its app routes to.
    mutating func enqueue(team: TeamID? = nil) {
        queueChange = .enqueue(team: team)
    }

    /// Writes the conversation row and everything logged, in the caller's transaction.
    mutating func write(in repo: any Repository) async throws {
        let lifecycleJobs = try await planLifecycle(in: repo)
        if windowOpened {
            conversation.replyWindowEndsAt = ChannelRules.of(conversation.channel).replyWindowEnd(
                lastConsumerMessageAt: conversation.lastConsumerMessageAt, hours: try await Self.replyWindowHours(conversation, in: repo))
        }
        var messageWritten = false
        if isNew {
            try await repo.insertConversation(conversation)
        } else if events.isEmpty, let message {
            // A message alone (most appends): the row and the message in one statement where the
            // engine can (the order is kept: no event comes between them).
            try await repo.updateConversation(conversation, from: original, inserting: message)
            messageWritten = true
        } else {
            try await repo.updateConversation(conversation, from: original)
        }
        for event in events {
            try await repo.insertEvent(event, brandId: conversation.brandId)
        }
        if let message, !messageWritten {
            try await repo.insertMessage(message, brandId: conversation.brandId)
        }
        var voiceJob = false
        if let voice {
            try await repo.insertVoice(voice)
            // Its renditions, or its rescan while the scanner is away: durable, with the message.
            if let job = try VoiceJobs.job(for: voice, at: now) { voiceJob = try await repo.enqueueJob(job) }
        }
        if let attachment {
            try await repo.insertAttachment(attachment)
        }
        if let (record, job) = delivery {
            try await repo.saveChannelDelivery(record)
            try await repo.enqueueJob(job)
        }
        for job in lifecycleJobs {
            try await repo.enqueueJob(job)
        }
        queuedJobs = !lifecycleJobs.isEmpty || delivery != nil || voiceJob
        switch queueChange {
        case .enqueue(let team?):
            try await repo.dequeue(conversation.id, assignedAt: nil)
            try await repo.enqueue(conversation.id, brandId: conversation.brandId, teamId: team, priority: 0, at: now)
        case .enqueue(nil):
            let team = try await repo.appTeam(appId: conversation.appId)
            try await repo.enqueue(conversation.id, brandId: conversation.brandId, teamId: team, priority: 0, at: now)
        case .dequeue(let assigned):
            try await repo.dequeue(conversation.id, assignedAt: assigned ? now : nil)
        case nil:
            break
        }
    }

    /// The brand's lifecycle for what this append did: the close timer of a conversation that opens
    /// (new, or reopened by an agent), the rating question and the closing line when it closes, and
    /// the automatic messages the brand has on (welcome or outside hours, an agent joined, a transfer,
    /// the place in line on messaging channels). Reads the brand's settings only when there is
    /// something to decide. Sets the conversation's survey state; returns the jobs to enqueue.
    private mutating func planLifecycle(in repo: any Repository) async throws -> [JobRecord] {
        let greets = isNew && message?.senderKind == .consumer
        let waitsOnChannel = conversation.channel.isMessagingApp && isNew && queueChange == .enqueue(team: nil)
        guard greets || isNew || reopening || closing || !announcements.isEmpty || waitsOnChannel else { return [] }
        let settings = try await repo.lifecycleSettings(brandId: conversation.brandId)
        var jobs: [JobRecord] = []
        if (isNew || reopening), settings.autoCloseMinutes[conversation.channel.rawValue] != nil {
            jobs.append(try LifecycleJobs.timer(for: conversation, at: now))
        }
        var says: [(AutomaticMessageKind, LifecycleJobs.Say)] = []
        func say(_ kind: AutomaticMessageKind, key: String, agent: AgentID? = nil, team: TeamID? = nil) {
            says.append((kind, LifecycleJobs.Say(
                conversationId: conversation.id, brandId: conversation.brandId, kind: kind, key: key, agentId: agent, teamId: team)))
        }
        if greets {
            say(LifecycleRules.isOpen(at: now, settings) ? .welcome : .outsideHours, key: "greeting")
        }
        if waitsOnChannel { say(.queuePosition, key: "queue:\(conversation.lastSeq)") }
        for announcement in announcements {
            switch announcement {
            case .joined(let agent): say(.agentJoined, key: "joined:\(conversation.lastSeq)", agent: agent)
            case .transferred(let agent, let team): say(.transferred, key: "transferred:\(conversation.lastSeq)", agent: agent, team: team)
            }
        }
        if closing {
            // Asked once: a conversation rated before it was reopened keeps its rating.
            let asks = settings.survey && conversation.rating == nil
            if conversation.rating == nil { conversation.survey = nil }
            if conversation.channel.isMessagingApp {
                let open = (try? ChannelRules.of(conversation.channel).authorizeFreeForm(windowEndsAt: conversation.replyWindowEndsAt, now: now)) != nil
                say(.closed, key: "closed:\(conversation.lastSeq)")
                if asks {
                    // Where the channel's window has closed, the question cannot be sent.
                    conversation.survey = open ? .offered : .skipped
                    if open { say(.survey, key: "survey:\(conversation.lastSeq)") }
                }
            } else if asks {
                conversation.survey = .offered
            }
        }
        if !says.isEmpty {
            let texts = try await repo.automaticMessages(brandId: conversation.brandId)
            for (kind, payload) in says where texts.isEnabled(kind) {
                jobs.append(try LifecycleJobs.say(payload, at: now))
            }
        }
        return jobs
    }

    /// How long the customer's conversation stays open for agents' free-form replies: the channel's
    /// window, or its extended one where the app's connection has it (Messenger's Human Agent).
    static func replyWindowHours(_ conversation: ConversationDTO, in repo: any Repository) async throws -> Int? {
        let rules = ChannelRules.of(conversation.channel)
        guard let extended = rules.extendedReplyWindowHours,
            let connection = try await repo.channelConnection(appId: conversation.appId), MessengerChannel.settings(connection).humanAgent
        else { return rules.replyWindowHours }
        return extended
    }

    /// True when the append is a message and nothing else: an existing conversation's row and the
    /// message are all it writes (no event, voice note, file, delivery, job, queue change, reply
    /// window or lifecycle step). `ConversationLog.writeAlone` can write it in one statement.
    var isMessageAlone: Bool {
        message != nil && !isNew && events.isEmpty && voice == nil && attachment == nil && delivery == nil && !windowOpened
            && queueChange == nil && !closing && !reopening && announcements.isEmpty
    }

    /// Writes a message alone (`isMessageAlone`) in one statement outside a transaction, only if
    /// the conversation's last sequence number is still the one this append started from. False
    /// when another writer logged an entry since (nothing is written then).
    func writeAlone(in store: Store) async throws -> Bool {
        guard isMessageAlone, let message else { return false }
        let (conversation, original) = (conversation, original)
        return try await store.alone { repo in try await repo.appendMessage(message, to: conversation, from: original) }
    }

    /// True when something was logged (an append that logged nothing need not be written).
    var isEmpty: Bool { events.isEmpty && message == nil }

    /// True when the agents' conversation list shows what this append did: a new conversation, a
    /// change of state or assignee, a rating. (A message alone updates the list from
    /// its own frame; receipts, notes, delivery states, calls and processed voice notes do not show there.)
    var changesList: Bool {
        isNew || previewChanged || events.contains { [.stateChanged, .assigned, .rated].contains($0.kind) }
    }

    /// The conversation's list line says something new about its last message (a voice note's
    /// transcript): the agents' lists get the conversation.
    private(set) var previewChanged = false

    mutating func showPreview(_ preview: String) {
        guard conversation.lastMessagePreview != preview else { return }
        conversation.lastMessagePreview = preview
        previewChanged = true
    }

    // MARK: Sequence

    private mutating func nextSeq() -> Int64 {
        conversation.lastSeq += 1
        return conversation.lastSeq
    }

    private func event(
        _ kind: ConversationEventDTO.Kind, by actor: ParticipantRef, _ fill: (inout ConversationEventDTO) -> Void
    ) -> ConversationEventDTO {
        var event = ConversationEventDTO(
            conversationId: conversation.id, seq: 0, kind: kind, actorKind: actor.kind, actorId: actor.id, createdAt: now)
        fill(&event)
        return event
    }

    @discardableResult
    private mutating func append(_ event: ConversationEventDTO) -> ConversationEventDTO {
        var event = event
        event.seq = nextSeq()
        events.append(event)
        return event
    }
}
