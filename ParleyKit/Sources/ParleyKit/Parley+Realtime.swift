import Foundation
import ParleyAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the app hears from Parley while connected.
public enum ParleyEvent: Sendable {
    /// A message in one of the consumer's conversations (the agents', and the consumer's own from
    /// another device). Each is delivered once, also across reconnects and restarts.
    case message(MessageDTO)
    /// Something that happened in a conversation: receipts (the agents read the consumer's
    /// messages), assignment, resolution, calls.
    case event(ConversationEventDTO)
    case conversation(ConversationDTO)
    case typing(conversationId: ConversationID, participant: ParticipantRef, isTyping: Bool)
    case connection(ConnectionState)
    /// One of the consumer's own messages changed state: sent, failed (with the server's reason),
    /// delivered or read by an agent, or another attempt that did not reach the server.
    case outgoing(Parley.OutgoingMessage)
    /// A voice note's upload: the fraction of its bytes sent, from 0 to 1.
    case uploadProgress(clientMessageId: String, fraction: Double)
    /// The brand's engagement rule asks the app to show this (its own UI), because of something
    /// the app reported (`report`).
    case prompt(EngagementPromptDTO)
    /// The consumer's conversation waits for an agent: its place in the queue and the expected
    /// wait (a nil `position`: an agent has it; an `.event` of kind `assigned` says who).
    case queue(QueuePositionDTO)
    /// A call in one of the consumer's conversations: `ringing` when an agent calls (show it, with
    /// `inviterName` and `media`; `declineCall` or the drop-in screen to answer), then each change
    /// (answered elsewhere, ended, missed). While the app has no connection a ringing call comes as
    /// a push notification whose `kind` is `call`.
    case call(CallDTO)
    /// A conversation closed (an agent resolved it, or it closed on its own after the customer went
    /// quiet). Show "This conversation has been closed"; when `survey == .offered`, ask for a rating
    /// (`rate`). The consumer's next message starts a new conversation.
    case closed(ConversationDTO)

    public enum ConnectionState: Sendable, Equatable {
        case connecting
        case connected
        /// Not connected; `retrying` when the SDK will try again by itself.
        case disconnected(retrying: Bool)
    }
}

extension Parley {
    /// Opens the real-time connection (the app is in the foreground and shows the conversation):
    /// catches up on everything since the last message this device saw, then follows along.
    /// Dropped connections are reopened with back-off until `disconnect()`. While connected the
    /// outbox is sent too (over the connection, else over HTTP), as `start()` does: an app that
    /// only ever connects never leaves a message pending.
    public func connect() {
        guard realtime == nil else { return }
        wantsConnection = true
        if !loopRunning {
            start()
            loopStartedByConnect = true
        }
        realtime = Task { [retryDelay] in
            var delay = retryDelay
            while self.wantsConnection, !Task.isCancelled {
                let reachedServer = await self.runConnection()
                guard self.wantsConnection, !Task.isCancelled else { break }
                self.emit(.connection(.disconnected(retrying: true)))
                delay = reachedServer ? retryDelay : min(delay * 2, .seconds(60))
                try? await Task.sleep(for: delay)
            }
            self.emit(.connection(.disconnected(retrying: false)))
        }
    }

    /// Closes the real-time connection (the app went to the background). The outbox keeps working
    /// over HTTP while `start()` runs.
    public func disconnect() {
        if loopStartedByConnect {
            stop()
        }
        wantsConnection = false
        frames?.finish()
        frames = nil
        realtime?.cancel()
        realtime = nil
    }

    /// The app shows the conversation up to its newest message: the agents see "read", and the
    /// conversation's `unread` count drops to none. Over the connection when there is one, else
    /// over HTTP (a screen that only loaded `messages(in:)`).
    public func markRead(_ conversationId: ConversationID) async {
        let newest = cachedMessages(in: conversationId).last(where: { $0.senderKind != .consumer })?.seq ?? 0
        let seq = max(cursors[conversationId.rawValue] ?? 0, newest)
        guard seq > 0 else { return }
        let receipt = ReceiptRequest(upToSeq: seq, state: .read)
        if greeted, frames != nil {
            await sendFrame(.receipt(id: nextFrameId(), conversationId: conversationId, receipt))
        } else {
            _ = try? await client.acknowledge(conversationId: conversationId, upToSeq: seq, state: .read)
        }
    }

    /// Declines a call an agent rings the consumer for (a `.call` event in state `ringing`).
    /// Answering one takes the drop-in conversation screen (it holds the audio and video).
    public func declineCall(_ callId: CallID) async {
        await sendFrame(.callReject(id: nextFrameId(), callId: callId))
    }

    /// The consumer is (or stopped) typing.
    public func typing(_ isTyping: Bool, in conversationId: ConversationID) async {
        await sendFrame(.typing(conversationId: conversationId, isTyping: isTyping))
    }

    /// One connection, until it drops. Returns whether the server answered (hello).
    private func runConnection() async -> Bool {
        emit(.connection(.connecting))
        do {
            try await ensureSession()
        } catch {
            return false
        }
        guard let token = session?.token, var components = URLComponents(url: serverURL, resolvingAgainstBaseURL: false) else { return false }
        components.scheme = components.scheme == "https" ? "wss" : "ws"
        components.path = (components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path) + "/v1/realtime"
        guard let url = components.url else { return false }
        let (stream, outgoing) = AsyncStream.makeStream(of: String.self)
        self.frames = outgoing
        greeted = false
        defer {
            outgoing.finish()
            if self.frames != nil { self.frames = nil }
            greeted = false
            // What waited for an answer on this connection is sent again (same ids) by the outbox.
            for (_, waiting) in pendingReplies { waiting.resume(returning: nil) }
            pendingReplies = [:]
        }
        do {
            try await transport.realtime(url: url, token: token, outgoing: stream) { text in
                await self.receive(text)
            }
        } catch ParleyTransportError.unauthorized {
            session = nil  // expired or revoked: a new session on the next attempt
        } catch {}
        return greeted
    }

    private func receive(_ text: String) async {
        guard let frame = try? decoder.decode(ServerFrame.self, from: Data(text.utf8)) else { return }
        if case .hello = frame {
            greeted = true
            emit(.connection(.connected))
            // What waits in the outbox goes now, over this connection.
            wakeLoop()
            // Catch up from what this device saw last.
            await sendFrame(.resume(id: "resume", cursors: cursors))
            return
        }
        await handle(frame)
    }

    private func handle(_ frame: ServerFrame) async {
        switch frame {
        case .ack(let id, _, _, _):
            pendingReplies.removeValue(forKey: id)?.resume(returning: frame)
        case .error(let id?, _):
            pendingReplies.removeValue(forKey: id)?.resume(returning: frame)
        case .message(let message):
            guard advance(message.conversationId, to: message.seq) else { return }  // seen already
            cache([message], in: message.conversationId)
            emit(.message(message))
            if message.senderKind == .agent {
                // Received on the device: the agents see "delivered".
                await sendFrame(.receipt(
                    id: nextFrameId(), conversationId: message.conversationId, ReceiptRequest(upToSeq: message.seq, state: .delivered)))
            }
        case .event(let event):
            guard advance(event.conversationId, to: event.seq) else { return }
            // A voice note processed (its length, waveform and renditions) or a message's delivery
            // on a channel: the message as it is now, for the cache and the timeline.
            if let message = event.message { cache([message], in: message.conversationId) }
            emit(.event(event))
            if event.kind == .stateChanged, event.state == .resolved, let conversation = try? await client.conversation(id: event.conversationId) {
                emit(.closed(conversation))
            }
            if event.kind == .receipt, event.actorKind == .agent, let seq = event.upToSeq, let state = event.deliveryState {
                applyReceipt(state, upTo: seq, in: event.conversationId)
            }
        case .conversation(let conversation):
            emit(.conversation(conversation))
        case .queue(let place):
            emit(.queue(place))
        case .call(let call):
            emit(.call(call))
        case .typing(let conversationId, let participant, let isTyping):
            emit(.typing(conversationId: conversationId, participant: participant, isTyping: isTyping))
        case .resumed(_, let replayed, let complete):
            if !complete { await sendFrame(.resume(id: "resume", cursors: replayed)) }
        default:
            break
        }
    }

    /// Notes that `seq` arrived; false when it was seen already (a replay overlapping live frames).
    /// Live frames can arrive out of order (two entries committed back to back are published by
    /// different tasks), so a number below the cursor is not a duplicate unless this process saw
    /// it, or it was seen before this process started (the cursor then, sealed on the device).
    private func advance(_ conversationId: ConversationID, to seq: Int64) -> Bool {
        let key = conversationId.rawValue
        var recent = recentSeqs[key] ?? []
        if recent.contains(seq) { return false }
        if let before = startCursors[key], seq <= before { return false }
        recent.insert(seq)
        if recent.count > 512, let oldest = recent.min() { recent.remove(oldest) }
        recentSeqs[key] = recent
        if seq > (cursors[key] ?? 0) {
            cursors[key] = seq
            try? store.write(Self.cursorsFile, cursors)
        }
        return true
    }

    /// Sends a frame the server answers (`ack` or `error` with the frame's id) and waits for the
    /// answer: nil when not connected, or when the connection drops or `timeout` passes first.
    func realtimeRequest(_ frame: ClientFrame, id: String, timeout: Duration = .seconds(15)) async -> ServerFrame? {
        guard greeted, let frames, let data = try? encoder.encode(frame), pendingReplies[id] == nil else { return nil }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.answer(id, with: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            pendingReplies[id] = continuation
            frames.yield(String(decoding: data, as: UTF8.self))
        }
    }

    /// A frame id: short (each byte goes over the customer's mobile data), unique on the connection.
    func nextFrameId() -> String {
        frameCounter += 1
        return "k\(frameCounter)"
    }

    private func answer(_ id: String, with frame: ServerFrame?) {
        pendingReplies.removeValue(forKey: id)?.resume(returning: frame)
    }

    private func sendFrame(_ frame: ClientFrame) async {
        guard let frames, let data = try? encoder.encode(frame) else { return }
        frames.yield(String(decoding: data, as: UTF8.self))
    }

    nonisolated func emit(_ event: ParleyEvent) {
        for subscriber in subscribers.withLock({ Array($0.values) }) { subscriber.yield(event) }
    }
}
