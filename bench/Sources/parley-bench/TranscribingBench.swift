import Foundation
import ParleyAPI

#if canImport(Glibc)
import Glibc
#endif

/// The text section's fixed rate while the server transcribes voice notes (issue 30: transcription
/// must not take the message path's CPU). One server per setting, each with the embedded engine
/// and a brand that transcribes: a quiet baseline first, then voice notes of real read speech
/// uploaded and the timed phases run while their transcripts are made.
enum TranscribingBench {
    struct Row: Sendable {
        var label: String
        var workers: Int
        /// Nil: the quiet baseline (no transcription running).
        var niceness: Int?
        /// The median run by delivery p99, and the p99 range over the runs.
        var phase: TextBench.Phase
        var p99Range: (Double, Double)
        /// The engine's CPU over the timed phases (the server's children, as the kernel counts
        /// them when they end: a run still going when the phases end is not in it).
        var transcriberCPUSeconds: Double
        var phaseSeconds: Double
        /// Whether every timed phase ended with transcripts still pending: the engine was busy all along.
        var busyThroughout: Bool
    }

    struct Report: Sendable {
        var consumers: Int
        var rate: Int
        var seconds: Double
        var repeats: Int
        var noteSeconds: Int
        var rows: [Row]
    }

    struct Options: Sendable {
        var consumers: Int
        var rate: Int
        var seconds: Double
        var repeats: Int
        var noteSeconds: Int
        var python: String
        var ffmpeg: String
        var speech: URL
    }

    static func run(binary: URL, publicDir: URL, options: Options) async throws -> Report {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-transcribing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let note = Array(try Data(contentsOf: try speechNote(seconds: options.noteSeconds, from: options.speech, in: work, ffmpeg: options.ffmpeg)))
        var rows: [Row] = []
        // The defaults (one worker, niceness 10); then both cores' worth of transcription, nice and not.
        for (workers, niceness) in [(1, 10), (2, 10), (2, 0)] {
            let server = try await ParleyServer(
                binary: binary, publicDir: publicDir,
                extraEnvironment: [
                    "PARLEY_TRANSCRIBER": "embedded", "PARLEY_TRANSCRIBER_PYTHON": options.python,
                    "PARLEY_TRANSCRIBER_WORKERS": "\(workers)", "PARLEY_TRANSCRIBER_NICE": "\(niceness)",
                ])
            let measured = try await server.use { running in
                try await measure(running, note: note, workers: workers, niceness: niceness, quiet: rows.isEmpty, options: options)
            }
            rows += measured
        }
        return Report(
            consumers: options.consumers, rate: options.rate, seconds: options.seconds, repeats: options.repeats,
            noteSeconds: options.noteSeconds, rows: rows)
    }

    /// Real read speech (the LibriVox recordings the tests use) joined and looped to `seconds`, then
    /// written as a browser would (WebM/Opus 64 kbit/s, a live stream).
    static func speechNote(seconds: Int, from speech: URL, in work: URL, ffmpeg: String) throws -> URL {
        let recordings = try FileManager.default.contentsOfDirectory(at: speech, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "wav" }.sorted { $0.path < $1.path }
        guard !recordings.isEmpty else { throw BenchError("no recordings in \(speech.path)") }
        let list = work.appendingPathComponent("speech.txt")
        try recordings.map { "file '\($0.path)'" }.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        let file = work.appendingPathComponent("speech-\(seconds)s.webm")
        try VoiceBench.runFFmpeg(ffmpeg, [
            "-nostdin", "-v", "error", "-y", "-stream_loop", "-1", "-f", "concat", "-safe", "0", "-i", list.path, "-t", "\(seconds)",
            "-ac", "1", "-ar", "48000", "-c:a", "libopus", "-b:a", "64k", "-application", "voip", "-f", "webm", "-live", "1", file.path,
        ])
        return file
    }

    private static func measure(
        _ server: ParleyServer, note: [UInt8], workers: Int, niceness: Int, quiet: Bool, options: Options
    ) async throws -> [Row] {
        let api = server.api
        let agentToken = try await api.login(email: server.adminEmail, password: server.adminPassword)
        let _: BrandSettingsDTO = try await api.call(
            "PATCH", "/v1/brand/settings", token: agentToken, body: UpdateBrandSettingsRequest(transcription: true, transcriptionLanguage: "en"))
        let sessions = try await TextBench.openConversations(server, consumers: options.consumers)
        let capacity = options.rate * Int(options.seconds.rounded(.up)) + 16
        func phase() async throws -> TextBench.Phase {
            try await TextBench.phase(
                "fixed", server: server, agentToken: agentToken, sessions: sessions, seconds: options.seconds, capacity: capacity,
                mode: .fixedRate(options.rate))
        }
        func row(_ label: String, niceness: Int?, _ runs: [TextBench.Phase], cpu: Double, busy: Bool) -> Row {
            let sorted = runs.sorted { $0.deliveryLatency.p99 < $1.deliveryLatency.p99 }
            return Row(
                label: label, workers: workers, niceness: niceness, phase: sorted[sorted.count / 2],
                p99Range: (sorted.first?.deliveryLatency.p99 ?? .nan, sorted.last?.deliveryLatency.p99 ?? .nan),
                transcriberCPUSeconds: cpu, phaseSeconds: options.seconds * Double(runs.count), busyThroughout: busy)
        }
        var rows: [Row] = []
        if quiet {
            var runs: [TextBench.Phase] = []
            for _ in 0..<options.repeats { runs.append(try await phase()) }
            rows.append(row("quiet: no transcription", niceness: nil, runs, cpu: 0, busy: false))
        }

        // The agent hears each note become ready, then its transcript.
        let ready = Locked<Set<String>>([])
        let transcribed = Locked<Set<String>>([])
        let agent = try await BenchSocket.open(url: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(agentToken)") { text in
            guard text.contains("voice_processed"), let frame = try? ParleyJSON.makeDecoder().decode(ServerFrame.self, from: Data(text.utf8)),
                case .event(let event) = frame, let message = event.message, let voice = message.voice
            else { return }
            let id = message.id.rawValue
            if voice.state == .ready { ready.withLock { _ = $0.insert(id) } }
            if let transcript = voice.transcript, transcript.state != .pending { transcribed.withLock { _ = $0.insert(id) } }
        }
        // Enough speech to keep every worker busy through the timed phases at this machine's speed
        // (about 4 times faster than real time per worker, slower while the phases run).
        let notes = max(1, Int((Double(workers) * (options.seconds + 3) * Double(options.repeats) * 5 / Double(options.noteSeconds)).rounded(.up)) + workers)
        let consumer = try await api.consumerSession(appId: server.appId, name: "Transcribing bench")
        for index in 0..<notes {
            _ = try await api.uploadVoice(token: consumer.token, clientMessageId: "transcribing-\(index)", note: note)
        }
        // Renditions first (ffmpeg at the server's own priority): the phases measure transcription alone.
        let deadline = ContinuousClock.now + .seconds(300)
        while ready.value.count < notes, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        guard ready.value.count == notes else { throw BenchError("\(ready.value.count) of \(notes) voice notes became ready") }
        let childrenBefore = ProcStats.childrenCPUSeconds(pid: server.pid)
        var runs: [TextBench.Phase] = []
        var busy = true
        for _ in 0..<options.repeats {
            runs.append(try await phase())
            if transcribed.value.count >= notes { busy = false }
        }
        let cpu = ProcStats.childrenCPUSeconds(pid: server.pid) - childrenBefore
        await agent.close()
        guard !transcribed.value.isEmpty || options.seconds < 5 else { throw BenchError("no transcript was made: is pocketsphinx installed for \(options.python)?") }
        rows.append(row("transcribing, \(workers) worker\(workers == 1 ? "" : "s"), niceness \(niceness)", niceness: niceness, runs, cpu: cpu, busy: busy))
        return rows
    }
}
