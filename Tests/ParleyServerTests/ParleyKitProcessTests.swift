import Foundation
import ParleyAPI
import ParleyMedia
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// ParleyKit in a process of its own (`parley chat`), killed in the middle of an upload: the voice
/// note is sealed on the device before the upload starts, so the next start sends it, once.
@Suite("ParleyKit in a process that is killed")
struct ParleyKitProcessTests {
    /// `parley chat` running with its standard input and output in the test's hands.
    final class ChatProcess: Sendable {
        let process: ChildProcess
        final class Transcript: Sendable { let text = Mutex("") }
        let transcript = Transcript()
        var output: String { transcript.text.withLock { $0 } }

        convenience init(server: Int, app: AppID, dataDir: URL) throws {
            try self.init(["chat", "--server", "http://127.0.0.1:\(server)", "--app", app.rawValue, "--data-dir", dataDir.path, "--name", "Kim on a train"])
        }

        init(_ arguments: [String], environment: [String: String]? = nil) throws {
            let binary = TestServer.repositoryRoot.appendingPathComponent(".build/debug/parley")
            guard FileManager.default.isExecutableFile(atPath: binary.path) else { throw TestFailure("\(binary.path) is not built (swift build)") }
            // posix_spawn (ChildProcess), not Foundation's Process: Process.run() crashed in CI while
            // other tests opened and closed sockets.
            process = try ChildProcess(binary.path, arguments, environment: environment, input: true)
            let transcript = self.transcript
            let reader = process.output
            let owner = process
            Thread {
                while let data = PipeReading.read(reader, upTo: 64 * 1024) {
                    transcript.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
                }
                _ = owner  // the pipe stays open while this thread reads it
            }.start()
        }

        func type(_ line: String) {
            process.write(line + "\n")
        }

        func wait(for text: String, within seconds: Double = 30) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if output.contains(text) { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw TestFailure("'\(text)' did not appear within \(seconds) s:\n\(output)")
        }

        func kill() {
            process.signal(SIGKILL)
            _ = process.waitForExit()
        }

        func quit() async throws {
            type("/quit")
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
            if process.isRunning { kill() }
        }
    }

    @Test("killed mid-upload (the network stalled after 64 KB), restarted: the voice note reaches the agents once")
    func killedMidUpload() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-chat-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let recording = root.appendingPathComponent("from-the-train.wav")
        try AudioFixtures.files().data("note.wav").write(to: recording)
        #expect(try Data(contentsOf: recording).count > 256 * 1024)
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let proxy = try StallingProxy(upstream: server.port, stallOn: "/v1/consumer/voice-messages", after: 64 * 1024)
            defer { proxy.stop() }

            let first = try ChatProcess(server: proxy.port, app: acme.app.id, dataDir: root.appendingPathComponent("chat"))
            try await first.wait(for: "online")
            first.type("Sending you a voice note about the refund")
            try await first.wait(for: "✓ sent: Sending you a voice note")
            first.type("/voice \(recording.path)")
            try await first.wait(for: "uploading the voice note")
            let deadline = Date().addingTimeInterval(20)
            while !proxy.stalled.withLock({ $0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(proxy.stalled.withLock { $0 })
            first.kill()  // in the middle of the upload

            let conversation = try #require(try await server.get("/v1/conversations", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first)
            let before = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(before.map(\.kind) == [.text])

            // The app starts again, on a network that works.
            let second = try ChatProcess(server: server.port, app: acme.app.id, dataDir: root.appendingPathComponent("chat"))
            try await second.wait(for: "✓ sent: voice note from-the-train.wav")
            try await second.quit()
            // And once more: nothing is left to send.
            let third = try ChatProcess(server: server.port, app: acme.app.id, dataDir: root.appendingPathComponent("chat"))
            try await third.wait(for: "online")
            try await Task.sleep(for: .milliseconds(500))
            #expect(!third.output.contains("✓ sent"))
            try await third.quit()

            let after = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(after.map(\.kind) == [.text, .voice])
            #expect(after.map(\.senderId) == Array(repeating: before[0].senderId, count: 2))
        }
    }
}

extension ParleyKitProcessTests {
    @Test("parley chat as a developer tries it: /help, unknown commands not sent, the agent's name, which message was read, one line per outage, /save to ~, a file, a wrong app id and a server without a scheme refused")
    func chatCommands() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-chat-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try AudioFixtures.files().data("note.m4a").write(to: home.appendingPathComponent("hello.m4a"))
        try ImageFixtures.files().data("small.webp").write(to: home.appendingPathComponent("label.webp"))
        let environment = ProcessInfo.processInfo.environment.merging(["HOME": home.path]) { $1 }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let inApp = try await acme.app(channel: .inApp)
            let (agentToken, agent) = try await acme.agent()

            // Refusals: no scheme (usage), a wrong app id (said, exit 1).
            let noScheme = try ChatProcess(["chat", "--server", "127.0.0.1:\(server.port)", "--app", inApp.id.rawValue], environment: environment)
            let noSchemeProcess = noScheme.process
            #expect(try await RawSocket.offPool { noSchemeProcess.waitForExit() } != 0)
            try await Task.sleep(for: .milliseconds(200))  // the reader has the last bytes
            #expect(noScheme.output.contains("http:// or https://") && noScheme.output.contains("Usage"))
            let wrongApp = try ChatProcess(
                ["chat", "--server", "http://127.0.0.1:\(server.port)", "--app", "app_0123456789abcdefghjkmnpq", "--data-dir", "~/wrong"], environment: environment)
            let wrongAppProcess = wrongApp.process
            #expect(try await RawSocket.offPool { wrongAppProcess.waitForExit() } != 0)
            try await Task.sleep(for: .milliseconds(200))
            #expect(wrongApp.output.contains("app_not_found") && !wrongApp.output.contains("cannot be reached"))

            let chat = try ChatProcess(
                ["chat", "--server", "http://127.0.0.1:\(server.port)", "--app", inApp.id.rawValue, "--data-dir", "~/chat", "--name", "Pat"],
                environment: environment)
            try await chat.wait(for: "online")
            #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("chat/key").path))
            chat.type("/help")
            try await chat.wait(for: "/save [file]")
            chat.type("/shout hello")
            try await chat.wait(for: "unknown command /shout")
            chat.type("Where is parcel 88?")
            try await chat.wait(for: "✓ sent: Where is parcel 88?")
            let conversation = try #require(try await server.get("/v1/conversations", token: acme.adminToken).decode(Page<ConversationDTO>.self).items.first)
            #expect(conversation.channel == .inApp)
            let messages = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self).items
            #expect(!messages.contains { $0.text.contains("shout") || $0.text.hasPrefix("/") })

            // The agent answers by name, reads, and sends a voice note.
            let answer = try await acme.reply("It is out for delivery", in: conversation.id, as: agentToken)
            try await chat.wait(for: "\(agent.name): It is out for delivery")
            _ = try await server.post(
                "/v1/conversations/\(conversation.id)/receipts", token: agentToken, json: ReceiptRequest(upToSeq: answer.message.seq, state: .read))
            try await chat.wait(for: "✓✓ read by the agent: Where is parcel 88?")
            chat.type("/voice ~/hello.m4a")
            try await chat.wait(for: "✓ sent: voice note hello.m4a")
            chat.type("/file ~/label.webp")
            try await chat.wait(for: "✓ sent: file label.webp")

            // The consumer's own voice note, once processed, can be saved (to ~).
            let deadline = Date().addingTimeInterval(30)
            var saved = false
            while !saved, Date() < deadline {
                chat.type("/save ~/saved.m4a")
                try await Task.sleep(for: .milliseconds(500))
                saved = chat.output.contains("saved ") && FileManager.default.fileExists(atPath: home.appendingPathComponent("saved.m4a").path)
            }
            #expect(saved, "\(chat.output)")
            #expect(chat.output.components(separatedBy: "offline").count == 1)
            try await chat.quit()
        }
    }
}
