import Foundation

// MARK: - Agents: sign-in

public struct LoginRequest: Codable, Sendable {
    public var email: String
    public var password: String
    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }
}

public struct AgentSessionResponse: Codable, Sendable {
    /// Bearer token for API clients; browsers get the same session as an HttpOnly cookie.
    public var token: String
    public var expiresAt: Date
    public var agent: AgentDTO
    public init(token: String, expiresAt: Date, agent: AgentDTO) {
        self.token = token
        self.expiresAt = expiresAt
        self.agent = agent
    }
}

// MARK: - Consumers: sessions

public struct ConsumerSessionRequest: Codable, Sendable {
    /// The public id of the brand's app (the widget's embed code names it).
    public var appId: AppID
    /// A JWT signed by the brand's backend with a key registered on the app. Absent: anonymous visitor.
    public var identityToken: String?
    /// A name shown to agents. For authenticated consumers the JWT's `name` claim wins.
    public var displayName: String?
    /// The page the widget opens on (http or https), for agents; the browser comes from User-Agent.
    /// Later pages are reported with `POST /v1/consumer/visits`.
    public var pageUrl: String?
    public var pageTitle: String?
    /// The customer's language (BCP 47, like "pt-BR"), for automatic messages.
    public var language: String?
    public init(appId: AppID, identityToken: String? = nil, displayName: String? = nil, pageUrl: String? = nil, pageTitle: String? = nil, language: String? = nil) {
        self.language = language
        self.pageUrl = pageUrl
        self.pageTitle = pageTitle
        self.appId = appId
        self.identityToken = identityToken
        self.displayName = displayName
    }
}

public struct ConsumerSessionResponse: Codable, Sendable {
    public var token: String
    public var expiresAt: Date
    public var consumer: ConsumerDTO
    public init(token: String, expiresAt: Date, consumer: ConsumerDTO) {
        self.token = token
        self.expiresAt = expiresAt
        self.consumer = consumer
    }
}

// MARK: - Messages

public struct SendMessageRequest: Codable, Sendable, Hashable {
    /// Chosen by the client, unique per sender: a retry with the same id returns the original message.
    public var clientMessageId: String
    public var text: String
    /// Consumers only: the conversation to write to. Absent: the consumer's latest conversation on
    /// this app and channel is continued (reopened if resolved), or a new one is opened.
    public var conversationId: ConversationID?
    /// Consumers only: the app's channel, or absent. Naming another channel is refused: the channel
    /// comes from the app the consumer signed in with.
    public var channel: Channel?
    /// Consumers only, without `conversationId`: open a new conversation instead of continuing the
    /// latest, while the consumer has fewer open ones in this app than the brand allows
    /// (`openConversationsPerConsumer`, 1 by default).
    public var newConversation: Bool?
    public init(
        clientMessageId: String, text: String, conversationId: ConversationID? = nil, channel: Channel? = nil, newConversation: Bool? = nil
    ) {
        self.clientMessageId = clientMessageId
        self.text = text
        self.conversationId = conversationId
        self.channel = channel
        self.newConversation = newConversation
    }
}

public struct SendMessageResponse: Codable, Sendable {
    public var message: MessageDTO
    public var conversation: ConversationDTO
    /// False when this was a retry of a message that already existed.
    public var created: Bool
    public init(message: MessageDTO, conversation: ConversationDTO, created: Bool) {
        self.message = message
        self.conversation = conversation
        self.created = created
    }
}

public struct ReceiptRequest: Codable, Sendable, Hashable {
    /// Every message from the other side up to and including this sequence number.
    public var upToSeq: Int64
    /// `delivered` or `read`.
    public var state: DeliveryState
    public init(upToSeq: Int64, state: DeliveryState) {
        self.upToSeq = upToSeq
        self.state = state
    }
}

public struct ReceiptResponse: Codable, Sendable {
    /// The stored event, or nil when the receipt changed nothing (already delivered/read).
    public var event: ConversationEventDTO?
    public init(event: ConversationEventDTO?) { self.event = event }
}

// MARK: - Conversations

public struct AssignRequest: Codable, Sendable {
    /// The agent to assign; null unassigns.
    public var agentId: AgentID?
    public init(agentId: AgentID?) { self.agentId = agentId }
}

public struct ConversationResponse: Codable, Sendable {
    public var conversation: ConversationDTO
    public init(conversation: ConversationDTO) { self.conversation = conversation }
}

// MARK: - Administration

public struct CreateAgentRequest: Codable, Sendable {
    public var email: String
    public var name: String
    public var password: String
    public var role: AgentRole
    public var permissions: [AgentPermission]?
    public init(email: String, name: String, password: String, role: AgentRole, permissions: [AgentPermission]? = nil) {
        self.email = email
        self.name = name
        self.password = password
        self.role = role
        self.permissions = permissions
    }
}

public struct UpdateAgentRequest: Codable, Sendable {
    public var name: String?
    public var role: AgentRole?
    public var permissions: [AgentPermission]?
    public var password: String?
    /// true: the agent is signed out everywhere and cannot sign in; false: they can again.
    public var disabled: Bool?
    public init(
        name: String? = nil, role: AgentRole? = nil, permissions: [AgentPermission]? = nil, password: String? = nil, disabled: Bool? = nil
    ) {
        self.disabled = disabled
        self.name = name
        self.role = role
        self.permissions = permissions
        self.password = password
    }
}

/// An agent changes their own password; every other session of theirs ends.
public struct ChangePasswordRequest: Codable, Sendable {
    public var currentPassword: String
    public var newPassword: String
    public init(currentPassword: String, newPassword: String) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
    }
}

public struct CreateAppRequest: Codable, Sendable {
    public var name: String
    public var channel: Channel
    public init(name: String, channel: Channel) {
        self.name = name
        self.channel = channel
    }
}

public struct AddAppKeyRequest: Codable, Sendable {
    /// Key id; the JWT header's `kid` selects the key. Unique within the app.
    public var kid: String
    /// `HS256` (shared secret), `ES256` or `RS256` (PEM public key).
    public var algorithm: String
    public var key: String
    public init(kid: String, algorithm: String, key: String) {
        self.kid = kid
        self.algorithm = algorithm
        self.key = key
    }
}

public struct ListResponse<Item: Codable & Sendable>: Codable, Sendable {
    public var items: [Item]
    public init(items: [Item]) { self.items = items }
}

// MARK: - Errors

/// The one error shape of every 4xx and 5xx response, and of real-time `error` frames.
public struct ErrorBody: Codable, Sendable, Hashable {
    public struct Detail: Codable, Sendable, Hashable {
        /// Stable machine-readable code, e.g. `message_too_long`.
        public var code: ErrorCode
        /// Human-readable explanation.
        public var message: String
        /// The request field at fault, when there is one (a JSON path like `text` or `permissions[1]`).
        public var field: String?
        /// For `rate_limited`: seconds after which a retry can succeed (also the Retry-After header).
        public var retryAfter: Int?
        public init(code: ErrorCode, message: String, field: String? = nil, retryAfter: Int? = nil) {
            self.code = code
            self.message = message
            self.field = field
            self.retryAfter = retryAfter
        }
    }

    public var error: Detail
    public init(code: ErrorCode, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.error = .init(code: code, message: message, field: field, retryAfter: retryAfter)
    }
}

/// An agent's private note on a conversation. `clientNoteId` makes a retry return the stored note.
public struct AddNoteRequest: Codable, Sendable, Hashable {
    public var clientNoteId: String
    public var text: String

    public init(clientNoteId: String, text: String) {
        self.clientNoteId = clientNoteId
        self.text = text
    }
}
