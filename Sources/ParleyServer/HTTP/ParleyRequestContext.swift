import Foundation
import NIOCore
import Hummingbird
import ParleyAPI
import ParleyDomain

/// The per-request context: Hummingbird's core storage plus who is asking.
public struct ParleyRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Where the real-time upgrade route leaves its decision (`RealtimeChannel`).
    let realtimeUpgrade: RealtimeUpgradeSlot
    /// Set by `AuthMiddleware` when a valid session token came with the request.
    public var principal: Principal?
    /// Set by `AuthMiddleware`: the SHA-256 of the presented token, for logout.
    public var sessionTokenHash: String?
    /// Set by `AuthMiddleware`: when the presented session ends.
    public var sessionExpiresAt: Date?
    /// Set by `AuthMiddleware` when a token came with the request but is not valid.
    public var authFailure: ParleyError?
    /// Set by `AuthMiddleware`: the token came from the session cookie, which a browser sends on its
    /// own (so the request's `Origin` is checked), not from a header a page had to set.
    public var authenticatedByCookie = false
    /// The peer's IP address (the proxy's, behind one; see `clientIP`).
    public let peerIP: String?
    /// The connection, so that a real-time connection whose client stops reading can be closed.
    public let channel: any NIOCore.Channel

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.realtimeUpgrade = RealtimeUpgradeSlot()
        self.peerIP = source.channel.remoteAddress?.ipAddress
        self.channel = source.channel
    }

    /// The client's IP address for rate limits: the peer, or behind a trusted proxy the last address
    /// the proxy appended to X-Forwarded-For.
    public func clientIP(_ request: Request, trustProxy: Bool) -> String {
        if trustProxy, let forwarded = request.headers[.init("X-Forwarded-For")!],
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty
        {
            return last
        }
        return peerIP ?? "unknown"
    }

    public var responseEncoder: JSONEncoder { ParleyCoders.encoder }

    /// The authenticated agent, or the reason there is none.
    public func requireAgent() throws(ParleyError) -> AgentPrincipal {
        switch principal {
        case .agent(let agent): return agent
        case .consumer: throw .forbidden("This is for agents; a consumer token cannot use it.")
        case nil: throw authFailure ?? .unauthenticated
        }
    }

    /// The authenticated consumer, or the reason there is none.
    public func requireConsumer() throws(ParleyError) -> ConsumerPrincipal {
        switch principal {
        case .consumer(let consumer): return consumer
        case .agent: throw .forbidden("This is for consumers; an agent session cannot use it.")
        case nil: throw authFailure ?? .unauthenticated
        }
    }

    public func requirePrincipal() throws(ParleyError) -> Principal {
        guard let principal else { throw authFailure ?? .unauthenticated }
        return principal
    }
}

/// Shared coders: JSONEncoder and JSONDecoder are safe to share once configured.
enum ParleyCoders {
    static let encoder = ParleyJSON.makeEncoder()
    static let decoder = ParleyJSON.makeDecoder()

    /// A real-time frame as the JSON text a WebSocket carries.
    static func text(_ frame: ServerFrame) throws -> String {
        String(decoding: try encoder.encode(frame), as: UTF8.self)
    }

    static func json(_ value: some Encodable) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// `{"type":"message","message":…}` around an already encoded message: the same text
    /// `text(.message(_))` makes, without encoding the message again.
    static func messageFrame(json: String) -> String {
        #"{"type":""# + ServerFrameType.message.rawValue + #"","message":"# + json + "}"
    }

    /// The ack of a `send` frame around an already encoded message (see `ServerFrame.ack`).
    static func sendAck(id: String, messageJSON: String, conversation: ConversationDTO?) throws -> String {
        var text = #"{"type":""# + ServerFrameType.ack.rawValue + #"","id":"# + MessageJSON.string(id) + #","message":"# + messageJSON
        if let conversation { text += #","conversation":"# + (try json(conversation)) }
        return text + "}"
    }
}
