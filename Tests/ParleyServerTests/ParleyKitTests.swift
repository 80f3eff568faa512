import Foundation
import JWTKit
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization
import Testing

@Suite("ParleyKit SDK")
struct ParleyKitTests {
    @Test("an app signs a consumer in, sends, reads history and acknowledges")
    func sdkRoundTrip() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let client = ParleyClient(baseURL: URL(string: "http://127.0.0.1:\(server.port)/")!, transport: NIOTransport())
            let consumer = try await client.startSession(appId: acme.app.id, displayName: "Ana from the app")
            #expect(consumer.displayName == "Ana from the app")

            let sent = try await client.send("Sent from ParleyKit", clientMessageId: "kit-1")
            #expect(sent.created)
            let retried = try await client.send("Sent from ParleyKit", clientMessageId: "kit-1")
            #expect(!retried.created)
            #expect(retried.message.id == sent.message.id)

            let answer = try await acme.reply("Hello from the agent", in: sent.conversation.id, as: acme.adminToken)
            #expect(try await client.conversations().map(\.id) == [sent.conversation.id])
            let history = try await client.messages(conversationId: sent.conversation.id)
            #expect(history.map(\.text) == ["Sent from ParleyKit", "Hello from the agent"])
            let event = try await client.acknowledge(conversationId: sent.conversation.id, upToSeq: answer.message.seq, state: .read)
            #expect(event?.deliveryState == .read)

            // Server refusals come back as typed errors with the stable code.
            await #expect(throws: ParleyClientError.api(status: 422, .init(
                code: "message_too_long",
                message: "The text has 2001 characters; web allows at most 2000 from a consumer.", field: "text"))) {
                try await client.send(String(repeating: "x", count: 2001))
            }
        }
    }

    /// A port nothing listens on (taken from the system, then given back).
    static func freePort() async -> Int {
        let endpoint = await LocalEndpoint.start(.init(), label: "port-finder")
        let port = endpoint.port
        await endpoint.stop()
        return port
    }

    static func storage(_ directory: URL) -> ParleyStorage {
        ParleyStorage(directory: directory.appendingPathComponent("parley"), key: .file(directory.appendingPathComponent("parley.key")))
    }

    @Test("offline: five messages wait in the sealed outbox across a restart, then reach the agents once each, in order; nothing is stored in plaintext")
    func offlineOutbox() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        let serverData = root.appendingPathComponent("server")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let database = try await TestDatabase.make()
        defer { Task { await database.drop() } }
        let port = await Self.freePort()
        let ids = Mutex<(BrandID, AppID, String)?>(nil)
        // The brand and its app exist; then the server goes away.
        try await TestServer.run(database: database, configure: { $0.port = port; $0.dataDirectory = serverData.path }) { server in
            let acme = try await BrandScenario.make(server)
            ids.withLock { $0 = (acme.brand.id, acme.app.id, acme.adminToken) }
        }
        let (brandID, appID, adminToken) = try #require(ids.withLock { $0 })
        let server = URL(string: "http://127.0.0.1:\(port)/")!
        let texts = (1...5).map { "Offline message \($0) about order 7731" }

        let offline = try await Parley.configure(
            brandID: brandID, appID: appID, server: server, identity: .anonymous(displayName: "Ana on the train"), storage: Self.storage(root), transport: NIOTransport(),
            retryDelay: .milliseconds(50))
        for text in texts { try await offline.send(text) }
        #expect(await offline.flush())  // still pending: nothing listens
        #expect(await offline.outgoing.map(\.state) == Array(repeating: .pending, count: 5))
        #expect(await offline.outgoing.first?.attempts == 1)
        // What the SDK stored is sealed: no text, no name, in any file.
        for name in try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path) {
            let bytes = try Data(contentsOf: root.appendingPathComponent("parley").appendingPathComponent(name))
            #expect(bytes.range(of: Data("Offline message".utf8)) == nil && bytes.range(of: Data("order 7731".utf8)) == nil, "\(name)")
        }

        // The app restarts; the server is back.
        let restarted = try await Parley.configure(
            brandID: brandID, appID: appID, server: server, identity: .anonymous(displayName: "Ana on the train"), storage: Self.storage(root), transport: NIOTransport(),
            retryDelay: .milliseconds(50))
        #expect(await restarted.outgoing.map(\.text) == texts)
        try await TestServer.run(database: database, configure: { $0.port = port; $0.dataDirectory = serverData.path }) { live in
            await restarted.start()
            let deadline = Date().addingTimeInterval(30)
            while await restarted.outgoing.contains(where: { $0.state == .pending }), Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            await restarted.stop()
            let sent = await restarted.outgoing
            guard case .sent(_, let conversationId, _) = try #require(sent.last).state else {
                Issue.record("not sent: \(sent.map(\.state))")
                return
            }
            // Once more from a third start: nothing is sent twice.
            let again = try await Parley.configure(
                brandID: brandID, appID: appID, server: server, identity: .anonymous(displayName: "Ana on the train"), storage: Self.storage(root), transport: NIOTransport())
            #expect(await again.flush() == false)
            let messages = try await live.get("/v1/conversations/\(conversationId)/messages", token: adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(messages.map(\.text) == texts)
            #expect(Set(sent.compactMap { if case .sent(_, let id, _) = $0.state { id } else { nil } }) == [conversationId])
            #expect(await again.consumer?.displayName == "Ana on the train")

            // A refusal is final for that message and does not hold back the next one.
            try await again.send(String(repeating: "x", count: 2001), clientMessageId: "too-long")
            try await again.send("After the long one", clientMessageId: "after")
            #expect(await again.flush() == false)
            let states = await again.outgoing.suffix(2).map(\.state)
            #expect(states.first == .failed(code: "message_too_long", message: "The text has 2001 characters; web allows at most 2000 from a consumer."))
            if case .sent = states.last {} else { Issue.record("the next message was held back: \(states)") }

            // Signing out wipes the device.
            try await again.signOut()
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path).isEmpty)
        }
    }

    @Test("an authenticated consumer: the brand's JWT closure is called for a session and again when it expires; the message still goes once")
    func authenticatedIdentity() async throws {
        let clock = ManualClock()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run(clock: clock, configure: { $0.consumerSessionTTL = 3600 }) { server in
            let acme = try await BrandScenario.make(server)
            let secret = String(repeating: "kit-secret-", count: 4)
            #expect(try await server.post(
                "/v1/apps/\(acme.app.id)/keys", token: acme.adminToken, json: AddAppKeyRequest(kid: "kit", algorithm: "HS256", key: secret)).status == .created)
            let signer = JWTKeyCollection()
            await signer.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: "kit")
            let calls = Mutex(0)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .authenticated {
                    calls.withLock { $0 += 1 }
                    return try await signer.sign(
                        BrandClaims(sub: .init(value: "user-77"), exp: .init(value: Date().addingTimeInterval(300)), aud: nil, name: "Bea Kit"), kid: "kit")
                },
                storage: Self.storage(root), transport: NIOTransport())
            try await parley.send("First, signed in")
            #expect(await parley.flush() == false)
            #expect(calls.withLock { $0 } == 1)
            #expect(await parley.consumer?.externalId == "user-77")

            // The session expires: the closure gives a fresh JWT and the message goes.
            clock.advance(by: .seconds(7200))
            try await parley.send("Second, after expiry")
            #expect(await parley.flush() == false)
            #expect(calls.withLock { $0 } == 2)
            let conversation = try #require(try await server.get("/v1/conversations", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first)
            let texts = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self)
                .items.map(\.text)
            #expect(texts == ["First, signed in", "Second, after expiry"])
        }
    }

    /// Everything a Parley instance emits, collected by one task for the test to look at.
    final class EventLog: Sendable {
        final class List: Sendable { let items = Mutex<[ParleyEvent]>([]) }
        let list = List()
        let task: Task<Void, Never>

        init(_ parley: Parley) {
            let list = self.list
            task = Task { for await event in parley.events { list.items.withLock { $0.append(event) } } }
        }

        var messages: [MessageDTO] { list.items.withLock { Self.messages($0) } }

        static func messages(_ events: [ParleyEvent]) -> [MessageDTO] {
            events.compactMap { if case .message(let message) = $0 { message } else { nil } }
        }

        func wait(within seconds: Double = 60, until check: @escaping @Sendable ([ParleyEvent]) -> Bool) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if list.items.withLock({ check($0) }) { return }
                try await Task.sleep(for: .milliseconds(30))
            }
            throw TestFailure("no such events within \(seconds) s: \(list.items.withLock { $0 })")
        }
    }

    @Test("real time: an agent's answer arrives as an event, marked delivered on arrival and read when the app says so; after a disconnect and a restart the device catches up exactly once")
    func realtime() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let url = URL(string: "http://127.0.0.1:\(server.port)/")!
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: url, identity: .anonymous(displayName: "Cam"), storage: Self.storage(root), transport: NIOTransport())
            try await parley.send("Hello from the app")
            #expect(await parley.flush() == false)
            guard case .sent(_, let conversationId, _) = try #require(await parley.outgoing.first).state else { return }
            let log = EventLog(parley)
            await parley.connect()
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }

            let answer = try await acme.reply("Answer one", in: conversationId, as: acme.adminToken)
            try await log.wait { EventLog.messages($0).contains { $0.text == "Answer one" } }
            let delivered = { (state: DeliveryState) in
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline {
                    let items = try await server.get("/v1/conversations/\(conversationId)/messages", token: acme.adminToken)
                        .decode(ListResponse<MessageDTO>.self).items
                    if items.first(where: { $0.id == answer.message.id })?.deliveryState == state { return true }
                    try await Task.sleep(for: .milliseconds(30))
                }
                return false
            }
            #expect(try await delivered(.delivered))
            await parley.markRead(conversationId)
            #expect(try await delivered(.read))
            await parley.disconnect()
            log.task.cancel()

            // Away: two answers. The app restarts and connects: exactly those two arrive.
            _ = try await acme.reply("Answer two", in: conversationId, as: acme.adminToken)
            _ = try await acme.reply("Answer three", in: conversationId, as: acme.adminToken)
            let restarted = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: url, identity: .anonymous(displayName: "Cam"), storage: Self.storage(root), transport: NIOTransport())
            let again = EventLog(restarted)
            await restarted.connect()
            try await again.wait { EventLog.messages($0).contains { $0.text == "Answer three" } }
            try await Task.sleep(for: .milliseconds(300))
            #expect(again.messages.map(\.text) == ["Answer two", "Answer three"])
            await restarted.disconnect()
            again.task.cancel()
        }
    }

    @Test("events for every screen: three subscribers; one cancelled (a SwiftUI view gone) ends neither other; the two left and one made later each get every event; a screen coming back hears again")
    func eventsForEveryScreen() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Dee"), storage: Self.storage(root), transport: NIOTransport())
            try await parley.send("Hello from three screens")
            #expect(await parley.flush() == false)
            guard case .sent(_, let conversationId, _) = try #require(await parley.outgoing.first).state else { return }
            let chat = EventLog(parley), badge = EventLog(parley), list = EventLog(parley)
            await parley.connect()
            let connected: @Sendable ([ParleyEvent]) -> Bool = { events in events.contains { if case .connection(.connected) = $0 { true } else { false } } }
            for log in [chat, badge, list] { try await log.wait(until: connected) }

            _ = try await acme.reply("One", in: conversationId, as: acme.adminToken)
            for log in [chat, badge, list] { try await log.wait { EventLog.messages($0).contains { $0.text == "One" } } }
            // The chat screen goes away: its task is cancelled, as SwiftUI's .task does.
            chat.task.cancel()
            _ = await chat.task.value
            let later = EventLog(parley)
            _ = try await acme.reply("Two", in: conversationId, as: acme.adminToken)
            _ = try await acme.reply("Three", in: conversationId, as: acme.adminToken)
            for log in [badge, list] {
                try await log.wait { EventLog.messages($0).contains { $0.text == "Three" } }
                #expect(log.messages.map(\.text) == ["One", "Two", "Three"])
            }
            try await later.wait { EventLog.messages($0).contains { $0.text == "Three" } }
            #expect(later.messages.map(\.text) == ["Two", "Three"])
            #expect(!chat.messages.contains { $0.text == "Two" })
            // Back on the chat screen: a new subscription hears the next answer.
            let back = EventLog(parley)
            _ = try await acme.reply("Four", in: conversationId, as: acme.adminToken)
            try await back.wait { EventLog.messages($0).contains { $0.text == "Four" } }
            await parley.disconnect()
            for log in [badge, list, later, back] { log.task.cancel() }
        }
    }

    @Test("a voice note recorded while the upload fails is kept sealed, survives a restart and is uploaded once; another brand's app id is refused")
    func voiceThroughTheOutbox() async throws {
        let audio = try AudioFixtures.files()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let recording = root.appendingPathComponent("note.m4a")
        try audio.data("note.m4a").write(to: recording)
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let url = URL(string: "http://127.0.0.1:\(server.port)/")!
            // The upload cannot reach the server (a closed port): the note waits, sealed.
            let offline = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(await Self.freePort())/")!,
                identity: .anonymous(), storage: Self.storage(root), transport: NIOTransport(), retryDelay: .milliseconds(20))
            let pending = try await offline.sendVoice(file: recording, contentType: "audio/mp4")
            #expect(await offline.flush())
            try FileManager.default.removeItem(at: recording)  // the app's own copy is gone
            let sealed = try Data(contentsOf: root.appendingPathComponent("parley").appendingPathComponent("voice-\(pending.clientMessageId).sealed"))
            #expect(sealed.range(of: Data("ftyp".utf8)) == nil)  // no M4A header in the clear

            let online = try await Parley.configure(brandID: acme.brand.id, appID: acme.app.id, server: url, identity: .anonymous(), storage: Self.storage(root), transport: NIOTransport())
            #expect(await online.flush() == false)
            #expect(await online.flush() == false)
            guard case .sent(let messageId, let conversationId, _) = try #require(await online.outgoing.first).state else {
                Issue.record("not sent: \(await online.outgoing)")
                return
            }
            let messages = try await server.get("/v1/conversations/\(conversationId)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(messages.map(\.id) == [messageId])
            #expect(messages.first?.kind == .voice && (messages.first?.voice?.durationMs ?? 0) > 500)

            // An app id with another brand's id: refused before anything is sent.
            let globex = try await BrandScenario.make(server, name: "Globex")
            let wrong = try await Parley.configure(
                brandID: globex.brand.id, appID: acme.app.id, server: url, identity: .anonymous(),
                storage: Self.storage(root.appendingPathComponent("other")), transport: NIOTransport())
            await #expect(throws: ParleyKitError.self) { try await wrong.conversations() }
        }
    }

    @Test("the device keeps the conversation and the last voice notes sealed: readable offline, no plaintext in any file, the oldest audio evicted")
    func encryptedCache() async throws {
        let audio = try AudioFixtures.files()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            var storage = Self.storage(root)
            storage.cachedVoiceNotes = 1
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!, identity: .anonymous(),
                storage: storage, transport: NIOTransport())
            try await parley.send("My card number ends in 4242 and the parcel is late")
            #expect(await parley.flush() == false)
            guard case .sent(_, let conversationId, _) = try #require(await parley.outgoing.first).state else { return }
            _ = try await acme.reply("Sorry about that, a new one ships today", in: conversationId, as: acme.adminToken)
            var notes: [MessageDTO] = []
            for _ in 0..<2 {
                let upload = try await VoiceTests.upload(server, try audio.data("note.webm"), token: acme.adminToken, agentConversation: conversationId)
                notes.append(try await VoiceTests.processed(server, try upload.decode(SendMessageResponse.self).message, token: acme.adminToken))
            }
            let history = try await parley.messages(in: conversationId)
            #expect(history.count == 4)
            #expect(await parley.cachedMessages(in: conversationId).map(\.text) == history.map(\.text))

            let first = try await parley.voiceAudio(for: notes[0])
            #expect(try SMSTests.probe(first) == "aac,1")
            #expect(try await parley.voiceAudio(for: notes[0]) == first)  // from the cache
            _ = try await parley.voiceAudio(for: notes[1])
            let files = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path)
            #expect(files.filter { $0.hasPrefix("audio-") } == ["audio-\(notes[1].id.rawValue).sealed"])
            for name in files {
                let bytes = try Data(contentsOf: root.appendingPathComponent("parley").appendingPathComponent(name))
                for secret in ["4242", "parcel", "ships today", "ftyp"] {
                    #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(name) holds '\(secret)' in the clear")
                }
            }
            try await parley.signOut()
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path).isEmpty)
            #expect(await parley.cachedMessages(in: conversationId).isEmpty)
        }
    }
}
