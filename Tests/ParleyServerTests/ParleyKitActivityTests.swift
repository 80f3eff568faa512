import Foundation
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization
import Testing

/// ParleyKit's monitoring API, message states, upload progress, app lifecycle and recorders.
@Suite("ParleyKit: activity, states, lifecycle, recording")
struct ParleyKitActivityTests {
    typealias EventLog = ParleyKitTests.EventLog

    static func root() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return root
    }

    @Test("report: events wait sealed while offline and go in batches once, a rule's prompt arrives as an event, its message in the conversation; bad names refused at once")
    func reportOfflineThenOnline() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            for (name, action, text) in [("checkout", EngagementAction.prompt, "Questions about delivery? Ask us here."),
                                         ("big_cart", .message, "Your cart is worth it: reply and an agent will help you order.")] {
                _ = name
                #expect(try await server.post("/v1/engagement-rules", token: acme.adminToken, json: SaveEngagementRuleRequest(
                    name: text, event: action == .prompt ? "screen_view" : "cart_value", property: action == .prompt ? "screen" : "value",
                    comparison: action == .prompt ? .equals : .atLeast, value: action == .prompt ? "checkout" : "100", action: action, text: text)).status == .created)
            }
            // Offline (nothing listens there): 120 events wait on the device, sealed.
            let offline = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(await ParleyKitTests.freePort())/")!,
                identity: .anonymous(displayName: "Dee"), storage: ParleyKitTests.storage(root), transport: NIOTransport(), retryDelay: .milliseconds(20))
            for index in 0..<118 { try await offline.report(.custom("scrolled", ["position": .number(Double(index))])) }
            try await offline.report(.screenView("checkout"), .cartValue(129.90, currency: "EUR"))
            #expect(await offline.flush())
            await #expect(throws: ParleyKitError.invalid("'name' is 1-64 characters of letters, digits, '_', '.', '-' and ':' (say, 'screen_view').")) {
                try await offline.report(.custom("has spaces"))
            }
            let sealed = try Data(contentsOf: root.appendingPathComponent("parley/activity.sealed"))
            #expect(sealed.range(of: Data("checkout".utf8)) == nil && sealed.range(of: Data("scrolled".utf8)) == nil)

            // The same device, online: three batches (50, 50, 20), a prompt, an automatic message.
            let online = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Dee"), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            let log = EventLog(online)
            #expect(await online.flush() == false)
            #expect(await online.flush() == false)  // nothing twice
            try await log.wait { $0.contains { if case .prompt(let prompt) = $0 { prompt.text == "Questions about delivery? Ask us here." } else { false } } }
            let consumer = try #require(await online.consumer)
            let activity = try await server.get("/v1/consumers/\(consumer.id)/activity?limit=200", token: acme.adminToken)
                .decode(ListResponse<ActivityEventDTO>.self).items
            #expect(activity.count == 120)
            #expect(Set(activity.map(\.name)) == ["scrolled", "screen_view", "cart_value"])
            #expect(activity.first { $0.name == "cart_value" }?.properties == ["value": .number(129.9), "currency": .string("EUR")])
            let conversation = try #require(try await online.conversations().first)
            let messages = try await online.messages(in: conversation.id)
            #expect(messages.map(\.text) == ["Your cart is worth it: reply and an agent will help you order."])
            #expect(messages.first?.senderKind == .system)
            log.task.cancel()
        }
    }

    @Test("a voice note's transcript reaches the app live, with the note's event, as Message.transcript")
    func transcriptLive() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        let recording = root.appendingPathComponent("note.m4a")
        try AudioFixtures.files().data("note.m4a").write(to: recording)
        let engine = ScriptedTranscriber(words: "is the blue one in stock")
        try await TestServer.run(transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await TranscriptionTests.enable(server, acme, .init(transcription: true)).status == .ok)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            let log = EventLog(parley)
            await parley.connect()
            // 60 s, not 15: this test starts while the suite's heaviest tests run (2,000 sockets, the
            // co-browse relays), and twice on 2026-11-28 the first connection took longer than 15 s.
            try await log.wait(within: 60) { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
            _ = try await parley.sendVoice(FileVoiceRecorder(source: recording).recorded(for: .seconds(3)))
            #expect(await parley.flush() == false)
            try await log.wait { events in
                events.contains { event in
                    if case .event(let happened) = event, happened.kind == .voiceProcessed, happened.message?.transcript?.state == .ready { true } else { false }
                }
            }
            let stored = try #require(await parley.outgoing.last?.state.stored)
            let message = try await parley.messages(in: stored.conversationId).first { $0.id == stored.messageId }
            #expect(message?.transcript == VoiceTranscriptDTO(state: .ready, text: "is the blue one in stock", language: "en"))
            log.task.cancel()
        }
    }

    @Test("the consumer's messages move sent -> delivered -> read as .outgoing events; a voice upload reports its progress")
    func statesAndProgress() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        let recording = root.appendingPathComponent("note.m4a")
        try AudioFixtures.files().data("note.m4a").write(to: recording)
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, _) = try await acme.agent()
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            let log = EventLog(parley)
            await parley.connect()
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
            let text = try await parley.send("Is the blue one in stock?")
            _ = try await parley.sendVoice(FileVoiceRecorder(source: recording).recorded(for: .seconds(3)))
            #expect(await parley.flush() == false)
            let sent = await parley.outgoing
            guard let first = sent.first?.state.stored, let last = sent.last?.state.stored else {
                Issue.record("not sent: \(sent)")
                return
            }
            // The upload's progress went from 0 to 1.
            let progress = log.list.items.withLock { items in
                items.compactMap { if case .uploadProgress(_, let fraction) = $0 { fraction } else { nil } }
            }
            #expect(progress.first == 0 && progress.last == 1 && progress == progress.sorted())
            // An agent's page receives them, then reads the first only.
            _ = try await server.post(
                "/v1/conversations/\(first.conversationId)/receipts", token: agentToken, json: ReceiptRequest(upToSeq: last.seq, state: .delivered))
            _ = try await server.post(
                "/v1/conversations/\(first.conversationId)/receipts", token: agentToken, json: ReceiptRequest(upToSeq: first.seq, state: .read))
            try await log.wait { events in
                let states = events.compactMap { if case .outgoing(let message) = $0 { message } else { nil } }
                return states.contains { $0.clientMessageId == text.clientMessageId && { if case .read = $0.state { true } else { false } }($0) }
                    && states.contains { $0.clientMessageId != text.clientMessageId && { if case .delivered = $0.state { true } else { false } }($0) }
            }
            let now = await parley.outgoing.map(\.state)
            #expect(now == [.read(messageId: first.messageId, conversationId: first.conversationId, seq: first.seq),
                            .delivered(messageId: last.messageId, conversationId: last.conversationId, seq: last.seq)])
            // A late "delivered" never takes "read" back.
            _ = try await server.post(
                "/v1/conversations/\(first.conversationId)/receipts", token: agentToken, json: ReceiptRequest(upToSeq: last.seq, state: .delivered))
            try await Task.sleep(for: .milliseconds(200))
            #expect(await parley.outgoing.map(\.state) == now)
            await parley.disconnect()
            log.task.cancel()
        }
    }

    @Test("following the app's lifecycle: foreground connects and sends, background disconnects; each change in order")
    func lifecycle() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            let center = NotificationCenter()
            let app = AppLifecycle(center: center, foreground: .init("test.foreground"), background: .init("test.background"))
            let log = EventLog(parley)
            await parley.followAppLifecycle(app)
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
            // Written in the foreground: the running outbox sends it without a flush.
            let message = try await parley.send("Sent while in the foreground")
            try await log.wait { $0.contains { if case .outgoing(let sent) = $0 { sent.clientMessageId == message.clientMessageId && sent.state.stored != nil } else { false } } }

            center.post(name: app.background, object: nil)
            try await log.wait { $0.contains { if case .connection(.disconnected(retrying: false)) = $0 { true } else { false } } }
            // The server hears of the close a moment after the app does.
            let consumerId = try #require(await parley.consumer).id
            let deadline = Date().addingTimeInterval(10)
            while server.services.hub.isConnected(consumerId: consumerId), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.services.hub.isConnected(consumerId: consumerId) == false)
            let connects = log.list.items.withLock { $0.filter { if case .connection(.connected) = $0 { true } else { false } }.count }
            center.post(name: app.foreground, object: nil)
            try await log.wait { events in events.filter { if case .connection(.connected) = $0 { true } else { false } }.count == connects + 1 }

            // Not following any more: notifications change nothing.
            await parley.stopFollowingAppLifecycle()
            center.post(name: app.background, object: nil)
            try await Task.sleep(for: .milliseconds(200))
            #expect(log.list.items.withLock { $0.last.map { if case .connection(.disconnected) = $0 { true } else { false } } ?? false } == false)
            await parley.disconnect()
            log.task.cancel()
        }
    }

    @Test("an app waiting for an agent hears its place in the queue move, then who has it")
    func queueEvents() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)  // manual: conversations wait until taken
            let (aheadToken, _) = try await acme.consumer(name: "Ahead")
            let ahead = try await acme.send("I was here first", as: aheadToken)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            try await parley.send("Is anyone there?")
            #expect(await parley.flush() == false)
            let mine = try #require(await parley.outgoing.first?.state.stored).conversationId
            #expect(try await parley.queuePosition(in: mine).position == 2)
            let log = EventLog(parley)
            await parley.connect()
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
            _ = try await server.post("/v1/conversations/\(ahead.conversation.id)/assign", token: acme.adminToken, json: AssignRequest(agentId: acme.admin.id))
            try await log.wait { $0.contains { if case .queue(let place) = $0 { place.conversationId == mine && place.position == 1 } else { false } } }
            _ = try await server.post("/v1/conversations/\(mine)/assign", token: acme.adminToken, json: AssignRequest(agentId: acme.admin.id))
            try await log.wait { $0.contains { if case .event(let event) = $0 { event.kind == .assigned && event.assigneeId == acme.admin.id } else { false } } }
            #expect(try await parley.queuePosition(in: mine).position == nil)
            await parley.disconnect()
            log.task.cancel()
        }
    }

    @Test("an app hears its conversation close, rates it, and its next message starts a new conversation linked to the closed one")
    func closeAndRate() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(.patch, "/v1/lifecycle", token: acme.adminToken, json: UpdateLifecycleRequest(survey: true))
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(), storage: ParleyKitTests.storage(root), transport: NIOTransport())
            try await parley.send("Where is my parcel?")
            #expect(await parley.flush() == false)
            let first = try #require(await parley.outgoing.first?.state.stored).conversationId
            let log = EventLog(parley)
            await parley.connect()
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
            _ = try await server.post("/v1/conversations/\(first)/resolve", token: acme.adminToken)
            try await log.wait { $0.contains { if case .closed(let conversation) = $0 { conversation.id == first && conversation.survey == .offered } else { false } } }
            let rated = try await parley.rate(first, score: 5, comment: "Found it, thanks")
            #expect(rated.rating?.score == 5 && rated.survey == .answered)
            try await parley.send("Another question")
            #expect(await parley.flush() == false)
            let second = try #require(await parley.outgoing.last?.state.stored).conversationId
            #expect(second != first)
            #expect(try await parley.conversations().first { $0.id == second }?.previousConversationId == first)
            // Its history, a page at a time.
            let page = try await parley.history(limit: 1)
            #expect(page.items.map(\.id) == [second])
            guard let cursor = page.nextCursor else { throw TestFailure("a second page was expected") }
            let older = try await parley.history(cursor: cursor, limit: 1)
            #expect(older.items.map(\.id) == [first])
            await parley.disconnect()
            log.task.cancel()
        }
    }

    @Test("the file recorder: pauses not counted, stops at the brand's limit, a level only while recording, states checked")
    func fileRecorder() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appendingPathComponent("note.m4a")
        try AudioFixtures.files().data("note.m4a").write(to: source)
        let start = ContinuousClock.now
        let clock = Mutex(start)
        let recorder = FileVoiceRecorder(source: source, now: { clock.withLock { $0 } }, meter: { position in position < .seconds(5) ? 0.25 : 0.75 })
        func advance(_ seconds: Int) { clock.withLock { $0 = $0.advanced(by: .seconds(seconds)) } }

        await #expect(throws: ParleyKitError.invalid("nothing is being recorded")) { try await recorder.stop() }
        try await recorder.start(limit: .seconds(15))
        await #expect(throws: ParleyKitError.invalid("a recording is already under way")) { try await recorder.start(limit: .seconds(15)) }
        advance(4)
        #expect(await recorder.level() == 0.25)
        await recorder.pause()
        #expect(await recorder.level() == 0)
        advance(100)  // paused: not counted
        #expect(await recorder.elapsed() == .seconds(4))
        try await recorder.resume()
        advance(3)
        #expect(await recorder.elapsed() == .seconds(7))
        #expect(await recorder.level() == 0.75)
        advance(60)  // past the limit: it stopped there
        #expect(await recorder.elapsed() == .seconds(15))
        #expect(await recorder.level() == 0)
        let recording = try await recorder.stop()
        #expect(recording.duration == .seconds(15))
        #expect(recording.contentType == "audio/mp4")
        #expect(try Data(contentsOf: recording.file) == Data(contentsOf: source))
        #expect(recording.file != source)
        try FileManager.default.removeItem(at: recording.file)

        // Cancelled: nothing to stop.
        try await recorder.start(limit: .seconds(15))
        await recorder.cancel()
        await #expect(throws: ParleyKitError.invalid("nothing is being recorded")) { try await recorder.stop() }
        let missing = FileVoiceRecorder(source: root.appendingPathComponent("none.m4a"))
        await #expect(throws: ParleyKitError.self) { try await missing.start(limit: .seconds(15)) }
    }
}

extension FileVoiceRecorder {
    /// A recording of the whole source file, as if `duration` had passed between start and stop.
    func recorded(for duration: Duration) async throws -> VoiceRecording {
        try await start(limit: .seconds(120))
        let recording = try await stop()
        return VoiceRecording(file: recording.file, contentType: recording.contentType, duration: duration)
    }
}
