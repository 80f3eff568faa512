import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ParleyAPI
import ParleyDomain
import ParleyMedia
@testable import ParleyServer
import Synchronization
import Testing

/// A transcriber that answers what the test scripts: words, or a failure for the first `failures`
/// calls. It records what it was asked.
final class ScriptedTranscriber: Transcriber {
    let words: String
    let failures: Int
    let retryable: Bool
    let lowConfidence: Bool
    private let state = Mutex<(calls: Int, languages: [String], wavHeaders: [Data])>((0, [], []))

    init(words: String, failures: Int = 0, retryable: Bool = true, lowConfidence: Bool = false) {
        (self.words, self.failures, self.retryable, self.lowConfidence) = (words, failures, retryable, lowConfidence)
    }

    var name: String { "scripted" }
    var calls: Int { state.withLock { $0.calls } }
    var wavHeaders: [Data] { state.withLock { $0.wavHeaders } }
    func supports(language: String) -> Bool { language != "xx" }

    func transcribe(wav: URL, language: String, durationMs: Int) async throws(TranscriptionFailure) -> Transcription {
        let header = (try? FileHandle(forReadingFrom: wav).readToEndLimited(44)) ?? Data()
        let call = state.withLock { state in
            state.calls += 1
            state.languages.append(language)
            state.wavHeaders.append(header)
            return state.calls
        }
        if call <= failures { throw TranscriptionFailure("scripted failure \(call)", retryable: retryable) }
        return Transcription(text: words, language: language, lowConfidence: lowConfidence)
    }
}

@Suite("Voice-note transcription")
struct TranscriptionTests {
    static func enable(_ server: TestServer, _ brand: BrandScenario, _ change: UpdateBrandSettingsRequest) async throws -> TestServer.Reply {
        try await server.request(.patch, "/v1/brand/settings", token: brand.adminToken, json: change)
    }

    /// Polls the agent's view of the message until its transcript leaves `pending`.
    static func transcribed(_ server: TestServer, _ message: MessageDTO, token: String) async throws -> MessageDTO {
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let items = try await server.get("/v1/conversations/\(message.conversationId)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self).items
            if let current = items.first(where: { $0.id == message.id }), let transcript = current.voice?.transcript,
                transcript.state != .pending
            {
                return current
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("no transcript after 90 s")
    }

    @Test("a ready note is transcribed: masked, shown to both sides, found by search, written in exports")
    func transcribesAfterReady() async throws {
        let words = "hi my card is four two four two four two four two four two four two four two four two and my parcel never came"
        let engine = ScriptedTranscriber(words: words)
        try await TestServer.run(transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let settings = try await Self.enable(server, acme, .init(cardMasking: .agents, transcription: true, transcriptionLanguage: "en"))
            #expect(settings.status == .ok, "\(settings.text)")
            let saved = try settings.decode(BrandSettingsDTO.self)
            #expect(saved.transcription && saved.transcriberAvailable && saved.transcriptionLanguage == "en")
            let (token, _) = try await acme.consumer()
            let sent = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            // Published at once, before any step: the transcript does not hold the note back.
            #expect(sent.message.voice?.transcript == nil)
            let done = try await Self.transcribed(server, sent.message, token: acme.adminToken)
            let transcript = try #require(done.voice?.transcript)
            #expect(done.voice?.state == .ready)
            #expect(transcript.state == .ready && transcript.language == "en" && !transcript.lowConfidence)
            // Spoken card digits are masked like typed ones, the last four kept.
            #expect(transcript.text == "hi my card is •••••••••••• 4242 and my parcel never came")
            // The engine got 16 kHz mono 16-bit WAV.
            let header = try #require(engine.wavHeaders.first)
            #expect(header.prefix(4) == Data("RIFF".utf8) && header[8..<12] == Data("WAVE".utf8))
            #expect(header[22] == 1 && header[24..<28].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } == 16_000)
            // The conversation's list line gains the first words.
            let listed = try await server.get("/v1/conversations/\(sent.conversation.id)", token: acme.adminToken).decode(ConversationDTO.self)
            #expect(listed.lastMessagePreview == "Audio message \(VoiceRules.clock(milliseconds: done.voice!.durationMs)) · hi my card is •••••••••••• 4242 and my parcel never came")
            // The customer's copy has it too (the same event).
            let mine = try await server.get("/v1/consumer/conversations/\(sent.conversation.id)/messages", token: token)
                .decode(ListResponse<MessageDTO>.self).items.first { $0.id == sent.message.id }
            #expect(mine?.voice?.transcript?.text == transcript.text)
            // Search finds the note by what was said, and shows the words; never in another brand.
            try await Task.sleep(for: .milliseconds(400))  // the SQLite indexer's batch (messages only)
            let hits = try await server.get("/v1/search?q=parcel%20never", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self).items
            #expect(hits.map(\.conversation.id) == [sent.conversation.id])
            #expect(hits.first?.message?.text.contains("my parcel never came") == true)
            #expect(hits.first?.message?.kind == .voice)
            #expect(try await server.get("/v1/search?q=4242", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self).items.count == 1)
            #expect(try await server.get("/v1/search?q=four", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self).items.isEmpty)
            #expect(try await server.get("/v1/search?q=parcel", token: globex.adminToken).decode(ListResponse<SearchHitDTO>.self).items.isEmpty)
            // Exports carry it, in each format.
            let day = String(ISO8601DateFormatter().string(from: done.createdAt).prefix(10))  // the note's day, also just after midnight
            let json = try await server.get("/v1/transcripts?from=\(day)&to=\(day)&format=json", token: acme.adminToken).text
            #expect(json.contains("\"spoken\":\"hi my card is •••••••••••• 4242 and my parcel never came\""))
            let txt = try await server.get("/v1/transcripts?from=\(day)&to=\(day)&format=txt", token: acme.adminToken).text
            #expect(txt.contains("\"hi my card is •••••••••••• 4242 and my parcel never came\""))
            let xml = try await server.get("/v1/transcripts?from=\(day)&to=\(day)&format=xml", token: acme.adminToken).text
            #expect(xml.contains("spoken=\"hi my card is •••••••••••• 4242 and my parcel never came\""))
            // Reports count the transcribed audio.
            let report = try await server.get("/v1/reports?from=\(day)&to=\(day)", token: acme.adminToken).decode(ReportDTO.self)
            #expect(report.total.transcribedSeconds == (done.voice!.durationMs + 500) / 1000)
            #expect(report.total.transcribedSeconds > 0)
            #expect(engine.calls == 1)
        }
    }

    @Test("an engine that keeps failing: retried with back-off on the clock, then 'unavailable'; the note plays all along")
    func failuresEndUnavailable() async throws {
        let clock = ManualClock()
        let engine = ScriptedTranscriber(words: "never", failures: 100)
        try await TestServer.run(clock: clock, transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await Self.enable(server, acme, .init(transcription: true)).status == .ok)
            let (token, _) = try await acme.consumer()
            let sent = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            let ready = try await VoiceTests.processed(server, sent.message, token: acme.adminToken)
            #expect(ready.voice?.state == .ready)
            // Each attempt fails; moving the clock past the back-off brings the next one.
            var waited = 0
            while engine.calls < VoiceJobs.maxAttempts, waited < 900 {
                clock.advance(by: .seconds(3600 * 2))
                try await server.services.jobRunner.runDue()
                try await Task.sleep(for: .milliseconds(100))
                waited += 1
            }
            let done = try await Self.transcribed(server, sent.message, token: acme.adminToken)
            #expect(done.voice?.transcript?.state == .unavailable)
            #expect(done.voice?.transcript?.text == "")
            #expect(engine.calls == VoiceJobs.maxAttempts)
            #expect(done.voice?.state == .ready)
            #expect(try await server.get(MediaPaths.voice(messageId: done.id, format: .opus), token: acme.adminToken).status == .ok)
        }
    }

    @Test("a failure that cannot pass, or a language the engine does not know: 'unavailable' at once, no retries")
    func permanentFailures() async throws {
        let engine = ScriptedTranscriber(words: "x", failures: 1, retryable: false)
        try await TestServer.run(transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await Self.enable(server, acme, .init(transcription: true)).status == .ok)
            let (token, _) = try await acme.consumer()
            let first = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            #expect(try await Self.transcribed(server, first.message, token: acme.adminToken).voice?.transcript?.state == .unavailable)
            #expect(engine.calls == 1)
            // The engine knows no "xx": never called for it.
            #expect(try await Self.enable(server, acme, .init(transcriptionLanguage: "xx")).status == .ok)
            let second = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.ogg"), token: token, conversationId: first.conversation.id)
                .decode(SendMessageResponse.self)
            let done = try await Self.transcribed(server, second.message, token: acme.adminToken)
            #expect(done.voice?.transcript == VoiceTranscriptDTO(state: .unavailable, language: "xx"))
            #expect(engine.calls == 1)
        }
    }

    @Test("a customer's note in the customer's language when the widget told it; an agent's in the brand's")
    func customersLanguage() async throws {
        let engine = ScriptedTranscriber(words: "hallo")
        try await TestServer.run(transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await Self.enable(server, acme, .init(transcription: true, transcriptionLanguage: "en")).status == .ok)
            var request = ConsumerSessionRequest(appId: acme.app.id, displayName: "Jana")
            request.language = "de-DE"
            let token = try await server.post("/v1/consumer/session", json: request).decode(ConsumerSessionResponse.self).token
            let theirs = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            #expect(try await Self.transcribed(server, theirs.message, token: acme.adminToken).transcript?.language == "de")
            let ours = try await VoiceTests.upload(
                server, try AudioFixtures.files().data("note.ogg"), token: acme.adminToken, agentConversation: theirs.conversation.id
            ).decode(SendMessageResponse.self)
            #expect(try await Self.transcribed(server, ours.message, token: acme.adminToken).transcript?.language == "en")
            #expect(VoiceRules.transcriptionLanguage(of: "pt_BR") == "pt" && VoiceRules.transcriptionLanguage(of: "C") == nil)
        }
    }

    @Test("every answer with the brand's settings says the server has a transcriber: the PATCH, the GET and the logo's PUT and DELETE")
    func everySettingsAnswerSaysSo() async throws {
        try await TestServer.run(transcriber: ScriptedTranscriber(words: "x")) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await Self.enable(server, acme, .init(transcriptionLanguage: "en")).decode(BrandSettingsDTO.self).transcriberAvailable)
            #expect(try await server.get("/v1/brand/settings", token: acme.adminToken).decode(BrandSettingsDTO.self).transcriberAvailable)
            let logo = try await server.request(.put, "/v1/brand/logo", token: acme.adminToken, data: try ImageFixtures.files().data("photo.png"))
            #expect(try logo.decode(BrandSettingsDTO.self).transcriberAvailable)
            #expect(try await server.request(.delete, "/v1/brand/logo", token: acme.adminToken).decode(BrandSettingsDTO.self).transcriberAvailable)
        }
    }

    @Test("off by default; a brand turns it on only where the server has a transcriber; a bad language is refused")
    func settings() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let current = try await server.get("/v1/brand/settings", token: acme.adminToken).decode(BrandSettingsDTO.self)
            #expect(!current.transcription && !current.transcriberAvailable && current.transcriptionLanguage == "en")
            let refused = try await Self.enable(server, acme, .init(transcription: true))
            #expect(refused.status == .conflict)
            #expect(try refused.error.code == "transcriber_unavailable")
            let bad = try await Self.enable(server, acme, .init(transcriptionLanguage: "english"))
            #expect(try bad.error.field == "transcriptionLanguage")
            // Nothing changed, and a note sent now has no transcript step.
            #expect(try await server.get("/v1/brand/settings", token: acme.adminToken).decode(BrandSettingsDTO.self) == current)
            let (token, _) = try await acme.consumer()
            let sent = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            let ready = try await VoiceTests.processed(server, sent.message, token: acme.adminToken)
            #expect(ready.voice?.state == .ready && ready.voice?.transcript == nil)
            // Agents cannot change it.
            let (agent, _) = try await acme.agent()
            #expect(try await server.request(.patch, "/v1/brand/settings", token: agent, json: UpdateBrandSettingsRequest(transcription: false)).status == .forbidden)
        }
    }

    @Test("erasure takes the transcript with its note, out of search too")
    func erasure() async throws {
        let engine = ScriptedTranscriber(words: "please delete everything about my submarine")
        try await TestServer.run(transcriber: engine) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await Self.enable(server, acme, .init(transcription: true)).status == .ok)
            let (token, consumer) = try await acme.consumer()
            let sent = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            _ = try await Self.transcribed(server, sent.message, token: acme.adminToken)
            #expect(try await server.get("/v1/search?q=submarine", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self).items.count == 1)
            let erased = try await server.request(.delete, "/v1/consumers/\(consumer.id)", token: acme.adminToken)
            #expect(erased.status == .ok || erased.status == .noContent, "\(erased.text)")
            #expect(try await server.get("/v1/search?q=submarine", token: acme.adminToken).decode(ListResponse<SearchHitDTO>.self).items.isEmpty)
        }
    }
}

@Suite("The server's transcriber, as its settings make it")
struct TranscriberSettingsTests {
    @Test("the embedded engine runs at PARLEY_TRANSCRIBER_NICE's niceness (10 by default); without its Python there is none")
    func niceness() async throws {
        let python = try #require(ProcessInfo.processInfo.environment["TEST_TRANSCRIBER_PYTHON"], "TEST_TRANSCRIBER_PYTHON names the Python with pocketsphinx")
        let ffmpeg = ProcessRunner(executable: "/usr/bin/ffmpeg")
        let http = ProviderHTTP(client: .shared, timeout: .seconds(5))
        var configuration = ParleyConfiguration()
        configuration.transcriber = "embedded"
        configuration.transcriberPython = python
        let made = await ParleyServices.transcriber(configuration, ffmpeg: ffmpeg, http: http, logger: Logger(label: "test"))
        #expect((made as? EmbeddedTranscriber)?.niceness == 10)
        configuration.transcriberNiceness = 3
        let lowered = await ParleyServices.transcriber(configuration, ffmpeg: ffmpeg, http: http, logger: Logger(label: "test"))
        #expect((lowered as? EmbeddedTranscriber)?.niceness == 3)
        configuration.transcriberPython = "/nonexistent/python3"
        #expect(await ParleyServices.transcriber(configuration, ffmpeg: ffmpeg, http: http, logger: Logger(label: "test")) == nil)
    }
}

@Suite("OpenAI-compatible transcription endpoint")
struct OpenAITranscriberTests {
    /// What the local endpoint received.
    final class Received: Sendable {
        let fields = Mutex<[String: String]>([:])
        let authorization = Mutex<String?>(nil)
        let fileBytes = Mutex<Int>(0)
    }

    static func endpoint(status: HTTPResponse.Status = .ok, body: String, hang: Bool = false, received: Received) async -> LocalEndpoint {
        let router = Router()
        router.post("/v1/audio/transcriptions") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 32 * 1024 * 1024)
            let form = try MultipartForm(bytes, boundary: MultipartForm.boundary(of: request.headers[.contentType]) ?? "")
            received.fileBytes.withLock { $0 = form["file"]?.data.count ?? 0 }
            received.fields.withLock { fields in
                fields = form.parts.filter { $0.key != "file" }.mapValues(\.text)
            }
            received.authorization.withLock { $0 = request.headers[.authorization] }
            if hang { try await Task.sleep(for: .seconds(4)) }
            return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        return await LocalEndpoint.start(router, label: "openai-transcriptions")
    }

    static func wav() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("note-\(UUID().uuidString).wav")
        // 1 s of 16 kHz mono silence with its 44-byte header.
        var data = Data("RIFF".utf8) + le32(36 + 32_000) + Data("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(16_000) + le32(32_000)
        data += le16(2) + le16(16) + Data("data".utf8) + le32(32_000) + Data(count: 32_000)
        try data.write(to: url)
        return url
    }

    static func le32(_ value: UInt32) -> Data { withUnsafeBytes(of: value.littleEndian) { Data($0) } }
    static func le16(_ value: UInt16) -> Data { withUnsafeBytes(of: value.littleEndian) { Data($0) } }

    static func transcriber(_ port: Int, timeout: Duration = .seconds(10)) -> OpenAITranscriber {
        // The process-wide client: nothing to shut down.
        OpenAITranscriber(
            http: ProviderHTTP(client: .shared, timeout: timeout), baseURL: "http://127.0.0.1:\(port)/", model: "whisper-1", apiKey: "sk-test")
    }

    @Test("the documented verbose_json answer: its text; the form as the reference asks it")
    func documentedAnswer() async throws {
        let fixture = try String(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/openai/transcription-verbose.json"), encoding: .utf8)
        let received = Received()
        let endpoint = await Self.endpoint(body: fixture, received: received)
        defer { Task { await endpoint.stop() } }
        let wav = try Self.wav()
        defer { try? FileManager.default.removeItem(at: wav) }
        let heard = try await Self.transcriber(endpoint.port).transcribe(wav: wav, language: "en", durationMs: 8_470)
        #expect(heard.text.hasPrefix("The beach was a popular spot on a hot summer day."))
        #expect(!heard.lowConfidence)
        #expect(heard.language == "en")
        #expect(received.fields.withLock { $0 } == ["model": "whisper-1", "language": "en", "response_format": "verbose_json", "temperature": "0"])
        #expect(received.authorization.withLock { $0 } == "Bearer sk-test")
        #expect(received.fileBytes.withLock { $0 } == 44 + 32_000)
    }

    @Test("a server set to the endpoint with a sealed key (parley seal): notes are transcribed there, the key opened; a key sealed with another fails the start")
    func serverWithSealedKey() async throws {
        let fixture = try String(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/openai/transcription-verbose.json"), encoding: .utf8)
        let received = Received()
        let endpoint = await Self.endpoint(body: fixture, received: received)
        var keyed = ParleyConfiguration()
        keyed.secretKey = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let sealed = try SecretBox.sealSetting("sk-live-123", configuration: keyed)
        #expect(sealed.hasPrefix("v1:") && !sealed.contains("sk-live"))
        try await TestServer.run(configure: { configuration in
            configuration.secretKey = keyed.secretKey
            configuration.transcriber = "openai"
            configuration.transcriptionURL = "http://127.0.0.1:\(endpoint.port)"
            configuration.transcriptionModel = "whisper-large-v3"
            configuration.transcriptionAPIKey = sealed
        }) { server in
            let acme = try await BrandScenario.make(server)
            #expect(try await TranscriptionTests.enable(server, acme, .init(transcription: true, transcriptionLanguage: "fr")).status == .ok)
            let (token, _) = try await acme.consumer()
            let sent = try await VoiceTests.upload(server, try AudioFixtures.files().data("note.webm"), token: token).decode(SendMessageResponse.self)
            let done = try await TranscriptionTests.transcribed(server, sent.message, token: acme.adminToken)
            #expect(done.transcript?.text.hasPrefix("The beach was a popular spot") == true)
            #expect(done.transcript?.language == "fr")
            #expect(received.authorization.withLock { $0 } == "Bearer sk-live-123")
            #expect(received.fields.withLock { $0["model"] } == "whisper-large-v3")
            #expect(received.fileBytes.withLock { $0 } > 44)
        }
        await endpoint.stop()
        // Sealed with another key: the server refuses to start, naming the setting.
        var other = keyed
        other.secretKey = Data(repeating: 7, count: 32).base64EncodedString()
        let foreign = try SecretBox.sealSetting("sk-live-123", configuration: other)
        await #expect(throws: TestFailure.self) {
            try await TestServer.run(configure: { configuration in
                configuration.secretKey = keyed.secretKey
                configuration.transcriber = "openai"
                configuration.transcriptionURL = "http://127.0.0.1:9"
                configuration.transcriptionAPIKey = foreign
            }) { _ in }
        }
    }

    @Test("unsure segments (the reference's thresholds) are a guess; refusals and outages are told apart")
    func confidenceAndFailures() async throws {
        let wav = try Self.wav()
        defer { try? FileManager.default.removeItem(at: wav) }
        let unsure = #"{"text":" la la","segments":[{"avg_logprob":-1.4,"no_speech_prob":0.2}]}"#
        let silent = #"{"text":"","segments":[{"avg_logprob":-0.3,"no_speech_prob":0.9}]}"#
        for (body, low) in [(unsure, true), (silent, true), (#"{"text":"plain json"}"#, false)] {
            let endpoint = await Self.endpoint(body: body, received: Received())
            let heard = try await Self.transcriber(endpoint.port).transcribe(wav: wav, language: "de", durationMs: 2_000)
            #expect(heard.lowConfidence == low, "\(body)")
            await endpoint.stop()
        }
        for (status, retryable) in [(HTTPResponse.Status.internalServerError, true), (.tooManyRequests, true), (.badRequest, false), (.unauthorized, false)] {
            let endpoint = await Self.endpoint(status: status, body: #"{"error":{"message":"no"}}"#, received: Received())
            await #expect(throws: TranscriptionFailure.self) { try await Self.transcriber(endpoint.port).transcribe(wav: wav, language: "en", durationMs: 1_000) }
            do {
                _ = try await Self.transcriber(endpoint.port).transcribe(wav: wav, language: "en", durationMs: 1_000)
            } catch {
                #expect(error.retryable == retryable, "\(status)")
            }
            await endpoint.stop()
        }
        // An answer that is not the API's: not retried.
        let garbage = await Self.endpoint(body: "<html>", received: Received())
        do {
            _ = try await Self.transcriber(garbage.port).transcribe(wav: wav, language: "en", durationMs: 1_000)
            Issue.record("garbage was accepted")
        } catch {
            #expect(!error.retryable)
        }
        await garbage.stop()
    }

    @Test("an endpoint that hangs: cut at the deadline, and retried later")
    func hangingEndpoint() async throws {
        let wav = try Self.wav()
        defer { try? FileManager.default.removeItem(at: wav) }
        let endpoint = await Self.endpoint(body: "{}", hang: true, received: Received())
        let started = ContinuousClock.now
        do {
            _ = try await Self.transcriber(endpoint.port, timeout: .seconds(1)).transcribe(wav: wav, language: "en", durationMs: 1_000)
            Issue.record("a hanging endpoint answered")
        } catch {
            #expect(error.retryable)
        }
        #expect(ContinuousClock.now - started < .seconds(20))
        await endpoint.stop()
    }
}
