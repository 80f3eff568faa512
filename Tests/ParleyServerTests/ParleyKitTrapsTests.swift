import Foundation
import JWTKit
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The traps a brand's iOS developer fell into (issue 33, item 3), each against a real server.
@Suite("ParleyKit without traps: connect sends, own messages in place, sign-out ends the session, base URLs with a path")
struct ParleyKitTrapsTests {
    /// NIOTransport with a record of every request (method, path, bearer token), and optionally a
    /// reverse proxy's path prefix: a request outside the prefix is a 404 from the "proxy", one
    /// inside loses the prefix on its way to the server.
    final class RecordingTransport: ParleyTransport {
        struct Seen: Sendable, Equatable {
            var method: String
            var path: String
            var token: String?
        }
        let inner = NIOTransport()
        let prefix: String?
        let seen = Mutex<[Seen]>([])
        /// No network: every request fails as a refused connection would.
        let offline = Mutex(false)

        init(prefix: String? = nil) { self.prefix = prefix }

        var requests: [Seen] { seen.withLock { $0 } }

        private func route(_ url: URL) -> URL? {
            guard let prefix else { return url }
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true), components.path.hasPrefix(prefix + "/") else { return nil }
            components.path = String(components.path.dropFirst(prefix.count))
            return components.url
        }

        @concurrent func exchange(_ request: URLRequest, maxBytes: Int, progress: (@Sendable (Double) -> Void)?) async throws -> (body: Data, status: Int) {
            let url = try #require(request.url?.absoluteURL)
            let token = request.value(forHTTPHeaderField: "Authorization").map { String($0.dropFirst("Bearer ".count)) }
            seen.withLock { $0.append(Seen(method: request.httpMethod ?? "GET", path: url.path, token: token)) }
            if offline.withLock({ $0 }) { throw ParleyClientError.transport("offline") }
            guard let routed = route(url) else { return (Data(#"{"error":{"code":"not_found","message":"Not behind the proxy's path"}}"#.utf8), 404) }
            var forwarded = request
            forwarded.url = routed
            return try await inner.exchange(forwarded, maxBytes: maxBytes, progress: progress)
        }

        @concurrent func realtime(url: URL, token: String, outgoing: AsyncStream<String>, receive: @escaping @Sendable @concurrent (String) async -> Void) async throws {
            seen.withLock { $0.append(Seen(method: "WS", path: url.path, token: token)) }
            guard let routed = route(url) else { throw ParleyClientError.transport("not behind the proxy's path") }
            try await inner.realtime(url: routed, token: token, outgoing: outgoing, receive: receive)
        }
    }

    static func root() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parleykit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return root
    }

    /// Polls `check` until it holds, for at most `seconds`.
    static func eventually(within seconds: Double = 60, _ what: String, _ check: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(30))
        }
        throw TestFailure("not within \(seconds) s: \(what)")
    }

    @Test("connect() alone sends the outbox: what was written before connecting and what is written while connected reach the agents, once each, in order")
    func connectSendsOutbox() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)")!,
                identity: .anonymous(displayName: "Gil"), storage: ParleyKitTests.storage(root), transport: NIOTransport(),
                retryDelay: .milliseconds(50))
            try await parley.send("Written before connecting")
            // The app shows chat on one screen and only ever connects (no start()).
            await parley.connect()
            try await Self.eventually("the first message sent") { await parley.outgoing.allSatisfy { $0.state.stored != nil } }
            try await parley.send("Written while connected")
            try await Self.eventually("the second message sent") { await parley.outgoing.allSatisfy { $0.state.stored != nil } }
            let conversationId = try #require(await parley.outgoing.last?.state.stored?.conversationId)
            let stored = try await server.get("/v1/conversations/\(conversationId)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(stored.filter { $0.senderKind == .consumer }.map(\.text) == ["Written before connecting", "Written while connected"])
            await parley.disconnect()
        }
    }

    @Test("the consumer's own messages are in the conversation from the moment they are written, and once the server has them they are its copies: no duplicates, the server's order")
    func ownMessagesInTimeline() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Hal"), storage: ParleyKitTests.storage(root), transport: NIOTransport(),
                retryDelay: .milliseconds(50))
            // Before anything reached the server: the current conversation shows what waits.
            try await parley.send("One")
            try await parley.send("Two")
            var timeline = await parley.timeline(in: nil)
            #expect(timeline.map(\.text) == ["One", "Two"])
            #expect(timeline.allSatisfy { $0.isMine && $0.message == nil && $0.outgoing?.state == .pending })

            #expect(await parley.flush() == false)
            let conversationId = try #require(await parley.outgoing.last?.state.stored?.conversationId)
            _ = try await acme.reply("Three, from the agent", in: conversationId, as: acme.adminToken)
            // The server's list has the consumer's own messages too: each is shown once.
            _ = try await parley.messages(in: conversationId)
            timeline = await parley.timeline(in: conversationId)
            #expect(timeline.map(\.text) == ["One", "Two", "Three, from the agent"])
            #expect(timeline.map(\.isMine) == [true, true, false])
            #expect(timeline.prefix(2).allSatisfy { $0.message != nil && $0.outgoing?.state.stored != nil })
            #expect(timeline.compactMap(\.message?.seq) == timeline.compactMap(\.message?.seq).sorted())
            #expect(Set(timeline.map(\.id)).count == timeline.count)

            // Written now: at the end, pending, in the conversation it will go to.
            try await parley.send("Four")
            timeline = await parley.timeline(in: conversationId)
            #expect(timeline.map(\.text) == ["One", "Two", "Three, from the agent", "Four"])
            #expect(timeline.last?.outgoing?.state == .pending)
            #expect(await parley.timeline(in: nil).map(\.id) == timeline.map(\.id))
            let pendingId = try #require(timeline.last?.id)

            // Sent over the socket (the server does not echo it to this connection): still once,
            // the same entry, now the server's copy.
            await parley.connect()
            try await Self.eventually("four sent") { await parley.outgoing.allSatisfy { $0.state.stored != nil } }
            timeline = await parley.timeline(in: conversationId)
            #expect(timeline.map(\.text) == ["One", "Two", "Three, from the agent", "Four"])
            #expect(timeline.last?.id == pendingId)
            #expect(timeline.last?.message?.text == "Four")

            // A refusal stays in place, failed, until the consumer sends it again or gives it up.
            let isFailed: @Sendable (Parley) async -> Bool = { parley in
                if case .failed(code: "message_too_long", _) = await parley.outgoing.last?.state { true } else { false }
            }
            try await parley.send(String(repeating: "x", count: 2001), clientMessageId: "too-long")
            try await Self.eventually("refused") { await isFailed(parley) }
            #expect(await parley.timeline(in: conversationId).last?.id == "too-long")
            #expect(try await parley.resend("too-long"))
            try await Self.eventually("refused again") { await isFailed(parley) }
            #expect(try await parley.discard("too-long"))
            #expect(await parley.timeline(in: conversationId).map(\.text) == ["One", "Two", "Three, from the agent", "Four"])
            #expect(try await parley.discard(pendingId) == false)  // the server has it
            await parley.disconnect()
        }
    }

    @Test("signOut ends the session on the server and unregisters push before wiping: the old token is refused, the device gets no more notifications, the next user starts afresh")
    func signOutRevokes() async throws {
        let root = try Self.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let key = ES256PrivateKey().pemRepresentation
            let credentials = ConnectAPNsRequest(teamId: "ABCDE12345", keyId: "KEY1234567", privateKey: key, topic: "com.acme.shop")
            #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: acme.adminToken, json: credentials).status == .ok)
            let transport = RecordingTransport()
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Ivy on a shared iPad"), storage: ParleyKitTests.storage(root), transport: transport)
            try await parley.registerForNotifications(apnsToken: Data(repeating: 0xab, count: 32))
            try await parley.send("Please call me back")
            #expect(await parley.flush() == false)
            let consumer = try #require(await parley.consumer)
            let token = try #require(transport.requests.compactMap(\.token).last)
            #expect(try await server.services.store.read { repo in try await repo.pushRegistrations(consumerId: consumer.id) }.count == 1)
            #expect(try await server.get("/v1/consumer/me", token: token).status == .ok)

            #expect(try await parley.signOut())
            #expect(try await server.services.store.read { repo in try await repo.pushRegistrations(consumerId: consumer.id) }.isEmpty)
            let refused = try await server.get("/v1/consumer/me", token: token)
            #expect(refused.status == .unauthorized)
            #expect(try refused.error.code == "session_revoked")
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path).isEmpty)

            // The next user of the device: a new consumer, nothing of the last one.
            let next = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Jo"), storage: ParleyKitTests.storage(root), transport: transport)
            #expect(await next.outgoing.isEmpty)
            #expect(try await next.conversations().isEmpty)
            #expect(await next.consumer?.id != consumer.id)

            // Offline, signing out still wipes the device, and says the server was not told.
            _ = try await next.send("sent")
            #expect(await next.flush() == false)
            transport.offline.withLock { $0 = true }
            try await next.send("never sent")
            #expect(try await next.signOut() == false)
            #expect(await next.outgoing.isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path).isEmpty)
        }
    }

    @Test("a server URL with a path (a reverse proxy's prefix, with or without the last slash) reaches the server for every call and the socket")
    func baseURLWithPath() async throws {
        for base in ["/chat", "/chat/"] {
            let root = try Self.root()
            defer { try? FileManager.default.removeItem(at: root) }
            try await TestServer.run { server in
                let acme = try await BrandScenario.make(server)
                let transport = RecordingTransport(prefix: "/chat")
                let parley = try await Parley.configure(
                    brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)\(base)")!,
                    identity: .anonymous(displayName: "Kim"), storage: ParleyKitTests.storage(root), transport: transport)
                try await parley.send("Through the proxy")
                #expect(await parley.flush() == false)
                let conversationId = try #require(await parley.outgoing.first?.state.stored?.conversationId)
                #expect(try await parley.settings().voiceMaxSeconds > 0)
                let log = ParleyKitTests.EventLog(parley)
                await parley.connect()
                try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
                _ = try await acme.reply("Heard you", in: conversationId, as: acme.adminToken)
                try await log.wait { ParleyKitTests.EventLog.messages($0).contains { $0.text == "Heard you" } }
                #expect(try await parley.messages(in: conversationId).map(\.text) == ["Through the proxy", "Heard you"])
                await parley.disconnect()
                log.task.cancel()
                let paths = transport.requests.map(\.path)
                #expect(!paths.isEmpty)
                #expect(paths.allSatisfy { $0.hasPrefix("/chat/v1/") }, "\(base): \(paths)")
            }
        }
    }

    @Test("twenty conversations are kept on the device by default, as promised")
    func cachedConversationsDefault() {
        let storage = ParleyStorage(directory: URL(fileURLWithPath: "/tmp/unused"), key: .bytes(Data(repeating: 1, count: 32)))
        #expect(storage.cachedConversations == 20)
        #expect(storage.cachedVoiceNotes == 20)
    }
}
