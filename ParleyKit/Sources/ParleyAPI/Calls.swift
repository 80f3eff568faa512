import Foundation

/// What a call carries. A voice call can become a video call when a side turns its camera on
/// (if the inviting agent may make video calls).
public enum CallMedia: String, Codable, Sendable, CaseIterable, Hashable {
    case voice
    case video
}

/// Where a call is. Only `ended` is final; the others live in the server's memory only.
public enum CallState: String, Codable, Sendable, CaseIterable, Hashable {
    /// The consumer's devices ring; the agent can cancel.
    case ringing
    /// The consumer accepted; the two browsers are negotiating and connecting media.
    case connecting
    /// Media flows (a side reported ICE connected).
    case active
    case ended
}

/// How a call ended, as shown in the timeline and call lists.
public enum CallOutcome: String, Codable, Sendable, CaseIterable, Hashable {
    /// It was answered and then hung up by a side.
    case completed
    /// The consumer declined.
    case rejected
    /// Nobody answered before the invitation expired.
    case missed
    /// The agent cancelled while it rang.
    case cancelled
    /// It could not connect or the connection dropped.
    case failed
}

/// Why a call ended, more precisely than its outcome.
public enum CallEndReason: String, Codable, Sendable, CaseIterable, Hashable {
    case hungUp = "hung_up"
    case rejected
    case noAnswer = "no_answer"
    case cancelled
    /// The browsers could not connect media (reported by a side).
    case iceFailed = "ice_failed"
    /// A side could not open its microphone or camera (reported by a side).
    case mediaUnavailable = "media_unavailable"
    /// Media did not connect within the connect timeout after the answer.
    case connectTimeout = "connect_timeout"
    /// The agent's page closed or lost its real-time connection.
    case agentDisconnected = "agent_disconnected"
    /// The consumer's page closed or lost its real-time connection.
    case consumerDisconnected = "consumer_disconnected"
    /// The server stopped (or crashed) during the call.
    case serverShutdown = "server_shutdown"

    /// Reasons a client may give when it reports that its side of the call failed.
    public static let reportableByClient: Set<CallEndReason> = [.iceFailed, .mediaUnavailable]
}

/// Microphone, camera and screen of one side, shown to the other.
public struct CallMediaState: Codable, Sendable, Hashable {
    public var muted: Bool
    public var cameraOn: Bool
    /// Whether this side shares its screen or a tab: a video track of its own stream, which the
    /// other side shows large. A side announces it before adding the track (the server refuses a
    /// share the call does not allow, see `CallDTO.screenShare`).
    public var sharingScreen: Bool

    public init(muted: Bool = false, cameraOn: Bool = false, sharingScreen: Bool = false) {
        self.muted = muted
        self.cameraOn = cameraOn
        self.sharingScreen = sharingScreen
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        muted = try c.decode(Bool.self, forKey: .muted)
        cameraOn = try c.decode(Bool.self, forKey: .cameraOn)
        // Absent from clients made before screen share.
        sharingScreen = try c.decodeIfPresent(Bool.self, forKey: .sharingScreen) ?? false
    }
}

/// Who may share a screen in a call, fixed when it starts.
public struct CallScreenShare: Codable, Sendable, Hashable {
    /// The inviting agent's profile has `share_screen`.
    public var agent: Bool
    /// The brand lets customers share (`screenShareFromConsumers`).
    public var consumer: Bool

    public init(agent: Bool, consumer: Bool) {
        self.agent = agent
        self.consumer = consumer
    }

    public func allows(_ side: ParticipantKind) -> Bool {
        switch side {
        case .agent: agent
        case .consumer: consumer
        case .system: false
        }
    }
}

/// A call, live or ended. The stored record is the ended form.
public struct CallDTO: Codable, Sendable, Hashable {
    public var id: CallID
    public var conversationId: ConversationID
    /// `video` once either side used video, else `voice`.
    public var media: CallMedia
    /// Whether a side may turn its camera on: the inviting agent may make video calls.
    public var videoAllowed: Bool
    public var state: CallState
    /// Increases with every change, so that a client can ignore a state it has already passed.
    public var version: Int
    public var invitedBy: String
    /// The inviting agent's name, as the consumer sees it while it rings.
    public var inviterName: String
    /// The consumer who answered (from the accepting device).
    public var answeredBy: String?
    public var invitedAt: Date
    public var answeredAt: Date?
    public var connectedAt: Date?
    public var endedAt: Date?
    public var outcome: CallOutcome?
    public var endReason: CallEndReason?
    /// Who ended it, when a side did (not for timeouts).
    public var endedBy: ParticipantKind?
    /// Seconds from the answer to the end; nil until it ends, 0 when it was not answered.
    public var durationSeconds: Int?
    /// When the invitation stops ringing (while ringing).
    public var ringsUntil: Date?
    public var agentMedia: CallMediaState?
    public var consumerMedia: CallMediaState?
    /// The sequence number of the stored timeline event, once the call has ended.
    public var seq: Int64?
    /// Who may share a screen, while the call is live (nil in stored records).
    public var screenShare: CallScreenShare?

    public init(
        id: CallID, conversationId: ConversationID, media: CallMedia, videoAllowed: Bool = false, state: CallState, version: Int, invitedBy: String,
        inviterName: String, answeredBy: String? = nil, invitedAt: Date, answeredAt: Date? = nil, connectedAt: Date? = nil,
        endedAt: Date? = nil, outcome: CallOutcome? = nil, endReason: CallEndReason? = nil, endedBy: ParticipantKind? = nil,
        durationSeconds: Int? = nil, ringsUntil: Date? = nil, agentMedia: CallMediaState? = nil,
        consumerMedia: CallMediaState? = nil, seq: Int64? = nil, screenShare: CallScreenShare? = nil
    ) {
        self.screenShare = screenShare
        self.id = id
        self.conversationId = conversationId
        self.media = media
        self.videoAllowed = videoAllowed
        self.state = state
        self.version = version
        self.invitedBy = invitedBy
        self.inviterName = inviterName
        self.answeredBy = answeredBy
        self.invitedAt = invitedAt
        self.answeredAt = answeredAt
        self.connectedAt = connectedAt
        self.endedAt = endedAt
        self.outcome = outcome
        self.endReason = endReason
        self.endedBy = endedBy
        self.durationSeconds = durationSeconds
        self.ringsUntil = ringsUntil
        self.agentMedia = agentMedia
        self.consumerMedia = consumerMedia
        self.seq = seq
    }
}

/// One STUN or TURN server, in the shape of WebRTC's `RTCIceServer`.
public struct IceServerDTO: Codable, Sendable, Hashable {
    public var urls: [String]
    public var username: String?
    public var credential: String?

    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls
        self.username = username
        self.credential = credential
    }
}

/// What a browser passes to `new RTCPeerConnection(...)` for one call.
public struct IceConfigurationDTO: Codable, Sendable, Hashable {
    public var iceServers: [IceServerDTO]
    /// `all`, or `relay` when the server requires media to go through TURN.
    public var iceTransportPolicy: String
    /// When the TURN credentials stop working.
    public var expiresAt: Date?

    public init(iceServers: [IceServerDTO], iceTransportPolicy: String, expiresAt: Date?) {
        self.iceServers = iceServers
        self.iceTransportPolicy = iceTransportPolicy
        self.expiresAt = expiresAt
    }
}

/// `POST /v1/conversations/{id}/calls`
public struct StartCallRequest: Codable, Sendable, Hashable {
    public var media: CallMedia
    /// The agent's own real-time connection (from its `hello` frame): signalling for the call goes there.
    public var connectionId: ConnectionID

    public init(media: CallMedia, connectionId: ConnectionID) {
        self.media = media
        self.connectionId = connectionId
    }
}

/// The answer to starting or accepting a call: the call and this side's ICE settings.
public struct CallSessionResponse: Codable, Sendable, Hashable {
    public var call: CallDTO
    public var ice: IceConfigurationDTO

    public init(call: CallDTO, ice: IceConfigurationDTO) {
        self.call = call
        self.ice = ice
    }
}

/// A WebRTC signalling message relayed between the two sides of a call.
public struct CallSignal: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        case offer
        case answer
        case candidate
    }

    public var kind: Kind
    /// The session description, for offers and answers.
    public var sdp: String?
    /// An ICE candidate line (`candidate:...`); empty for the end of candidates.
    public var candidate: String?
    public var sdpMid: String?
    public var sdpMLineIndex: Int?

    public init(kind: Kind, sdp: String? = nil, candidate: String? = nil, sdpMid: String? = nil, sdpMLineIndex: Int? = nil) {
        self.kind = kind
        self.sdp = sdp
        self.candidate = candidate
        self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex
    }
}

/// What a side reports about its own media connection.
public enum CallConnectionReport: String, Codable, Sendable, Hashable {
    case connected
    case failed
}
