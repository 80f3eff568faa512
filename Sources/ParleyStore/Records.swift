import Foundation
import ParleyAPI
import ParleyDomain

/// An agent with what only the server may see.
public struct AgentRecord: Sendable, Hashable {
    public var agent: AgentDTO
    public var passwordHash: String
    /// When an admin disabled the agent; nil while they may sign in.
    public var disabledAt: Date?
    /// When an admin deleted the agent. The row stays (their messages name them); they cannot sign
    /// in, are not listed, and their email is free for a new agent.
    public var deletedAt: Date?
    public init(agent: AgentDTO, passwordHash: String, disabledAt: Date? = nil, deletedAt: Date? = nil) {
        self.agent = agent
        self.passwordHash = passwordHash
        self.disabledAt = disabledAt
        self.deletedAt = deletedAt
    }

    /// Whether the agent may sign in and use sessions.
    public var isActive: Bool { disabledAt == nil && deletedAt == nil }
}

/// A sign-in session. Only a hash of the token is stored: a stolen database grants no sessions.
public struct SessionRecord: Sendable, Hashable {
    public var tokenHash: String
    public var brandId: BrandID
    public var subjectKind: ParticipantKind
    public var subjectId: String
    public var appId: AppID?
    public var createdAt: Date
    public var expiresAt: Date
    public var revokedAt: Date?
    public init(
        tokenHash: String, brandId: BrandID, subjectKind: ParticipantKind, subjectId: String, appId: AppID?,
        createdAt: Date, expiresAt: Date, revokedAt: Date? = nil
    ) {
        self.tokenHash = tokenHash
        self.brandId = brandId
        self.subjectKind = subjectKind
        self.subjectId = subjectId
        self.appId = appId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }
}

/// A key that verifies consumer JWTs for an app.
public struct AppKeyRecord: Sendable, Hashable {
    public var kid: String
    public var appId: AppID
    public var brandId: BrandID
    public var algorithm: String
    public var keyMaterial: String
    public var createdAt: Date
    public init(kid: String, appId: AppID, brandId: BrandID, algorithm: String, keyMaterial: String, createdAt: Date) {
        self.kid = kid
        self.appId = appId
        self.brandId = brandId
        self.algorithm = algorithm
        self.keyMaterial = keyMaterial
        self.createdAt = createdAt
    }

    public var dto: AppKeyDTO { AppKeyDTO(kid: kid, appId: appId, algorithm: algorithm, createdAt: createdAt) }
}

/// The stored audio of a voice message: the original and its renditions.
public struct VoiceRecord: Sendable, Hashable {
    public var messageId: MessageID
    public var brandId: BrandID
    /// The sniffed container of the original (`webm`, `ogg`, `mp4`, ...).
    public var container: String
    public var originalKey: String
    public var originalBytes: Int
    public var durationMs: Int
    public var waveform: [UInt8]
    public var state: VoiceState
    public var failureReason: String?
    public var opusKey: String?
    public var opusBytes: Int?
    public var aacKey: String?
    public var aacBytes: Int?
    public var scan: MalwareScanState
    /// What the scanner found, or why it could not scan.
    public var scanDetail: String?
    /// Scans tried while the scanner was unavailable.
    public var scanAttempts: Int
    /// When a pending note is scanned again.
    public var scanNextAt: Date?
    /// The transcript step: nil when the brand did not transcribe when the note was ready.
    public var transcript: VoiceTranscriptDTO?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        messageId: MessageID, brandId: BrandID, container: String, originalKey: String, originalBytes: Int, durationMs: Int,
        waveform: [UInt8], state: VoiceState, failureReason: String? = nil, opusKey: String? = nil, opusBytes: Int? = nil,
        aacKey: String? = nil, aacBytes: Int? = nil, scan: MalwareScanState = .clean, scanDetail: String? = nil,
        scanAttempts: Int = 0, scanNextAt: Date? = nil, transcript: VoiceTranscriptDTO? = nil, createdAt: Date, updatedAt: Date
    ) {
        self.transcript = transcript
        self.scan = scan
        self.scanDetail = scanDetail
        self.scanAttempts = scanAttempts
        self.scanNextAt = scanNextAt
        self.messageId = messageId
        self.brandId = brandId
        self.container = container
        self.originalKey = originalKey
        self.originalBytes = originalBytes
        self.durationMs = durationMs
        self.waveform = waveform
        self.state = state
        self.failureReason = failureReason
        self.opusKey = opusKey
        self.opusBytes = opusBytes
        self.aacKey = aacKey
        self.aacBytes = aacBytes
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// How clients see it: the original always, renditions once made.
    public var dto: VoiceDTO {
        if state == .blocked {
            return VoiceDTO(durationMs: durationMs, waveform: waveform, state: state, failureReason: failureReason, scan: scan, renditions: [], transcript: nil)
        }
        var renditions = [
            VoiceRenditionDTO(
                format: .original, contentType: Self.contentType(ofContainer: container), bytes: originalBytes,
                url: MediaPaths.voice(messageId: messageId, format: .original))
        ]
        for (rendition, key, bytes) in [(VoiceRendition.opus, opusKey, opusBytes), (.aac, aacKey, aacBytes)] {
            if let bytes, key != nil {
                renditions.append(.init(
                    format: rendition.format, contentType: rendition.contentType, bytes: bytes,
                    url: MediaPaths.voice(messageId: messageId, format: rendition.format)))
            }
        }
        return VoiceDTO(
            durationMs: durationMs, waveform: waveform, state: state, failureReason: failureReason, scan: scan, renditions: renditions,
            transcript: transcript)
    }

    /// Whether someone other than the sender may fetch the note's audio.
    public var deliverable: Bool { state != .blocked && (scan == .clean || scan == .unscanned) }

    /// The Content-Type of the stored original, from its sniffed container.
    public static func contentType(ofContainer container: String) -> String {
        AudioContainer(rawValue: container)?.contentType ?? "application/octet-stream"
    }

    /// A rendition's stored file, once it is made.
    public func rendition(_ rendition: VoiceRendition) -> (key: String, bytes: Int)? {
        switch rendition {
        case .opus: opusKey.flatMap { key in opusBytes.map { (key, $0) } }
        case .aac: aacKey.flatMap { key in aacBytes.map { (key, $0) } }
        }
    }

    /// Records a rendition's stored file.
    public mutating func setRendition(_ rendition: VoiceRendition, key: String, bytes: Int) {
        switch rendition {
        case .opus: (opusKey, opusBytes) = (key, bytes)
        case .aac: (aacKey, aacBytes) = (key, bytes)
        }
    }
}

/// Which conversations an agent's list shows. Newest activity first; `before` continues a page.
public struct ConversationFilter: Sendable, Hashable {
    public enum Assignee: Sendable, Hashable {
        case any
        case unassigned
        case agent(AgentID)
    }

    public var states: [ConversationState]
    public var assignee: Assignee
    public var channel: Channel?
    /// One customer's conversations (the details pane's "past conversations").
    public var consumerId: ConsumerID?
    public var limit: Int
    /// Keyset cursor: the `(updatedAt, id)` of the last row of the previous page.
    public var before: (updatedAt: Int64, id: ConversationID)?
    /// Only conversations active since then (a customer's history goes back so far).
    public var activeSince: Date?

    public init(
        states: [ConversationState] = [], assignee: Assignee = .any, channel: Channel? = nil, limit: Int = 50,
        before: (updatedAt: Int64, id: ConversationID)? = nil
    ) {
        self.states = states
        self.assignee = assignee
        self.channel = channel
        self.limit = limit
        self.before = before
    }

    public static func == (lhs: ConversationFilter, rhs: ConversationFilter) -> Bool {
        lhs.states == rhs.states && lhs.assignee == rhs.assignee && lhs.channel == rhs.channel
            && lhs.limit == rhs.limit && lhs.before?.updatedAt == rhs.before?.updatedAt && lhs.before?.id == rhs.before?.id
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(states)
        hasher.combine(limit)
    }
}
