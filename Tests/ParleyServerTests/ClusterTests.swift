import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
import SQLKit
import Synchronization
import Testing

@testable import ParleyServer

/// Several nodes on one PostgreSQL database (`PARLEY_CLUSTER`): events, presence and routing cross
/// nodes through LISTEN/NOTIFY. Two real servers in this process, each with its own port, hub
/// and job runner.
@Suite(
    "Cluster",
    .enabled(if: TestServer.clusterPostgresURL != nil && BlobStoreContractTests.s3Endpoint != nil, "the test script starts PostgreSQL and SeaweedFS"))
struct ClusterTests {
    /// Two nodes on one new database; the database is dropped afterwards.
    static func twoNodes(
        configure: @escaping @Sendable (inout ParleyConfiguration) -> Void = { _ in }, _ body: @Sendable (TestServer, TestServer) async throws -> Void
    ) async throws {
        let database = try await TestDatabase.makeShared()
        let folder = "cluster-\(UUID().uuidString.prefix(8).lowercased())"
        let node: @Sendable (inout ParleyConfiguration) -> Void = { configuration in
            configuration.cluster = true
            configuration.s3Endpoint = BlobStoreContractTests.s3Endpoint
            configuration.s3Bucket = BlobStoreContractTests.s3Bucket
            configuration.s3Prefix = folder
            (configuration.s3AccessKey, configuration.s3SecretKey) = ("parley", "parley-secret")
            configure(&configuration)
        }
        do {
            try await TestServer.run(database: database, configure: node) { a in
                try await TestServer.run(database: database, configure: node) { b in
                    try await body(a, b)
                }
            }
        } catch {
            await database.drop()
            throw error
        }
        await database.drop()
    }

    struct Count: Decodable { var n: Int }

    /// Polls `check` (on the wall clock: another node's notice travels through PostgreSQL).
    static func eventually(_ what: String, within seconds: Double = 15, _ check: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try await !check() {
            guard Date() < deadline else { throw TestFailure("\(what) did not happen within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("a consumer on node A and an agent on node B: messages both ways with the same sequence numbers, typing and receipts, presence; a large frame crosses too")
    func acrossNodes() async throws {
        try await Self.twoNodes { a, b in
            let acme = try await BrandScenario.make(a)
            let (agentToken, agent) = try await acme.agent()
            let (consumerToken, _) = try await acme.consumer(name: "Nadia")
            let onA = try await RealtimeProbe.connect(port: a.port, token: consumerToken)
            let onB = try await RealtimeProbe.connect(port: b.port, token: agentToken)

            // The agent connected to B is connected for A.
            try await Self.eventually("A seeing the agent on B") { a.services.presence.connectedAgents(brandId: acme.brand.id).contains(agent.id) }

            // The consumer writes on A; the agent on B gets the message as committed.
            let sent = try await a.post(
                "/v1/consumer/messages", token: consumerToken, json: SendMessageRequest(clientMessageId: UUID().uuidString, text: "Hello from A"))
                .decode(SendMessageResponse.self).message
            let arrived = try await onB.next { if case .message(let message) = $0 { message.id == sent.id } else { false } }
            guard case .message(let seen) = arrived else { return }
            #expect(seen.seq == sent.seq && seen.text == "Hello from A")
            let conversationId = sent.conversationId

            // The agent opens it on B and replies there; the consumer on A gets the reply.
            try onB.send(.view(conversationId: conversationId))
            let reply = try await b.post(
                "/v1/conversations/\(conversationId)/messages", token: agentToken,
                json: SendMessageRequest(clientMessageId: UUID().uuidString, text: "Hello from B", conversationId: conversationId))
                .decode(SendMessageResponse.self).message
            _ = try await onA.next { if case .message(let message) = $0 { message.id == reply.id && message.seq == sent.seq + 1 } else { false } }

            // Typing from A reaches the agent viewing on B; a receipt from B reaches A.
            try onA.send(.typing(conversationId: conversationId, isTyping: true))
            _ = try await onB.next { if case .typing(let id, let who, true) = $0 { id == conversationId && who.kind == .consumer } else { false } }
            _ = try await b.post(
                "/v1/conversations/\(conversationId)/receipts", token: agentToken, json: ReceiptRequest(upToSeq: sent.seq, state: .read))
            _ = try await onA.next { frame in
                if case .event(let event) = frame { event.kind == .receipt && event.upToSeq == sent.seq } else { false }
            }

            // A frame too large for a NOTIFY payload (8,000 bytes) goes by reference, in order.
            // (2,000 characters is a consumer's most; four bytes each.)
            let long = String(repeating: "🙂", count: 1_990)
            let big = try await a.post(
                "/v1/consumer/messages", token: consumerToken,
                json: SendMessageRequest(clientMessageId: UUID().uuidString, text: long, conversationId: conversationId))
            #expect(big.status == .created, "\(big.text)")
            let bigMessage = try big.decode(SendMessageResponse.self).message
            #expect(bigMessage.text.utf8.count + 200 > PostgresBusTransport.inlineLimit)
            _ = try await onB.next { if case .message(let message) = $0 { message.id == bigMessage.id && message.text == long } else { false } }
            let stored = try await a.services.store.database.read { db in
                try await db.raw("SELECT COUNT(*) AS n FROM bus_payloads").first(decoding: Count.self)?.n ?? 0
            }
            #expect(stored >= 1)

            // The agent's last connection closes on B: offline on A too.
            _ = await onB.close()
            try await Self.eventually("A seeing the agent leave") { !a.services.presence.connectedAgents(brandId: acme.brand.id).contains(agent.id) }
            _ = await onA.close()
        }
    }

    @Test("routing on node A gives a new conversation to an agent connected only to node B")
    func routingAcrossNodes() async throws {
        try await Self.twoNodes { a, b in
            let acme = try await BrandScenario.make(a, routing: .automatic)
            let (agentToken, agent) = try await acme.agent()
            _ = try await a.request(.put, "/v1/me/presence", token: acme.adminToken, json: SetPresenceRequest(presence: .offline))
            let onB = try await RealtimeProbe.connect(port: b.port, token: agentToken)
            _ = try await b.request(.put, "/v1/me/presence", token: agentToken, json: SetPresenceRequest(presence: .online))
            try await Self.eventually("A seeing the agent on B") { a.services.presence.connectedAgents(brandId: acme.brand.id).contains(agent.id) }

            let (token, _) = try await acme.consumer()
            let conversation = try await acme.send("Who can help?", as: token).conversation
            try await Self.eventually("the conversation assigned") {
                try await a.get("/v1/conversations/\(conversation.id)", token: acme.adminToken).decode(ConversationDTO.self).assigneeId == agent.id
            }
            // The agent on B hears of it: the conversation frame crossed from A.
            _ = try await onB.next { if case .conversation(let changed) = $0 { changed.id == conversation.id && changed.assigneeId == agent.id } else { false } }
            _ = await onB.close()
        }
    }

    @Test("a node that loses its bus connection reconnects and makes its clients resume: what they missed comes from the log, nothing is lost")
    func busConnectionLost() async throws {
        try await Self.twoNodes { a, b in
            let acme = try await BrandScenario.make(a)
            let (agentToken, _) = try await acme.agent()
            let (consumerToken, _) = try await acme.consumer()
            let first = try await acme.send("Before the cut", as: consumerToken).message
            let onB = try await RealtimeProbe.connect(port: b.port, token: agentToken)

            // Every LISTEN connection of this database is cut (as a failover or a network blip would).
            let database = try #require(b.services.configuration.databaseURL.flatMap { URLComponents(string: $0)?.path.dropFirst() })
            try await a.services.store.database.read { db in
                try await db.raw(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(bind: String(database)) AND query LIKE 'LISTEN%'"
                ).run()
            }
            // B's clients are told to reconnect and resume.
            let closed = try await onB.closedByServer()
            #expect(closed?.closeCode == .unknown(RealtimeCloseCode.resume), "\(String(describing: closed))")

            // Written while B was catching up: the resume after reconnecting brings it.
            let missed = try await acme.send("During the cut", as: consumerToken, conversationId: first.conversationId).message
            let again = try await RealtimeProbe.connect(port: b.port, token: agentToken)
            try again.send(.resume(id: "r1", cursors: [first.conversationId.rawValue: first.seq]))
            _ = try await again.next { if case .message(let message) = $0 { message.id == missed.id } else { false } }
            _ = try await again.next { if case .resumed(let id, _, _) = $0 { id == "r1" } else { false } }
            // And the bus carries new events again.
            let after = try await acme.send("After the cut", as: consumerToken, conversationId: first.conversationId).message
            _ = try await again.next { if case .message(let message) = $0 { message.id == after.id } else { false } }
            _ = await again.close()
        }
    }

    @Test("a limit holds for the cluster: sign-in attempts spread over two nodes share one bucket")
    func limitsAcrossNodes() async throws {
        try await Self.twoNodes(configure: { $0.rateLogins = 4 }) { a, b in
            let acme = try await BrandScenario.make(a)
            var statuses: [Int] = []
            for attempt in 0..<6 {
                let node = attempt.isMultiple(of: 2) ? a : b
                // One account, on alternate nodes: its bucket allows 2 attempts per 5 minutes (a token
                // every 150 s, so a slow machine sees no refill to speak of).
                let reply = try await node.post("/v1/auth/login", json: LoginRequest(email: "nobody@acme.test", password: "not the password"))
                statuses.append(Int(reply.status.code))
            }
            _ = acme
            // Shared: 2 let through (3 if a token came back meanwhile). Per node it would be 4 (2 each).
            #expect(statuses.filter { $0 == 401 }.count <= 3, "\(statuses)")
            #expect(Array(statuses.prefix(2)) == [401, 401] && statuses.last == 429, "\(statuses)")
        }
    }

    @Test("a voice note uploaded on node A is converted by whichever node's job runner claims it and plays on node B, Range requests and all")
    func voiceAcrossNodes() async throws {
        let audio = try AudioFixtures.files()
        try await Self.twoNodes { a, b in
            let acme = try await BrandScenario.make(a)
            let (consumerToken, _) = try await acme.consumer()
            let sent = try await VoiceTests.upload(a, try audio.data("note.webm"), token: consumerToken).decode(SendMessageResponse.self).message
            let ready = try await VoiceTests.processed(b, sent, token: acme.adminToken)
            #expect(ready.voice?.state == .ready)
            let original = try await b.get("/v1/media/\(sent.id)/original", token: acme.adminToken)
            let uploaded = try audio.data("note.webm")
            #expect(original.status == .ok && original.body == uploaded)
            let opus = try await b.get("/v1/media/\(sent.id)/opus", token: acme.adminToken)
            #expect(opus.status == .ok && opus.body.starts(with: Data("OggS".utf8)))
            let part = try await b.request(.get, "/v1/media/\(sent.id)/opus", token: acme.adminToken, headers: [.range: "bytes=0-3"])
            #expect(part.status == .partialContent && part.body == Data("OggS".utf8))
            // Nothing of it on either node's disk: the object store holds it.
            #expect(VoiceTests.mediaFiles(a).isEmpty && VoiceTests.mediaFiles(b).isEmpty)
        }
    }

    @Test("a call across nodes: the agent's request lands on node A while its socket is on B; the consumer on A rings, answers, signals and hangs up through B, which holds the call; a device connecting on A rings too; the consumer's socket closing on A ends a call held on B")
    func callAcrossNodes() async throws {
        try await Self.twoNodes(configure: CallTests.configure) { a, b in
            let acme = try await BrandScenario.make(a)
            let (agentToken, _) = try await acme.agent(permissions: [.initiateVoiceCall, .initiateVideoCall])
            let (consumerToken, consumer) = try await acme.consumer(name: "Ana")
            let conversation = try await acme.send("Can you call me?", as: consumerToken).conversation
            let agentOnB = try await RealtimeProbe.connect(port: b.port, token: agentToken)
            let consumerOnA = try await RealtimeProbe.connect(port: a.port, token: consumerToken)

            // The HTTP request reaches A (a load balancer without stickiness): B, with the socket, holds the call.
            let started = try await a.post(
                "/v1/conversations/\(conversation.id)/calls", token: agentToken,
                json: StartCallRequest(media: .voice, connectionId: agentOnB.connectionId))
            #expect(started.status == .created, "\(started.text)")
            let call = try started.decode(CallSessionResponse.self).call
            #expect(b.services.calls.liveCount == 1 && a.services.calls.liveCount == 0)
            #expect(try await a.services.store.read { repo in try await repo.callAndNode(brandId: acme.brand.id, id: call.id) }?.node
                == b.services.calls.node)
            // A connection id no node has is refused, after every node was asked.
            let nowhere = try await a.post(
                "/v1/conversations/\(conversation.id)/calls", token: agentToken,
                json: StartCallRequest(media: .voice, connectionId: ConnectionID.make()))
            #expect(nowhere.status == .unprocessableContent)
            #expect(try nowhere.error.code == "connection_not_found")

            // The consumer on A rings; a second device connecting to A while it rings rings too.
            _ = try await consumerOnA.next(where: { CallTests.call($0, .ringing) != nil })
            let lateDevice = try await RealtimeProbe.connect(port: a.port, token: consumerToken)
            let rang = try #require(CallTests.call(try await lateDevice.next(where: { CallTests.call($0, .ringing) != nil }), .ringing))
            #expect(rang.id == call.id && rang.ringsUntil != nil)

            // Answered on A: forwarded to B, which binds the consumer's connection on A.
            let accepted = try await CallTests.request(consumerOnA, .callAccept(id: "a1", callId: call.id), id: "a1").get()
            #expect(accepted.0.state == .connecting && accepted.0.answeredBy == consumer.id.rawValue)
            #expect(accepted.1?.iceServers.last?.username?.hasSuffix("\(call.id).consumer") == true)
            _ = try await agentOnB.next(where: { CallTests.call($0, .connecting) != nil })
            // The other device on A is refused by B, with B's reason.
            #expect(CallTests.errorCode(try await CallTests.request(lateDevice, .callAccept(id: "a2", callId: call.id), id: "a2")) == "call_already_answered")

            // Signalling both ways: the offer from B reaches the socket on A; the answer from A reaches B.
            let offer = CallSignal(kind: .offer, sdp: CallTests.offer)
            _ = try await CallTests.request(agentOnB, .callSignal(id: "s1", callId: call.id, offer), id: "s1").get()
            guard case .callSignal(_, .agent, let relayed) = try await consumerOnA.next(where: {
                if case .callSignal = $0 { return true } else { return false }
            }) else { throw TestFailure("no offer") }
            #expect(relayed == offer)
            _ = try await CallTests.request(consumerOnA, .callSignal(id: "s2", callId: call.id, CallSignal(kind: .answer, sdp: CallTests.offer)), id: "s2").get()
            guard case .callSignal(_, .consumer, let answer) = try await agentOnB.next(where: {
                if case .callSignal = $0 { return true } else { return false }
            }) else { throw TestFailure("no answer") }
            #expect(answer.kind == .answer)
            let active = try await CallTests.request(consumerOnA, .callReport(id: "r1", callId: call.id, .connected, reason: nil), id: "r1").get()
            #expect(active.0.state == .active)
            _ = try await CallTests.request(consumerOnA, .callMedia(id: "m1", callId: call.id, CallMediaState(muted: true, cameraOn: false)), id: "m1").get()
            guard case .callMedia(_, .consumer, let media) = try await agentOnB.next(where: {
                if case .callMedia = $0 { return true } else { return false }
            }) else { throw TestFailure("no media state") }
            #expect(media.muted)

            // The consumer hangs up on A: B ends the call and stores the record; a repeat gets the record.
            let ended = try await CallTests.request(consumerOnA, .callHangUp(id: "h1", callId: call.id), id: "h1").get().0
            #expect(ended.state == .ended && ended.endedBy == .consumer && ended.outcome == .completed)
            #expect(b.services.calls.liveCount == 0)
            let again = try await CallTests.request(consumerOnA, .callHangUp(id: "h2", callId: call.id), id: "h2").get().0
            #expect(again.endedBy == .consumer)
            _ = try await agentOnB.next(where: { CallTests.callEvent($0) != nil })

            // A second call, answered on A; the consumer's socket on A closes: B hears it and ends the call.
            let second = try await a.post(
                "/v1/conversations/\(conversation.id)/calls", token: agentToken,
                json: StartCallRequest(media: .voice, connectionId: agentOnB.connectionId)).decode(CallSessionResponse.self).call
            _ = try await CallTests.request(consumerOnA, .callAccept(id: "a3", callId: second.id), id: "a3").get()
            await consumerOnA.close()
            let left = try #require(CallTests.call(try await agentOnB.next(where: { CallTests.call($0, .ended)?.id == second.id }), .ended))
            #expect(left.endReason == .consumerDisconnected)
            #expect(b.services.calls.liveCount == 0)
            await lateDevice.close()
            await agentOnB.close()
        }
    }

    @Test("the record of a call whose node is gone is ended by a node that knows who is alive; live nodes' calls are left alone")
    func orphanedCalls() async throws {
        try await Self.twoNodes(configure: CallTests.configure) { a, b in
            let acme = try await BrandScenario.make(a)
            let (consumerToken, _) = try await acme.consumer(name: "Ana")
            let conversation = try await acme.send("Call me", as: consumerToken).conversation
            func record(_ node: String) async throws -> CallDTO {
                let call = CallDTO(
                    id: CallID.make(), conversationId: conversation.id, media: .voice, state: .active, version: 1, invitedBy: "agt_x",
                    inviterName: "Sam", invitedAt: Date().addingTimeInterval(-60), answeredAt: Date().addingTimeInterval(-50))
                try await a.services.store.write { repo in try await repo.insertCall(call, brandId: acme.brand.id, node: node) }
                return call
            }
            let gone = try await record("node_gone")
            let onB = try await record(b.services.calls.node)
            // Too new to know who is alive: nothing is touched.
            let relay = StubRelay(node: a.services.calls.node, live: nil)
            let sweeper = CallService(
                store: a.services.store, hub: a.services.hub, bus: a.services.bus, conversations: a.services.conversations,
                configuration: a.services.configuration, clock: a.services.calls.clock, relay: relay, logger: a.services.calls.logger)
            await sweeper.endOrphanedCalls()
            #expect(try await a.services.store.read { repo in try await repo.unfinishedCalls(limit: 10) }.count == 2)
            relay.live.withLock { $0 = [a.services.calls.node, b.services.calls.node] }
            await sweeper.endOrphanedCalls()
            let stored = try await a.services.store.read { repo in try await repo.call(brandId: acme.brand.id, id: gone.id) }
            #expect(stored?.state == .ended && stored?.outcome == .failed && stored?.endReason == .serverShutdown)
            #expect(try await a.services.store.read { repo in try await repo.call(brandId: acme.brand.id, id: onB.id) }?.state == .active)
        }
    }
}

/// A relay that says which nodes are alive, for the sweep.
final class StubRelay: CallRelay, Sendable {
    let node: String
    let live: Mutex<Set<String>?>

    init(node: String, live: Set<String>?) {
        self.node = node
        self.live = Mutex(live)
    }

    func forward(_ call: ForwardedCall, to node: String?, timeout: Duration) async throws -> CallAnswer {
        throw ParleyError.callNodeUnavailable
    }

    func serveCalls(_ handler: @escaping @Sendable (ForwardedCall) async -> CallAnswer?) {}

    func liveNodes() -> Set<String>? { live.withLock { $0 } }
}
