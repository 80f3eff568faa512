import Foundation

/// WebSocket close codes with a meaning a client can act on.
public enum RealtimeCloseCode {
    /// The server could not keep up sending to this client (its queue overflowed) or is shutting down:
    /// reconnect and send `resume` with the last seen sequence numbers. Nothing stored is lost.
    public static let resume: UInt16 = 4000
    /// The session is no longer valid (expired or logged out): sign in again.
    public static let unauthorized: UInt16 = 4001
    /// A frame was too large or not a valid Parley frame.
    public static let protocolViolation: UInt16 = 4002
    /// The client kept sending frames faster than its limit after being told to slow down: reconnect
    /// later, at a normal pace.
    public static let tooManyFrames: UInt16 = 4008
}

/// Who a real-time event concerns or comes from.
public struct ParticipantRef: Codable, Sendable, Hashable {
    public var kind: ParticipantKind
    public var id: String
    public init(kind: ParticipantKind, id: String) {
        self.kind = kind
        self.id = id
    }
}

/// A frame sent by a client. Every frame except `typing` carries an `id` chosen by the client;
/// the server answers it with an `ack` or an `error` frame with the same `id`.
public enum ClientFrame: Sendable, Hashable {
    case send(id: String, SendMessageRequest)
    case receipt(id: String, conversationId: ConversationID, ReceiptRequest)
    case typing(conversationId: ConversationID, isTyping: Bool)
    /// An agent opened a conversation on this connection (nil: closed it). Typing and receipts of a
    /// conversation go to its consumer, its assignee and the agents who have it open.
    case view(conversationId: ConversationID?)
    /// Replays everything stored after the given sequence numbers, per conversation, then `resumed`.
    case resume(id: String, cursors: [String: Int64])
    /// The consumer answers a ringing call on this device; the ack carries the ICE settings.
    case callAccept(id: String, callId: CallID)
    /// The consumer declines a ringing call.
    case callReject(id: String, callId: CallID)
    /// Either side ends the call (the agent cancels it while it rings).
    case callHangUp(id: String, callId: CallID)
    /// An SDP offer or answer, or an ICE candidate, for the other side of the call.
    case callSignal(id: String, callId: CallID, CallSignal)
    /// This side's microphone and camera state, for the other side.
    case callMedia(id: String, callId: CallID, CallMediaState)
    /// This side's media connected, or failed for `reason` (one of `CallEndReason.reportableByClient`).
    case callReport(id: String, callId: CallID, CallConnectionReport, reason: CallEndReason?)
    /// An agent (with the `cobrowse` permission) offers co-browse to the conversation's customer.
    case cobrowseOffer(id: String, conversationId: ConversationID)
    /// The customer accepts (from this connection, whose page is then shared; `origin` is the page's
    /// site as the browser told the widget) or declines. Accepting an active session again, from a
    /// new page of the same site, moves the session to that page.
    case cobrowseAnswer(id: String, sessionId: CobrowseID, accept: Bool, origin: String?)
    /// Either side stops the session (the agent withdraws an offer).
    case cobrowseEnd(id: String, sessionId: CobrowseID)
    /// The customer's page: a snapshot part or changes, relayed to the agent as they are.
    case cobrowseData(sessionId: CobrowseID, seq: Int64, kind: CobrowseDataKind, last: Bool, payload: String)
    /// The agent points at or highlights something; relayed to the customer's page.
    case cobrowsePoint(sessionId: CobrowseID, payload: String)
    /// The agent's view needs the whole page again (it reloaded, or fell behind).
    case cobrowseResync(sessionId: CobrowseID)
    /// Control of the customer's page: the agent (with `cobrowse_control`) asks for it or gives it
    /// back; the customer grants it (from the shared page's connection), refuses, or takes it back.
    case cobrowseControl(id: String, sessionId: CobrowseID, action: CobrowseControlAction)
    /// While the customer lets them: the agent's click or typing, relayed to the customer's page,
    /// which carries it out (never on a masked element).
    case cobrowseInput(sessionId: CobrowseID, payload: String)
}

/// A frame sent by the server.
public enum ServerFrame: Sendable {
    case hello(connectionId: ConnectionID, participant: ParticipantRef, brandId: BrandID, heartbeatSeconds: Int)
    case ack(id: String, message: MessageDTO?, conversation: ConversationDTO?, event: ConversationEventDTO?)
    case error(id: String?, ErrorBody.Detail)
    case message(MessageDTO)
    case event(ConversationEventDTO)
    case conversation(ConversationDTO)
    case typing(conversationId: ConversationID, participant: ParticipantRef, isTyping: Bool)
    /// End of a replay. `cursors` says how far each conversation was replayed; when `complete` is false
    /// the replay was cut to protect the connection's queue: send `resume` again from `cursors`.
    case resumed(id: String, cursors: [String: Int64], complete: Bool)
    /// The answer to a call frame (or a call started over HTTP): the call as it is now, and for the
    /// side that starts or accepts it, the ICE settings. Encoded as an `ack` with a `call` field.
    case callAck(id: String, call: CallDTO, ice: IceConfigurationDTO?)
    /// A call of a conversation the recipient can see changed state (ringing, connecting, active, ended).
    case call(CallDTO)
    /// An agent of the brand changed presence, or connected or went away (agents only).
    case presence(AgentPresenceDTO)
    /// Signalling from the other side of the recipient's call.
    case callSignal(callId: CallID, from: ParticipantKind, CallSignal)
    /// The other side of the recipient's call muted, unmuted, or turned its camera on or off.
    case callMedia(callId: CallID, from: ParticipantKind, CallMediaState)
    /// The consumer's conversation waits for an agent: its place in the queue (consumers only).
    case queue(QueuePositionDTO)
    /// The contact centre now (managers: everyone; agents: themselves), whenever it changes.
    case report(LiveReportDTO)
    /// A co-browse session changed (offered, accepted, page moved, ended): to the customer and the offering agent.
    case cobrowse(CobrowseSessionDTO)
    /// The answer to a co-browse frame: the session as it is now. Encoded as an `ack` with a `cobrowse` field.
    case cobrowseAck(id: String, session: CobrowseSessionDTO)
    /// The customer's page, for the agent viewing it.
    case cobrowseData(sessionId: CobrowseID, seq: Int64, kind: CobrowseDataKind, last: Bool, payload: String)
    /// The agent's pointer or highlight, for the customer's page.
    case cobrowsePoint(sessionId: CobrowseID, payload: String)
    /// The customer's page should send a whole snapshot again: `reason` is `agent` (the agent's
    /// view asked) or `budget` (changes came faster than the per-second budget and some were dropped).
    case cobrowseResync(sessionId: CobrowseID, reason: String)
    /// The agent's click or typing, for the customer's page (only while control is granted).
    case cobrowseInput(sessionId: CobrowseID, payload: String)
}



// MARK: - Frame types

/// The `type` of a client frame: the one list of tags the coder uses.
public enum ClientFrameType: String, Codable, Sendable, CaseIterable {
    case send, receipt, typing, view, resume
    case callAccept = "call.accept"
    case callReject = "call.reject"
    case callHangUp = "call.hangup"
    case callSignal = "call.signal"
    case callMedia = "call.media"
    case callReport = "call.report"
    case cobrowseOffer = "cobrowse.offer"
    case cobrowseAnswer = "cobrowse.answer"
    case cobrowseEnd = "cobrowse.end"
    case cobrowseData = "cobrowse.data"
    case cobrowsePoint = "cobrowse.point"
    case cobrowseResync = "cobrowse.resync"
    case cobrowseControl = "cobrowse.control"
    case cobrowseInput = "cobrowse.input"
}

/// The `type` of a server frame: the one list of tags the coder and the pre-encoded fast path use.
public enum ServerFrameType: String, Codable, Sendable, CaseIterable {
    case hello, ack, error, message, event, conversation, typing, resumed, call, presence, queue, report, cobrowse
    case callSignal = "call.signal"
    case callMedia = "call.media"
    case cobrowseData = "cobrowse.data"
    case cobrowsePoint = "cobrowse.point"
    case cobrowseResync = "cobrowse.resync"
    case cobrowseInput = "cobrowse.input"
}

extension ClientFrame {
    /// The id the client chose, which the server's `ack` or `error` repeats (`typing` and `view` have none).
    public var replyId: String? {
        switch self {
        case .send(let id, _), .receipt(let id, _, _), .resume(let id, _), .callAccept(let id, _), .callReject(let id, _),
            .callHangUp(let id, _), .callSignal(let id, _, _), .callMedia(let id, _, _), .callReport(let id, _, _, _),
            .cobrowseOffer(let id, _), .cobrowseAnswer(let id, _, _, _), .cobrowseEnd(let id, _), .cobrowseControl(let id, _, _):
            id
        case .typing, .view, .cobrowseData, .cobrowsePoint, .cobrowseResync, .cobrowseInput:
            nil
        }
    }

    public var type: ClientFrameType {
        switch self {
        case .send: .send
        case .receipt: .receipt
        case .typing: .typing
        case .view: .view
        case .resume: .resume
        case .callAccept: .callAccept
        case .callReject: .callReject
        case .callHangUp: .callHangUp
        case .callSignal: .callSignal
        case .callMedia: .callMedia
        case .callReport: .callReport
        case .cobrowseOffer: .cobrowseOffer
        case .cobrowseAnswer: .cobrowseAnswer
        case .cobrowseEnd: .cobrowseEnd
        case .cobrowseData: .cobrowseData
        case .cobrowsePoint: .cobrowsePoint
        case .cobrowseResync: .cobrowseResync
        case .cobrowseControl: .cobrowseControl
        case .cobrowseInput: .cobrowseInput
        }
    }
}

extension ServerFrame {
    public var type: ServerFrameType {
        switch self {
        case .hello: .hello
        case .ack, .callAck, .cobrowseAck: .ack
        case .error: .error
        case .message: .message
        case .event: .event
        case .conversation: .conversation
        case .typing: .typing
        case .resumed: .resumed
        case .call: .call
        case .presence: .presence
        case .queue: .queue
        case .report: .report
        case .callSignal: .callSignal
        case .callMedia: .callMedia
        case .cobrowse: .cobrowse
        case .cobrowseData: .cobrowseData
        case .cobrowsePoint: .cobrowsePoint
        case .cobrowseResync: .cobrowseResync
        case .cobrowseInput: .cobrowseInput
        }
    }
}

// MARK: - Codable

private enum FrameKeys: String, CodingKey {
    case type, id, conversationId, clientMessageId, text, channel, upToSeq, state, isTyping, cursors
    case complete, connectionId, participant, brandId, heartbeatSeconds, message, conversation, event, error
    case callId, call, ice, signal, media, report, reason, from, presence, queue
    case sessionId, accept, origin, seq, kind, last, payload, cobrowse, action
}

extension KeyedDecodingContainer where K == FrameKeys {
    fileprivate func frameType<T: RawRepresentable & Decodable>(_: T.Type) throws -> T where T.RawValue == String {
        let raw = try decode(String.self, forKey: .type)
        guard let type = T(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: self, debugDescription: "unknown frame type '\(raw)'")
        }
        return type
    }
}

extension ClientFrame: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FrameKeys.self)
        func id() throws -> String { try c.decode(String.self, forKey: .id) }
        func callId() throws -> CallID { try c.decode(CallID.self, forKey: .callId) }
        func sessionId() throws -> CobrowseID { try c.decode(CobrowseID.self, forKey: .sessionId) }
        switch try c.frameType(ClientFrameType.self) {
        case .send:
            self = .send(
                id: try id(),
                SendMessageRequest(
                    clientMessageId: try c.decode(String.self, forKey: .clientMessageId),
                    text: try c.decode(String.self, forKey: .text),
                    conversationId: try c.decodeIfPresent(ConversationID.self, forKey: .conversationId),
                    channel: try c.decodeIfPresent(Channel.self, forKey: .channel)))
        case .receipt:
            self = .receipt(
                id: try id(), conversationId: try c.decode(ConversationID.self, forKey: .conversationId),
                ReceiptRequest(upToSeq: try c.decode(Int64.self, forKey: .upToSeq), state: try c.decode(DeliveryState.self, forKey: .state)))
        case .typing:
            self = .typing(conversationId: try c.decode(ConversationID.self, forKey: .conversationId), isTyping: try c.decode(Bool.self, forKey: .isTyping))
        case .view:
            self = .view(conversationId: try c.decodeIfPresent(ConversationID.self, forKey: .conversationId))
        case .resume:
            self = .resume(id: try id(), cursors: try c.decode([String: Int64].self, forKey: .cursors))
        case .callAccept:
            self = .callAccept(id: try id(), callId: try callId())
        case .callReject:
            self = .callReject(id: try id(), callId: try callId())
        case .callHangUp:
            self = .callHangUp(id: try id(), callId: try callId())
        case .callSignal:
            self = .callSignal(id: try id(), callId: try callId(), try c.decode(CallSignal.self, forKey: .signal))
        case .callMedia:
            self = .callMedia(id: try id(), callId: try callId(), try c.decode(CallMediaState.self, forKey: .media))
        case .callReport:
            self = .callReport(
                id: try id(), callId: try callId(), try c.decode(CallConnectionReport.self, forKey: .report),
                reason: try c.decodeIfPresent(CallEndReason.self, forKey: .reason))
        case .cobrowseOffer:
            self = .cobrowseOffer(id: try id(), conversationId: try c.decode(ConversationID.self, forKey: .conversationId))
        case .cobrowseAnswer:
            self = .cobrowseAnswer(
                id: try id(), sessionId: try sessionId(), accept: try c.decode(Bool.self, forKey: .accept),
                origin: try c.decodeIfPresent(String.self, forKey: .origin))
        case .cobrowseEnd:
            self = .cobrowseEnd(id: try id(), sessionId: try sessionId())
        case .cobrowseData:
            self = .cobrowseData(
                sessionId: try sessionId(), seq: try c.decode(Int64.self, forKey: .seq), kind: try c.decode(CobrowseDataKind.self, forKey: .kind),
                last: try c.decodeIfPresent(Bool.self, forKey: .last) ?? false, payload: try c.decode(String.self, forKey: .payload))
        case .cobrowsePoint:
            self = .cobrowsePoint(sessionId: try sessionId(), payload: try c.decode(String.self, forKey: .payload))
        case .cobrowseResync:
            self = .cobrowseResync(sessionId: try sessionId())
        case .cobrowseControl:
            self = .cobrowseControl(id: try id(), sessionId: try sessionId(), action: try c.decode(CobrowseControlAction.self, forKey: .action))
        case .cobrowseInput:
            self = .cobrowseInput(sessionId: try sessionId(), payload: try c.decode(String.self, forKey: .payload))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FrameKeys.self)
        try c.encode(type, forKey: .type)
        switch self {
        case .send(let id, let request):
            try c.encode(id, forKey: .id)
            try c.encode(request.clientMessageId, forKey: .clientMessageId)
            try c.encode(request.text, forKey: .text)
            try c.encodeIfPresent(request.conversationId, forKey: .conversationId)
            try c.encodeIfPresent(request.channel, forKey: .channel)
        case .receipt(let id, let conversationId, let receipt):
            try c.encode(id, forKey: .id)
            try c.encode(conversationId, forKey: .conversationId)
            try c.encode(receipt.upToSeq, forKey: .upToSeq)
            try c.encode(receipt.state, forKey: .state)
        case .typing(let conversationId, let isTyping):
            try c.encode(conversationId, forKey: .conversationId)
            try c.encode(isTyping, forKey: .isTyping)
        case .view(let conversationId):
            try c.encodeIfPresent(conversationId, forKey: .conversationId)
        case .resume(let id, let cursors):
            try c.encode(id, forKey: .id)
            try c.encode(cursors, forKey: .cursors)
        case .callAccept(let id, let callId), .callReject(let id, let callId), .callHangUp(let id, let callId):
            try c.encode(id, forKey: .id)
            try c.encode(callId, forKey: .callId)
        case .callSignal(let id, let callId, let signal):
            try c.encode(id, forKey: .id)
            try c.encode(callId, forKey: .callId)
            try c.encode(signal, forKey: .signal)
        case .callMedia(let id, let callId, let media):
            try c.encode(id, forKey: .id)
            try c.encode(callId, forKey: .callId)
            try c.encode(media, forKey: .media)
        case .callReport(let id, let callId, let report, let reason):
            try c.encode(id, forKey: .id)
            try c.encode(callId, forKey: .callId)
            try c.encode(report, forKey: .report)
            try c.encodeIfPresent(reason, forKey: .reason)
        case .cobrowseOffer(let id, let conversationId):
            try c.encode(id, forKey: .id)
            try c.encode(conversationId, forKey: .conversationId)
        case .cobrowseAnswer(let id, let sessionId, let accept, let origin):
            try c.encode(id, forKey: .id)
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(accept, forKey: .accept)
            try c.encodeIfPresent(origin, forKey: .origin)
        case .cobrowseEnd(let id, let sessionId):
            try c.encode(id, forKey: .id)
            try c.encode(sessionId, forKey: .sessionId)
        case .cobrowseData(let sessionId, let seq, let kind, let last, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(seq, forKey: .seq)
            try c.encode(kind, forKey: .kind)
            try c.encode(last, forKey: .last)
            try c.encode(payload, forKey: .payload)
        case .cobrowsePoint(let sessionId, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(payload, forKey: .payload)
        case .cobrowseResync(let sessionId):
            try c.encode(sessionId, forKey: .sessionId)
        case .cobrowseControl(let id, let sessionId, let action):
            try c.encode(id, forKey: .id)
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(action, forKey: .action)
        case .cobrowseInput(let sessionId, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(payload, forKey: .payload)
        }
    }
}

extension ServerFrame: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FrameKeys.self)
        switch try c.frameType(ServerFrameType.self) {
        case .hello:
            self = .hello(
                connectionId: try c.decode(ConnectionID.self, forKey: .connectionId),
                participant: try c.decode(ParticipantRef.self, forKey: .participant),
                brandId: try c.decode(BrandID.self, forKey: .brandId),
                heartbeatSeconds: try c.decode(Int.self, forKey: .heartbeatSeconds))
        case .ack where c.contains(.cobrowse):
            self = .cobrowseAck(id: try c.decode(String.self, forKey: .id), session: try c.decode(CobrowseSessionDTO.self, forKey: .cobrowse))
        case .ack where c.contains(.call):
            self = .callAck(
                id: try c.decode(String.self, forKey: .id), call: try c.decode(CallDTO.self, forKey: .call),
                ice: try c.decodeIfPresent(IceConfigurationDTO.self, forKey: .ice))
        case .ack:
            self = .ack(
                id: try c.decode(String.self, forKey: .id),
                message: try c.decodeIfPresent(MessageDTO.self, forKey: .message),
                conversation: try c.decodeIfPresent(ConversationDTO.self, forKey: .conversation),
                event: try c.decodeIfPresent(ConversationEventDTO.self, forKey: .event))
        case .error:
            self = .error(id: try c.decodeIfPresent(String.self, forKey: .id), try c.decode(ErrorBody.Detail.self, forKey: .error))
        case .message:
            self = .message(try c.decode(MessageDTO.self, forKey: .message))
        case .event:
            self = .event(try c.decode(ConversationEventDTO.self, forKey: .event))
        case .conversation:
            self = .conversation(try c.decode(ConversationDTO.self, forKey: .conversation))
        case .presence:
            self = .presence(try c.decode(AgentPresenceDTO.self, forKey: .presence))
        case .queue:
            self = .queue(try c.decode(QueuePositionDTO.self, forKey: .queue))
        case .report:
            self = .report(try c.decode(LiveReportDTO.self, forKey: .report))
        case .typing:
            self = .typing(
                conversationId: try c.decode(ConversationID.self, forKey: .conversationId),
                participant: try c.decode(ParticipantRef.self, forKey: .participant),
                isTyping: try c.decode(Bool.self, forKey: .isTyping))
        case .resumed:
            self = .resumed(
                id: try c.decode(String.self, forKey: .id), cursors: try c.decode([String: Int64].self, forKey: .cursors),
                complete: try c.decode(Bool.self, forKey: .complete))
        case .call:
            self = .call(try c.decode(CallDTO.self, forKey: .call))
        case .callSignal:
            self = .callSignal(
                callId: try c.decode(CallID.self, forKey: .callId), from: try c.decode(ParticipantKind.self, forKey: .from),
                try c.decode(CallSignal.self, forKey: .signal))
        case .callMedia:
            self = .callMedia(
                callId: try c.decode(CallID.self, forKey: .callId), from: try c.decode(ParticipantKind.self, forKey: .from),
                try c.decode(CallMediaState.self, forKey: .media))
        case .cobrowse:
            self = .cobrowse(try c.decode(CobrowseSessionDTO.self, forKey: .cobrowse))
        case .cobrowseData:
            self = .cobrowseData(
                sessionId: try c.decode(CobrowseID.self, forKey: .sessionId), seq: try c.decode(Int64.self, forKey: .seq),
                kind: try c.decode(CobrowseDataKind.self, forKey: .kind), last: try c.decode(Bool.self, forKey: .last),
                payload: try c.decode(String.self, forKey: .payload))
        case .cobrowsePoint:
            self = .cobrowsePoint(sessionId: try c.decode(CobrowseID.self, forKey: .sessionId), payload: try c.decode(String.self, forKey: .payload))
        case .cobrowseResync:
            self = .cobrowseResync(sessionId: try c.decode(CobrowseID.self, forKey: .sessionId), reason: try c.decode(String.self, forKey: .reason))
        case .cobrowseInput:
            self = .cobrowseInput(sessionId: try c.decode(CobrowseID.self, forKey: .sessionId), payload: try c.decode(String.self, forKey: .payload))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FrameKeys.self)
        try c.encode(type, forKey: .type)
        switch self {
        case .hello(let connectionId, let participant, let brandId, let heartbeatSeconds):
            try c.encode(connectionId, forKey: .connectionId)
            try c.encode(participant, forKey: .participant)
            try c.encode(brandId, forKey: .brandId)
            try c.encode(heartbeatSeconds, forKey: .heartbeatSeconds)
        case .ack(let id, let message, let conversation, let event):
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(message, forKey: .message)
            try c.encodeIfPresent(conversation, forKey: .conversation)
            try c.encodeIfPresent(event, forKey: .event)
        case .error(let id, let detail):
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(detail, forKey: .error)
        case .message(let message):
            try c.encode(message, forKey: .message)
        case .event(let event):
            try c.encode(event, forKey: .event)
        case .conversation(let conversation):
            try c.encode(conversation, forKey: .conversation)
        case .presence(let presence):
            try c.encode(presence, forKey: .presence)
        case .queue(let position):
            try c.encode(position, forKey: .queue)
        case .report(let report):
            try c.encode(report, forKey: .report)
        case .typing(let conversationId, let participant, let isTyping):
            try c.encode(conversationId, forKey: .conversationId)
            try c.encode(participant, forKey: .participant)
            try c.encode(isTyping, forKey: .isTyping)
        case .resumed(let id, let cursors, let complete):
            try c.encode(id, forKey: .id)
            try c.encode(cursors, forKey: .cursors)
            try c.encode(complete, forKey: .complete)
        case .callAck(let id, let call, let ice):
            try c.encode(id, forKey: .id)
            try c.encode(call, forKey: .call)
            try c.encodeIfPresent(ice, forKey: .ice)
        case .call(let call):
            try c.encode(call, forKey: .call)
        case .callSignal(let callId, let from, let signal):
            try c.encode(callId, forKey: .callId)
            try c.encode(from, forKey: .from)
            try c.encode(signal, forKey: .signal)
        case .callMedia(let callId, let from, let media):
            try c.encode(callId, forKey: .callId)
            try c.encode(from, forKey: .from)
            try c.encode(media, forKey: .media)
        case .cobrowse(let session):
            try c.encode(session, forKey: .cobrowse)
        case .cobrowseAck(let id, let session):
            try c.encode(id, forKey: .id)
            try c.encode(session, forKey: .cobrowse)
        case .cobrowseData(let sessionId, let seq, let kind, let last, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(seq, forKey: .seq)
            try c.encode(kind, forKey: .kind)
            try c.encode(last, forKey: .last)
            try c.encode(payload, forKey: .payload)
        case .cobrowsePoint(let sessionId, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(payload, forKey: .payload)
        case .cobrowseResync(let sessionId, let reason):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(reason, forKey: .reason)
        case .cobrowseInput(let sessionId, let payload):
            try c.encode(sessionId, forKey: .sessionId)
            try c.encode(payload, forKey: .payload)
        }
    }
}
