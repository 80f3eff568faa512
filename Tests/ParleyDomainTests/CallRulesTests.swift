import Foundation
import ParleyAPI
import ParleyDomain
import Testing

@Suite("Call state machine")
struct CallMachineTests {
    typealias Event = CallMachine.Event
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// A machine driven through `events`, each one second after the previous.
    func machine(_ events: [(Event, CallParty?)]) throws -> CallMachine {
        var machine = CallMachine(invitedAt: t0)
        for (index, (event, party)) in events.enumerated() {
            try machine.apply(event, by: party, at: t0.addingTimeInterval(Double(index + 1)))
        }
        return machine
    }

    @Test("a call that is answered, connects and is hung up is completed, timed from the answer")
    func completed() throws {
        var call = CallMachine(invitedAt: t0)
        #expect(call.state == .ringing)
        let r1 = try call.apply(.accept, by: .consumer, at: t0.addingTimeInterval(4))
        #expect(r1)
        #expect(call.state == .connecting)
        #expect(call.answeredAt == t0.addingTimeInterval(4))
        let r2 = try call.apply(.connected, by: .agent, at: t0.addingTimeInterval(5))
        #expect(r2)
        #expect(call.state == .active)
        let r3 = try call.apply(.connected, by: .consumer, at: t0.addingTimeInterval(5))
        #expect(r3 == false)
        #expect(call.durationSeconds == nil)
        let r4 = try call.apply(.hangUp, by: .consumer, at: t0.addingTimeInterval(64))
        #expect(r4)
        #expect(call.state == .ended)
        #expect(call.outcome == .completed)
        #expect(call.endReason == .hungUp)
        #expect(call.endedBy == .consumer)
        #expect(call.durationSeconds == 60)
    }

    @Test("every way a call ends", arguments: [
        ([(Event.reject, CallParty.consumer)], CallOutcome.rejected, CallEndReason.rejected, CallParty?.some(.consumer)),
        ([(.hangUp, .consumer)], .rejected, .rejected, .consumer),
        ([(.hangUp, .agent)], .cancelled, .cancelled, .agent),
        ([(.ringTimeout, nil)], .missed, .noAnswer, nil),
        ([(.left, .agent)], .cancelled, .agentDisconnected, .agent),
        ([(.accept, .consumer), (.hangUp, .agent)], .completed, .hungUp, .agent),
        ([(.accept, .consumer), (.failed(.mediaUnavailable), .consumer)], .failed, .mediaUnavailable, .consumer),
        ([(.accept, .consumer), (.connectTimeout, nil)], .failed, .connectTimeout, nil),
        ([(.accept, .consumer), (.left, .consumer)], .failed, .consumerDisconnected, .consumer),
        ([(.accept, .consumer), (.connected, .agent), (.failed(.iceFailed), .agent)], .failed, .iceFailed, .agent),
        ([(.accept, .consumer), (.connected, .agent), (.left, .agent)], .failed, .agentDisconnected, .agent),
        ([(.accept, .consumer), (.connected, .agent), (.hangUp, .agent)], .completed, .hungUp, .agent),
    ] as [([(Event, CallParty?)], CallOutcome, CallEndReason, CallParty?)])
    func endings(events: [(Event, CallParty?)], outcome: CallOutcome, reason: CallEndReason, endedBy: CallParty?) throws {
        let call = try machine(events)
        #expect(call.state == .ended)
        #expect(call.outcome == outcome)
        #expect(call.endReason == reason)
        #expect(call.endedBy == endedBy)
        #expect(call.endedAt != nil)
        #expect(call.durationSeconds == (call.answeredAt == nil ? 0 : Int(call.endedAt!.timeIntervalSince(call.answeredAt!))))
    }

    @Test("refused events leave the call as it was", arguments: [
        ([], Event.accept, CallParty.agent, "not_allowed_in_call"),
        ([], .reject, .agent, "not_allowed_in_call"),
        ([], .connected, .agent, "call_not_answered"),
        ([], .failed(.iceFailed), .consumer, "call_not_answered"),
        ([(.accept, .consumer)], .accept, .consumer, "call_already_answered"),
        ([(.accept, .consumer)], .reject, .consumer, "call_already_answered"),
        ([(.ringTimeout, nil)], .accept, .consumer, "call_ended"),
        ([(.hangUp, .agent)], .reject, .consumer, "call_ended"),
    ] as [([(Event, CallParty?)], Event, CallParty, String)])
    func refused(before: [(Event, CallParty?)], event: Event, party: CallParty, code: String) throws {
        var call = try machine(before)
        let snapshot = call
        let error = #expect(throws: ParleyError.self) { try call.apply(event, by: party, at: t0.addingTimeInterval(99)) }
        #expect(error?.code.rawValue == code)
        #expect(call == snapshot)
    }

    @Test("timers that fire late change nothing", arguments: [
        ([(Event.accept, CallParty?.some(.consumer))], Event.ringTimeout),
        ([], .connectTimeout),
        ([(.accept, .consumer), (.connected, .agent)], .connectTimeout),
        ([(.accept, .consumer), (.connected, .agent)], .ringTimeout),
        ([(.hangUp, .agent)], .ringTimeout),
        ([(.accept, .consumer), (.hangUp, .consumer)], .connectTimeout),
    ] as [([(Event, CallParty?)], Event)])
    func lateTimers(before: [(Event, CallParty?)], timer: Event) throws {
        var call = try machine(before)
        let snapshot = call
        let r5 = try call.apply(timer, by: nil, at: t0.addingTimeInterval(99))
        #expect(r5 == false)
        #expect(call == snapshot)
    }

    @Test("glare: the consumer accepts as the agent cancels; whoever arrives first wins")
    func acceptVersusCancel() throws {
        var cancelledFirst = CallMachine(invitedAt: t0)
        try cancelledFirst.apply(.hangUp, by: .agent, at: t0.addingTimeInterval(1))
        let error = #expect(throws: ParleyError.self) { try cancelledFirst.apply(.accept, by: .consumer, at: t0.addingTimeInterval(1)) }
        #expect(error?.code == "call_ended")
        #expect(cancelledFirst.outcome == .cancelled)

        var acceptedFirst = CallMachine(invitedAt: t0)
        try acceptedFirst.apply(.accept, by: .consumer, at: t0.addingTimeInterval(1))
        try acceptedFirst.apply(.hangUp, by: .agent, at: t0.addingTimeInterval(1))
        #expect(acceptedFirst.outcome == .completed)
        #expect(acceptedFirst.durationSeconds == 0)
    }

    @Test("glare: both sides hang up at once; the first is recorded and the second changes nothing")
    func bothHangUp() throws {
        var call = try machine([(.accept, .consumer), (.connected, .consumer)])
        let r6 = try call.apply(.hangUp, by: .consumer, at: t0.addingTimeInterval(10))
        #expect(r6)
        let r7 = try call.apply(.hangUp, by: .agent, at: t0.addingTimeInterval(10))
        #expect(r7 == false)
        let r8 = try call.apply(.left, by: .agent, at: t0.addingTimeInterval(11))
        #expect(r8 == false)
        #expect(call.endedBy == .consumer)
        #expect(call.endedAt == t0.addingTimeInterval(10))
    }

    @Test("glare: the invitation expires as the consumer accepts")
    func timeoutVersusAccept() throws {
        var expired = CallMachine(invitedAt: t0)
        try expired.apply(.ringTimeout, by: nil, at: t0.addingTimeInterval(45))
        let r9 = (try? expired.apply(.accept, by: .consumer, at: t0.addingTimeInterval(45)))
        #expect(r9 == nil)
        #expect(expired.outcome == .missed)
    }

    @Test("aborting (server shutdown) ends a call once")
    func abort() throws {
        var ringing = CallMachine(invitedAt: t0)
        let r10 = ringing.abort(.serverShutdown, at: t0)
        #expect(r10)
        #expect(ringing.outcome == .cancelled)
        let r11 = ringing.abort(.serverShutdown, at: t0)
        #expect(r11 == false)
        var active = try machine([(.accept, .consumer), (.connected, .agent)])
        let r12 = active.abort(.serverShutdown, at: t0.addingTimeInterval(9))
        #expect(r12)
        #expect(active.outcome == .failed)
        #expect(active.endReason == .serverShutdown)
    }
}

@Suite("Call negotiation and rules")
struct CallNegotiationTests {
    @Test("offer, answer and renegotiation from either side")
    func rounds() throws {
        var negotiation = CallNegotiation()
        let r13 = try negotiation.receive(.offer, from: .agent)
        #expect(r13 == .relay)
        let r14 = try negotiation.receive(.candidate, from: .agent)
        #expect(r14 == .relay)
        let r15 = try negotiation.receive(.candidate, from: .consumer)
        #expect(r15 == .relay)
        let r16 = try negotiation.receive(.answer, from: .consumer)
        #expect(r16 == .relay)
        #expect(negotiation.pendingOfferFrom == nil)
        // The consumer turns its camera on: it offers, the agent answers.
        let r17 = try negotiation.receive(.offer, from: .consumer)
        #expect(r17 == .relay)
        let r18 = try negotiation.receive(.answer, from: .agent)
        #expect(r18 == .relay)
        #expect(negotiation.rounds == 2)
    }

    @Test("glare: both offer at once; the agent's offer stands whichever arrives first")
    func glare() throws {
        var agentFirst = CallNegotiation()
        let r19 = try agentFirst.receive(.offer, from: .agent)
        #expect(r19 == .relay)
        let r20 = try agentFirst.receive(.offer, from: .consumer)
        #expect(r20 == .dropCollidingOffer)
        #expect(agentFirst.pendingOfferFrom == .agent)
        let r21 = try agentFirst.receive(.answer, from: .consumer)
        #expect(r21 == .relay)

        var consumerFirst = CallNegotiation()
        let r22 = try consumerFirst.receive(.offer, from: .consumer)
        #expect(r22 == .relay)
        let r23 = try consumerFirst.receive(.offer, from: .agent)
        #expect(r23 == .relay)
        #expect(consumerFirst.pendingOfferFrom == .agent)
        // The agent ignores the consumer's offer; the consumer rolls back and answers the agent.
        let stray = #expect(throws: ParleyError.self) { try consumerFirst.receive(.answer, from: .agent) }
        #expect(stray?.code == "no_offer_to_answer")
        let r24 = try consumerFirst.receive(.answer, from: .consumer)
        #expect(r24 == .relay)
    }

    @Test("an answer without an offer, or to one's own offer, is refused")
    func strayAnswers() throws {
        var negotiation = CallNegotiation()
        let r25 = (try? negotiation.receive(.answer, from: .consumer))
        #expect(r25 == nil)
        _ = try negotiation.receive(.offer, from: .agent)
        let r26 = (try? negotiation.receive(.answer, from: .agent))
        #expect(r26 == nil)
        #expect(negotiation.pendingOfferFrom == .agent)
    }

    @Test("permissions: each kind of call needs its own permission")
    func permissions() throws {
        let voiceOnly = AgentPrincipal(agentId: "agt_a", brandId: "brd_b", role: .agent, permissions: [.initiateVoiceCall])
        try CallRules.authorizeInvite(voiceOnly, media: .voice, channel: .web, conversationState: .open)
        let error = #expect(throws: ParleyError.self) {
            try CallRules.authorizeInvite(voiceOnly, media: .video, channel: .web, conversationState: .open)
        }
        #expect(error?.code == "call_permission_missing")
        #expect(error?.kind == .forbidden)
        #expect(CallRules.videoAllowed(inviter: voiceOnly) == false)
        // Role does not grant it: an admin without the permission cannot call either.
        let admin = AgentPrincipal(agentId: "agt_c", brandId: "brd_b", role: .admin, permissions: [])
        #expect((try? CallRules.authorizeInvite(admin, media: .voice, channel: .web, conversationState: .open)) == nil)
    }

    @Test("channels: only web and in-app conversations carry calls", arguments: Channel.allCases)
    func channels(channel: Channel) throws {
        let agent = AgentPrincipal(agentId: "agt_a", brandId: "brd_b", role: .agent, permissions: [.initiateVoiceCall, .initiateVideoCall])
        if channel == .web || channel == .inApp {
            try CallRules.authorizeInvite(agent, media: .video, channel: channel, conversationState: .reopened)
        } else {
            let error = #expect(throws: ParleyError.self) {
                try CallRules.authorizeInvite(agent, media: .voice, channel: channel, conversationState: .open)
            }
            #expect(error?.code == "channel_cannot_call")
        }
        let resolved = #expect(throws: ParleyError.self) {
            try CallRules.authorizeInvite(agent, media: .voice, channel: .web, conversationState: .resolved)
        }
        #expect(resolved?.code == "conversation_resolved")
    }

    @Test("signals are checked for size and shape; video is found in SDP")
    func signals() throws {
        let audioOnly = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nm=video 0 UDP/TLS/RTP/SAVPF 96\r\n"
        let withVideo = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"
        #expect(CallRules.videoSectionsSent(audioOnly) == 0)
        #expect(CallRules.videoSectionsSent(withVideo) == 1)
        // A camera and a shared screen; a section only received or stopped sends nothing.
        let cameraAndScreen = withVideo + "a=sendrecv\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=sendonly\r\n"
        #expect(CallRules.videoSectionsSent(cameraAndScreen) == 2)
        #expect(CallRules.videoSectionsSent(withVideo + "a=recvonly\r\n") == 0)
        #expect(CallRules.videoSectionsSent(withVideo + "a=inactive\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n") == 1)
        // A direction at session level applies to sections that give none.
        #expect(CallRules.videoSectionsSent("v=0\r\na=recvonly\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n") == 0)
        try CallRules.validate(CallSignal(kind: .offer, sdp: withVideo))
        try CallRules.validate(CallSignal(kind: .candidate, candidate: "candidate:1 1 udp 2122260223 127.0.0.1 54321 typ host", sdpMid: "0", sdpMLineIndex: 0))
        try CallRules.validate(CallSignal(kind: .candidate, candidate: ""))
        for bad in [
            CallSignal(kind: .offer),
            CallSignal(kind: .answer, sdp: "<script>"),
            CallSignal(kind: .offer, sdp: "v=0" + String(repeating: "a", count: CallRules.maxSDPBytes)),
            CallSignal(kind: .candidate),
            CallSignal(kind: .candidate, candidate: "javascript:1"),
            CallSignal(kind: .candidate, candidate: "candidate:" + String(repeating: "1", count: 2000)),
        ] {
            #expect(throws: ParleyError.self) { try CallRules.validate(bad) }
        }
    }
}
