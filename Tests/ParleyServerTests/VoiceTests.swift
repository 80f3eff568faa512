import Foundation
import HTTPTypes
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyServer
import Testing

@Suite("Voice messages")
struct VoiceTests {
    static func upload(
        _ server: TestServer, _ data: Data, token: String, clientMessageId: String = UUID().uuidString, conversationId: ConversationID? = nil,
        agentConversation: ConversationID? = nil, contentType: String = "audio/webm"
    ) async throws -> TestServer.Reply {
        var path = agentConversation.map { "/v1/conversations/\($0)/voice-messages" } ?? "/v1/consumer/voice-messages"
        path += "?clientMessageId=\(clientMessageId)"
        if let conversationId { path += "&conversationId=\(conversationId)" }
        return try await server.request(.post, path, token: token, data: data, headers: [.contentType: contentType])
    }

    /// Polls until the voice note leaves `processing`.
    static func processed(_ server: TestServer, _ message: MessageDTO, token: String) async throws -> MessageDTO {
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let items = try await server.get("/v1/conversations/\(message.conversationId)/messages", token: token).decode(ListResponse<MessageDTO>.self).items
            if let current = items.first(where: { $0.id == message.id }), current.voice?.state != .processing { return current }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("voice note still processing after 90 s")
    }

    static func mediaFiles(_ server: TestServer) -> [String] {
        let root = server.dataDirectory.appendingPathComponent("media")
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        return (enumerator?.allObjects as? [String] ?? []).filter { !$0.hasPrefix(".partial") && $0.contains(".") }
    }

    @Test("every accepted container: measured, published at once, converted to Opus and AAC", arguments: [
        "note.webm", "note.ogg", "note.m4a", "note.mp3", "note.wav", "note.amr", "note.caf", "note.aac",
        "note.aiff", "note-aifc.caf", "note-streamed.flac", "note-amr5.3gp", "note-amr-video.3gp",
    ])
    func containers(file: String) async throws {
        let fixtures = try AudioFixtures.files()
        let spoken = try AudioFixtures.speechMilliseconds()
        if file == "note-streamed.flac" {
            // As streaming encoders write it: STREAMINFO's 36-bit total_samples is 0 (bytes 21-25).
            let bytes = [UInt8](try fixtures.data(file).prefix(26))
            #expect(bytes[21] & 0x0F == 0 && bytes[22..<26].allSatisfy { $0 == 0 })
        }
        if file == "note-aifc.caf" { #expect(try fixtures.data(file)[8..<12] == Data("AIFC".utf8)) }
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            // The client's Content-Type is ignored: the bytes decide.
            let reply = try await Self.upload(server, try fixtures.data(file), token: token, contentType: "application/octet-stream")
            #expect(reply.status == .created, "\(file): \(reply.text)")
            let sent = try reply.decode(SendMessageResponse.self)
            let voice = try #require(sent.message.voice)
            #expect(sent.message.kind == .voice)
            // Duration and waveform are there before any rendition exists.
            #expect(voice.state == .processing)
            #expect(abs(voice.durationMs - spoken) < 350, "\(file): \(voice.durationMs) ms vs \(spoken) ms")
            #expect(voice.waveform.count == 64)
            #expect(voice.waveform.max() == 255)
            #expect(voice.renditions.map(\.format) == [.original])
            #expect(sent.message.text == "[audio message \(VoiceRulesClock.clock(voice.durationMs))]")
            #expect(sent.conversation.lastMessagePreview == "Audio message \(VoiceRulesClock.clock(voice.durationMs))")
            #expect(sent.conversation.lastMessageKind == .voice)

            let ready = try await Self.processed(server, sent.message, token: acme.adminToken)
            let done = try #require(ready.voice)
            #expect(done.state == .ready)
            #expect(done.renditions.map(\.format) == [.original, .opus, .aac])
            let opus = try await server.get(MediaPaths.voice(messageId: ready.id, format: .opus), token: acme.adminToken)
            #expect(opus.headers[.contentType] == "audio/ogg")
            #expect(AudioContainer.sniff(opus.body) == .ogg)
            let aac = try await server.get(MediaPaths.voice(messageId: ready.id, format: .aac), token: token)
            #expect(aac.headers[.contentType] == "audio/mp4")
            #expect(AudioContainer.sniff(aac.body) == .mp4)
            // Every rendition holds the same audio as was measured, and only audio (checked for the
            // containers whose audio needed care: unknown lengths, AMR packed in MP4, video tracks).
            let checked = ["note.webm", "note.aiff", "note-aifc.caf", "note-streamed.flac", "note-amr5.3gp", "note-amr-video.3gp"]
            for (format, body) in [("opus", opus.body), ("aac", aac.body)] where checked.contains(file) {
                let (length, streams) = try Self.probe(body)
                #expect(abs(length - done.durationMs) < 150, "\(file) \(format): \(length) ms vs \(done.durationMs) ms")
                #expect(streams == ["audio"], "\(file) \(format): \(streams)")
            }
            // The original comes back byte for byte.
            let original = try await server.get(MediaPaths.voice(messageId: ready.id, format: .original) + "?download=1", token: acme.adminToken)
            #expect(original.body == (try fixtures.data(file)))
            #expect(original.headers[.contentDisposition]?.hasPrefix("attachment") == true)
        }
    }

    /// A rendition's decoded length (ffmpeg decodes it: headers are not trusted here either) and its
    /// streams' kinds (ffprobe).
    static func probe(_ data: Data) throws -> (milliseconds: Int, streams: [String]) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("rendition-\(UUID().uuidString)")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let ffmpeg = ProcessRunner(executable: ProcessRunner.locate("ffmpeg") ?? "/usr/bin/ffmpeg")
        let pcm = try ffmpeg.runBlocking(["-nostdin", "-v", "error", "-i", file.path, "-ac", "1", "-ar", "8000", "-f", "s16le", "-"], timeout: .seconds(60))
        let ffprobe = ProcessRunner(executable: ProcessRunner.locate("ffprobe") ?? "/usr/bin/ffprobe")
        let kinds = try ffprobe.runBlocking(["-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", file.path], timeout: .seconds(60))
        return (pcm.stdout.count / 2 * 1000 / 8000, String(decoding: kinds.stdout, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    @Test("AMR in 3GP with five frames a sample: measured, drawn and converted as the raw AMR it holds (Debian's ffmpeg alone decodes a fifth)")
    func amrInThreeGP() async throws {
        let fixtures = try AudioFixtures.files()
        let ffmpeg = ProcessRunner(executable: ProcessRunner.locate("ffmpeg") ?? "/usr/bin/ffmpeg")
        let analyzer = AudioAnalyzer(ffmpeg: ffmpeg)
        let raw = try await analyzer.analyze(fixtures.url("note.amr"))
        let packed = try await analyzer.analyze(fixtures.url("note-amr5.3gp"))
        #expect(abs(packed.durationMs - raw.durationMs) < 40, "\(packed.durationMs) ms vs \(raw.durationMs) ms")
        #expect(packed.waveform == raw.waveform)
        // Without the copy to raw AMR, ffmpeg 5.1 hears about a fifth of it.
        let direct = try ffmpeg.runBlocking(AudioAnalyzer.arguments(input: fixtures.url("note-amr5.3gp")), timeout: .seconds(60))
        #expect(direct.stdout.count / 2 * 1000 / AudioAnalyzer.sampleRate < raw.durationMs / 2)
        // A 3GP whose audio is not AMR (or an M4A) is decoded as it is.
        #expect(try await AMRUnpacking.unpack(fixtures.url("note.m4a"), ffmpeg: ffmpeg, timeout: .seconds(30)) == nil)
        #expect(try await AMRUnpacking.unpack(fixtures.url("note.wav"), ffmpeg: ffmpeg, timeout: .seconds(30)) == nil)
    }

    @Test("accidental taps: shorter than the brand's minimum (1 s by default) is refused and stores nothing; the minimum is the brand's")
    func tooShort() async throws {
        let fixtures = try AudioFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            try await acme.send("hello", as: token)
            #expect(try await server.get("/v1/consumer/settings", token: token).decode(ConsumerSettingsDTO.self).voiceMinSeconds == 1)
            let before = try await HTTPErrorTests.rowCounts(server)
            for file in ["tap.wav", "tap.mp3"] {
                let reply = try await Self.upload(server, try fixtures.data(file), token: token)
                #expect(reply.status == .unprocessableContent, "\(file): \(reply.text)")
                #expect(try reply.error.code == "voice_too_short", "\(file)")
                #expect(try reply.error.message.contains("at least 1 second"), "\(file)")
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            #expect(Self.mediaFiles(server).isEmpty)
            // A brand that asks for 8 s refuses the 6 s phrase; one that asks for none takes the tap.
            var change = UpdateBrandSettingsRequest()
            change.voiceMinSeconds = 11
            #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: change).status == .badRequest)
            change.voiceMinSeconds = 8
            #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: change).decode(BrandSettingsDTO.self).voiceMinSeconds == 8)
            #expect(try await Self.upload(server, try fixtures.data("note.webm"), token: token).error.code == "voice_too_short")
            change.voiceMinSeconds = 0
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: change)
            #expect(try await Self.upload(server, try fixtures.data("tap.wav"), token: token).status == .created)
        }
    }

    @Test("refusals: too long, too big while streaming, not audio, corrupt, empty, switched off, no permission")
    func refusals() async throws {
        let fixtures = try AudioFixtures.files()
        try await TestServer.run(configure: { $0.maxVoiceBytes = 64 * 1024 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            try await acme.send("hello", as: token)
            #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(voiceMaxSeconds: 15)).status == .ok)
            let before = try await HTTPErrorTests.rowCounts(server)

            let cases: [(String, Data, HTTPResponse.Status, String)] = [
                ("20 s over a 15 s limit", try fixtures.data("tone20s.webm"), .unprocessableContent, "voice_too_long"),
                ("1 MB over a 64 KB cap", Data(repeating: 0x1A, count: 1_000_000), .contentTooLarge, "voice_too_large"),
                ("a shell script named .mp3", try fixtures.data("script.mp3"), .unsupportedMediaType, "unsupported_audio"),
                ("a program named .ogg", try fixtures.data("program.ogg"), .unsupportedMediaType, "unsupported_audio"),
                ("a truncated WebM", try fixtures.data("corrupt.webm"), .unprocessableContent, "corrupt_audio"),
                ("nothing", Data(), .unprocessableContent, "empty_audio"),
            ]
            for (name, data, status, code) in cases {
                let reply = try await Self.upload(server, data, token: token)
                #expect(reply.status == status, "\(name): \(reply.text)")
                #expect(try reply.error.code.rawValue == code, "\(name)")
            }
            let tooLong = try await Self.upload(server, try fixtures.data("tone20s.webm"), token: token)
            #expect(try tooLong.error.message.contains("0:15"))
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            #expect(Self.mediaFiles(server).isEmpty)

            // The brand switches voice off for consumers: refused, and the widget is told to hide the microphone.
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(voiceFromConsumers: false))
            let off = try await Self.upload(server, try fixtures.data("note.webm"), token: token)
            #expect(off.status == .forbidden)
            #expect(try off.error.code == "voice_disabled")
            #expect(try await server.get("/v1/consumer/settings", token: token).decode(ConsumerSettingsDTO.self).voiceEnabled == false)

            // An agent without send_audio cannot send voice; with it, can.
            let conversationId = try await server.get("/v1/conversations", token: acme.adminToken).decode(Page<ConversationDTO>.self).items[0].id
            let (plainToken, _) = try await acme.agent(permissions: [])
            let denied = try await Self.upload(server, try fixtures.data("note.webm"), token: plainToken, agentConversation: conversationId)
            #expect(try denied.error.code == "permission_required")
            let allowed = try await Self.upload(server, try fixtures.data("note.webm"), token: acme.adminToken, agentConversation: conversationId)
            #expect(allowed.status == .created)
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(voiceFromAgents: false))
            #expect(try await Self.upload(server, try fixtures.data("note.webm"), token: acme.adminToken, agentConversation: conversationId).error.code == "voice_disabled")
            #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(voiceMaxSeconds: 121)).status == .badRequest)
            #expect(try await server.request(.patch, "/v1/brand/settings", token: plainToken, json: UpdateBrandSettingsRequest(voiceMaxSeconds: 60)).status == .forbidden)
        }
    }

    @Test("a retried upload returns the original message and stores nothing more")
    func idempotentUpload() async throws {
        let fixtures = try AudioFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await Self.upload(server, try fixtures.data("note.webm"), token: token, clientMessageId: "voice-1")
            #expect(first.status == .created)
            let retry = try await Self.upload(server, try fixtures.data("note.webm"), token: token, clientMessageId: "voice-1")
            #expect(retry.status == .ok)
            #expect(try retry.decode(SendMessageResponse.self).message.id == (try first.decode(SendMessageResponse.self).message.id))
            let conversation = try await server.get("/v1/conversations", token: acme.adminToken).decode(Page<ConversationDTO>.self).items[0]
            let messages = try await server.get("/v1/conversations/\(conversation.id)/messages", token: acme.adminToken).decode(ListResponse<MessageDTO>.self)
            #expect(messages.items.count == 1)
            #expect(Self.mediaFiles(server).filter { $0.contains("original") }.count == 1)
            let reused = try await acme.send("text with a voice id", as: token, clientMessageId: "voice-1-text")
            let clash = try await Self.upload(server, try fixtures.data("note.webm"), token: token, clientMessageId: reused.message.clientMessageId)
            #expect(try clash.error.code == "client_message_id_reused")
        }
    }

    @Test("playback: ranges, ETags, caching, and only for people in the conversation")
    func playback() async throws {
        let fixtures = try AudioFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (token, _) = try await acme.consumer()
            let (stranger, _) = try await acme.consumer()
            let original = try fixtures.data("note.webm")
            let sent = try await Self.upload(server, original, token: token).decode(SendMessageResponse.self)
            let path = MediaPaths.voice(messageId: sent.message.id, format: .original)

            let full = try await server.get(path, token: acme.adminToken)
            #expect(full.status == .ok)
            #expect(full.headers[.acceptRanges] == "bytes")
            #expect(full.headers[.cacheControl]?.contains("private") == true)
            let etag = try #require(full.headers[.eTag])

            let head = try await server.request(.get, path, token: acme.adminToken, headers: [.range: "bytes=0-99"])
            #expect(head.status == .partialContent)
            #expect(head.body == original.prefix(100))
            #expect(head.headers[.contentRange] == "bytes 0-99/\(original.count)")
            let middle = original.count / 2
            let seek = try await server.request(.get, path, token: acme.adminToken, headers: [.range: "bytes=\(middle)-"])
            #expect(seek.body == original.suffix(from: middle))
            let tail = try await server.request(.get, path, token: acme.adminToken, headers: [.range: "bytes=-10"])
            #expect(tail.body == original.suffix(10))
            let outside = try await server.request(.get, path, token: acme.adminToken, headers: [.range: "bytes=\(original.count + 5)-"])
            #expect(outside.status == .rangeNotSatisfiable)
            #expect(outside.headers[.contentRange] == "bytes */\(original.count)")
            let cached = try await server.request(.get, path, token: acme.adminToken, headers: [.ifNoneMatch: etag])
            #expect(cached.status == .notModified)

            // Another consumer of the brand, another brand, nobody: not found / unauthenticated.
            #expect(try await server.get(path, token: stranger).status == .notFound)
            #expect(try await server.get(path, token: globex.adminToken).status == .notFound)
            #expect(try await server.get(path).status == .unauthorized)
            #expect(try await server.get("/v1/media/\(sent.message.id)/flac", token: acme.adminToken).status == .notFound)
        }
    }

    @Test("agents see the duration on arrival and hear when renditions are ready, over the socket")
    func realtime() async throws {
        let fixtures = try AudioFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            let sent = try await Self.upload(server, try fixtures.data("note.webm"), token: token).decode(SendMessageResponse.self)
            // Generous waits: the suite runs every test at once on two cores (this measures nothing).
            guard case .message(let arrived) = try await agent.next(within: 30, where: { if case .message = $0 { return true }; return false }) else {
                throw TestFailure("no message")
            }
            #expect(arrived.voice?.durationMs == sent.message.voice?.durationMs)
            #expect(arrived.voice?.state == .processing)
            guard case .event(let event) = try await agent.next(within: 30, where: { if case .event(let e) = $0 { return e.kind == .voiceProcessed }; return false }) else {
                throw TestFailure("no voice event")
            }
            #expect(event.messageId == sent.message.id)
            #expect(event.message?.voice?.state == .ready)
            // A client that was away gets the same event on resume.
            let consumer = try await RealtimeProbe.connect(port: server.port, token: token)
            try consumer.send(.resume(id: "r", cursors: [sent.conversation.id.rawValue: sent.message.seq]))
            guard case .event(let replayed) = try await consumer.next(within: 30) else { throw TestFailure("expected the voice event") }
            #expect(replayed.kind == .voiceProcessed)
            #expect(replayed.message?.voice?.renditions.count == 3)
            await agent.close()
            await consumer.close()
        }
    }

    @Test("a voice note left processing by a crash is finished at start-up")
    func recovery() async throws {
        let fixtures = try AudioFixtures.files()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-recovery-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await TestDatabase.make()
        let (messageIds, continuation) = AsyncStream<(MessageID, String)>.makeStream()
        // First run: a server whose transcoder cannot run, so the note stays in processing.
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path; $0.voiceWorkers = 1 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            // Stop the processor before it can finish: mark the note processing again afterwards.
            let sent = try await Self.upload(server, try fixtures.data("note.webm"), token: token).decode(SendMessageResponse.self)
            _ = try await Self.processed(server, sent.message, token: acme.adminToken)
            try await server.services.store.database.write { db in
                try await db.raw("UPDATE voice_media SET state = 'processing', opus_key = NULL, opus_bytes = NULL, aac_key = NULL, aac_bytes = NULL").run()
            }
            continuation.yield((sent.message.id, acme.adminToken))
            continuation.finish()
        }
        var iterator = messageIds.makeAsyncIterator()
        let (messageId, adminToken) = try #require(await iterator.next())
        // Second run on the same data directory: the processor picks the note up.
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path }) { server in
            let deadline = Date().addingTimeInterval(90)
            var state: VoiceState?
            while Date() < deadline {
                state = try await server.services.store.read { repo in
                    try await repo.voicesProcessing(limit: 10).isEmpty ? .ready : .processing
                }
                if state == .ready { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(state == .ready)
            let media = try await server.get(MediaPaths.voice(messageId: messageId, format: .opus), token: adminToken)
            #expect(media.status == .ok)
        }
        await database.drop()
    }
}

extension VoiceTests {
    /// An ffmpeg that decodes for real but crashes, or hangs, when asked for renditions.
    static func brokenFFmpeg(_ behaviour: String) throws -> URL {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("ffmpeg-\(behaviour)-\(UUID().uuidString)")
        let real = ProcessRunner.locate("ffmpeg") ?? "/usr/bin/ffmpeg"
        let action = behaviour == "crash" ? "kill -SEGV $$" : "exec sleep 600"
        try "#!/bin/sh\ncase \"$*\" in *\"-f ogg\"*) \(action) ;; esac\nexec \(real) \"$@\"\n".write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        return script
    }

    @Test("an ffmpeg that crashes or hangs fails that one note, with a reason; the server goes on", arguments: ["crash", "hang"])
    func brokenTranscoder(behaviour: String) async throws {
        let fixtures = try AudioFixtures.files()
        let ffmpeg = try Self.brokenFFmpeg(behaviour)
        defer { try? FileManager.default.removeItem(at: ffmpeg) }
        try await TestServer.run(configure: { $0.ffmpeg = ffmpeg.path; $0.ffmpegTimeoutSeconds = 2 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let sent = try await Self.upload(server, try fixtures.data("note.webm"), token: token).decode(SendMessageResponse.self)
            #expect(sent.message.voice?.durationMs ?? 0 > 0)  // decoding worked: the note was measured
            let failed = try await Self.processed(server, sent.message, token: acme.adminToken)
            #expect(failed.voice?.state == .failed)
            #expect(failed.voice?.failureReason?.isEmpty == false)
            // The original still plays; the missing renditions say why.
            #expect(try await server.get(MediaPaths.voice(messageId: failed.id, format: .original), token: token).status == .ok)
            let opus = try await server.get(MediaPaths.voice(messageId: failed.id, format: .opus), token: token)
            #expect(try opus.error.code == "rendition_failed")
            // Everything else goes on.
            #expect(try await server.get("/health").status == .ok)
            let text = try await acme.send("still here", as: token)
            #expect(text.message.seq > failed.seq)
        }
    }
}

/// The m:ss the server writes, computed independently for the assertions.
enum VoiceRulesClock {
    static func clock(_ milliseconds: Int) -> String {
        let seconds = Int((Double(milliseconds) / 1000).rounded())
        return String(format: "%d:%02d", seconds / 60, seconds % 60)
    }
}
