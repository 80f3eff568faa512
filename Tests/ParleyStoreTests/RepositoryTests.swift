import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore
import SQLKit
import Testing

@Suite("Repository")
struct RepositoryTests {
    @Test("migrations are recorded and applied once", arguments: Backend.available)
    func migrations(backend: Backend) async throws {
        try await backend.withStore { store in
            // MUT: apply again on a migrated database
            let applied = try await Migrations.apply(to: store.database, logger: .init(label: "test"))
            // validate
            #expect(applied.isEmpty)
            #expect(try await Migrations.appliedVersions(in: store.database) == Migrations.all.map(\.version))
        }
    }

    @Test("brands, apps, agents and consumers round-trip", arguments: Backend.available)
    func identities(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let key = AppKeyRecord(
                kid: "k1", appId: fixture.app.id, brandId: fixture.brand.id, algorithm: "HS256",
                keyMaterial: String(repeating: "s", count: 32), createdAt: SystemClock().now())
            try await store.write { repo in try await repo.insertAppKey(key) }

            try await store.read { (repo: any Repository) async throws -> Void in
                #expect(try await repo.brand(id: fixture.brand.id) == fixture.brand)
                #expect(try await repo.brandCount() == 1)
                #expect(try await repo.app(id: fixture.app.id) == fixture.app)
                #expect(try await repo.apps(brandId: fixture.brand.id) == [fixture.app])
                #expect(try await repo.appKeys(appId: fixture.app.id) == [key])
                #expect(try await repo.agent(email: fixture.agent.email)?.agent == fixture.agent)
                #expect(try await repo.agent(brandId: fixture.brand.id, id: fixture.agent.id)?.passwordHash == "hash")
                #expect(try await repo.consumer(brandId: fixture.brand.id, id: fixture.consumer.id) == fixture.consumer)
            }
        }
    }

    @Test("another brand's rows are not found by id", arguments: Backend.available)
    func tenancy(backend: Backend) async throws {
        try await backend.withStore { store in
            let acme = try await Fixture.make(in: store, name: "Acme")
            let globex = try await Fixture.make(in: store, name: "Globex")
            let conversation = acme.conversation()
            try await store.write { repo in try await repo.insertConversation(conversation) }

            try await store.read { (repo: any Repository) async throws -> Void in
                #expect(try await repo.conversation(brandId: globex.brand.id, id: conversation.id, lock: false) == nil)
                #expect(try await repo.agent(brandId: globex.brand.id, id: acme.agent.id) == nil)
                #expect(try await repo.consumer(brandId: globex.brand.id, id: acme.consumer.id) == nil)
                #expect(try await repo.conversations(brandId: globex.brand.id, filter: .init()).isEmpty)
                #expect(try await repo.conversations(consumerId: acme.consumer.id, brandId: globex.brand.id, limit: 10).isEmpty)
            }
        }
    }

    @Test("a second agent with the same email is refused", arguments: Backend.available)
    func uniqueEmail(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            var twinAgent = fixture.agent
            twinAgent.id = AgentID.make()
            let twin = twinAgent
            // The store reports the database's unique-key refusal; the service turns it into email_taken.
            let error = await #expect(throws: (any Error).self) {
                try await store.write { repo in try await repo.insertAgent(AgentRecord(agent: twin, passwordHash: "x")) }
            }
            #expect(error.map(isUniqueViolation) == true)
            #expect(try await store.read { repo in try await repo.agents(brandId: fixture.brand.id) }.count == 1)
        }
    }

    @Test("sessions: stored by hash, revocable", arguments: Backend.available)
    func sessions(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let now = SystemClock().now()
            let session = SessionRecord(
                tokenHash: "abc123", brandId: fixture.brand.id, subjectKind: .consumer, subjectId: fixture.consumer.id.rawValue,
                appId: fixture.app.id, createdAt: now, expiresAt: now.addingTimeInterval(60))
            try await store.write { repo in try await repo.insertSession(session) }
            #expect(try await store.read { repo in try await repo.session(tokenHash: "abc123") } == session)
            try await store.write { repo in try await repo.revokeSession(tokenHash: "abc123", at: now) }
            #expect(try await store.read { repo in try await repo.session(tokenHash: "abc123") }?.revokedAt == now)
        }
    }

    @Test("conversation lists filter and page by recent activity", arguments: Backend.available)
    func conversationLists(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let base = SystemClock().now()
            let conversations = (0..<5).map { index in
                var conversation = fixture.conversation(
                    state: index == 4 ? .resolved : .open, updatedAt: base.addingTimeInterval(Double(index)))
                if index == 0 { conversation.assigneeId = fixture.agent.id }
                return conversation
            }
            try await store.write { repo in
                for conversation in conversations { try await repo.insertConversation(conversation) }
            }
            try await store.read { (repo: any Repository) async throws -> Void in
                let open = try await repo.conversations(brandId: fixture.brand.id, filter: .init(states: [.open]))
                #expect(open.map(\.id) == conversations[0..<4].reversed().map(\.id))
                let mine = try await repo.conversations(brandId: fixture.brand.id, filter: .init(assignee: .agent(fixture.agent.id)))
                #expect(mine.map(\.id) == [conversations[0].id])
                let unassigned = try await repo.conversations(brandId: fixture.brand.id, filter: .init(assignee: .unassigned))
                #expect(unassigned.count == 4)

                let first = try await repo.conversations(brandId: fixture.brand.id, filter: .init(limit: 2))
                let last = first.last!
                let second = try await repo.conversations(
                    brandId: fixture.brand.id,
                    filter: .init(limit: 10, before: (StoredTime.millis(last.updatedAt), last.id)))
                #expect(first.map(\.id) + second.map(\.id) == conversations.reversed().map(\.id))
            }
        }
    }

    @Test("messages: unique sequence, idempotency key, ordered history", arguments: Backend.available)
    func messages(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            let first = fixture.message(in: conversation, seq: 1, from: .consumer)
            let second = fixture.message(in: conversation, seq: 2, from: .agent)
            try await store.write { repo in
                try await repo.insertConversation(conversation)
                try await repo.insertMessage(first, brandId: fixture.brand.id)
                try await repo.insertMessage(second, brandId: fixture.brand.id)
            }

            // A second message with seq 1, or with the same sender and client id, cannot exist.
            let clash = fixture.message(in: conversation, seq: 1, from: .consumer)
            await #expect(throws: (any Error).self) {
                try await store.write { repo in try await repo.insertMessage(clash, brandId: fixture.brand.id) }
            }
            var reusedMessage = fixture.message(in: conversation, seq: 3, from: .consumer)
            reusedMessage.clientMessageId = first.clientMessageId
            let reused = reusedMessage
            let duplicate = await #expect(throws: (any Error).self) {
                try await store.write { repo in try await repo.insertMessage(reused, brandId: fixture.brand.id) }
            }
            #expect(duplicate.map(isUniqueViolation) == true)

            try await store.read { (repo: any Repository) async throws -> Void in
                #expect(try await repo.messages(conversationId: conversation.id, afterSeq: 0, limit: 10) == [first, second])
                #expect(try await repo.messages(conversationId: conversation.id, afterSeq: 1, limit: 10) == [second])
                #expect(try await repo.message(senderId: fixture.consumer.id.rawValue, clientMessageId: first.clientMessageId) == first)
            }
        }
    }

    @Test("delivery states only rise, and only on the other side's messages", arguments: Backend.available)
    func deliveryStates(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            let messages = [
                fixture.message(in: conversation, seq: 1, from: .agent),
                fixture.message(in: conversation, seq: 2, from: .consumer),
                fixture.message(in: conversation, seq: 3, from: .agent),
            ]
            try await store.write { repo in
                try await repo.insertConversation(conversation)
                for message in messages { try await repo.insertMessage(message, brandId: fixture.brand.id) }
            }
            let raise = { @Sendable (upTo: Int64, state: DeliveryState) in
                try await store.write { repo in
                    try await repo.raiseDeliveryState(
                        conversationId: conversation.id, senderKind: .agent, upToSeq: upTo, to: state, at: SystemClock().now())
                }
            }
            #expect(try await raise(3, .read) == 2)
            #expect(try await raise(3, .delivered) == 0)  // never backwards
            #expect(try await raise(3, .read) == 0)  // repeated: no change
            let states = try await store.read { repo in
                try await repo.messages(conversationId: conversation.id, afterSeq: 0, limit: 10).map(\.deliveryState)
            }
            #expect(states == [.read, .sent, .read])
        }
    }

    @Test("events interleave with messages by sequence", arguments: Backend.available)
    func events(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            let event = ConversationEventDTO(
                conversationId: conversation.id, seq: 2, kind: .receipt, actorKind: .consumer, actorId: fixture.consumer.id.rawValue,
                upToSeq: 1, deliveryState: .read, createdAt: SystemClock().now())
            let assigned = ConversationEventDTO(
                conversationId: conversation.id, seq: 3, kind: .assigned, actorKind: .agent, actorId: fixture.agent.id.rawValue,
                assigneeId: fixture.agent.id, createdAt: SystemClock().now())
            try await store.write { repo in
                try await repo.insertConversation(conversation)
                try await repo.insertEvent(event, brandId: fixture.brand.id)
                try await repo.insertEvent(assigned, brandId: fixture.brand.id)
            }
            #expect(try await store.read { repo in try await repo.events(conversationId: conversation.id, afterSeq: 1, limit: 10, includeNotes: true) } == [event, assigned])
            #expect(try await store.read { repo in try await repo.events(conversationId: conversation.id, afterSeq: 2, limit: 10, includeNotes: true) } == [assigned])
        }
    }

    @Test("a failed transaction changes nothing", arguments: Backend.available)
    func rollback(backend: Backend) async throws {
        try await backend.withStore { store in
            struct Abort: Error {}
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            await #expect(throws: Abort.self) {
                try await store.write { repo in
                    try await repo.insertConversation(conversation)
                    throw Abort()
                }
            }
            #expect(try await store.read { repo in try await repo.conversation(brandId: fixture.brand.id, id: conversation.id, lock: false) } == nil)
        }
    }

    @Test("concurrent writers never lose an update", arguments: Backend.available)
    func concurrentWriters(backend: Backend) async throws {
        try await backend.withStore { store in
            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(conversation) }
            // MUT: 40 writers each lock the row, read last_seq and write last_seq + 1
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        try await store.write { repo in
                            let read = try await repo.conversation(brandId: fixture.brand.id, id: conversation.id, lock: true)!
                            var current = read
                            current.lastSeq += 1
                            try await repo.updateConversation(current, from: read)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let final = try await store.read { repo in try await repo.conversation(brandId: fixture.brand.id, id: conversation.id, lock: false) }
            #expect(final?.lastSeq == 40)
        }
    }

    @Test("call records: stored at invitation, final once ended, per brand", arguments: Backend.available)
    func calls(backend: Backend) async throws {
        try await backend.withStore { store in
            let acme = try await Fixture.make(in: store, name: "Acme")
            let globex = try await Fixture.make(in: store, name: "Globex")
            let conversation = acme.conversation()
            let invited = SystemClock().now()
            var draft = CallDTO(
                id: CallID.make(), conversationId: conversation.id, media: .voice, state: .ringing, version: 1,
                invitedBy: acme.agent.id.rawValue, inviterName: acme.agent.name, invitedAt: invited)
            let ringing = draft
            try await store.write { repo in
                try await repo.insertConversation(conversation)
                try await repo.insertCall(ringing, brandId: acme.brand.id)
            }
            #expect(try await store.read { repo in try await repo.unfinishedCalls(limit: 10) }.map(\.call.id) == [ringing.id])

            draft.state = .ended
            draft.media = .video
            draft.answeredBy = acme.consumer.id.rawValue
            draft.answeredAt = invited.addingTimeInterval(3)
            draft.connectedAt = invited.addingTimeInterval(4)
            draft.endedAt = invited.addingTimeInterval(63)
            draft.outcome = .completed
            draft.endReason = .hungUp
            draft.endedBy = .consumer
            draft.durationSeconds = 60
            draft.seq = 7
            let call = draft
            let event = ConversationEventDTO(
                conversationId: conversation.id, seq: 7, kind: .call, actorKind: .consumer, actorId: acme.consumer.id.rawValue,
                callId: call.id, createdAt: invited.addingTimeInterval(63))
            let ended = call
            #expect(try await store.write { repo in
                try await repo.insertEvent(event, brandId: acme.brand.id)
                return try await repo.updateCall(ended, brandId: acme.brand.id)
            })
            // Once ended, a late write changes nothing.
            var changed = call
            changed.outcome = .failed
            let late = changed
            #expect(try await store.write { repo in try await repo.updateCall(late, brandId: acme.brand.id) } == false)

            try await store.read { (repo: any Repository) async throws -> Void in
                var stored = try #require(try await repo.call(brandId: acme.brand.id, id: call.id))
                stored.version = call.version
                #expect(stored == call)
                #expect(try await repo.calls(conversationId: conversation.id, brandId: acme.brand.id, limit: 10).map(\.id) == [call.id])
                #expect(try await repo.unfinishedCalls(limit: 10).isEmpty)
                #expect(try await repo.events(conversationId: conversation.id, afterSeq: 0, limit: 10, includeNotes: true).first?.callId == call.id)
                // Another brand finds nothing.
                #expect(try await repo.call(brandId: globex.brand.id, id: call.id) == nil)
                #expect(try await repo.calls(conversationId: conversation.id, brandId: globex.brand.id, limit: 10).isEmpty)
            }
        }
    }

    @Test("voice records round-trip with their message; a corrupt enum column is an error, never a default", arguments: Backend.available)
    func voiceAndCorruptRows(backend: Backend) async throws {
        try await backend.withStore { store in
            let acme = try await Fixture.make(in: store)
            let conversation = acme.conversation()
            var draft = acme.message(in: conversation, seq: 1, from: .consumer, text: "")
            draft.kind = .voice
            let message = draft
            let now = SystemClock().now()
            let voice = VoiceRecord(
                messageId: message.id, brandId: acme.brand.id, container: "webm", originalKey: "voice/\(message.id)/original",
                originalBytes: 1234, durationMs: 4200, waveform: [0, 7, 128, 255], state: .ready, opusKey: "voice/o", opusBytes: 99,
                scan: .clean, scanAttempts: 1, createdAt: now, updatedAt: now)
            let stored = message
            try await store.write { repo in
                try await repo.insertConversation(conversation)
                try await repo.insertMessage(stored, brandId: acme.brand.id)
                try await repo.insertVoice(voice)
            }
            try await store.read { (repo: any Repository) async throws -> Void in
                #expect(try await repo.voice(messageId: message.id, brandId: acme.brand.id) == voice)
                let read = try #require(try await repo.messages(conversationId: conversation.id, afterSeq: 0, limit: 10).first)
                #expect(read.voice == voice.dto)
                #expect(try await repo.message(brandId: acme.brand.id, id: message.id)?.voice?.waveform == [0, 7, 128, 255])
            }

            // MUT: a scan state no version of Parley ever wrote
            try await store.database.write { db in
                try await db.raw("UPDATE voice_media SET scan_state = 'probably_fine' WHERE message_id = \(bind: message.id)").run()
            }
            // validate: reading it is an error (it used to read as `clean`)
            await #expect(throws: StoreError.self) {
                try await store.read { repo in try await repo.voice(messageId: message.id, brandId: acme.brand.id) }
            }
            await #expect(throws: StoreError.self) {
                try await store.read { repo in try await repo.messages(conversationId: conversation.id, afterSeq: 0, limit: 10) }
            }
        }
    }

}
