import Foundation
import Hummingbird
import Logging
import NIOCore
import ParleyAPI
import ParleyDomain
import Tracing

/// The one WebSocket endpoint for agents and consumers.
///
/// The upgrade is decided by a route of the WebSocket router (`addRoutes`: the session, the flood
/// cooldown), the socket is SwiftNIO's with a `RealtimeSocket` on top (`RealtimeChannel`), and each
/// connection is a `RealtimeConnection`: client frames are budgeted as they are read and handled in
/// order by a task that runs only while there are frames to handle; everything sent to the client,
/// answers and events alike, goes through the connection's bounded `Outbox`, so the order a client
/// sees is the order frames were queued.
struct RealtimeController {
    static let path = "/v1/realtime"
    static let heartbeatSeconds = 30

    let conversations: ConversationService
    let calls: CallService
    let cobrowse: CobrowseService
    let hub: RealtimeHub
    let configuration: ParleyConfiguration
    let limits: RateLimits
    let metrics: ParleyMetrics

    /// The upgrade decision: who connects, with which session. Refused upgrades get Hummingbird's 400
    /// (a session closed for flooding gets 429 from the connection guard on a connection's first request).
    func addRoutes(to router: Router<ParleyRequestContext>) {
        router.get(RouterPath(stringLiteral: Self.path)) { _, context -> Response in
            let principal = try context.requirePrincipal()
            if let hash = context.sessionTokenHash, let wait = limits.floods.remaining(hash) {
                throw FloodCooldown.refusal(wait)
            }
            // Behind a proxy every socket comes from the proxy's address: only the per-consumer limit applies.
            context.realtimeUpgrade.decide(
                RealtimeUpgrade(
                    principal: principal, sessionTokenHash: context.sessionTokenHash, expiresAt: context.sessionExpiresAt,
                    ip: configuration.trustProxy ? nil : context.peerIP))
            return Response(status: .ok)
        }
    }

    /// A socket was upgraded: its connection is registered with the hub and the client greeted.
    func open(
        _ upgrade: RealtimeUpgrade, writer: any RealtimeWriter, eventLoop: any EventLoop, queueLimit: Int, logger: Logger
    ) -> RealtimeConnection {
        let outbox = hub.register(
            upgrade.principal, sessionTokenHash: upgrade.sessionTokenHash, expiresAt: upgrade.expiresAt, eventLoop: eventLoop, writer: writer)
        let connection = RealtimeConnection(
            controller: self, upgrade: upgrade, outbox: outbox, eventLoop: eventLoop,
            queueLimit: queueLimit, logger: logger)
        Task { await greet(upgrade.principal, outbox: outbox) }
        return connection
    }

    // The work done once per connection (greeting, ending) and per frame (`handle`) is kept out of
    // line: a handler task's async frame holds the locals of everything inlined into it while it runs.

    /// `hello`, and the calls ringing for a consumer (a device that connects while a call rings rings too).
    @inline(never)
    func greet(_ principal: Principal, outbox: Outbox) async {
        hello(principal, outbox: outbox)
        if case .consumer(let consumer) = principal {
            ringing(await calls.ringing(for: consumer), outbox: outbox)
            for session in await cobrowse.sessions(for: consumer) { send(.cobrowse(session), to: outbox) }
        }
    }

    @inline(never)
    private func hello(_ principal: Principal, outbox: Outbox) {
        send(
            .hello(
                connectionId: outbox.connectionId, participant: principal.participant, brandId: principal.brandId,
                heartbeatSeconds: Self.heartbeatSeconds),
            to: outbox)
    }

    @inline(never)
    private func ringing(_ calls: [CallDTO], outbox: Outbox) {
        for call in calls { send(.call(call), to: outbox) }
    }

    /// The connection ended and its admitted frames were handled: a call it took part in ends while
    /// the connection is still registered, then it leaves the hub.
    @inline(never)
    func finished(_ outbox: Outbox) async {
        await calls.connectionClosed(outbox.connectionId)
        await cobrowse.connectionClosed(outbox.connectionId)
        hub.unregister(outbox)
    }

    /// One message read from the client, on the socket's event loop: budgeted before any decoding (a
    /// flood costs the server as little as possible) and admitted for handling, or refused. False once
    /// the connection is closing.
    ///
    /// Reading never waits for handling: a frame counts when it arrives, and one that finds the
    /// handling queue full (a burst behind) is refused like one over the budget, so a flooder is
    /// closed instead of being slowed to the rate its frames are handled.
    func take(_ message: RealtimeSocket.Message, connection: RealtimeConnection, limiter: inout FrameLimiter) -> Bool {
        let outbox = connection.outbox
        var decision = limiter.take()
        if decision == .allow, case .text(let text) = message, !connection.admit(text) {
            decision = limiter.overflowed()  // handling is a burst behind: refused like a frame over budget
        }
        switch decision {
        case .allow:
            break
        case .refuse:
            metrics.realtimeFramesRefused.increment()
            if case .text(let text) = message, let id = Self.frameId(in: text) {
                send(.error(id: id, .init(code: .rateLimited, message: "Too many frames; slow down.", retryAfter: 1)), to: outbox)
            }
            return true
        case .close:
            metrics.realtimeFloodCloses.increment()
            if let sessionTokenHash = connection.sessionTokenHash { limits.floods.penalize(sessionTokenHash) }
            outbox.close(code: RealtimeCloseCode.tooManyFrames, text: "too many frames: slow down")
            return false
        }
        if case .binary = message {
            send(.error(id: nil, .init(code: .unsupportedFrame, message: "Send JSON frames as text.")), to: outbox)
        }
        return true
    }

    @inline(never)
    func handle(_ text: String, principal: Principal, ip: String?, outbox: Outbox, typingGate: TypingGate) async {
        guard let frame = decode(text, outbox: outbox) else { return }
        let started = ContinuousClock.now
        defer { metrics.frameHandled(frame.type, in: .now - started) }
        guard Traces.on else {
            return await handle(frame, principal: principal, ip: ip, outbox: outbox, typingGate: typingGate)
        }
        await withSpan("frame \(frame.type.rawValue)", ofKind: .server) { span in
            span.attributes["parley.request_id"] = RequestID.current
            span.attributes["parley.frame.type"] = frame.type.rawValue
            await handle(frame, principal: principal, ip: ip, outbox: outbox, typingGate: typingGate)
        }
    }

    private func handle(_ frame: ClientFrame, principal: Principal, ip: String?, outbox: Outbox, typingGate: TypingGate) async {
        do {
            switch frame {
            case .send(let id, let request):
                try await handleSend(id: id, request, principal: principal, ip: ip, outbox: outbox)
            case .receipt(let id, let conversationId, let receipt):
                try await handleReceipt(id: id, conversationId: conversationId, receipt, principal: principal, outbox: outbox)
            case .typing(let conversationId, let isTyping):
                try await handleTyping(conversationId: conversationId, isTyping: isTyping, principal: principal, outbox: outbox, typingGate: typingGate)
            case .view(let conversationId):
                try await handleView(conversationId: conversationId, principal: principal, outbox: outbox)
            case .resume(let id, let cursors):
                try await resume(id: id, cursors: cursors, principal: principal, outbox: outbox)
            case .callAccept, .callReject, .callHangUp, .callSignal, .callMedia, .callReport:
                try await handleCall(frame, principal: principal, outbox: outbox)
            case .cobrowseOffer, .cobrowseAnswer, .cobrowseEnd, .cobrowseData, .cobrowsePoint, .cobrowseResync, .cobrowseControl, .cobrowseInput:
                try await handleCobrowse(frame, principal: principal, outbox: outbox)
            }
        } catch {
            refuse(frame, error, outbox: outbox)
        }
    }

    /// The error frame answering `frame`.
    @inline(never)
    private func refuse(_ frame: ClientFrame, _ error: any Error, outbox: Outbox) {
        if let error = error as? ParleyError {
            send(.error(id: frame.replyId, .init(code: error.code, message: error.message, field: error.field, retryAfter: error.retryAfter)), to: outbox)
        } else {
            send(.error(id: frame.replyId, .init(code: .internalError, message: "Something went wrong on our side. Try again.")), to: outbox)
        }
    }

    // One function per kind of frame, out of line: inlined into `handle`, every kind's locals made one
    // async frame of 41 KB, allocated each time a handler task starts.

    @inline(never)
    private func handleSend(id: String, _ request: SendMessageRequest, principal: Principal, ip: String?, outbox: Outbox) async throws {
        let (response, messageJSON) = try await conversations.sendEncoded(principal, request, from: ip, fromConnection: outbox.connectionId)
        // The conversation rides along when it is new or changed beyond this message.
        let changed = !response.created || response.message.seq == 1 || response.conversation.lastSeq != response.message.seq
        if let messageJSON, let text = try? ParleyCoders.sendAck(id: id, messageJSON: messageJSON, conversation: changed ? response.conversation : nil) {
            outbox.send(text)
        } else {
            send(.ack(id: id, message: response.message, conversation: changed ? response.conversation : nil, event: nil), to: outbox)
        }
    }

    @inline(never)
    private func handleReceipt(id: String, conversationId: ConversationID, _ receipt: ReceiptRequest, principal: Principal, outbox: Outbox) async throws {
        let event = try await conversations.receipt(principal, conversationId: conversationId, receipt, fromConnection: outbox.connectionId)
        send(.ack(id: id, message: nil, conversation: nil, event: event), to: outbox)
    }

    /// At most one change per second per conversation goes out; a change held back is sent when its
    /// second is over, so an indicator never sticks.
    @inline(never)
    private func handleTyping(conversationId: ConversationID, isTyping: Bool, principal: Principal, outbox: Outbox, typingGate: TypingGate) async throws {
        let conversations = self.conversations
        let connectionId = outbox.connectionId
        try await typingGate.offer(conversationId: conversationId, isTyping: isTyping) { isTyping in
            try await conversations.typing(principal, conversationId: conversationId, isTyping: isTyping, fromConnection: connectionId)
        }
    }

    @inline(never)
    private func handleView(conversationId: ConversationID?, principal: Principal, outbox: Outbox) async throws {
        guard case .agent = principal else { return }
        if let conversationId {
            _ = try await conversations.conversation(principal, id: conversationId)
        }
        hub.view(connectionId: outbox.connectionId, conversationId: conversationId)
    }

    /// The frame, or nil after telling the client why it is not one.
    private func decode(_ text: String, outbox: Outbox) -> ClientFrame? {
        if let frame = SendFrameReader.read(text) { return frame }
        do {
            return try ParleyCoders.decoder.decode(ClientFrame.self, from: Data(text.utf8))
        } catch let error as DecodingError {
            let parleyError = ParleyError.from(error)
            send(.error(id: Self.frameId(in: text), .init(code: parleyError.code, message: parleyError.message, field: parleyError.field)), to: outbox)
        } catch {
            send(.error(id: nil, .init(code: .invalidJson, message: "The frame is not valid JSON.")), to: outbox)
        }
        return nil
    }

    /// A call frame: the call service decides, the ack carries the call as it is now.
    private func handleCall(_ frame: ClientFrame, principal: Principal, outbox: Outbox) async throws {
        let connection = outbox.connectionId
        switch frame {
        case .callAccept(let id, let callId):
            let session = try await calls.accept(principal, callId: callId, connection: connection)
            send(.callAck(id: id, call: session.call, ice: session.ice), to: outbox)
        case .callReject(let id, let callId):
            send(.callAck(id: id, call: try await calls.reject(principal, callId: callId, connection: connection), ice: nil), to: outbox)
        case .callHangUp(let id, let callId):
            send(.callAck(id: id, call: try await calls.hangUp(principal, callId: callId, connection: connection), ice: nil), to: outbox)
        case .callSignal(let id, let callId, let signal):
            send(.callAck(id: id, call: try await calls.signal(principal, callId: callId, signal, connection: connection), ice: nil), to: outbox)
        case .callMedia(let id, let callId, let media):
            send(.callAck(id: id, call: try await calls.media(principal, callId: callId, media, connection: connection), ice: nil), to: outbox)
        case .callReport(let id, let callId, let report, let reason):
            let call = try await calls.report(principal, callId: callId, report, reason: reason, connection: connection)
            send(.callAck(id: id, call: call, ice: nil), to: outbox)
        case .send, .receipt, .typing, .view, .resume, .cobrowseOffer, .cobrowseAnswer, .cobrowseEnd, .cobrowseData, .cobrowsePoint, .cobrowseResync,
            .cobrowseControl, .cobrowseInput:
            preconditionFailure("not a call frame")
        }
    }

    /// A co-browse frame: offers, answers and ends are acknowledged with the session; the page and
    /// the pointer are relayed without an answer (an `error` frame without an id when refused).
    @inline(never)
    private func handleCobrowse(_ frame: ClientFrame, principal: Principal, outbox: Outbox) async throws {
        let connection = outbox.connectionId
        switch (frame, principal) {
        case (.cobrowseOffer(let id, let conversationId), .agent(let agent)):
            send(.cobrowseAck(id: id, session: try await cobrowse.offer(agent, conversationId: conversationId, connection: connection)), to: outbox)
        case (.cobrowseAnswer(let id, let sessionId, let accept, let origin), .consumer(let consumer)):
            let session = try await cobrowse.answer(consumer, sessionId: sessionId, accept: accept, origin: origin, connection: connection)
            send(.cobrowseAck(id: id, session: session), to: outbox)
        case (.cobrowseEnd(let id, let sessionId), _):
            send(.cobrowseAck(id: id, session: try await cobrowse.end(principal, sessionId: sessionId)), to: outbox)
        case (.cobrowseData(let sessionId, let seq, let kind, let last, let payload), .consumer(let consumer)):
            try await cobrowse.data(consumer, sessionId: sessionId, seq: seq, kind: kind, last: last, payload: payload, connection: connection)
        case (.cobrowsePoint(let sessionId, let payload), .agent(let agent)):
            try await cobrowse.point(agent, sessionId: sessionId, payload: payload, connection: connection)
        case (.cobrowseResync(let sessionId), .agent(let agent)):
            try await cobrowse.resync(agent, sessionId: sessionId, connection: connection)
        case (.cobrowseControl(let id, let sessionId, let action), _):
            send(.cobrowseAck(id: id, session: try await cobrowse.control(principal, sessionId: sessionId, action: action, connection: connection)), to: outbox)
        case (.cobrowseInput(let sessionId, let payload), .agent(let agent)):
            try await cobrowse.input(agent, sessionId: sessionId, payload: payload, connection: connection)
        case (.cobrowseInput, .consumer):
            throw ParleyError(.forbidden, code: .forbidden, message: "Only the agent in control clicks and types on the customer's page.")
        case (.cobrowseOffer, .consumer), (.cobrowsePoint, .consumer), (.cobrowseResync, .consumer):
            throw ParleyError(.forbidden, code: .forbidden, message: "Only agents offer co-browse and point at the page.")
        case (.cobrowseAnswer, .agent), (.cobrowseData, .agent):
            throw ParleyError(.forbidden, code: .forbidden, message: "Only the customer answers co-browse and sends the page.")
        default:
            preconditionFailure("not a co-browse frame")
        }
    }

    /// Replays what the client missed. At most half the outbox per request so that a replay never
    /// overflows it; `resumed.cursors` tells where each conversation's replay stopped, and the client
    /// sends `resume` again from there when a cursor is still below the conversation's last sequence.
    private func resume(id: String, cursors: [String: Int64], principal: Principal, outbox: Outbox) async throws {
        if cursors.count > ConversationService.maxResumeCursors {
            throw ParleyError.invalidField("cursors", "A resume can name at most \(ConversationService.maxResumeCursors) conversations.")
        }
        var budget = max(1, configuration.realtimeQueueLimit / 2)
        var reached: [String: Int64] = [:]
        var complete = true
        for (key, lastSeen) in cursors.sorted(by: { $0.key < $1.key }) {
            guard lastSeen >= 0 else { throw ParleyError.invalidField("cursors", "Sequence numbers start at 0.") }
            let conversationId = ConversationID(rawValue: key)  // a malformed one is not found
            var position = lastSeen
            if budget > 0 {
                let frames = try await conversations.timeline(principal, conversationId: conversationId, afterSeq: lastSeen, limit: budget)
                for frame in frames {
                    send(frame, to: outbox)
                    switch frame {
                    case .message(let message): position = message.seq
                    case .event(let event): position = event.seq
                    default: break
                    }
                }
                if frames.count == budget { complete = false }
                budget -= frames.count
            } else {
                _ = try await conversations.conversation(principal, id: conversationId)
                complete = false
            }
            reached[key] = position
        }
        send(.resumed(id: id, cursors: reached, complete: complete), to: outbox)
    }

    private func send(_ frame: ServerFrame, to outbox: Outbox) {
        guard let text = try? ParleyCoders.text(frame) else { return }
        outbox.send(text)
    }

    /// The `id` of a frame that failed to decode, so that the error can still be matched to it.
    static func frameId(in text: String) -> String? {
        struct IdOnly: Decodable { var id: String? }
        return (try? ParleyCoders.decoder.decode(IdOnly.self, from: Data(text.utf8)))?.id
    }
}
