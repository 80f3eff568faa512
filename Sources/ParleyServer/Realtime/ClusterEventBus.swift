import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

/// The event bus of several nodes: what a node publishes reaches its own subscribers at once (as
/// on one node) and every other node's through a `BusTransport` (PostgreSQL LISTEN/NOTIFY).
///
/// Order: a node's envelopes carry its own sequence numbers and are sent one batch at a time, in
/// publish order; each node hands them to its subscribers in that order. Loss: a gap in a node's
/// numbers, an envelope that could not be sent, or a transport that reconnected means frames were
/// missed; the node then tells its clients to reconnect and resume (`onGap`), and they get what
/// they missed from the conversation log. Nothing acknowledged is lost by this: the bus carries
/// notices of committed rows, never the rows themselves.
public final class ClusterEventBus: EventBus, Service {
    /// What travels: a frame for the connections of an audience, a domain event, a presence notice
    /// or a forwarded call frame.
    struct Content: Codable, Sendable {
        var frame: RealtimeEvent?
        var domain: DomainEvent?
        var presence: PresenceNotice?
        var call: CallEnvelope?
    }

    /// One JSON object: the sending node, its number for the envelope, and the content's members.
    ///
    /// A node writes `node` and `seq` first (`ClusterEventBus.text`), so that it can tell its own
    /// envelopes, which PostgreSQL hands back to it too, by their first bytes and skip them unread
    /// (decoding them was 4.5% of a node's CPU at 1,000 messages/s). The object is the one the
    /// previous version wrote, so either version reads the other's (keys in any order).
    struct Envelope: Decodable, Sendable {
        var node: String
        var seq: UInt64
        var content: Content

        private enum CodingKeys: String, CodingKey { case node, seq }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            node = try container.decode(String.self, forKey: .node)
            seq = try container.decode(UInt64.self, forKey: .seq)
            content = try Content(from: decoder)
        }
    }

    /// A call frame forwarded to the node holding the call (`to`; nil: every node), or its answer
    /// (`to`: the node that asked), matched by `id`.
    struct CallEnvelope: Codable, Sendable {
        var to: String?
        var id: UInt64
        var forwarded: ForwardedCall?
        var answer: CallAnswer?
    }

    /// This process, as other nodes know it.
    public let node: String
    private let local = LocalEventBus()
    private let transport: any BusTransport
    private let logger: Logger
    /// Envelopes to send, in order, with the last number given; the sender is woken through `wake`.
    private let outgoing = Mutex<(queue: [String], seq: UInt64)>(([], 0))
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    /// The last sequence number seen from each other node.
    private let seen = Mutex<[String: UInt64]>([:])
    private let gapHandlers = Mutex<[@Sendable () -> Void]>([])
    private let presenceHandlers = Mutex<[@Sendable (String, PresenceNotice) -> Void]>([])
    /// Forwarded call frames waiting for their answer, by id.
    private let waitingAnswers = Mutex<(last: UInt64, waiting: [UInt64: CheckedContinuation<CallAnswer, any Error>])>((0, [:]))
    private let callHandler = Mutex<(@Sendable (ForwardedCall) async -> CallAnswer?)?>(nil)
    /// Most envelopes sent in one batch.
    static let batch = 256
    /// How this node's envelopes begin on the wire: `{"node":"<node>",`.
    private let ownPrefix: String

    public init(transport: any BusTransport, node: String = "node_" + Identifier.random(12), logger: Logger) {
        self.transport = transport
        self.node = node
        self.logger = logger
        ownPrefix = Self.prefix(node: node)
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// `{"node":"<node>",` with the name as JSON writes it.
    static func prefix(node: String) -> String {
        let name = (try? ParleyCoders.encoder.encode(node)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        return #"{"node":"# + name + ","
    }

    /// An envelope as it travels: `prefix` (`{"node":…,`), `"seq":…`, then the members of
    /// `content`, the content as a JSON object (`{…}`, or `{}`).
    static func text(prefix: String, seq: UInt64, content: String) -> String {
        let rest = content.dropFirst()
        return prefix + #""seq":\#(seq)"# + (rest == "}" ? "}" : "," + rest)
    }

    // MARK: EventBus

    public func publish(_ event: RealtimeEvent) async {
        await local.publish(event)
        send(Content(frame: event))
    }

    public func subscribe(_ handler: @escaping @Sendable (RealtimeEvent) -> Void) {
        local.subscribe(handler)
    }

    public func publish(_ event: DomainEvent) async {
        await local.publish(event)
        // A logged message matters to push only, which decides on the node that logged it (with the
        // cluster's presence): one envelope fewer per message for every other node to read.
        if case .messageLogged = event { return }
        send(Content(domain: event))
    }

    public func subscribe(domain handler: @escaping @Sendable (DomainEvent) -> Void) {
        local.subscribe(domain: handler)
    }

    /// Tells the other nodes who is connected here (`ClusterPresence`).
    func publish(presence notice: PresenceNotice) {
        send(Content(presence: notice))
    }

    /// Registers a handler for other nodes' presence notices (with the sending node).
    func subscribe(presence handler: @escaping @Sendable (String, PresenceNotice) -> Void) {
        presenceHandlers.withLock { $0.append(handler) }
    }

    // MARK: Forwarded call frames

    /// Sends a call frame to `node` (nil: every node) and waits up to `timeout` for the answer.
    func forward(_ call: ForwardedCall, to node: String?, timeout: Duration) async throws -> CallAnswer {
        let id = waitingAnswers.withLock { state in
            state.last += 1
            return state.last
        }
        return try await withCheckedThrowingContinuation { continuation in
            waitingAnswers.withLock { $0.waiting[id] = continuation }
            send(Content(call: CallEnvelope(to: node, id: id, forwarded: call)))
            Task {
                // A network deadline, in real time: the node asked may be gone.
                try? await Task.sleep(for: timeout)
                self.waitingAnswers.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: ParleyError.callNodeUnavailable)
            }
        }
    }

    /// Answers call frames forwarded to this node; `handler` returns nil to stay silent.
    func serveCalls(_ handler: @escaping @Sendable (ForwardedCall) async -> CallAnswer?) {
        callHandler.withLock { $0 = handler }
    }

    private func received(_ envelope: CallEnvelope, from sender: String) {
        guard envelope.to == nil || envelope.to == node else { return }
        if let answer = envelope.answer {
            waitingAnswers.withLock { $0.waiting.removeValue(forKey: envelope.id) }?.resume(returning: answer)
        } else if let forwarded = envelope.forwarded, let handler = callHandler.withLock({ $0 }) {
            Task {
                guard let answer = await handler(forwarded) else { return }
                self.send(Content(call: CallEnvelope(to: sender, id: envelope.id, answer: answer)))
            }
        }
    }

    /// Called when this node may have missed envelopes (its clients should resume from the log).
    public func onGap(_ handler: @escaping @Sendable () -> Void) {
        gapHandlers.withLock { $0.append(handler) }
    }

    /// Whether envelopes from other nodes are arriving (`/ready`).
    public var isConnected: Bool { transport.isConnected }

    /// The envelopes waiting for the sender task, as they will travel (for tests).
    var queuedEnvelopes: [String] { outgoing.withLock { $0.queue } }

    private func send(_ content: Content) {
        let members = (try? ParleyCoders.encoder.encode(content)).map { String(decoding: $0, as: UTF8.self) }
        // Numbered and queued under one lock: the queue's order is the numbers' order.
        let encoded: Bool = outgoing.withLock { outgoing in
            guard let members else { return false }
            outgoing.seq += 1
            outgoing.queue.append(Self.text(prefix: ownPrefix, seq: outgoing.seq, content: members))
            return true
        }
        if encoded { wake.yield() } else { logger.error("could not encode a bus envelope") }
    }

    // MARK: Running

    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.sendLoop() }
            group.addTask {
                do {
                    try await self.transport.run(receive: { payload in self.receive(payload) }, reconnected: { self.gap("reconnected") })
                } catch {
                    self.logger.error("the event bus stopped", metadata: ["error": "\(error)"])
                }
            }
            try? await gracefulShutdown()
            wake.finish()
            group.cancelAll()
        }
    }

    private func sendLoop() async {
        for await _ in wakes {
            while true {
                // Whatever is queued goes in one batch (NOTIFY is cheap; round trips are not).
                let batch: [String] = outgoing.withLock { outgoing in
                    let taken = Array(outgoing.queue.prefix(Self.batch))
                    outgoing.queue.removeFirst(taken.count)
                    return taken
                }
                if batch.isEmpty { break }
                var delay = Duration.milliseconds(50)
                var sent = false
                for _ in 0..<5 where !Task.isCancelled {
                    do {
                        try await transport.send(batch)
                        sent = true
                        break
                    } catch {
                        logger.warning("the event bus could not send; trying again", metadata: ["error": "\(error)"])
                        try? await Task.sleep(for: delay)
                        delay *= 2
                    }
                }
                if !sent {
                    // The other nodes see a gap in this node's numbers and make their clients resume.
                    logger.error("the event bus dropped envelopes it could not send", metadata: ["count": "\(batch.count)"])
                }
            }
            if Task.isCancelled { return }
        }
    }

    func receive(_ payload: String) {
        // This node's own, delivered here when it was published: skipped by its first bytes.
        if payload.utf8.starts(with: ownPrefix.utf8) { return }
        guard let envelope = try? ParleyCoders.decoder.decode(Envelope.self, from: Data(payload.utf8)) else {
            logger.warning("an event bus envelope could not be read")
            return
        }
        guard envelope.node != node else { return }  // delivered here when it was published
        let previous = seen.withLock { seen -> UInt64? in
            defer { seen[envelope.node] = max(seen[envelope.node] ?? 0, envelope.seq) }
            return seen[envelope.node]
        }
        if let previous, envelope.seq != previous + 1 {
            if envelope.seq <= previous { return }  // already had it
            gap("node \(envelope.node) skipped from \(previous) to \(envelope.seq)")
        }
        let content = envelope.content
        if let frame = content.frame { local.deliverNow(frame) }
        if let domain = content.domain { local.deliverNow(domain) }
        if let notice = content.presence {
            for handler in presenceHandlers.withLock({ $0 }) { handler(envelope.node, notice) }
        }
        if let call = content.call { received(call, from: envelope.node) }
    }

    private func gap(_ why: String) {
        logger.notice("the event bus may have missed events; clients resume from the log", metadata: ["why": "\(why)"])
        for handler in gapHandlers.withLock({ $0 }) { handler() }
    }
}
