import Foundation
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Testing

/// Consumer features the server has, through ParleyKit (issue 33, item 4), against a real server.
@Suite("ParleyKit consumer features: history backwards, unread counts, calls, notification payloads")
struct ParleyKitFeaturesTests {
    static func configure(_ server: TestServer, _ acme: BrandScenario, _ root: URL, name: String) async throws -> Parley {
        try await Parley.configure(
            brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
            identity: .anonymous(displayName: name), storage: ParleyKitTests.storage(root), transport: NIOTransport(),
            retryDelay: .milliseconds(50))
    }

    @Test("a long conversation read backwards from its end, a page at a time, with nothing missed or repeated; the unread count and mark-read without a connection")
    func historyBackwardsAndUnread() async throws {
        let root = try ParleyKitTrapsTests.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let parley = try await Self.configure(server, acme, root, name: "Lou")
            try await parley.send("My order never came")
            #expect(await parley.flush() == false)
            let conversationId = try #require(await parley.outgoing.first?.state.stored?.conversationId)
            let answers = (1...25).map { "Answer \($0)" }
            for text in answers { _ = try await acme.reply(text, in: conversationId, as: acme.adminToken) }

            #expect(try await parley.unreadCount() == 25)
            #expect(try await parley.conversations().first?.unread == 25)

            var page = try await parley.latestMessages(in: conversationId, limit: 10)
            #expect(page.map(\.text) == Array(answers.suffix(10)))
            var read = page
            while let first = page.first {
                page = try await parley.messages(in: conversationId, before: first.seq, limit: 10)
                #expect(page.count <= 10)
                read.insert(contentsOf: page, at: 0)
            }
            let everything = try await parley.messages(in: conversationId, afterSeq: 0, limit: 100)
            #expect(read.map(\.id) == everything.map(\.id))
            #expect(read.map(\.text) == ["My order never came"] + answers)
            // All of it is in the device's cache, in order, for the timeline.
            #expect(await parley.timeline(in: conversationId).map(\.text) == ["My order never came"] + answers)

            // The app shows the conversation without a connection: read over HTTP.
            await parley.markRead(conversationId)
            #expect(try await parley.unreadCount() == 0)
            let agentView = try await server.get("/v1/conversations/\(conversationId)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(agentView.filter { $0.senderKind == .agent }.allSatisfy { $0.deliveryState == .read })
            _ = try await acme.reply("One more", in: conversationId, as: acme.adminToken)
            #expect(try await parley.unreadCount() == 1)

            // Backwards and forwards at once is a clear refusal.
            let (token, _) = try await acme.consumer(name: "Someone else")
            let theirs = try await server.get("/v1/consumer/conversations/\(conversationId)/messages?before=5", token: token)
            #expect(theirs.status == .notFound)  // another consumer's: nothing said about it
            let mine = try await server.get("/v1/conversations/\(conversationId)/messages?after=1&before=5", token: acme.adminToken)
            #expect(mine.status == .badRequest)
            #expect(try mine.error.code == "invalid_field" && mine.error.field == "before")
            #expect(try await server.get("/v1/conversations/\(conversationId)/messages?before=0", token: acme.adminToken).status == .badRequest)
        }
    }

    @Test("an agent rings the consumer: the app hears the call ringing with who calls and how, and can decline it; the agent sees it declined")
    func incomingCall() async throws {
        let root = try ParleyKitTrapsTests.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, agent) = try await acme.agent(permissions: [.initiateVoiceCall, .initiateVideoCall])
            let parley = try await Self.configure(server, acme, root, name: "Mo")
            try await parley.send("Could you call me?")
            #expect(await parley.flush() == false)
            let conversationId = try #require(await parley.outgoing.first?.state.stored?.conversationId)
            let log = ParleyKitTests.EventLog(parley)
            await parley.connect()
            try await log.wait { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }

            let agentSocket = try await RealtimeProbe.connect(port: server.port, token: agentToken)
            let invited = try await server.post(
                "/v1/conversations/\(conversationId)/calls", token: agentToken,
                json: StartCallRequest(media: .video, connectionId: agentSocket.connectionId))
            #expect(invited.status == .created)
            let calls: @Sendable ([ParleyEvent]) -> [CallDTO] = { events in events.compactMap { if case .call(let call) = $0 { call } else { nil } } }
            try await log.wait { calls($0).contains { $0.state == .ringing } }
            let ringing = try #require(calls(log.list.items.withLock { $0 }).first { $0.state == .ringing })
            #expect(ringing.conversationId == conversationId && ringing.media == .video && ringing.inviterName == agent.name)

            await parley.declineCall(ringing.id)
            try await log.wait { calls($0).contains { $0.id == ringing.id && $0.outcome == .rejected } }
            _ = try await agentSocket.next(within: 10) { frame in
                if case .call(let call) = frame, call.id == ringing.id, call.outcome == .rejected { true } else { false }
            }
            await agentSocket.close()
            await parley.disconnect()
            log.task.cancel()
        }
    }

    @Test("notification payloads: Parley's APNs and FCM shapes name the conversation and the kind; anything else is not Parley's")
    func notificationPayloads() throws {
        let apns: [AnyHashable: Any] = [
            "aps": ["alert": ["title": "Acme", "body": "New message from Acme"], "badge": 2, "thread-id": "cnv_0123456789abcdefghjkmnpq"],
            "parley": ["conversationId": "cnv_0123456789abcdefghjkmnpq", "kind": "voice"],
        ]
        let note = try #require(ParleyNotification(userInfo: apns))
        #expect(note.conversationId.rawValue == "cnv_0123456789abcdefghjkmnpq" && note.kind == .voice)
        let fcm: [AnyHashable: Any] = ["conversationId": "cnv_0123456789abcdefghjkmnpq", "kind": "call", "gcm.message_id": "1"]
        #expect(ParleyNotification(userInfo: fcm)?.kind == .call)
        #expect(ParleyNotification(userInfo: ["aps": ["alert": "Your parcel shipped"]]) == nil)
        #expect(ParleyNotification(userInfo: ["parley": ["conversationId": "../etc", "kind": "text"]]) == nil)
        #expect(ParleyNotification(userInfo: ["parley": ["conversationId": "cnv_0123456789abcdefghjkmnpq", "kind": "fax"]]) == nil)
    }
}

extension ParleyKitFeaturesTests {
    @Test("images and files through the outbox: sealed while offline and across a restart, uploaded once with progress, in the timeline from the start; a refused file fails in place with the server's code")
    func attachmentsThroughOutbox() async throws {
        let files = try ImageFixtures.files()
        let root = try ParleyKitTrapsTests.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let transport = ParleyKitTrapsTests.RecordingTransport()
            let configure = {
                try await Parley.configure(
                    brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                    identity: .anonymous(displayName: "Nia"), storage: ParleyKitTests.storage(root), transport: transport,
                    retryDelay: .milliseconds(50))
            }
            let parley = try await configure()
            try await parley.send("Here is the receipt")
            #expect(await parley.flush() == false)
            let conversationId = try #require(await parley.outgoing.first?.state.stored?.conversationId)

            // On the train: chosen, kept sealed, not sent.
            transport.offline.withLock { $0 = true }
            let photo = files.directory.appendingPathComponent("photo.png")
            try await parley.sendAttachment(file: photo, fileName: "receipt+1 été.png", clientMessageId: "photo-1")
            #expect(await parley.flush())
            #expect(await parley.timeline(in: conversationId).last?.outgoing?.state == .pending)
            #expect(await parley.timeline(in: conversationId).last?.kind == .attachment)
            let pngHead = try Data(contentsOf: photo).prefix(64)
            for name in try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("parley").path) {
                let bytes = try Data(contentsOf: root.appendingPathComponent("parley").appendingPathComponent(name))
                #expect(bytes.range(of: pngHead) == nil, "\(name) holds the photo in the clear")
            }

            // The app restarts with the network back: uploaded once, with progress.
            transport.offline.withLock { $0 = false }
            let restarted = try await configure()
            let log = ParleyKitTests.EventLog(restarted)
            #expect(await restarted.flush() == false)
            #expect(await restarted.flush() == false)
            guard case .sent(let messageId, _, _) = try #require(await restarted.outgoing.first { $0.clientMessageId == "photo-1" }).state else {
                Issue.record("not sent")
                return
            }
            try await log.wait { $0.contains { if case .uploadProgress("photo-1", 1) = $0 { true } else { false } } }
            let stored = try await server.get("/v1/conversations/\(conversationId)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            let attachments = stored.filter { $0.kind == .attachment }
            #expect(attachments.map(\.id) == [messageId])
            #expect(attachments.first?.attachment?.fileName == "receipt+1 été.png")
            #expect(attachments.first?.attachment?.type == .png)
            #expect(await restarted.timeline(in: conversationId).map(\.id) == [await restarted.outgoing[0].clientMessageId, "photo-1"])

            // A program named .pdf: refused for good, in place, with the server's reason.
            try await restarted.sendAttachment(file: files.directory.appendingPathComponent("program.pdf"), clientMessageId: "bad-1")
            #expect(await restarted.flush() == false)
            let failed = await restarted.timeline(in: conversationId).last
            #expect(failed?.id == "bad-1")
            if case .failed(let code, _) = failed?.outgoing?.state { #expect(code == "unsupported_attachment") } else { Issue.record("not failed: \(String(describing: failed))") }
            #expect(try await restarted.discard("bad-1"))
            log.task.cancel()
        }
    }
}
