import Logging
import ParleyAPI
import ParleyStore
import Synchronization

/// One real-time event on its way to the connections that may see it.
public struct RealtimeEvent: Sendable, Codable {
    public enum Audience: Sendable, Hashable, Codable {
        /// The brand's agents and the conversation's consumer (every device of theirs).
        case conversation(brandId: BrandID, consumerId: ConsumerID)
        /// Those taking part in one conversation: its consumer (every device), its assignee (every
        /// device) and the agents who have it open. Typing and receipts go here, not to the whole brand.
        case participants(brandId: BrandID, consumerId: ConsumerID, conversationId: ConversationID, assigneeId: AgentID?)
        /// The brand's agents only.
        case agents(brandId: BrandID)
        /// The brand's managers and admins (the contact centre's live report).
        case managers(brandId: BrandID)
        /// One agent's devices.
        case agent(AgentID)
        /// One consumer's devices only (their place in the queue).
        case consumer(ConsumerID)
        /// One connection (the other side of a call).
        case connection(ConnectionID)
    }

    public var audience: Audience
    /// The JSON text of a `ServerFrame`, encoded once for every recipient.
    public var frame: String
    /// A connection that must not get the event (typing is not echoed to the typist).
    public var excludingConnection: ConnectionID?

    public init(audience: Audience, frame: String, excludingConnection: ConnectionID? = nil) {
        self.audience = audience
        self.frame = frame
        self.excludingConnection = excludingConnection
    }
}

/// What happened, for the services that follow a brand (routing, the live report, push): typed,
/// apart from the socket frames clients get, so that nobody decodes a frame to learn what happened.
/// Codable: a bus across nodes carries them as it carries frames.
public enum DomainEvent: Sendable, Codable, Hashable {
    /// A conversation opened, or changed state, assignee or rating (`ConversationAppend.changesList`).
    case conversationChanged(ConversationDTO)
    /// A message was logged in a conversation of `consumerId`.
    case messageLogged(MessageDTO, brandId: BrandID, consumerId: ConsumerID)
    /// A call to `consumerId` began ringing.
    case callRinging(CallDTO, brandId: BrandID, consumerId: ConsumerID)
    /// An agent's presence (or load) changed.
    case presenceChanged(AgentPresenceDTO, brandId: BrandID)
    /// A co-browse session changed: every node keeps the sessions that are not over (`CobrowseService`).
    case cobrowseChanged(CobrowseSessionRecord)

    public var brandId: BrandID {
        switch self {
        case .conversationChanged(let conversation): conversation.brandId
        case .messageLogged(_, let brandId, _), .callRinging(_, let brandId, _), .presenceChanged(_, let brandId): brandId
        case .cobrowseChanged(let record): record.brandId
        }
    }
}

/// Carries real-time events from the domain operations that make them to the hubs that deliver
/// them, and domain events to the services that follow them.
///
/// One node uses `LocalEventBus`. Several nodes need a bus that crosses processes (PostgreSQL
/// LISTEN/NOTIFY in ARCHITECTURE.md); only this protocol has to be implemented for that.
public protocol EventBus: Sendable {
    func publish(_ event: RealtimeEvent) async
    /// Registers a handler for every event published from now on. Handlers must not block.
    func subscribe(_ handler: @escaping @Sendable (RealtimeEvent) -> Void)
    func publish(_ event: DomainEvent) async
    /// Registers a handler for every domain event published from now on. Handlers must not block.
    func subscribe(domain handler: @escaping @Sendable (DomainEvent) -> Void)
}

/// The in-process bus: publishing calls every subscriber directly.
public final class LocalEventBus: EventBus {
    private let handlers = Mutex<[@Sendable (RealtimeEvent) -> Void]>([])
    private let domainHandlers = Mutex<[@Sendable (DomainEvent) -> Void]>([])

    public init() {}

    public func publish(_ event: RealtimeEvent) async {
        for handler in handlers.withLock({ $0 }) {
            handler(event)
        }
    }

    public func subscribe(_ handler: @escaping @Sendable (RealtimeEvent) -> Void) {
        handlers.withLock { $0.append(handler) }
    }

    public func publish(_ event: DomainEvent) async {
        for handler in domainHandlers.withLock({ $0 }) {
            handler(event)
        }
    }

    public func subscribe(domain handler: @escaping @Sendable (DomainEvent) -> Void) {
        domainHandlers.withLock { $0.append(handler) }
    }

    /// Hands an event from elsewhere (another node) to every subscriber.
    func deliverNow(_ event: RealtimeEvent) {
        for handler in handlers.withLock({ $0 }) { handler(event) }
    }

    func deliverNow(_ event: DomainEvent) {
        for handler in domainHandlers.withLock({ $0 }) { handler(event) }
    }
}

extension EventBus {
    /// Encodes `frame` once and publishes it to `audience`. A frame that cannot be encoded (a bug, not
    /// bad input: every frame is made of our own types) is logged and not sent.
    func publish(_ frame: ServerFrame, to audience: RealtimeEvent.Audience, excluding connectionId: ConnectionID? = nil, logger: Logger) async {
        do {
            await publish(RealtimeEvent(audience: audience, frame: try ParleyCoders.text(frame), excludingConnection: connectionId))
        } catch {
            logger.error("could not encode a real-time frame", metadata: ["error": "\(error)"])
        }
    }
}
