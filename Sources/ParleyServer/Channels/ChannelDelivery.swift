import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// The durable job that sends one agent message out through its conversation's messaging channel.
/// Enqueued in the message's own transaction (`ConversationService.append`), one per message
/// (`dedupeKey: send:<messageId>`), in the conversation's lane so that messages leave in order.
struct ChannelSendJob: Codable, Sendable {
    static let kind = "channel.send"

    struct Template: Codable, Sendable {
        var name: String
        var language: String
        var parameters: [String]
    }

    var messageId: MessageID
    var brandId: BrandID
    var template: Template?
}

/// One provider's outbound side (ARCHITECTURE.md, "Channel connectors").
protocol OutboundConnector: Sendable {
    var channel: Channel { get }
    /// Sends the message; returns the provider's id for it. Throws `JobFailure` (retry, not yet,
    /// permanent) or `DeliveryRefused` (the provider's own refusal, shown to the agent).
    func send(_ message: MessageDTO, in conversation: ConversationDTO, template: ChannelSendJob.Template?) async throws -> String
}

/// A provider refused a message for good: its code and a sentence for the agent.
struct DeliveryRefused: Error, Sendable {
    var code: String
    var message: String
    /// Whether sending again may work (a retry button for the agent).
    var retryable: Bool
}

/// Runs `channel.send` jobs: finds the message and its conversation, skips what was already
/// accepted (a job re-run after a crash), hands the message to the channel's connector, and records
/// the outcome on the message's delivery, telling the agents when it failed.
struct ChannelSender: JobHandler {
    let kind = ChannelSendJob.kind
    let store: Store
    let conversations: ConversationService
    let connectors: [Channel: any OutboundConnector]
    let logger: Logger

    func run(_ job: JobRecord) async throws {
        let payload = try JSONDecoder().decode(ChannelSendJob.self, from: Data(job.payload.utf8))
        let found = try await store.read { repo -> (MessageDTO, ConversationDTO, ChannelDeliveryRecord)? in
            guard let message = try await repo.message(brandId: payload.brandId, id: payload.messageId),
                let conversation = try await repo.conversation(brandId: payload.brandId, id: message.conversationId, lock: false),
                let delivery = try await repo.channelDelivery(messageId: message.id)
            else { return nil }
            return (message, conversation, delivery)
        }
        guard let (message, conversation, delivery) = found else { return }  // deleted since: nothing to send
        guard delivery.providerMessageId == nil, delivery.state != .failed else { return }  // already done
        guard let connector = connectors[conversation.channel] else {
            try await conversations.updateDelivery(
                messageId: message.id, brandId: payload.brandId, state: .failed, errorCode: ErrorCode.channelNotSupported.rawValue,
                errorMessage: "Parley cannot send on the \(conversation.channel.rawValue) channel yet.", retryable: false)
            return
        }
        do {
            let providerId = try await connector.send(message, in: conversation, template: payload.template)
            try await conversations.updateDelivery(messageId: message.id, brandId: payload.brandId, state: .sent, providerMessageId: providerId)
        } catch let refused as DeliveryRefused {
            logger.notice(
                "a provider refused a message", metadata: ["message": "\(message.id)", "code": "\(refused.code)", "channel": "\(conversation.channel)"])
            try await conversations.updateDelivery(
                messageId: message.id, brandId: payload.brandId, state: .failed, errorCode: refused.code, errorMessage: refused.message,
                retryable: refused.retryable)
        }
    }

    func gaveUp(_ job: JobRecord, reason: String) async {
        guard let payload = try? JSONDecoder().decode(ChannelSendJob.self, from: Data(job.payload.utf8)) else { return }
        try? await conversations.updateDelivery(
            messageId: payload.messageId, brandId: payload.brandId, state: .failed, errorCode: ErrorCode.notSent.rawValue,
            errorMessage: "The message could not be sent after \(job.attempts) attempt\(job.attempts == 1 ? "" : "s") (\(reason)).", retryable: true)
    }
}

extension ConversationService {
    /// Records a message's channel delivery. Each change (sent, failed, queued again) is logged as a
    /// `delivery` event, so every agent's screen follows it and it stays in the conversation's history.
    func updateDelivery(
        messageId: MessageID, brandId: BrandID, state: ChannelDeliveryState, providerMessageId: String? = nil, errorCode: String? = nil,
        errorMessage: String? = nil, retryable: Bool = false
    ) async throws {
        try await conversationLog.write { repo, appends in
            guard var delivery = try await repo.channelDelivery(messageId: messageId), delivery.brandId == brandId else { return }
            let previous = delivery.state
            delivery.state = state
            // Queued again (a retry): the provider's id of the failed attempt no longer applies.
            delivery.providerMessageId = state == .queued ? nil : providerMessageId ?? delivery.providerMessageId
            (delivery.errorCode, delivery.errorMessage, delivery.retryable) = state == .failed ? (errorCode, errorMessage, retryable) : (nil, nil, false)
            delivery.updatedAt = clock.now()
            try await repo.saveChannelDelivery(delivery)
            guard state != previous,
                let conversation = try await repo.conversation(brandId: brandId, id: delivery.conversationId, lock: true),
                let message = try await repo.message(brandId: brandId, id: messageId)
            else { return }
            var log = ConversationAppend(conversation, now: clock.now())
            _ = log.logDelivery(message)
            try await appends.write(&log, in: repo)
        }
    }

    /// `POST /v1/messages/{id}/retry`: an agent sends a failed message again (a new job; the
    /// provider never got the failed one, so nothing is sent twice).
    public func retryDelivery(_ agent: AgentPrincipal, messageId: MessageID) async throws -> MessageDTO {
        let job = try await store.read { repo -> JobRecord in
            guard let message = try await repo.message(brandId: agent.brandId, id: messageId),
                let delivery = try await repo.channelDelivery(messageId: messageId), delivery.brandId == agent.brandId
            else { throw ParleyError.notFound("Message") }
            guard delivery.state == .failed, delivery.retryable else {
                throw ParleyError(.conflict, code: .notRetryable, message: "Only a failed message that can be sent again is retried.")
            }
            let conversation = try await Self.authorizedConversation(.agent(agent), id: message.conversationId, in: repo, lock: false)
            // A template goes again as the template (allowed outside the window); anything else only
            // while the window is open.
            let template = try delivery.template.map { try JSONDecoder().decode(ChannelSendJob.Template.self, from: Data($0.utf8)) }
            if template == nil {
                try ChannelRules.of(conversation.channel).authorizeFreeForm(windowEndsAt: conversation.replyWindowEndsAt, now: clock.now())
            }
            return try jobs.make(
                ChannelSendJob.kind, ChannelSendJob(messageId: messageId, brandId: agent.brandId, template: template), brandId: agent.brandId,
                lane: "send:\(conversation.id)", dedupeKey: "send:\(messageId):\(StoredTime.millis(clock.now()))")
        }
        try await updateDelivery(messageId: messageId, brandId: agent.brandId, state: .queued)
        _ = try await store.write { repo in try await repo.enqueueJob(job) }
        jobs.wake()
        guard let message = try await store.read({ repo in try await repo.message(brandId: agent.brandId, id: messageId) }) else {
            throw ParleyError.notFound("Message")
        }
        return message
    }

    /// A provider's status callback: `delivered`/`read` become the customer's receipts (the same
    /// ticks as on the web); `failed` marks the message failed with the provider's error. An unknown
    /// provider id is ignored (a status for a message sent outside Parley).
    func providerStatus(
        channel: Channel, providerMessageId: String, status: ProviderStatus
    ) async throws {
        guard let delivery = try await store.read({ repo in try await repo.channelDelivery(channel: channel, providerMessageId: providerMessageId) }) else {
            return
        }
        switch status {
        case .sent:
            return
        case .delivered, .read:
            guard let (conversation, seq) = try await store.read({ repo -> (ConversationDTO, Int64)? in
                guard let conversation = try await repo.conversation(brandId: delivery.brandId, id: delivery.conversationId, lock: false),
                    let message = try await repo.message(brandId: delivery.brandId, id: delivery.messageId)
                else { return nil }
                return (conversation, message.seq)
            }) else { return }
            let consumer = ConsumerPrincipal(consumerId: conversation.consumerId, brandId: conversation.brandId, appId: conversation.appId)
            _ = try await receipt(.consumer(consumer), conversationId: conversation.id, ReceiptRequest(upToSeq: seq, state: status == .read ? .read : .delivered))
        case .failed(let code, let message, let retryable):
            try await updateDelivery(
                messageId: delivery.messageId, brandId: delivery.brandId, state: .failed, errorCode: code, errorMessage: message, retryable: retryable)
        }
    }
}

extension ConversationService {
    /// A read receipt that names a time, not messages (Messenger's `watermark`): every message the
    /// brand sent this customer on the app (agents' and automatic) up to then was read.
    func providerRead(channel: Channel, externalId: String, appId: AppID, brandId: BrandID, upTo watermark: Date) async throws {
        let found = try await store.read { repo -> (ConversationDTO, Int64)? in
            guard let consumer = try await repo.consumer(brandId: brandId, externalId: externalId),
                let conversation = try await repo.latestConversation(consumerId: consumer.id, appId: appId, channel: channel, lock: false)
            else { return nil }
            let recent = try await repo.messages(conversationId: conversation.id, afterSeq: max(0, conversation.lastSeq - 200), limit: 200)
            guard let seq = recent.filter({ $0.senderKind != .consumer && $0.createdAt <= watermark }).map(\.seq).max() else { return nil }
            return (conversation, seq)
        }
        guard let (conversation, seq) = found else { return }
        let consumer = ConsumerPrincipal(consumerId: conversation.consumerId, brandId: conversation.brandId, appId: conversation.appId)
        _ = try await receipt(.consumer(consumer), conversationId: conversation.id, ReceiptRequest(upToSeq: seq, state: .read))
    }
}

/// A provider's status for a message it accepted.
enum ProviderStatus: Sendable, Equatable {
    case sent
    case delivered
    case read
    case failed(code: String, message: String, retryable: Bool)
}
