import Crypto
import Foundation
import ParleyAPI
import ParleyDomain
import ParleyServer
import ParleyStore
import Synchronization
import Testing

/// An `error` frame, as a Swift error.
struct FrameError: Error {
    let detail: ErrorBody.Detail
}

@Suite("Calls: invitation, signalling relay and records")
struct CallTests {
    static let turnSecret = "test-turn-secret-0123456789"
    static let offer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
    static let videoOffer = offer + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n"

    static func configure(_ configuration: inout ParleyConfiguration) {
        configuration.turnURLs = ["turn:127.0.0.1:3478?transport=udp"]
        configuration.stunURLs = ["stun:127.0.0.1:3478"]
        configuration.turnSecret = turnSecret
        // Long enough for a machine busy with every other test (on PostgreSQL too): only the
        // timeout test shortens them.
        configuration.callRingSeconds = 30
        configuration.callConnectSeconds = 30
    }

    /// A brand with a calling agent, a consumer with an open web conversation, and both connected.
    struct Party: Sendable {
        let acme: BrandScenario
        let agentToken: String
        let agent: AgentDTO
        let agentSocket: RealtimeProbe
        let consumerToken: String
        let consumer: ConsumerDTO
        let consumerSocket: RealtimeProbe
        let conversation: ConversationDTO

        static func make(
            _ server: TestServer, permissions: [AgentPermission] = [.initiateVoiceCall, .initiateVideoCall], channel: Channel? = nil
        ) async throws -> Party {
            let acme = try await BrandScenario.make(server)
            let (agentToken, agent) = try await acme.agent(permissions: permissions)
            var appId: AppID?
            if let channel { appId = try await acme.app(channel: channel).id }
            let (consumerToken, consumer) = try await acme.consumer(name: "Ana", appId: appId)
            let reply = try await server.post(
                "/v1/consumer/messages", token: consumerToken,
                json: SendMessageRequest(clientMessageId: UUID().uuidString, text: "Can you call me?"))
            let sent = try reply.decode(SendMessageResponse.self)
            return Party(
                acme: acme, agentToken: agentToken, agent: agent,
                agentSocket: try await RealtimeProbe.connect(port: server.port, token: agentToken),
                consumerToken: consumerToken, consumer: consumer,
                consumerSocket: try await RealtimeProbe.connect(port: server.port, token: consumerToken),
                conversation: sent.conversation)
        }

        func invite(_ server: TestServer, media: CallMedia = .voice) async throws -> TestServer.Reply {
            try await server.post(
                "/v1/conversations/\(conversation.id)/calls", token: agentToken,
                json: StartCallRequest(media: media, connectionId: agentSocket.connectionId))
        }

        func close() async {
            await agentSocket.close()
            await consumerSocket.close()
        }
    }

    static func call(_ frame: ServerFrame, _ state: CallState) -> CallDTO? {
        if case .call(let call) = frame, call.state == state { return call }
        return nil
    }

    static func callEvent(_ frame: ServerFrame) -> ConversationEventDTO? {
        if case .event(let event) = frame, event.kind == .call { return event }
        return nil
    }

    /// Sends a call frame and returns its answer: the call, or the error.
    static func request(_ socket: RealtimeProbe, _ frame: ClientFrame, id: String) async throws -> Result<(CallDTO, IceConfigurationDTO?), FrameError> {
        try socket.send(frame)
        let answer = try await socket.next { frame in
            switch frame {
            case .callAck(let ackId, _, _): ackId == id
            case .error(let errorId, _): errorId == id
            default: false
            }
        }
        switch answer {
        case .callAck(_, let call, let ice): return .success((call, ice))
        case .error(_, let detail): return .failure(FrameError(detail: detail))
        default: throw TestFailure("unexpected \(answer)")
        }
    }

    static func errorCode(_ result: Result<(CallDTO, IceConfigurationDTO?), FrameError>) -> String? {
        if case .failure(let error) = result { return error.detail.code.rawValue }
        return nil
    }

    @Test("a call from invitation to hang-up: ringing on every device, signalling only to the answering one, record stored")
    func fullCall() async throws {
        // Timeouts long enough for a machine busy with other tests; the timeout tests use short ones.
        try await TestServer.run(configure: {
            Self.configure(&$0)
            $0.callRingSeconds = 30
            $0.callConnectSeconds = 30
        }) { server in
            let party = try await Party.make(server)
            let secondDevice = try await RealtimeProbe.connect(port: server.port, token: party.consumerToken)
            let otherAgent = try await RealtimeProbe.connect(port: server.port, token: party.acme.adminToken)

            let reply = try await party.invite(server)
            #expect(reply.status == .created)
            let started = try reply.decode(CallSessionResponse.self)
            #expect(started.call.state == .ringing)
            #expect(started.call.inviterName == party.agent.name)
            #expect(started.call.ringsUntil != nil)

            // TURN REST credentials: "<expiry>:<call>.<side>", base64(HMAC-SHA1(secret, user name)).
            #expect(started.ice.iceTransportPolicy == "all")
            #expect(started.ice.iceServers.first?.urls == ["stun:127.0.0.1:3478"])
            let turn = try #require(started.ice.iceServers.first { $0.username != nil })
            let username = try #require(turn.username)
            let parts = username.split(separator: ":", maxSplits: 1)
            #expect(parts.count == 2)
            let expiry = try #require(Int(parts[0]))
            let now = Int(Date().timeIntervalSince1970)
            #expect(expiry > now + 3600 && expiry <= now + 4 * 3600 + 5)
            #expect(parts[1] == "\(started.call.id).agent")
            let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(username.utf8), using: SymmetricKey(data: Data(Self.turnSecret.utf8)))
            #expect(turn.credential == Data(mac).base64EncodedString())

            // Both consumer devices ring and learn who calls.
            let ringing = try #require(Self.call(try await party.consumerSocket.next(where: { Self.call($0, .ringing) != nil }), .ringing))
            #expect(ringing.inviterName == party.agent.name)
            #expect(ringing.media == .voice)
            _ = try await secondDevice.next(where: { Self.call($0, .ringing) != nil })

            // Device 1 answers and gets its own credentials; device 2 stops ringing.
            let accepted = try await Self.request(party.consumerSocket, .callAccept(id: "a1", callId: started.call.id), id: "a1").get()
            #expect(accepted.0.state == .connecting)
            #expect(accepted.0.answeredBy == party.consumer.id.rawValue)
            #expect(accepted.1?.iceServers.last?.username?.hasSuffix("\(started.call.id).consumer") == true)
            _ = try await secondDevice.next(where: { Self.call($0, .connecting) != nil })
            _ = try await party.agentSocket.next(where: { Self.call($0, .connecting) != nil })
            // A second answer, from the other device, is refused.
            #expect(Self.errorCode(try await Self.request(secondDevice, .callAccept(id: "a2", callId: started.call.id), id: "a2")) == "call_already_answered")

            // Offer and candidates reach the answering device only; the answer reaches the agent.
            let offer = CallSignal(kind: .offer, sdp: Self.offer)
            _ = try await Self.request(party.agentSocket, .callSignal(id: "s1", callId: started.call.id, offer), id: "s1").get()
            guard case .callSignal(_, .agent, let relayed) = try await party.consumerSocket.next(where: {
                if case .callSignal = $0 { return true } else { return false }
            }) else { throw TestFailure("no offer") }
            #expect(relayed == offer)
            let candidate = CallSignal(kind: .candidate, candidate: "candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host", sdpMid: "0", sdpMLineIndex: 0)
            _ = try await Self.request(party.consumerSocket, .callSignal(id: "s2", callId: started.call.id, CallSignal(kind: .answer, sdp: Self.offer)), id: "s2").get()
            _ = try await Self.request(party.consumerSocket, .callSignal(id: "s3", callId: started.call.id, candidate), id: "s3").get()
            var atAgent: [CallSignal] = []
            while atAgent.count < 2 {
                if case .callSignal(_, .consumer, let signal) = try await party.agentSocket.next(where: {
                    if case .callSignal = $0 { return true } else { return false }
                }) { atAgent.append(signal) }
            }
            #expect(atAgent.map(\.kind) == [.answer, .candidate])
            // Others in the brand cannot signal into the call, nor can the second device.
            #expect(Self.errorCode(try await Self.request(otherAgent, .callSignal(id: "x1", callId: started.call.id, offer), id: "x1")) == "call_not_found")
            #expect(Self.errorCode(try await Self.request(secondDevice, .callSignal(id: "x2", callId: started.call.id, candidate), id: "x2")) == "call_on_other_device")

            // Media connects; mute is shown to the other side.
            let active = try await Self.request(party.agentSocket, .callReport(id: "r1", callId: started.call.id, .connected, reason: nil), id: "r1").get()
            #expect(active.0.state == .active)
            _ = try await Self.request(party.consumerSocket, .callMedia(id: "m1", callId: started.call.id, CallMediaState(muted: true, cameraOn: false)), id: "m1").get()
            guard case .callMedia(_, .consumer, let media) = try await party.agentSocket.next(where: {
                if case .callMedia = $0 { return true } else { return false }
            }) else { throw TestFailure("no media state") }
            #expect(media.muted)

            // The agent hangs up: both sides and the rest of the brand see the end and the timeline row.
            let ended = try await Self.request(party.agentSocket, .callHangUp(id: "h1", callId: started.call.id), id: "h1").get().0
            #expect(ended.state == .ended)
            #expect(ended.outcome == .completed)
            #expect(ended.endReason == .hungUp)
            #expect(ended.endedBy == .agent)
            #expect(ended.durationSeconds != nil)
            let row = try #require(Self.callEvent(try await party.consumerSocket.next(where: { Self.callEvent($0) != nil })))
            #expect(row.call?.id == started.call.id)
            #expect(row.call?.outcome == .completed)
            _ = try await otherAgent.next(where: { Self.callEvent($0) != nil })
            // Hanging up again answers with the record and changes nothing.
            let again = try await Self.request(party.consumerSocket, .callHangUp(id: "h2", callId: started.call.id), id: "h2").get().0
            #expect(again.endedBy == .agent)

            // The record: listed for agents and for the consumer, and in the stored timeline.
            let list = try await server.get("/v1/conversations/\(party.conversation.id)/calls", token: party.acme.adminToken)
            let record = try #require(try list.decode(ListResponse<CallDTO>.self).items.first)
            #expect(record.id == started.call.id)
            #expect(record.outcome == .completed)
            #expect(record.invitedBy == party.agent.id.rawValue)
            #expect(record.answeredBy == party.consumer.id.rawValue)
            #expect(record.answeredAt != nil && record.connectedAt != nil && record.endedAt != nil)
            #expect(record.seq == row.seq)
            let mine = try await server.get("/v1/consumer/conversations/\(party.conversation.id)/calls", token: party.consumerToken)
            #expect(try mine.decode(ListResponse<CallDTO>.self).items.map(\.id) == [started.call.id])
            let events = try await server.get("/v1/conversations/\(party.conversation.id)/events", token: party.agentToken)
            #expect(try events.decode(ListResponse<ConversationEventDTO>.self).items.contains { $0.kind == .call && $0.call?.outcome == .completed })
            #expect(server.services.calls.liveCount == 0)

            await secondDevice.close()
            await otherAgent.close()
            await party.close()
        }
    }

    @Test("a call's new state is stored before anyone hears of it: whoever is told can read it back")
    func storedBeforeTold() async throws {
        let bus = StoreCheckingBus()
        try await TestServer.run(bus: bus, configure: Self.configure) { server in
            bus.store.withLock { $0 = server.services.store }
            let party = try await Party.make(server)
            let started = try await party.invite(server).decode(CallSessionResponse.self)
            _ = try await party.consumerSocket.next(where: { Self.call($0, .ringing) != nil })
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "a1", callId: started.call.id), id: "a1").get()
            _ = try await party.agentSocket.next(where: { Self.call($0, .connecting) != nil })
            _ = try await Self.request(party.agentSocket, .callReport(id: "r1", callId: started.call.id, .connected, reason: nil), id: "r1").get()
            _ = try await party.consumerSocket.next(where: { Self.call($0, .active) != nil })
            _ = try await Self.request(party.agentSocket, .callHangUp(id: "h1", callId: started.call.id), id: "h1").get()
            _ = try await party.consumerSocket.next(where: { Self.call($0, .ended) != nil })
            let seen = bus.seen.withLock { $0 }
            #expect(seen.map(\.published) == [.ringing, .connecting, .active, .ended])
            for check in seen {
                #expect(check.stored == check.published, "published \(check.published) while the store had \(String(describing: check.stored))")
            }
            await party.close()
        }
    }

    @Test("refusals: permission, channel, second call, foreign connection, consumer token, other brand")
    func refusals() async throws {
        try await TestServer.run(configure: Self.configure) { server in
            let voiceOnly = try await Party.make(server, permissions: [.initiateVoiceCall])
            let video = try await voiceOnly.invite(server, media: .video)
            #expect(video.status == .forbidden)
            #expect(try video.error.code == "call_permission_missing")

            let nobody = try await Party.make(server, permissions: [])
            let refused = try await nobody.invite(server)
            #expect(refused.status == .forbidden)

            let sms = try await Party.make(server, channel: .sms)
            let noCalls = try await sms.invite(server)
            #expect(noCalls.status == .unprocessableContent)
            #expect(try noCalls.error.code == "channel_cannot_call")
            // The consumer on SMS never hears of it.
            #expect(try await sms.consumerSocket.expectSilence() == nil)

            // A connection id that is not the agent's own.
            let borrowed = try await server.post(
                "/v1/conversations/\(voiceOnly.conversation.id)/calls", token: voiceOnly.agentToken,
                json: StartCallRequest(media: .voice, connectionId: voiceOnly.consumerSocket.connectionId))
            #expect(try borrowed.error.code == "connection_not_found")
            // A consumer cannot start a call.
            let byConsumer = try await server.post(
                "/v1/conversations/\(voiceOnly.conversation.id)/calls", token: voiceOnly.consumerToken,
                json: StartCallRequest(media: .voice, connectionId: voiceOnly.consumerSocket.connectionId))
            #expect(byConsumer.status == .forbidden)
            // Another brand's agent does not find the conversation.
            let foreign = try await Party.make(server)
            let across = try await server.post(
                "/v1/conversations/\(voiceOnly.conversation.id)/calls", token: foreign.agentToken,
                json: StartCallRequest(media: .voice, connectionId: foreign.agentSocket.connectionId))
            #expect(across.status == .notFound)
            #expect(try await server.get("/v1/conversations/\(voiceOnly.conversation.id)/calls", token: foreign.agentToken).status == .notFound)

            // One call at a time per conversation.
            let first = try await voiceOnly.invite(server)
            #expect(first.status == .created)
            let second = try await voiceOnly.invite(server)
            #expect(second.status == .conflict)
            #expect(try second.error.code == "call_in_progress")
            // Nobody else can answer or hang up: the other brand's consumer, or the agent "accepting".
            let callId = try first.decode(CallSessionResponse.self).call.id
            #expect(Self.errorCode(try await Self.request(foreign.consumerSocket, .callAccept(id: "f1", callId: callId), id: "f1")) == "call_not_found")
            #expect(Self.errorCode(try await Self.request(voiceOnly.agentSocket, .callAccept(id: "f2", callId: callId), id: "f2")) == "not_allowed_in_call")
            // Signalling before the answer is refused.
            #expect(Self.errorCode(try await Self.request(voiceOnly.agentSocket, .callSignal(id: "f3", callId: callId, CallSignal(kind: .offer, sdp: Self.offer)), id: "f3")) == "call_not_answered")
            // Garbage signals are refused with a field.
            _ = try await Self.request(voiceOnly.consumerSocket, .callAccept(id: "a", callId: callId), id: "a").get()
            #expect(Self.errorCode(try await Self.request(voiceOnly.agentSocket, .callSignal(id: "f4", callId: callId, CallSignal(kind: .offer, sdp: "<html>")), id: "f4")) == "invalid_field")
            // Voice-only inviter: video in an offer, or a camera turned on, is refused.
            #expect(Self.errorCode(try await Self.request(voiceOnly.consumerSocket, .callSignal(id: "f5", callId: callId, CallSignal(kind: .offer, sdp: Self.videoOffer)), id: "f5")) == "video_not_allowed")
            #expect(Self.errorCode(try await Self.request(voiceOnly.agentSocket, .callMedia(id: "f6", callId: callId, CallMediaState(muted: false, cameraOn: true)), id: "f6")) == "video_not_allowed")
            // A client cannot claim a server-side reason.
            #expect(Self.errorCode(try await Self.request(voiceOnly.agentSocket, .callReport(id: "f7", callId: callId, .failed, reason: .serverShutdown), id: "f7")) == "invalid_field")

            for party in [voiceOnly, nobody, sms, foreign] { await party.close() }
        }
    }

    @Test("missed, rejected, cancelled, failed to connect, and a page that closes: each gets its record")
    func endings() async throws {
        // The ring and connect timers run on a manual clock: the test moves it past them.
        let clock = ManualClock()
        try await TestServer.run(clock: clock, configure: Self.configure) { server in
            let party = try await Party.make(server)
            func start() async throws -> CallID {
                clock.advance(by: .seconds(1))  // each call invited at its own time, for the list's order
                let reply = try await party.invite(server)
                #expect(reply.status == .created)
                let id = try reply.decode(CallSessionResponse.self).call.id
                _ = try await party.consumerSocket.next(where: { Self.call($0, .ringing)?.id == id })
                return id
            }
            func endedRecord(_ id: CallID) async throws -> CallDTO {
                let event = try await party.agentSocket.next(within: 10, where: { Self.callEvent($0)?.callId == id })
                return try #require(Self.callEvent(event)?.call)
            }
            /// Moves the clock past the 30 s timers (once the server has armed one) and waits for the record.
            func endedByTimer(_ id: CallID) async throws -> CallDTO {
                try await clock.advanceOnceSleeping(by: .seconds(31))
                return try await endedRecord(id)
            }

            // Nobody answers within the ring timeout.
            let missed = try await start()
            let missedRecord = try await endedByTimer(missed)
            #expect(missedRecord.outcome == .missed)
            #expect(missedRecord.endReason == .noAnswer)
            #expect(missedRecord.durationSeconds == 0)
            // Accepting afterwards is refused.
            #expect(Self.errorCode(try await Self.request(party.consumerSocket, .callAccept(id: "late", callId: missed), id: "late")) == "call_ended")

            let rejected = try await start()
            _ = try await Self.request(party.consumerSocket, .callReject(id: "r", callId: rejected), id: "r").get()
            #expect(try await endedRecord(rejected).outcome == .rejected)

            let cancelled = try await start()
            // (The agent's own socket may see the timeline event before the ack, so the ack is the record here.)
            let cancelledRecord = try await Self.request(party.agentSocket, .callHangUp(id: "c", callId: cancelled), id: "c").get().0
            _ = try await party.consumerSocket.next(where: { Self.callEvent($0)?.callId == cancelled })
            #expect(cancelledRecord.outcome == .cancelled)
            #expect(cancelledRecord.endedBy == .agent)

            // Answered, but media never connects within the connect timeout.
            let stuck = try await start()
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "s", callId: stuck), id: "s").get()
            let stuckRecord = try await endedByTimer(stuck)
            #expect(stuckRecord.outcome == .failed)
            #expect(stuckRecord.endReason == .connectTimeout)

            // A side reports ICE failure.
            let iceFailed = try await start()
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "i", callId: iceFailed), id: "i").get()
            _ = try await Self.request(party.consumerSocket, .callReport(id: "i2", callId: iceFailed, .failed, reason: .iceFailed), id: "i2").get()
            #expect(try await endedRecord(iceFailed).endReason == .iceFailed)

            // The consumer's page closes during the call: the agent is told at once.
            let dropped = try await start()
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "d", callId: dropped), id: "d").get()
            _ = try await Self.request(party.consumerSocket, .callReport(id: "d2", callId: dropped, .connected, reason: nil), id: "d2").get()
            await party.consumerSocket.close()
            let droppedRecord = try await endedRecord(dropped)
            #expect(droppedRecord.outcome == .failed)
            #expect(droppedRecord.endReason == .consumerDisconnected)

            let list = try await server.get("/v1/conversations/\(party.conversation.id)/calls", token: party.agentToken)
            #expect(try list.decode(ListResponse<CallDTO>.self).items.map(\.outcome) == [.failed, .failed, .failed, .cancelled, .rejected, .missed])
            await party.agentSocket.close()
        }
    }

    @Test("a voice call turns into a video call when the inviter may use video; glare keeps the agent's offer")
    func renegotiation() async throws {
        try await TestServer.run(configure: Self.configure) { server in
            let party = try await Party.make(server)
            let callId = try await party.invite(server).decode(CallSessionResponse.self).call.id
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "a", callId: callId), id: "a").get()
            _ = try await Self.request(party.agentSocket, .callSignal(id: "o1", callId: callId, CallSignal(kind: .offer, sdp: Self.offer)), id: "o1").get()
            _ = try await Self.request(party.consumerSocket, .callSignal(id: "a1", callId: callId, CallSignal(kind: .answer, sdp: Self.offer)), id: "a1").get()
            // The consumer turns the camera on: a new offer with video, and the call becomes a video call.
            let upgraded = try await Self.request(party.consumerSocket, .callSignal(id: "o2", callId: callId, CallSignal(kind: .offer, sdp: Self.videoOffer)), id: "o2").get().0
            #expect(upgraded.media == .video)
            _ = try await party.agentSocket.next(where: { if case .call(let c) = $0 { return c.media == .video } else { return false } })
            // Glare: the agent offers too before answering; its offer stands and the consumer's next offer is dropped.
            _ = try await Self.request(party.agentSocket, .callSignal(id: "o3", callId: callId, CallSignal(kind: .offer, sdp: Self.videoOffer)), id: "o3").get()
            #expect(Self.errorCode(try await Self.request(party.consumerSocket, .callSignal(id: "o4", callId: callId, CallSignal(kind: .offer, sdp: Self.videoOffer)), id: "o4")) == "offer_collision")
            _ = try await Self.request(party.consumerSocket, .callSignal(id: "a2", callId: callId, CallSignal(kind: .answer, sdp: Self.videoOffer)), id: "a2").get()
            _ = try await Self.request(party.consumerSocket, .callHangUp(id: "h", callId: callId), id: "h").get()
            let list = try await server.get("/v1/conversations/\(party.conversation.id)/calls", token: party.agentToken)
            #expect(try list.decode(ListResponse<CallDTO>.self).items.first?.media == .video)
            await party.close()
        }
    }

    /// A screen offered as its own video section (call-session.js adds it sendrecv).
    static let screenOffer = offer + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\na=sendrecv\r\n"
    /// The answer to it: the other side receives the screen and sends no video.
    static let screenAnswer = offer + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\na=recvonly\r\n"
    /// The share ended: the section stays, receiving only.
    static let screenStopped = offer + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\na=recvonly\r\n"

    @Test("screen share: the agent's profile and the brand decide who may share; a shared screen is not a camera")
    func screenShare() async throws {
        try await TestServer.run(configure: Self.configure) { server in
            // A voice-only agent who may share their screen; the brand has not let customers share.
            let party = try await Party.make(server, permissions: [.initiateVoiceCall, .shareScreen])
            let started = try await party.invite(server).decode(CallSessionResponse.self).call
            #expect(started.screenShare == CallScreenShare(agent: true, consumer: false))
            let callId = started.id
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "a", callId: callId), id: "a").get()
            _ = try await Self.request(party.agentSocket, .callSignal(id: "o1", callId: callId, CallSignal(kind: .offer, sdp: Self.offer)), id: "o1").get()
            _ = try await Self.request(party.consumerSocket, .callSignal(id: "a1", callId: callId, CallSignal(kind: .answer, sdp: Self.offer)), id: "a1").get()

            // Video not announced as a screen is a camera, which this voice-only call refuses.
            #expect(Self.errorCode(try await Self.request(party.agentSocket, .callSignal(id: "x1", callId: callId, CallSignal(kind: .offer, sdp: Self.screenOffer)), id: "x1")) == "video_not_allowed")
            // Announced first, it is the screen: the consumer hears of it, and the offer is relayed.
            let announced = try await Self.request(party.agentSocket, .callMedia(id: "m1", callId: callId, CallMediaState(sharingScreen: true)), id: "m1").get().0
            #expect(announced.agentMedia?.sharingScreen == true)
            guard case .callMedia(_, .agent, let media) = try await party.consumerSocket.next(where: {
                if case .callMedia = $0 { return true } else { return false }
            }) else { throw TestFailure("no call.media") }
            #expect(media.sharingScreen)
            _ = try await Self.request(party.agentSocket, .callSignal(id: "o2", callId: callId, CallSignal(kind: .offer, sdp: Self.screenOffer)), id: "o2").get()
            // The consumer receives it (a recvonly section sends nothing), and the call stays a voice call.
            let answered = try await Self.request(party.consumerSocket, .callSignal(id: "a2", callId: callId, CallSignal(kind: .answer, sdp: Self.screenAnswer)), id: "a2").get().0
            #expect(answered.media == .voice)
            // A second video section beside the screen is a camera: still refused.
            let twoSections = Self.screenOffer + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:2\r\na=sendrecv\r\n"
            #expect(Self.errorCode(try await Self.request(party.agentSocket, .callSignal(id: "x2", callId: callId, CallSignal(kind: .offer, sdp: twoSections)), id: "x2")) == "video_not_allowed")
            // The customer may not share here: refused, and the agent hears nothing of it.
            let refused = try await Self.request(party.consumerSocket, .callMedia(id: "m2", callId: callId, CallMediaState(sharingScreen: true)), id: "m2")
            #expect(Self.errorCode(refused) == "screen_share_not_allowed")
            // The agent stops: the section goes inactive and the announcement says so.
            _ = try await Self.request(party.agentSocket, .callMedia(id: "m3", callId: callId, CallMediaState(sharingScreen: false)), id: "m3").get()
            _ = try await Self.request(party.agentSocket, .callSignal(id: "o3", callId: callId, CallSignal(kind: .offer, sdp: Self.screenStopped)), id: "o3").get()
            let ended = try await Self.request(party.agentSocket, .callHangUp(id: "h", callId: callId), id: "h").get().0
            #expect(ended.screenShare == nil && ended.media == .voice)

            // The brand lets customers share; an agent without share_screen may not.
            let settings = try await server.request(
                .patch, "/v1/brand/settings", token: party.acme.adminToken, json: UpdateBrandSettingsRequest(screenShareFromConsumers: true))
            #expect(try settings.decode(BrandSettingsDTO.self).screenShareFromConsumers)
            let (plainToken, _) = try await party.acme.agent(permissions: [.initiateVoiceCall, .initiateVideoCall])
            let plainSocket = try await RealtimeProbe.connect(port: server.port, token: plainToken)
            let second = try await server.post(
                "/v1/conversations/\(party.conversation.id)/calls", token: plainToken,
                json: StartCallRequest(media: .video, connectionId: plainSocket.connectionId)
            ).decode(CallSessionResponse.self).call
            #expect(second.screenShare == CallScreenShare(agent: false, consumer: true))
            _ = try await Self.request(party.consumerSocket, .callAccept(id: "b", callId: second.id), id: "b").get()
            #expect(Self.errorCode(try await Self.request(plainSocket, .callMedia(id: "m4", callId: second.id, CallMediaState(cameraOn: true, sharingScreen: true)), id: "m4")) == "screen_share_not_allowed")
            let consumerShares = try await Self.request(party.consumerSocket, .callMedia(id: "m5", callId: second.id, CallMediaState(sharingScreen: true)), id: "m5").get().0
            #expect(consumerShares.consumerMedia?.sharingScreen == true)
            _ = try await Self.request(plainSocket, .callHangUp(id: "h2", callId: second.id), id: "h2").get()
            await plainSocket.close()
            await party.close()
        }
    }

    @Test("records a crash left open are closed at start-up; relay-only servers say so")
    func recovery() async throws {
        try await TestServer.run(configure: { Self.configure(&$0); $0.callRelayOnly = true }) { server in
            let party = try await Party.make(server)
            let started = try await party.invite(server).decode(CallSessionResponse.self)
            #expect(started.ice.iceTransportPolicy == "relay")
            // A record as a crash would leave it: answered, never ended, not live in this process.
            let orphan = CallDTO(
                id: "call_orphan00000000000000000", conversationId: party.conversation.id, media: .video, state: .active, version: 1,
                invitedBy: party.agent.id.rawValue, inviterName: party.agent.name, answeredBy: party.consumer.id.rawValue,
                invitedAt: SystemClock().now().addingTimeInterval(-60), answeredAt: SystemClock().now().addingTimeInterval(-50))
            try await server.services.store.write { repo in try await repo.insertCall(orphan, brandId: party.acme.brand.id) }
            await server.services.calls.endOrphanedCalls()
            let list = try await server.get("/v1/conversations/\(party.conversation.id)/calls", token: party.agentToken)
            let items = try list.decode(ListResponse<CallDTO>.self).items
            let closed = try #require(items.first { $0.id == orphan.id })
            #expect(closed.state == .ended)
            #expect(closed.outcome == .failed)
            #expect(closed.endReason == .serverShutdown)
            #expect((closed.durationSeconds ?? 0) >= 49)
            // The live call was left alone.
            #expect(items.first { $0.id == started.call.id }?.state == .ringing)
            await party.close()
        }
    }
}

/// The in-process bus, and for each call state it carries, what the store held at that moment: an
/// event must never announce a state that a reader cannot find yet.
final class StoreCheckingBus: EventBus {
    struct Check: Sendable {
        var published: CallState
        var stored: CallState?
    }

    private let bus = LocalEventBus()
    let store = Mutex<Store?>(nil)
    let seen = Mutex<[Check]>([])

    func publish(_ event: RealtimeEvent) async {
        if let store = store.withLock({ $0 }), case .conversation(let brandId, _) = event.audience,
            case .call(let call)? = try? ParleyJSON.makeDecoder().decode(ServerFrame.self, from: Data(event.frame.utf8))
        {
            let stored = try? await store.read { repo in try await repo.call(brandId: brandId, id: call.id) }
            seen.withLock { $0.append(Check(published: call.state, stored: stored?.state)) }
        }
        await bus.publish(event)
    }

    func subscribe(_ handler: @escaping @Sendable (RealtimeEvent) -> Void) { bus.subscribe(handler) }
    func publish(_ event: DomainEvent) async { await bus.publish(event) }
    func subscribe(domain handler: @escaping @Sendable (DomainEvent) -> Void) { bus.subscribe(domain: handler) }
}
