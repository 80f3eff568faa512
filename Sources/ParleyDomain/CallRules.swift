import Foundation
import ParleyAPI

/// Who may call whom, and where.
public enum CallRules {
    /// Default time a call rings before it counts as missed.
    public static let defaultRingSeconds = 45
    /// Default time from the answer until media must be connected.
    public static let defaultConnectSeconds = 30
    /// Largest SDP a side may send (real offers are 2-8 KB; video with simulcast stays under 20 KB).
    public static let maxSDPBytes = 64 * 1024
    /// Largest ICE candidate line.
    public static let maxCandidateBytes = 1024

    /// The permission an agent's profile needs to start a call of this kind.
    public static func permission(for media: CallMedia) -> AgentPermission {
        media == .voice ? .initiateVoiceCall : .initiateVideoCall
    }

    /// Checks that `agent` may invite the consumer of a conversation on `channel` to a call.
    public static func authorizeInvite(
        _ agent: AgentPrincipal, media: CallMedia, channel: Channel, conversationState: ConversationState
    ) throws(ParleyError) {
        try requirePermission(agent, media: media)
        guard ChannelRules.of(channel).supportsCalls else {
            throw ParleyError(
                .unprocessable, code: .channelCannotCall,
                message: "Conversations on \(channel.rawValue) cannot carry calls; only web and in-app conversations can.")
        }
        guard conversationState != .resolved else {
            throw ParleyError(
                .conflict, code: .conversationResolved, message: "This conversation is resolved. Reopen it before calling.")
        }
    }

    /// Checks the agent's profile for the permission to start a call of this kind.
    public static func requirePermission(_ agent: AgentPrincipal, media: CallMedia) throws(ParleyError) {
        guard agent.permissions.contains(permission(for: media)) else {
            throw ParleyError(
                .forbidden, code: .callPermissionMissing,
                message: "Your profile does not allow \(media.rawValue) calls (\(permission(for: media).rawValue)).")
        }
    }

    /// Whether video may be used in a call: only when the inviting agent may make video calls.
    public static func videoAllowed(inviter: AgentPrincipal) -> Bool {
        inviter.permissions.contains(.initiateVideoCall)
    }

    /// Who may share a screen in a call the agent starts: the agent with `share_screen`, the
    /// customer when the brand allows it.
    public static func screenShare(inviter: AgentPrincipal, settings: BrandSettingsDTO) -> CallScreenShare {
        CallScreenShare(agent: inviter.permissions.contains(.shareScreen), consumer: settings.screenShareFromConsumers)
    }

    /// How many video sections the side that wrote this SDP sends on: `m=video` sections with a
    /// non-zero port whose direction is `sendrecv` (the default) or `sendonly`. A camera is one; a
    /// shared screen is another (call-session.js sends it `sendrecv`); a section only received
    /// (`recvonly`: the answer to the other side's screen, or a share that ended) or `inactive`
    /// sends nothing.
    public static func videoSectionsSent(_ sdp: String) -> Int {
        var count = 0
        var inVideo = false
        var sending = false
        var sessionSends = true
        var inSession = true
        func close() {
            if inVideo, sending { count += 1 }
        }
        for line in sdp.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("m=") {
                close()
                inSession = false
                inVideo = line.hasPrefix("m=video ") && !line.hasPrefix("m=video 0 ")
                sending = sessionSends
                continue
            }
            let direction: Bool? =
                switch line {
                case "a=sendrecv", "a=sendonly": true
                case "a=recvonly", "a=inactive": false
                default: nil
                }
            guard let direction else { continue }
            if inSession { sessionSends = direction } else { sending = direction }
        }
        close()
        return count
    }

    /// Checks the size and shape of a signalling message.
    public static func validate(_ signal: CallSignal) throws(ParleyError) {
        switch signal.kind {
        case .offer, .answer:
            guard let sdp = signal.sdp, !sdp.isEmpty else { throw ParleyError.missingField("signal.sdp") }
            guard sdp.utf8.count <= maxSDPBytes else {
                throw ParleyError.invalidField("signal.sdp", "A session description can be at most \(maxSDPBytes) bytes.")
            }
            guard sdp.hasPrefix("v=0") else {
                throw ParleyError.invalidField("signal.sdp", "This is not a session description (SDP starts with v=0).")
            }
        case .candidate:
            guard let candidate = signal.candidate else { throw ParleyError.missingField("signal.candidate") }
            guard candidate.utf8.count <= maxCandidateBytes else {
                throw ParleyError.invalidField("signal.candidate", "An ICE candidate can be at most \(maxCandidateBytes) bytes.")
            }
            guard candidate.isEmpty || candidate.hasPrefix("candidate:") else {
                throw ParleyError.invalidField("signal.candidate", "An ICE candidate line starts with 'candidate:'.")
            }
            if let mid = signal.sdpMid, mid.utf8.count > 64 {
                throw ParleyError.invalidField("signal.sdpMid", "A media id can be at most 64 bytes.")
            }
        }
    }
}

/// The two sides of a call.
public enum CallParty: String, Sendable, Hashable {
    case agent
    case consumer

    public var other: CallParty { self == .agent ? .consumer : .agent }
    public var participantKind: ParticipantKind { self == .agent ? .agent : .consumer }
}

/// The call state machine.
///
/// ```
/// ringing --accept--> connecting --connected--> active
///    |                    |                       |
///    | reject -> rejected | hang up -> completed  | hang up -> completed
///    | cancel -> cancelled| failed / timeout /    | failed / a side left -> failed
///    | timeout -> missed  |   a side left -> failed
///    v                    v                       v
///  ended <----------------+-----------------------+
/// ```
///
/// Races are settled by order of arrival: the first event that ends a call wins, and later ones
/// either do nothing (a second hang-up, a timer that fired late) or are refused (accepting a call
/// that was just cancelled).
public struct CallMachine: Sendable, Hashable {
    public enum Event: Sendable, Hashable {
        case accept
        case reject
        case hangUp
        case connected
        case failed(CallEndReason)
        case ringTimeout
        case connectTimeout
        case left
    }

    public private(set) var state: CallState = .ringing
    public private(set) var outcome: CallOutcome?
    public private(set) var endReason: CallEndReason?
    public private(set) var endedBy: CallParty?
    public private(set) var answeredAt: Date?
    public private(set) var connectedAt: Date?
    public private(set) var endedAt: Date?
    public let invitedAt: Date

    public init(invitedAt: Date) {
        self.invitedAt = invitedAt
    }

    /// Seconds from the answer to the end (0 when never answered); nil while the call goes on.
    public var durationSeconds: Int? {
        guard let endedAt else { return nil }
        guard let answeredAt else { return 0 }
        return max(0, Int((endedAt.timeIntervalSince(answeredAt)).rounded()))
    }

    /// Applies `event` caused by `party` (nil for timers). Returns whether the state changed; throws
    /// when the event is not allowed now (the call stays as it was).
    @discardableResult
    public mutating func apply(_ event: Event, by party: CallParty?, at now: Date) throws(ParleyError) -> Bool {
        switch (state, event) {
        // Ringing
        case (.ringing, .accept):
            try require(party == .consumer, "Only the consumer can accept a call.")
            state = .connecting
            answeredAt = now
            return true
        case (.ringing, .reject):
            try require(party == .consumer, "Only the consumer can decline a call; the agent cancels it.")
            end(.rejected, .rejected, by: party, at: now)
            return true
        case (.ringing, .hangUp):
            // The agent hanging up a ringing call cancels it; the consumer's declines it.
            if party == .consumer {
                end(.rejected, .rejected, by: party, at: now)
            } else {
                end(.cancelled, .cancelled, by: party, at: now)
            }
            return true
        case (.ringing, .ringTimeout):
            end(.missed, .noAnswer, by: nil, at: now)
            return true
        case (.ringing, .left):
            // The consumer has no device bound to the call yet, so only the agent can leave while it rings.
            end(.cancelled, .agentDisconnected, by: party, at: now)
            return true
        case (.ringing, .connected), (.ringing, .failed):
            throw ParleyError(.conflict, code: .callNotAnswered, message: "This call has not been answered yet.")
        case (.ringing, .connectTimeout):
            return false

        // Connecting and active
        case (.connecting, .connected):
            state = .active
            connectedAt = now
            return true
        case (.active, .connected):
            return false  // both sides report it
        case (.connecting, .hangUp), (.active, .hangUp):
            end(.completed, .hungUp, by: party, at: now)
            return true
        case (.connecting, .failed(let reason)), (.active, .failed(let reason)):
            end(.failed, reason, by: party, at: now)
            return true
        case (.connecting, .connectTimeout):
            end(.failed, .connectTimeout, by: nil, at: now)
            return true
        case (.connecting, .left), (.active, .left):
            end(.failed, party == .consumer ? .consumerDisconnected : .agentDisconnected, by: party, at: now)
            return true
        case (.connecting, .accept), (.active, .accept):
            throw ParleyError(.conflict, code: .callAlreadyAnswered, message: "This call was already answered.")
        case (.connecting, .reject), (.active, .reject):
            throw ParleyError(.conflict, code: .callAlreadyAnswered, message: "This call was already answered: hang up instead.")
        case (.connecting, .ringTimeout), (.active, .ringTimeout), (.active, .connectTimeout):
            return false

        // Ended: hanging up again (or a late timer) changes nothing; answering is refused.
        case (.ended, .accept), (.ended, .reject):
            throw ParleyError(.conflict, code: .callEnded, message: "This call has already ended.")
        case (.ended, _):
            return false
        }
    }

    /// Ends the call at once, e.g. when the server shuts down. Returns false if it had already ended.
    @discardableResult
    public mutating func abort(_ reason: CallEndReason, at now: Date) -> Bool {
        guard state != .ended else { return false }
        end(answeredAt == nil ? .cancelled : .failed, reason, by: nil, at: now)
        return true
    }

    private mutating func end(_ outcome: CallOutcome, _ reason: CallEndReason, by party: CallParty?, at now: Date) {
        state = .ended
        self.outcome = outcome
        endReason = reason
        endedBy = party
        endedAt = now
    }

    private func require(_ condition: Bool, _ message: String) throws(ParleyError) {
        guard condition else { throw ParleyError(.forbidden, code: .notAllowedInCall, message: message) }
    }
}

/// The offer/answer exchange of one call, including renegotiation (turning video on) and glare,
/// when both sides send an offer at once.
///
/// The agent's side is the "impolite" peer of WebRTC's perfect-negotiation pattern and the consumer's
/// the "polite" one: on a collision the agent's offer wins. The server applies the same rule, so that
/// a losing offer is never relayed and the answer that follows is always for the offer that stands.
public struct CallNegotiation: Sendable, Hashable {
    public enum Decision: Sendable, Hashable {
        /// Pass the signal on to the other side.
        case relay
        /// The consumer's offer collided with the agent's and is dropped; the consumer's page rolls
        /// it back and answers the agent's offer instead.
        case dropCollidingOffer
    }

    /// Whose offer waits for an answer.
    public private(set) var pendingOfferFrom: CallParty?
    /// Completed offer/answer rounds.
    public private(set) var rounds = 0

    public init() {}

    public mutating func receive(_ kind: CallSignal.Kind, from party: CallParty) throws(ParleyError) -> Decision {
        switch kind {
        case .offer:
            switch pendingOfferFrom {
            case nil, party:
                pendingOfferFrom = party
                return .relay
            case .some:
                // Glare: the agent (impolite) wins.
                if party == .agent {
                    pendingOfferFrom = .agent
                    return .relay
                }
                return .dropCollidingOffer
            }
        case .answer:
            guard let offerer = pendingOfferFrom, offerer != party else {
                throw ParleyError(.conflict, code: .noOfferToAnswer, message: "There is no offer from the other side to answer.")
            }
            pendingOfferFrom = nil
            rounds += 1
            return .relay
        case .candidate:
            return .relay
        }
    }
}
