import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization

/// Transcripts: one conversation, or every conversation a brand began in a date range, as TXT, XML
/// (docs/transcript.xsd) or JSON. A range is written while it is read, a page of conversations at a
/// time, one conversation in memory: an export of a year is as light as one of a day.
public struct TranscriptService: Sendable {
    /// The conversations, messages and calls a transcript is made of, and who took part.
    typealias Stores = any ConversationStore & CallStore & CobrowseStore & IdentityStore

    let store: StoreAccess<Stores>
    let clock: any WallClock
    /// Where links to voice notes and files point (`PARLEY_PUBLIC_URL`; relative without it).
    let publicURL: String?
    /// Range exports running per brand, at most `maxExports` at once.
    let running: RunningExports
    let maxExports: Int
    let logger: Logger

    /// Conversations read per page, entries per page within one.
    static let conversationPage = 100
    static let entryPage = 500
    /// The longest range one export covers.
    static let maxRangeDays = 400

    /// What an export will write, checked before the first byte goes out (errors are still answers).
    public struct Export: Sendable {
        public let format: Transcript.Format
        public let fileName: String
        let write: @Sendable (_ sink: @concurrent (String) async throws -> Void) async throws -> Void
        /// Streams the export to `sink`, in pieces of about 32 KB, each written before the next is read.
        /// `@concurrent`, as Hummingbird's response body writer is: the sink writes to it.
        @concurrent public func stream(to sink: @concurrent (String) async throws -> Void) async throws {
            try await write(sink)
        }
    }

    public static func format(_ raw: String?) throws -> Transcript.Format {
        guard let format = Transcript.Format(rawValue: raw ?? "txt") else {
            throw ParleyError.invalidField("format", "'format' is txt, xml or json.")
        }
        return format
    }

    /// One conversation, for any agent of its brand.
    public func conversation(_ agent: AgentPrincipal, id: ConversationID, format: Transcript.Format) async throws -> Export {
        let conversation = try await store.read { repo in try await ConversationService.authorizedConversation(.agent(agent), id: id, in: repo, lock: false) }
        let now = clock.now()
        return Export(format: format, fileName: "transcript-\(conversation.id).\(format.rawValue)") { sink in
            let names = try await self.names(brandId: agent.brandId)
            var out = Transcript.opening(format, generatedAt: now)
            out += try Transcript.write(try await self.record(conversation, names: names), as: format, first: true)
            out += Transcript.closing(format)
            try await sink(out)
        }
    }

    /// Every conversation the brand began from `from` (inclusive) to `to` (exclusive), oldest first;
    /// managers and admins only, a few exports at once per brand.
    public func range(_ agent: AgentPrincipal, from: Date, to: Date, format: Transcript.Format) async throws -> Export {
        try agent.require(.manager)
        guard from < to else { throw ParleyError.invalidField("to", "'to' must be after 'from'.") }
        guard to.timeIntervalSince(from) <= Double(Self.maxRangeDays) * 86_400 else {
            throw ParleyError.invalidField("to", "An export covers at most \(Self.maxRangeDays) days; export a longer period in parts.")
        }
        let now = clock.now()
        let name = "transcripts-\(Self.day(from))-to-\(Self.day(to.addingTimeInterval(-1))).\(format.rawValue)"
        guard let slot = running.start(agent.brandId, limit: maxExports) else {
            throw ParleyError(
                .rateLimited, code: .exportBusy, message: "\(maxExports) exports of this brand are running; try again when one is done.",
                retryAfter: 10)
        }
        return Export(format: format, fileName: name) { sink in
            // Held while the export runs; given back when the response is done with (or dropped).
            _ = slot
            let names = try await self.names(brandId: agent.brandId)
            var buffer = Transcript.opening(format, generatedAt: now)
            var after: (Date, ConversationID)?
            var first = true
            while true {
                let page = try await store.read { [after] repo in
                    try await repo.conversationsBegun(brandId: agent.brandId, from: from, to: to, after: after, limit: Self.conversationPage)
                }
                for batch in Self.batches(page) {
                    for record in try await self.records(batch, names: names) {
                        buffer += try Transcript.write(record, as: format, first: first)
                        first = false
                        if buffer.utf8.count >= 32 * 1024 {
                            try await sink(buffer)
                            buffer = ""
                        }
                    }
                }
                guard page.count == Self.conversationPage, let last = page.last else { break }
                after = (last.createdAt, last.id)
            }
            buffer += Transcript.closing(format)
            try await sink(buffer)
        }
    }

    static func day(_ date: Date) -> String { String(date.formatted(.iso8601).prefix(10)) }

    /// Agents' and apps' names of the brand, read once per export.
    struct Names: Sendable {
        var agents: [String: String]
        var apps: [AppID: String]
    }

    private func names(brandId: BrandID) async throws -> Names {
        try await store.read { repo in
            Names(
                agents: Dictionary(try await repo.agents(brandId: brandId).map { ($0.id.rawValue, $0.name) }, uniquingKeysWith: { first, _ in first }),
                apps: Dictionary(try await repo.apps(brandId: brandId).map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first }))
        }
    }

    /// Conversations read together: as many as hold at most `batchEntries` entries between them; a
    /// longer conversation alone (it is read a page at a time).
    static let batchEntries: Int64 = 5_000

    static func batches(_ conversations: [ConversationDTO]) -> [[ConversationDTO]] {
        var batches: [[ConversationDTO]] = []
        var current: [ConversationDTO] = []
        var size: Int64 = 0
        for conversation in conversations {
            if !current.isEmpty, size + conversation.lastSeq > batchEntries {
                batches.append(current)
                (current, size) = ([], 0)
            }
            current.append(conversation)
            size += conversation.lastSeq
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    /// A batch's records: a conversation too long for a batch on its own, a page at a time; the rest
    /// in three queries for the whole batch (customers, messages, events).
    func records(_ batch: [ConversationDTO], names: Names) async throws -> [Transcript.Conversation] {
        if batch.count == 1, let only = batch.first, only.lastSeq > Self.batchEntries { return [try await record(only, names: names)] }
        let kinds: [ConversationEventDTO.Kind] = [.stateChanged, .assigned, .call, .rated]
        let ids = batch.map(\.id)
        let (customers, messages, events) = try await store.read { repo in
            let customers = Dictionary(
                try await repo.consumers(brandId: batch[0].brandId, ids: Array(Set(batch.map(\.consumerId)))).map { ($0.id, $0) },
                uniquingKeysWith: { first, _ in first })
            let events = try await ConversationService.withMessages(
                try await repo.events(conversationIds: ids, kinds: kinds), brandId: batch[0].brandId, repo: repo)
            return (customers, Dictionary(grouping: try await repo.messages(conversationIds: ids), by: \.conversationId), Dictionary(grouping: events, by: \.conversationId))
        }
        return batch.map { conversation in
            let customer = customers[conversation.consumerId]
            let entries = (messages[conversation.id] ?? []).map { entry(for: $0, customer: customer?.displayName ?? "The customer") }
                + (events[conversation.id] ?? []).compactMap { entry(for: $0, names: names) }
            return Self.transcript(conversation, customer: customer, entries: entries, names: names)
        }
    }

    /// The conversation as a record: its messages, calls and what happened to it, in order, read a
    /// page of entries at a time. Private notes, receipts and delivery changes are not part of it.
    func record(_ conversation: ConversationDTO, names: Names) async throws -> Transcript.Conversation {
        let customer = try await store.read { repo in try await repo.consumer(brandId: conversation.brandId, id: conversation.consumerId) }
        var entries: [Transcript.Entry] = []
        var cursor: Int64 = 0
        while true {
            let (messages, events, eventsFull) = try await store.read { [cursor] repo in
                let messages = try await repo.messages(conversationId: conversation.id, afterSeq: cursor, limit: Self.entryPage)
                let stored = try await repo.events(conversationId: conversation.id, afterSeq: cursor, limit: Self.entryPage, includeNotes: false)
                let kept = try await ConversationService.withMessages(
                    stored.filter { [.stateChanged, .assigned, .call, .rated].contains($0.kind) }, brandId: conversation.brandId, repo: repo)
                return (messages, kept, stored.count == Self.entryPage ? stored.last?.seq : nil)
            }
            // A page ends where the shorter of two full lists ends (past it, the other list has not
            // been read yet).
            var upper = Int64.max
            if messages.count == Self.entryPage, let last = messages.last?.seq { upper = min(upper, last) }
            if let last = eventsFull { upper = min(upper, last) }
            entries += messages.filter { $0.seq <= upper }.map { entry(for: $0, customer: customer?.displayName ?? "The customer") }
            entries += events.filter { $0.seq <= upper }.compactMap { entry(for: $0, names: names) }
            guard upper != .max else { break }
            cursor = upper
        }
        return Self.transcript(conversation, customer: customer, entries: entries, names: names)
    }

    /// The record of a conversation from its entries (in any order: they are put in sequence order).
    static func transcript(_ conversation: ConversationDTO, customer: ConsumerDTO?, entries: [Transcript.Entry], names: Names) -> Transcript.Conversation {
        Transcript.Conversation(
            id: conversation.id, channel: conversation.channel, app: names.apps[conversation.appId] ?? conversation.appId.rawValue,
            state: conversation.state, customer: customer?.displayName ?? "A customer", customerId: conversation.consumerId,
            anonymous: customer?.anonymous ?? true, createdAt: conversation.createdAt, previousConversationId: conversation.previousConversationId,
            rating: conversation.rating, entries: entries.sorted { $0.seq < $1.seq })
    }

    private func entry(for message: MessageDTO, customer: String) -> Transcript.Entry {
        let base = publicURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? ""
        let name = switch message.senderKind {
        case .consumer: customer
        case .agent: message.senderName ?? "An agent"
        case .system: "Automatic message"
        }
        switch message.kind {
        case .voice:
            var entry = Transcript.Entry(
                seq: message.seq, at: message.createdAt, kind: .voice, sender: message.senderKind, name: name, text: message.text,
                href: "\(base)/v1/media/\(message.id)/original", durationSeconds: message.voice.map { ($0.durationMs + 500) / 1000 })
            if let transcript = message.voice?.transcript, transcript.state == .ready, !transcript.text.isEmpty {
                entry.spoken = transcript.text
                entry.spokenLowConfidence = transcript.lowConfidence ? true : nil
            }
            return entry
        case .attachment:
            return Transcript.Entry(
                seq: message.seq, at: message.createdAt, kind: .attachment, sender: message.senderKind, name: name, text: message.text,
                href: "\(base)/v1/files/\(message.id)/original")
        case .text:
            return Transcript.Entry(seq: message.seq, at: message.createdAt, kind: .text, sender: message.senderKind, name: name, text: message.text)
        }
    }

    private func entry(for event: ConversationEventDTO, names: Names) -> Transcript.Entry? {
        let actor = event.actorKind == .agent ? names.agents[event.actorId] ?? "An agent"
            : event.actorKind == .consumer ? "The customer" : event.actorId == "router" ? "Routing" : "Parley"
        let text: String
        switch event.kind {
        case .call:
            guard let call = event.call else { return nil }
            return Transcript.Entry(
                seq: event.seq, at: call.endedAt ?? event.createdAt, kind: .call, sender: nil, name: nil, text: Transcript.callLine(call),
                durationSeconds: call.durationSeconds)
        case .stateChanged where event.state == .resolved:
            text = event.actorId == LifecycleService.sender.id ? "Closed automatically: the customer had gone quiet" : "\(actor) resolved the conversation"
        case .stateChanged:
            text = "\(actor) reopened the conversation"
        case .assigned:
            text = event.assigneeId.map { "\(actor) assigned it to \(names.agents[$0.rawValue] ?? "an agent")" } ?? "\(actor) unassigned it"
        case .rated:
            guard let rating = event.rating else { return nil }
            text = "The customer rated it \(rating.score) out of 5" + (rating.comment.map { ": \"\($0)\"" } ?? "")
        default:
            return nil
        }
        return Transcript.Entry(seq: event.seq, at: event.createdAt, kind: .event, sender: nil, name: nil, text: text)
    }
}

/// How many range exports each brand has running.
final class RunningExports: Sendable {
    private let counts = Mutex<[BrandID: Int]>([:])

    init() {}

    /// A slot, or nil when the brand has `limit` running; the slot is given back when it is freed.
    func start(_ brandId: BrandID, limit: Int) -> Slot? {
        let taken = counts.withLock { counts in
            guard counts[brandId, default: 0] < limit else { return false }
            counts[brandId, default: 0] += 1
            return true
        }
        return taken ? Slot(brandId: brandId, exports: self) : nil
    }

    final class Slot: Sendable {
        let brandId: BrandID
        let exports: RunningExports
        init(brandId: BrandID, exports: RunningExports) { (self.brandId, self.exports) = (brandId, exports) }
        deinit { exports.end(brandId) }
    }

    func end(_ brandId: BrandID) {
        counts.withLock { counts in
            counts[brandId, default: 1] -= 1
            if counts[brandId] == 0 { counts[brandId] = nil }
        }
    }
}
