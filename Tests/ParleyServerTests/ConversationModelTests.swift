import Foundation
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization
import Testing

/// The model an app's conversation screen binds to (issue 33, item 5), on Linux against a real server.
@Suite("ParleyKit's conversation model")
struct ConversationModelTests {
    /// A clock the test moves, for the voice output and the recorder.
    final class TestClock: Sendable {
        let start = ContinuousClock.now
        let offset = Mutex(Duration.zero)
        func now() -> ContinuousClock.Instant { start + offset.withLock { $0 } }
        func advance(_ by: Duration) { offset.withLock { $0 += by } }
    }

    @MainActor
    static func eventually(within seconds: Double = 20, _ what: String, _ check: @MainActor () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if check() { return }
            try await Task.sleep(for: .milliseconds(30))
        }
        throw TestFailure("not within \(seconds) s: \(what)")
    }

    @MainActor
    @Test("a whole conversation through the model: own message at once, the agent's name, typing and answer, a voice note recorded, sent and played (seek, speed, end), closed with a survey and rated")
    func wholeConversation() async throws {
        let audio = try AudioFixtures.files()
        let root = try ParleyKitTrapsTests.root()
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestServer.run { @MainActor server in
            let acme = try await BrandScenario.make(server)
            _ = try await LifecycleTests.patch(server, acme, UpdateLifecycleRequest(survey: true))
            let (agentToken, agent) = try await acme.agent()
            let parley = try await Parley.configure(
                brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                identity: .anonymous(displayName: "Oli"), storage: ParleyKitTests.storage(root), transport: NIOTransport(),
                retryDelay: .milliseconds(50))
            let clock = TestClock()
            let output = ClockVoiceOutput(now: { clock.now() })
            let model = ConversationModel(parley: parley, output: output)
            let screen = Task { await model.open() }
            defer { screen.cancel() }
            try await Self.eventually("connected") { model.connection == .connected }
            #expect(model.entries.isEmpty && model.conversationId == nil && !model.isClosed)

            // The consumer writes: in the list at once, then the server's copy.
            model.draft = "Hello, is anyone there?"
            await model.send()
            #expect(model.draft.isEmpty)
            #expect(model.entries.map(\.text) == ["Hello, is anyone there?"])
            try await Self.eventually("sent") { model.entries.last?.outgoing?.state.stored != nil }
            let conversationId = try #require(model.conversationId)

            // The agent types, then answers: the name comes with the answer.
            let agentSocket = try await RealtimeProbe.connect(port: server.port, token: agentToken)
            try agentSocket.send(.typing(conversationId: conversationId, isTyping: true))
            try await Self.eventually("typing") { model.agentIsTyping }
            _ = try await acme.reply("Yes! How can I help?", in: conversationId, as: agentToken)
            try await Self.eventually("the answer") { model.entries.last?.text == "Yes! How can I help?" }
            #expect(!model.agentIsTyping)
            #expect(model.agentName == agent.name)
            #expect(model.entries.map(\.isMine) == [true, false])

            // A voice note: recorded to the brand's limit, sent, processed, played.
            let recorder = FileVoiceRecorder(source: audio.url("note.m4a"), now: { clock.now() })
            await model.startRecording(with: recorder)
            guard case .recording(_, let limit, false) = model.recording else { throw TestFailure("not recording: \(model.recording)") }
            #expect(limit == .seconds(try await parley.settings().voiceMaxSeconds))
            clock.advance(.seconds(3))
            await model.recordingTick()
            #expect(model.recording == .recording(elapsed: .seconds(3), limit: limit, paused: false))
            await model.finishRecording()
            #expect(model.recording == .idle)
            #expect(model.entries.last?.kind == .voice)
            try await Self.eventually("the voice note processed") {
                model.entries.last?.message?.voice?.state == .ready && !(model.entries.last?.message?.voice?.renditions.isEmpty ?? true)
            }
            let note = try #require(model.entries.last?.message)
            let player = model.player
            await player.play(note)
            #expect(player.state == .playing)
            #expect(player.duration == .milliseconds(note.voice?.durationMs ?? 0) && player.duration > .seconds(2))
            #expect(player.waveform.count == note.voice?.waveform.count && player.waveform.contains { $0 > 0 })
            #expect(output.audio?.isEmpty == false)
            clock.advance(.seconds(1))
            await player.tick()
            #expect(player.position == .seconds(1))
            await player.setRate(2)
            #expect(player.rate == 2)
            clock.advance(.milliseconds(500))
            await player.tick()
            #expect(player.position == .seconds(2))
            await player.pause()
            #expect(player.state == .paused)
            await player.seek(to: 0.5)
            #expect(abs(player.progress - 0.5) < 0.01)
            await player.play(note)
            clock.advance(.seconds(60))
            await player.tick()
            #expect(player.state == .ended && player.position == player.duration)

            // The agent closes it: closed, a rating asked for; the consumer rates.
            #expect(try await server.post("/v1/conversations/\(conversationId)/resolve", token: agentToken).status == .ok)
            try await Self.eventually("closed") { model.isClosed }
            #expect(model.survey == .offered)
            await model.rate(5, comment: "Quick and kind")
            #expect(model.survey == .answered)
            #expect(model.problem == nil)
            await agentSocket.close()
        }
    }
}
