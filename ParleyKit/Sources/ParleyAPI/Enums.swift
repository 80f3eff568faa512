/// Where a conversation takes place. The channel decides text limits and
/// whether calls can be offered (see `ChannelRules` in ParleyDomain).
public enum Channel: String, Codable, Sendable, CaseIterable, Hashable {
    case web
    case inApp = "in_app"
    case whatsapp
    case messenger
    case apple
    case sms

    /// A messaging app reached through its provider (agents' messages go out through its API),
    /// as opposed to Parley's own web widget and in-app SDK.
    public var isMessagingApp: Bool {
        switch self {
        case .web, .inApp: false
        case .whatsapp, .messenger, .apple, .sms: true
        }
    }
}

/// Life cycle of a conversation: `open` -> `resolved` (by an agent, or closed automatically) ->
/// (an agent reopens it) `reopened`. A customer writing after the close starts a new conversation
/// that links to the old one.
public enum ConversationState: String, Codable, Sendable, CaseIterable, Hashable {
    case open
    case resolved
    case reopened
}

/// What an agent may administer. Ordered: every role can do what the one before it can.
public enum AgentRole: String, Codable, Sendable, CaseIterable, Hashable, Comparable {
    case agent
    case manager
    case admin

    private var rank: Int {
        switch self {
        case .agent: 0
        case .manager: 1
        case .admin: 2
        }
    }

    public static func < (lhs: AgentRole, rhs: AgentRole) -> Bool { lhs.rank < rhs.rank }
}

/// Capabilities granted in an agent's profile, independent of role.
public enum AgentPermission: String, Codable, Sendable, CaseIterable, Hashable {
    case sendAudio = "send_audio"
    case initiateVoiceCall = "initiate_voice_call"
    case initiateVideoCall = "initiate_video_call"
    /// Offering co-browse: seeing the customer's page (on the brand's site), once they accept.
    case cobrowse
    /// Sharing their screen (or a tab) during a call.
    case shareScreen = "share_screen"
    /// Asking a customer in co-browse to let them click and type on the page (off by default, even
    /// for a new brand's first admin: an admin grants it per agent).
    case cobrowseControl = "cobrowse_control"
}

/// Who wrote a message or caused an event.
public enum ParticipantKind: String, Codable, Sendable, Hashable {
    case consumer
    case agent
    case system
}

/// Delivery of a message to its recipient. Only ever moves forward.
public enum DeliveryState: String, Codable, Sendable, CaseIterable, Hashable, Comparable {
    case sent
    case delivered
    case read

    public var rank: Int {
        switch self {
        case .sent: 0
        case .delivered: 1
        case .read: 2
        }
    }

    public init?(rank: Int) {
        switch rank {
        case 0: self = .sent
        case 1: self = .delivered
        case 2: self = .read
        default: return nil
        }
    }

    public static func < (lhs: DeliveryState, rhs: DeliveryState) -> Bool { lhs.rank < rhs.rank }
}

/// The kind of content a message carries.
public enum MessageKind: String, Codable, Sendable, Hashable {
    case text
    case voice
    /// An image or a file; `MessageDTO.attachment` describes it.
    case attachment
}

/// Where a voice note is on its way from upload to playable everywhere.
public enum VoiceState: String, Codable, Sendable, Hashable {
    /// Stored and measured (duration and waveform are known); renditions are being made.
    case processing
    /// Every rendition is ready.
    case ready
    /// Processing failed; `failureReason` says why.
    case failed
    /// The malware scan found something (or the note could not be scanned under a fail-closed
    /// policy): the file is quarantined and never served.
    case blocked
}

/// Where a voice note's transcript is (`VoiceDTO.transcript`; absent when the brand does not
/// transcribe).
public enum TranscriptState: String, Codable, Sendable, Hashable, CaseIterable {
    /// Waiting for the transcriber (it runs once the note is ready to play).
    case pending
    /// Transcribed: `text` is what was heard, empty when nothing was.
    case ready
    /// The transcriber could not make one (after its last retry, or the language is not one it knows).
    case unavailable
}

/// Where a voice note is with the malware scan. Only the sender can fetch a note that is not
/// `clean` or `unscanned`.
public enum MalwareScanState: String, Codable, Sendable, CaseIterable, Hashable {
    /// The scanner found nothing.
    case clean
    /// The scanner was unavailable; the brand fails closed, so the note waits and is scanned again.
    case pending
    /// The scanner found malware; the note is blocked.
    case infected
    /// The scanner was unavailable for too long under a fail-closed policy; the note is blocked.
    case failed
    /// Delivered without a scan: no scanner is configured, or it was unavailable and the brand fails open.
    case unscanned
}

/// What happens to an upload when the malware scanner is unavailable.
public enum ScanFailurePolicy: String, Codable, Sendable, CaseIterable, Hashable {
    /// The note waits, is scanned when the scanner is back (with bounded retries), and is blocked if
    /// it never can be.
    case closed
    /// The note is delivered at once, marked `unscanned`.
    case open
}

/// Who sees payment card numbers in consumers' messages masked. The unmasked number is never
/// stored, so agents see it masked whenever masking is on.
public enum CardMasking: String, Codable, Sendable, CaseIterable, Hashable {
    case off
    /// Agents (and everything stored) see `•••• •••• •••• 4242`; the consumer's own device keeps
    /// showing what it sent until it reloads.
    case agents
    /// The consumer's own copy is masked as well.
    case everyone
}
