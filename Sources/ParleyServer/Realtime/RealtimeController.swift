import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import ParleyAPI
import ParleyDomain
import Tracing

/// The one WebSocket endpoint for agents and consumers.
///
/// Each connection runs two child tasks: one reads and handles client frames in order, one drains
/// the connection's bounded `Outbox` to the socket. Everything sent to the client, answers and
/// events alike, goes through the outbox, so the order a client sees is the order frames were queued.
struct RealtimeController {
    static let path = "/v1/realtime"
    static let heartbeatSeconds = 30

    let conversations: ConversationService
    let calls: CallService
    let hub: RealtimeHub
    let configuration: ParleyConfiguration
    let limits: RateLimits
    let metrics: ParleyMetrics

    func addRoutes(to router: Router<ParleyRequestContext>) {
        router.ws(RouterPath(stringLiteral: Self.path)) { _, context in
            _ = try context.requirePrincipal()
            // A session closed for flooding a moment ago. The connection guard refuses such upgrades
            // with 429 on a connection's first request; this covers a later one (Hummingbird: 400).
            if let hash = context.sessionTokenHash, let wait = limits.floods.remaining(hash) {
                throw FloodCooldown.refusal(wait)
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            let session = context.requestContext
            guard let principal = session.principal else { return }
            // Behind a proxy every socket comes from the proxy's address: only the per-consumer limit applies.
            let ip = configuration.trustProxy ? nil : session.peerIP
            await serve(
                principal: principal, sessionTokenHash: session.sessionTokenHash, expiresAt: session.sessionExpiresAt,
                ip: ip, channel: session.channel, inbound: inbound, outbound: outbound, logger: context.logger)
        }
    }

    @inline(never)
    func serve(
        principal: Principal, sessionTokenHash: String?, expiresAt: Date?, ip: String? = nil, channel: (any NIOCore.Channel)? = nil,
        inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger
    ) async {
        let outbox = opened(principal, sessionTokenHash: sessionTokenHash, expiresAt: expiresAt, channel: channel)
        let typingGate = TypingGate()
        await greet(principal, outbox: outbox)

        await run(
            principal: principal, sessionTokenHash: sessionTokenHash, ip: ip, inbound: inbound, outbound: outbound, outbox: outbox,
            typingGate: typingGate, logger: logger)
        // A call this connection took part in ends while the connection is still registered.
        await ended(outbox)
        closed(outbox)
    }

    /// The connection's two halves: a child task reads, this one writes.
    @inline(never)
    private func run(
        principal: Principal, sessionTokenHash: String?, ip: String?, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        outbox: Outbox, typingGate: TypingGate, logger: Logger
    ) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                await read(
                    inbound, principal: principal, sessionTokenHash: sessionTokenHash, ip: ip, outbox: outbox, typingGate: typingGate,
                    logger: logger)
            }
            await write(outbox, to: outbound)
            group.cancelAll()
        }
    }

    @inline(never)
    private func opened(_ principal: Principal, sessionTokenHash: String?, expiresAt: Date?, channel: (any NIOCore.Channel)?) -> Outbox {
        hub.register(principal, sessionTokenHash: sessionTokenHash, expiresAt: expiresAt, channel: channel)
    }

    @inline(never)
    private func closed(_ outbox: Outbox) {
        hub.unregister(outbox)
    }

    // An idle connection holds the async frames of what it waits in (reading, writing) for as long as
    // it is open: the task allocator keeps every frame of a suspended call chain, and an inlined
    // callee's locals become part of its caller's frame. The work done once per connection (greeting,
    // ending) and per frame (`handle`) is kept out of line, so that its frames exist only while it runs.
    // Measured with heaptrack on 1,000 idle connections (docs/architecture.md, "What an idle connection costs").

    /// `hello`, and the calls ringing for a consumer (a device that connects while a call rings rings too).
    @inline(never)
    private func greet(_ principal: Principal, outbox: Outbox) async {
        hello(principal, outbox: outbox)
        if case .consumer(let consumer) = principal {
            // In a child task: the frames of the lookup's call tree (SQL, decoding) are freed with it,
            // where in this task they would stay allocated, and touched, as long as the connection lasts.
            let calls = self.calls
            let ringing = await withTaskGroup(of: [CallDTO].self) { group in
                group.addTask { await calls.ringing(for: consumer) }
                return await group.next() ?? []
            }
            self.ringing(ringing, outbox: outbox)
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

    /// A call this connection took part in ends with it.
    @inline(never)
    private func ended(_ outbox: Outbox) async {
        await calls.connectionClosed(outbox.connectionId)
    }

    /// Reads the client's frames: reassembles them within the size limit, applies the frame budget
    /// as each one is read, before any decoding (a flood costs the server as little as possible), and
    /// hands the admitted ones to a handler through a queue of at most a burst's worth.
    ///
    /// Reading never waits for handling: when handling was done in this loop, a frame that took long
    /// to handle (a write on a busy database) held the reading back, the client's frames waited in
    /// TCP's buffers, and the budget counted them only as fast as they were handled: a flooder was
    /// slowed to the budget's rate instead of being closed, and kept a connection's worth of work
    /// queued for ever. Now a frame counts when it arrives, and one that finds the queue full is
    /// refused like one over the budget.
    ///
    /// The handler is a task only while there is something to handle (`FrameQueue`): it starts
    /// when a frame finds the queue idle and ends when the queue is empty. An idle connection, which
    /// is what a server holds most of, keeps no handler task and no stream waiting for frames.
    @inline(never)
    private func read(
        _ inbound: WebSocketInboundStream, principal: Principal, sessionTokenHash: String?, ip: String?, outbox: Outbox,
        typingGate: TypingGate, logger: Logger
    ) async {
        var limiter = FrameLimiter(perSecond: configuration.realtimeFramesPerSecond)
        let queue = FrameQueue(limit: Int(limiter.burst))
        await withDiscardingTaskGroup { group in
            await readFrames(inbound, limiter: &limiter, sessionTokenHash: sessionTokenHash, outbox: outbox, logger: logger) { text in
                switch queue.offer(text) {
                case .full:
                    return false
                case .queued:
                    return true
                case .startHandler:
                    group.addTask {
                        // Each frame's work (and the jobs and logs it causes) under `<connection>/<n>`.
                        while let (text, number) = queue.next() {
                            await RequestID.with("\(outbox.connectionId)/\(number)") {
                                await handle(text, principal: principal, ip: ip, outbox: outbox, typingGate: typingGate)
                            }
                        }
                    }
                    return true
                }
            }
            // The group waits for the handler: frames admitted within the budget are handled (at most
            // a burst's worth), even when the connection is closing, as they would have been had the
            // handler started before the close (a flood read from TCP's buffers at once is admitted and
            // closed before the handler first runs).
        }
        outbox.finish()  // the client went away: stop writing
    }

    /// The reading half of `read`: `admit` queues a frame within the budget for handling, false when
    /// the queue is full.
    @inline(never)
    private func readFrames(
        _ inbound: WebSocketInboundStream, limiter: inout FrameLimiter, sessionTokenHash: String?, outbox: Outbox, logger: Logger,
        admit: (String) -> Bool
    ) async {
        var assembler = MessageAssembler(maxSize: configuration.maxRealtimeFrameBytes)
        do {
            // Only the iteration waits here; each frame is taken out of line (`take`), so that its
            // temporaries are not part of this long-lived frame.
            for try await frame in inbound {
                guard take(frame, assembler: &assembler, limiter: &limiter, sessionTokenHash: sessionTokenHash, outbox: outbox, admit: admit)
                else { return }
            }
        } catch {
            logger.debug("real-time connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// One frame read: reassembled, budgeted, admitted or refused. False once the connection is closing.
    @inline(never)
    private func take(
        _ frame: WebSocketDataFrame, assembler: inout MessageAssembler, limiter: inout FrameLimiter, sessionTokenHash: String?,
        outbox: Outbox, admit: (String) -> Bool
    ) -> Bool {
        let message: WebSocketMessage
        do {
            guard let complete = try assembler.add(frame) else { return true }
            message = complete
        } catch MessageAssembler.Failure.tooLarge {
            outbox.close(code: 1009, text: "message too large")
            return false
        } catch {
            outbox.close(code: 1002, text: "protocol error")
            return false
        }
        // The limit comes before any decoding: a flood costs the server as little as possible.
        var decision = limiter.take()
        if decision == .allow, case .text(let text) = message, !admit(text) {
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
            if let sessionTokenHash { limits.floods.penalize(sessionTokenHash) }
            outbox.close(code: RealtimeCloseCode.tooManyFrames, text: "too many frames: slow down")
            return false
        }
        if case .binary = message {
            send(.error(id: nil, .init(code: .unsupportedFrame, message: "Send JSON frames as text.")), to: outbox)
        }
        return true
    }

    /// Drains the outbox to the socket until the client leaves or the connection is closed.
    @inline(never)
    private func write(_ outbox: Outbox, to outbound: WebSocketOutboundWriter) async {
    for await frame in outbox.stream {
        if outbox.pendingClose != nil { break }
        // A write waits while the client's receive buffer is full; the hub closes the socket
        // of a write that waits past the write timeout (a client that stopped reading).
        outbox.writeBegins()
        do {
            try await outbound.write(.text(frame))
            metrics.realtimeFramesSent.increment()
        } catch {
            outbox.writeEnds()
            break
        }
        outbox.writeEnds()
    }
    if let reason = outbox.pendingClose, outbox.channel?.isActive ?? true {
        outbox.writeBegins()
        try? await outbound.close(Self.closeCode(reason.code), reason: reason.text)
        outbox.writeEnds()
    }
    }

    static func closeCode(_ code: UInt16) -> WebSocketErrorCode {
        code == 1009 ? .messageTooLarge : .unknown(code)
    }

    @inline(never)
    private func handle(_ text: String, principal: Principal, ip: String?, outbox: Outbox, typingGate: TypingGate) async {
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
        case .send, .receipt, .typing, .view, .resume:
            preconditionFailure("not a call frame")
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
