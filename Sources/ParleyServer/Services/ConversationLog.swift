import Foundation
import Logging
import ParleyAPI
import ParleyStore
import Synchronization

/// The conversation log: the one entry point through which sequenced entries are written and
/// published. A writer opens a transaction with `write`, logs entries in `ConversationAppend`s and
/// hands each to `Appends.write`; once the transaction has committed, every append is published in
/// sequence order, each entry to the audience its kind has (`plan`), the services that follow the
/// brand get typed `DomainEvent`s, and the job runner is woken when jobs were queued. A transaction
/// that throws publishes nothing; a retry that logged nothing publishes nothing.
struct ConversationLog: Sendable {
    let store: Store
    let bus: any EventBus
    let jobs: JobQueue
    let logger: Logger

    /// One transaction's appends, in the order they were written.
    final class Appends: Sendable {
        private let written = Mutex<(logs: [ConversationAppend], queuedJobs: Bool)>(([], false))

        /// Writes `log` (the conversation row and every entry) in the transaction of `repo`.
        func write(_ log: inout ConversationAppend, in repo: any Repository) async throws {
            try await log.write(in: repo)
            // One copy for the list (the caller keeps `log`), moved into it: an append holds two
            // conversations and a message, and each copy retains every string and array of them.
            var done: ConversationAppend? = log
            written.withLock { $0.logs.append(done.take()!) }
        }

        /// Jobs were queued in this transaction outside an append: wake the runner after commit.
        func queuedJobs() { written.withLock { $0.queuedJobs = true } }

        fileprivate var result: (logs: [ConversationAppend], queuedJobs: Bool) { written.withLock { $0 } }
    }

    /// What a `write` returns: the body's value, the appends committed, and the JSON of the first
    /// message logged as it was published (the sender's ack reuses it rather than encoding it again).
    struct Committed<Value: Sendable>: Sendable {
        var value: Value
        var logs: [ConversationAppend]
        var messageJSON: String?
    }

    /// Runs `body` in one write transaction, then publishes what it wrote. `connection` is the
    /// sending connection: it gets its message and receipts as an answer, not as a frame.
    @discardableResult
    func write<Value: Sendable>(
        excluding connection: ConnectionID? = nil, _ body: @escaping @Sendable (any Repository, Appends) async throws -> Value
    ) async throws -> Committed<Value> {
        let (value, logs, queuedJobs) = try await store.write { repo in
            let appends = Appends()
            let value = try await body(repo, appends)
            let result = appends.result
            return (value, result.logs, result.queuedJobs)
        }
        var messageJSON: String?
        for index in logs.indices {  // by index: `for log in logs` copies each append
            let json = await publish(logs[index], excluding: connection)
            messageJSON = messageJSON ?? json
        }
        if queuedJobs || logs.contains(where: \.queuedJobs) { jobs.wake() }
        return Committed(value: value, logs: logs, messageJSON: messageJSON)
    }

    /// Writes `log`, a message alone (`ConversationAppend.isMessageAlone`), in one statement with no
    /// transaction around it, then publishes it as `write` does. Nil, with nothing written, when
    /// another writer logged an entry in the conversation after `log` was made from it: the caller
    /// makes its append again in a transaction (`write`).
    func writeAlone(_ log: ConversationAppend, excluding connection: ConnectionID? = nil) async throws -> Committed<Void>? {
        guard try await log.writeAlone(in: store) else { return nil }
        let json = await publish(log, excluding: connection)
        return Committed(value: (), logs: [log], messageJSON: json)
    }

    // MARK: Audiences

    /// One thing to publish for an append.
    enum Publication: Sendable, Equatable {
        /// A sequenced event; `exceptSender`: not to the connection that caused it (a receipt).
        case event(ConversationEventDTO, RealtimeEvent.Audience, exceptSender: Bool)
        /// The logged message, to the conversation, never back to the connection that sent it.
        case message(MessageDTO, RealtimeEvent.Audience)
        /// The conversation as it now is, for the agents' lists.
        case conversation(ConversationDTO, RealtimeEvent.Audience)
    }

    /// Who sees an entry of `kind`: private notes, channel delivery states and co-browse records are for the brand's
    /// agents; receipts for those taking part (the consumer, the assignee, agents who have it open);
    /// everything else for the conversation's consumer and the brand's agents.
    static func audience(of kind: ConversationEventDTO.Kind, in conversation: ConversationDTO) -> RealtimeEvent.Audience {
        switch kind {
        case .note, .delivery, .cobrowse:
            .agents(brandId: conversation.brandId)
        case .receipt:
            ConversationService.participants(of: conversation)
        case .stateChanged, .assigned, .voiceProcessed, .call, .rated:
            .conversation(brandId: conversation.brandId, consumerId: conversation.consumerId)
        }
    }

    /// What publishing `log` sends, in order: its entries by sequence number, then the conversation
    /// when the agents' list shows a change (`ConversationAppend.changesList`).
    static func plan(_ log: ConversationAppend) -> [Publication] {
        let conversation = log.conversation
        if log.events.isEmpty {
            // Most appends are one message and nothing else: nothing to put in order (sorting a
            // one-entry list of copies was 1.5% of a message's instructions, bench/instructions.sh).
            var plan: [Publication] = []
            plan.reserveCapacity(2)
            if let message = log.message {
                plan.append(.message(message, .conversation(brandId: conversation.brandId, consumerId: conversation.consumerId)))
            }
            if log.changesList { plan.append(.conversation(conversation, .agents(brandId: conversation.brandId))) }
            return plan
        }
        var entries: [(Int64, Publication)] = log.events.map { event in
            (event.seq, .event(event, audience(of: event.kind, in: conversation), exceptSender: event.kind == .receipt))
        }
        if let message = log.message {
            entries.append((message.seq, .message(message, .conversation(brandId: conversation.brandId, consumerId: conversation.consumerId))))
        }
        var plan = entries.sorted { $0.0 < $1.0 }.map(\.1)
        if log.changesList { plan.append(.conversation(conversation, .agents(brandId: conversation.brandId))) }
        return plan
    }

    /// Publishes one committed append; returns its message's JSON.
    @discardableResult
    func publish(_ log: ConversationAppend, excluding connection: ConnectionID? = nil) async -> String? {
        var messageJSON: String?
        for publication in Self.plan(log) {
            switch publication {
            case .event(let event, let audience, let exceptSender):
                await bus.publish(.event(event), to: audience, excluding: exceptSender ? connection : nil, logger: logger)
            case .message(let message, let audience):
                do {
                    let json = try MessageJSON.text(message)
                    await bus.publish(RealtimeEvent(audience: audience, frame: ParleyCoders.messageFrame(json: json), excludingConnection: connection))
                    messageJSON = json
                } catch {
                    logger.error("could not encode a real-time frame", metadata: ["error": "\(error)"])
                }
            case .conversation(let conversation, let audience):
                await bus.publish(.conversation(conversation), to: audience, logger: logger)
            }
        }
        let conversation = log.conversation
        if let message = log.message {
            await bus.publish(.messageLogged(message, brandId: conversation.brandId, consumerId: conversation.consumerId))
        }
        if log.changesList { await bus.publish(.conversationChanged(conversation)) }
        return messageJSON
    }
}
