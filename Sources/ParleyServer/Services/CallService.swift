import Crypto
import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

/// Voice and video calls: invitations, the call state machine, signalling relay and call records.
///
/// A live call exists in the memory of one node (the one with the inviting agent's real-time
/// connection), bound to the two real-time connections that take part in it: the inviting agent's
/// and the consumer device's that accepted. Signalling goes only between those two. The stored
/// record (table `calls`) follows the call, names the node that holds it, and is final once it
/// ends, when a sequenced `call` event also puts it in the conversation's timeline. On several
/// nodes, frames that arrive elsewhere are forwarded to that node (CallService+Cluster.swift).
///
/// A `Service`: at start it closes records a crash left open (and, on several nodes, those of
/// nodes that went away, now and then); on shutdown it ends every live call.
public final class CallService: Service, Sendable {
    /// What calls read and write: their records, the conversations they belong to, the inviting agent.
    typealias Stores = any CallStore & ConversationStore & IdentityStore

    let sessions = Mutex<[CallID: Session]>([:])
    let store: StoreAccess<Stores>
    let hub: RealtimeHub
    let conversations: ConversationService
    let bus: any EventBus
    let configuration: ParleyConfiguration
    let clock: any WallClock
    let logger: Logger
    /// Carries frames to and from the other nodes; nil on one node.
    let relay: (any CallRelay)?
    /// This node's name in the records of the calls it holds.
    let node: String
    /// Connections here bound to calls other nodes hold.
    let remoteBindings = Mutex<[ConnectionID: RemoteBinding]>([:])

    init(
        store: Store, hub: RealtimeHub, bus: any EventBus, conversations: ConversationService, configuration: ParleyConfiguration,
        clock: any WallClock, relay: (any CallRelay)? = nil, logger: Logger
    ) {
        self.relay = relay
        self.node = relay?.node ?? "node_" + Identifier.random(12)
        self.store = store.access { $0 as Stores }
        self.clock = clock
        self.bus = bus
        self.hub = hub
        self.conversations = conversations
        self.configuration = configuration
        self.logger = logger
        relay?.serveCalls { [weak self] forwarded in await self?.answer(forwarded) }
    }

    /// Live calls on this node.
    public var liveCount: Int { sessions.withLock { $0.count } }

    // MARK: Starting

    /// The agent invites the conversation's consumer. Signalling for the agent's side goes to the
    /// agent's real-time connection `request.connectionId`; the node that has it holds the call.
    public func start(_ agent: AgentPrincipal, conversationId: ConversationID, _ request: StartCallRequest) async throws -> CallSessionResponse {
        if let relay, ConnectionID.isWellFormed(request.connectionId), hub.principal(ofConnection: request.connectionId) == nil {
            try CallRules.requirePermission(agent, media: request.media)
            let answer: CallAnswer
            do {
                answer = try await relay.forward(
                    ForwardedCall(
                        principal: .agent(agent), callId: nil, connection: request.connectionId, command: .start(conversationId: conversationId, request)),
                    to: nil, timeout: Self.forwardTimeout)
            } catch let error as ParleyError where error.code == ParleyError.callNodeUnavailable.code {
                throw Self.connectionNotFound  // no node has that connection
            }
            if let error = answer.error { throw error }
            guard let call = answer.call, let ice = answer.ice else { throw ParleyError.callNodeUnavailable }
            return CallSessionResponse(call: call, ice: ice)
        }
        return try await startHere(agent, conversationId: conversationId, request)
    }

    private static let connectionNotFound = ParleyError(
        .unprocessable, code: .connectionNotFound,
        message: "connectionId must be one of your open real-time connections (from its hello frame).", field: "connectionId")

    /// Starts the call on this node, which has the agent's connection.
    func startHere(_ agent: AgentPrincipal, conversationId: ConversationID, _ request: StartCallRequest) async throws -> CallSessionResponse {
        try CallRules.requirePermission(agent, media: request.media)
        let (conversation, inviter, settings) = try await store.read { repo in
            let conversation = try await ConversationService.authorizedConversation(.agent(agent), id: conversationId, in: repo, lock: false)
            return (
                conversation, try await repo.agent(brandId: agent.brandId, id: agent.agentId), try await repo.brandSettings(brandId: agent.brandId)
            )
        }
        guard ConnectionID.isWellFormed(request.connectionId),
            case .agent(let owner) = hub.principal(ofConnection: request.connectionId), owner.agentId == agent.agentId
        else {
            throw Self.connectionNotFound
        }
        try CallRules.authorizeInvite(agent, media: request.media, channel: conversation.channel, conversationState: conversation.state)
        let now = clock.now()
        let call = CallDTO(
            id: CallID.make(), conversationId: conversation.id, media: request.media,
            videoAllowed: CallRules.videoAllowed(inviter: agent), state: .ringing, version: 1,
            invitedBy: agent.agentId.rawValue, inviterName: inviter?.agent.name ?? "An agent", invitedAt: now,
            ringsUntil: now.addingTimeInterval(TimeInterval(configuration.callRingSeconds)),
            agentMedia: CallMediaState(muted: false, cameraOn: request.media == .video),
            screenShare: CallRules.screenShare(inviter: agent, settings: settings))
        let session = Session(
            call: call, machine: CallMachine(invitedAt: now), brandId: agent.brandId, consumerId: conversation.consumerId,
            agentId: agent.agentId, videoAllowed: CallRules.videoAllowed(inviter: agent), agentConnection: request.connectionId)
        try sessions.withLock { sessions throws(ParleyError) in
            if sessions.values.contains(where: { $0.call.conversationId == conversation.id }) {
                throw ParleyError(
                    .conflict, code: .callInProgress, message: "This conversation already has a call. End it before starting another.")
            }
            sessions[call.id] = session
        }
        do {
            try await store.write { repo in try await repo.insertCall(call, brandId: agent.brandId, node: self.node) }
        } catch {
            _ = sessions.withLock { $0.removeValue(forKey: call.id) }
            throw error
        }
        schedule(.ringTimeout, for: call.id, after: configuration.callRingSeconds)
        await bus.publish(.call(call), to: .conversation(brandId: agent.brandId, consumerId: conversation.consumerId), logger: logger)
        await bus.publish(.callRinging(call, brandId: agent.brandId, consumerId: conversation.consumerId))
        logger.info("call invited", metadata: ["call": "\(call.id)", "media": "\(request.media.rawValue)"])
        return CallSessionResponse(call: call, ice: iceConfiguration(callId: call.id, party: .agent, now: now))
    }

    // MARK: Frames from the two sides

    /// The consumer answers on the device of `connection`; that device becomes the call's consumer side.
    public func accept(_ principal: Principal, callId: CallID, connection: ConnectionID) async throws -> CallSessionResponse {
        if let answer = try await forwarded(principal, callId: callId, connection: connection, .accept) {
            guard let call = answer.call, let ice = answer.ice else { throw ParleyError.callNodeUnavailable }
            return CallSessionResponse(call: call, ice: ice)
        }
        return try await acceptHere(principal, callId: callId, connection: connection)
    }

    public func reject(_ principal: Principal, callId: CallID, connection: ConnectionID) async throws -> CallDTO {
        try await perform(principal, callId: callId, connection: connection, .reject) {
            try await self.transition(callId, .reject, actor: .principal(principal, connection: connection))
        }
    }

    public func hangUp(_ principal: Principal, callId: CallID, connection: ConnectionID) async throws -> CallDTO {
        try await perform(principal, callId: callId, connection: connection, .hangUp) {
            try await self.transition(callId, .hangUp, actor: .principal(principal, connection: connection))
        }
    }

    /// A side reports that its media connected, or failed.
    public func report(
        _ principal: Principal, callId: CallID, _ report: CallConnectionReport, reason: CallEndReason?, connection: ConnectionID
    ) async throws -> CallDTO {
        try await perform(principal, callId: callId, connection: connection, .report(report, reason: reason)) {
            try await self.reportHere(principal, callId: callId, report, reason: reason, connection: connection)
        }
    }

    /// Relays an offer, answer or ICE candidate to the other side. Offers that bring video into a
    /// voice call need an inviter who may make video calls; they turn the call into a video call.
    public func signal(_ principal: Principal, callId: CallID, _ signal: CallSignal, connection: ConnectionID) async throws -> CallDTO {
        try CallRules.validate(signal)
        return try await perform(principal, callId: callId, connection: connection, .signal(signal)) {
            try await self.signalHere(principal, callId: callId, signal, connection: connection)
        }
    }

    /// A side muted or unmuted, or turned its camera on or off; the other side is told.
    public func media(_ principal: Principal, callId: CallID, _ state: CallMediaState, connection: ConnectionID) async throws -> CallDTO {
        try await perform(principal, callId: callId, connection: connection, .media(state)) {
            try await self.mediaHere(principal, callId: callId, state, connection: connection)
        }
    }

    /// Forwards the frame to the node holding the call, or runs `here`.
    private func perform(
        _ principal: Principal, callId: CallID, connection: ConnectionID, _ command: CallCommand, here: () async throws -> CallDTO
    ) async throws -> CallDTO {
        if let answer = try await forwarded(principal, callId: callId, connection: connection, command) {
            guard let call = answer.call else { throw ParleyError.callNodeUnavailable }
            return call
        }
        return try await here()
    }

    func acceptHere(_ principal: Principal, callId: CallID, connection: ConnectionID) async throws -> CallSessionResponse {
        let call = try await transition(callId, .accept, actor: .principal(principal, connection: connection))
        return CallSessionResponse(call: call, ice: iceConfiguration(callId: callId, party: .consumer, now: clock.now()))
    }

    func reportHere(
        _ principal: Principal, callId: CallID, _ report: CallConnectionReport, reason: CallEndReason?, connection: ConnectionID
    ) async throws -> CallDTO {
        switch report {
        case .connected:
            return try await transition(callId, .connected, actor: .principal(principal, connection: connection))
        case .failed:
            let reason = reason ?? .iceFailed
            guard CallEndReason.reportableByClient.contains(reason) else {
                throw ParleyError.invalidField(
                    "reason", "A side can report \(CallEndReason.reportableByClient.map(\.rawValue).sorted().joined(separator: " or ")).")
            }
            return try await transition(callId, .failed(reason), actor: .principal(principal, connection: connection))
        }
    }

    func signalHere(_ principal: Principal, callId: CallID, _ signal: CallSignal, connection: ConnectionID) async throws -> CallDTO {
        try CallRules.validate(signal)
        let videoSent = signal.sdp.map(CallRules.videoSectionsSent) ?? 0
        let (session, target, decision, upgraded) = try sessions.withLock { sessions throws(ParleyError) in
            var session = try Self.live(sessions, callId, principal)
            let party = try Self.bound(session, principal, connection: connection)
            guard session.machine.state == .connecting || session.machine.state == .active else {
                throw ParleyError(.conflict, code: .callNotAnswered, message: "Signalling starts once the call is answered.")
            }
            var upgraded = false
            // A side that announced a shared screen (allowed, or `call.media` would have refused
            // it) sends one video section for it; any other is a camera.
            let cameras = videoSent - (session.sharingScreen(party) ? 1 : 0)
            if cameras > 0, session.call.media == .voice {
                guard session.videoAllowed else { throw Self.videoRefused }
                session.call.media = .video
                session.call.version += 1
                upgraded = true
            }
            let decision = try session.negotiation.receive(signal.kind, from: party)
            sessions[callId] = session
            return (session, session.connection(of: party.other), decision, upgraded ? party : nil)
        }
        if upgraded != nil { await changed(session) }
        guard decision == .relay else {
            throw ParleyError(
                .conflict, code: .offerCollision,
                message: "Both sides offered at once; the agent's offer stands. Roll back and answer it.")
        }
        if let target, let party = session.party(of: principal) {
            await bus.publish(.callSignal(callId: callId, from: party.participantKind, signal), to: .connection(target), logger: logger)
        }
        return session.call
    }

    func mediaHere(_ principal: Principal, callId: CallID, _ state: CallMediaState, connection: ConnectionID) async throws -> CallDTO {
        let (session, party, upgraded) = try sessions.withLock { sessions throws(ParleyError) in
            var session = try Self.live(sessions, callId, principal)
            let party = try Self.bound(session, principal, connection: connection)
            var upgraded = false
            if state.sharingScreen, session.call.screenShare?.allows(party.participantKind) != true {
                throw Self.screenShareRefused(party)
            }
            if state.cameraOn, session.call.media == .voice {
                guard session.videoAllowed else { throw Self.videoRefused }
                session.call.media = .video
                upgraded = true
            }
            if party == .agent { session.call.agentMedia = state } else { session.call.consumerMedia = state }
            session.call.version += 1
            sessions[callId] = session
            return (session, party, upgraded)
        }
        if let target = session.connection(of: party.other) {
            await bus.publish(.callMedia(callId: callId, from: party.participantKind, state), to: .connection(target), logger: logger)
        }
        if upgraded { await changed(session) }
        return session.call
    }

    /// Ends the calls a closed connection took part in, here and on the nodes holding calls it
    /// was bound to.
    public func connectionClosed(_ connectionId: ConnectionID) async {
        await connectionClosedHere(connectionId)
        await remoteConnectionClosed(connectionId)
    }

    func connectionClosedHere(_ connectionId: ConnectionID) async {
        let affected = sessions.withLock { sessions in
            sessions.values.compactMap { session -> (CallID, CallParty)? in
                if session.agentConnection == connectionId { return (session.call.id, .agent) }
                if session.consumerConnection == connectionId { return (session.call.id, .consumer) }
                return nil
            }
        }
        for (callId, party) in affected {
            _ = try? await transition(callId, .left, actor: .departed(party))
        }
    }

    /// Calls ringing for this consumer, on any node: a device that connects while it rings rings too.
    public func ringing(for consumer: ConsumerPrincipal) async -> [CallDTO] {
        await ringingElsewhere(for: consumer) + ringingHere(for: consumer)
    }

    private func ringingHere(for consumer: ConsumerPrincipal) -> [CallDTO] {
        sessions.withLock { sessions in
            sessions.values.filter { $0.consumerId == consumer.consumerId && $0.brandId == consumer.brandId && $0.machine.state == .ringing }
                .map(\.call)
        }
    }

    // MARK: Reading records

    /// A conversation's calls, newest first (live ones as they are now).
    public func calls(_ principal: Principal, conversationId: ConversationID, limit: Int) async throws -> [CallDTO] {
        let stored = try await store.read { repo in
            let conversation = try await ConversationService.authorizedConversation(principal, id: conversationId, in: repo, lock: false)
            return try await repo.calls(conversationId: conversation.id, brandId: conversation.brandId, limit: limit)
        }
        let live = sessions.withLock { sessions in sessions.mapValues(\.call) }
        return stored.map { live[$0.id] ?? $0 }
    }

    // MARK: Transitions

    static let callNotFound = ParleyError(.notFound, code: .callNotFound, message: "There is no live call with this id.")
    private static let otherDevice = ParleyError(.conflict, code: .callOnOtherDevice, message: "This call is taking place on another device or tab.")
    private static let videoRefused = ParleyError(
        .forbidden, code: .videoNotAllowed, message: "Video is not allowed in this call: the inviting agent may make voice calls only.")

    private static func screenShareRefused(_ party: CallParty) -> ParleyError {
        ParleyError(
            .forbidden, code: .screenShareNotAllowed,
            message: party == .agent
                ? "Your profile does not allow sharing your screen (share_screen)."
                : "This brand does not let customers share their screen in calls.")
    }

    /// The live session of a call the principal takes part in.
    private static func live(_ sessions: [CallID: Session], _ callId: CallID, _ principal: Principal) throws(ParleyError) -> Session {
        guard let session = sessions[callId], session.party(of: principal) != nil else {
            throw Self.callNotFound
        }
        return session
    }

    /// The principal's side of the call, checking that the frame comes from the device bound to it.
    private static func bound(_ session: Session, _ principal: Principal, connection: ConnectionID?) throws(ParleyError) -> CallParty {
        guard let party = session.party(of: principal) else {
            throw Self.callNotFound
        }
        if let connection, let expected = session.connection(of: party), expected != connection {
            throw Self.otherDevice
        }
        if party == .consumer, session.consumerConnection == nil {
            throw ParleyError(.conflict, code: .callNotAnswered, message: "This call has not been answered yet.")
        }
        return party
    }

    @discardableResult
    func transition(_ callId: CallID, _ event: CallMachine.Event, actor: Actor) async throws -> CallDTO {
        let now = clock.now()
        let outcome = try sessions.withLock { sessions throws(ParleyError) -> (Session, changed: Bool)? in
            guard var session = sessions[callId] else { return nil }
            let party: CallParty?
            switch actor {
            case .principal(let principal, let connection):
                guard let side = session.party(of: principal) else {
                    throw Self.callNotFound
                }
                if !(side == .consumer && event == .accept) {
                    if let connection, let expected = session.connection(of: side), expected != connection {
                        throw Self.otherDevice
                    }
                }
                party = side
            case .server:
                party = nil
            case .departed(let side):
                party = side
            }
            guard try session.machine.apply(event, by: party, at: now) else { return (session, false) }
            if event == .accept, case .principal(_, let connection) = actor {
                session.consumerConnection = connection
                session.call.answeredBy = session.consumerId.rawValue
                session.call.consumerMedia = CallMediaState(muted: false, cameraOn: session.call.media == .video)
            }
            session.refresh()
            if case .server = actor {
                // The timer that fired is the task running this; cancelling it would cancel the write below.
            } else {
                session.timer?.cancel()
            }
            session.timer = nil
            if session.machine.state == .ended {
                sessions[callId] = nil
            } else {
                sessions[callId] = session
            }
            return (session, true)
        }
        guard let (session, changed) = outcome else {
            return try await ended(callId, event: event, actor: actor)
        }
        if changed {
            if session.machine.state == .connecting {
                schedule(.connectTimeout, for: callId, after: configuration.callConnectSeconds)
            }
            await self.changed(session)
            if session.machine.state == .ended {
                logger.info(
                    "call ended",
                    metadata: ["call": "\(callId)", "outcome": "\(session.call.outcome?.rawValue ?? "")", "reason": "\(session.call.endReason?.rawValue ?? "")"])
            }
        }
        return session.call
    }

    /// An event for a call that is no longer live: a repeated hang-up is answered with the record;
    /// answering is refused.
    private func ended(_ callId: CallID, event: CallMachine.Event, actor: Actor) async throws -> CallDTO {
        guard case .principal(let principal, _) = actor, CallID.isWellFormed(callId) else {
            throw Self.callNotFound
        }
        let record = try await store.read { repo in try await repo.call(brandId: principal.brandId, id: callId) }
        guard var record, record.state == .ended else {
            throw Self.callNotFound
        }
        // The record must be one the principal may see.
        _ = try await conversations.conversation(principal, id: record.conversationId)
        record.version = Int.max
        switch event {
        case .hangUp, .connected, .failed, .left, .ringTimeout, .connectTimeout:
            return record
        case .accept, .reject:
            throw ParleyError(.conflict, code: .callEnded, message: "This call has already ended.")
        }
    }

    /// Stores a call's new state, then publishes it: whoever hears of it (a page, another node) can
    /// read it back. An ended call also gets its timeline event. A state that cannot be stored is
    /// still published, after the error is logged: the call itself goes on from this node's memory.
    func changed(_ session: Session) async {
        let audience = RealtimeEvent.Audience.conversation(brandId: session.brandId, consumerId: session.consumerId)
        guard session.call.state == .ended else {
            let call = session.call
            do {
                _ = try await store.write { repo in try await repo.updateCall(call, brandId: session.brandId) }
            } catch {
                logger.error("could not store a call's state", metadata: ["call": "\(call.id)", "error": "\(error)"])
            }
            await bus.publish(.call(call), to: audience, logger: logger)
            return
        }
        var call = session.call
        do {
            // The record's event is published by the conversation log as it commits.
            _ = try await storeEnd(&call, brandId: session.brandId, actor: endActor(session))
            await bus.publish(.call(call), to: audience, logger: logger)
        } catch {
            logger.error("could not store a call's record", metadata: ["call": "\(call.id)", "error": "\(error)"])
            await bus.publish(.call(call), to: audience, logger: logger)
        }
    }

    private func endActor(_ session: Session) -> ParticipantRef {
        switch session.machine.endedBy {
        case .agent: ParticipantRef(kind: .agent, id: session.agentId.rawValue)
        case .consumer: ParticipantRef(kind: .consumer, id: session.consumerId.rawValue)
        case nil: ParticipantRef(kind: .system, id: "calls")
        }
    }

    /// Writes the final record and its sequenced timeline event in one transaction.
    func storeEnd(_ call: inout CallDTO, brandId: BrandID, actor: ParticipantRef) async throws -> ConversationEventDTO? {
        let snapshot = call
        let result = try await conversations.conversationLog.write { repo, appends -> (CallDTO, ConversationEventDTO)? in
            var call = snapshot
            guard let conversation = try await repo.conversation(brandId: brandId, id: call.conversationId, lock: true) else { return nil }
            var log = ConversationAppend(conversation, now: self.clock.now())
            let event = log.logCall(&call, by: actor)
            if try await !repo.updateCall(call, brandId: brandId) {
                guard try await repo.call(brandId: brandId, id: call.id) == nil else { return nil }  // already ended
                try await repo.insertCall(call, brandId: brandId)
            }
            try await appends.write(&log, in: repo)
            return (call, event)
        }.value
        guard let (stored, event) = result else { return nil }
        call = stored
        return event
    }

    private func schedule(_ event: CallMachine.Event, for callId: CallID, after seconds: Int) {
        let clock = clock
        let task = Task { [weak self] in
            try? await clock.sleep(for: .seconds(seconds))
            guard !Task.isCancelled, let self else { return }
            _ = try? await self.transition(callId, event, actor: .server)
        }
        let kept = sessions.withLock { sessions -> Bool in
            guard sessions[callId] != nil else { return false }
            sessions[callId]?.timer?.cancel()
            sessions[callId]?.timer = task
            return true
        }
        if !kept { task.cancel() }
    }
}
