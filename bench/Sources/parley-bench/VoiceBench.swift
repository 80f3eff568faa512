import Foundation
import ParleyAPI
import ParleyDomain
import ParleyMedia

/// Section 3 (voice pipeline) and section 5 (playback), on one server.
enum VoiceBench {
    struct Report: Sendable {
        var noteSeconds: Int
        var noteBytes: Int
        var runs: Int
        /// Medians over the runs, milliseconds.
        var bareAnalysisMs: Double
        var bareTranscodeMs: Double
        var uploadAnsweredMs: Double
        var publishedMs: Double
        var renditionsReadyMs: Double
        var renditionBytes: [String: Int]
        var durationMs: Int
        var waveformBars: Int
        var bareTotalMs: Double { bareAnalysisMs + bareTranscodeMs }
        var overhead: Double { renditionsReadyMs / bareTotalMs }
    }

    struct Playback: Sendable {
        var listeners: Int
        var requests: Int
        var bytes: Int
        var firstByte: Distribution
        var full: Distribution
        var errors: Int
    }

    /// A browser-style voice note: WebM/Opus written as a live stream (no duration, no cues), like
    /// MediaRecorder's, from noise shaped like speech (syllables at about 4 Hz).
    static func makeNote(seconds: Int, in directory: URL, ffmpeg: String) throws -> URL {
        let file = directory.appendingPathComponent("note-\(seconds)s.webm")
        try runFFmpeg(ffmpeg, [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
            "anoisesrc=color=pink:sample_rate=48000:amplitude=0.5:duration=\(seconds),tremolo=f=4:d=0.9,lowpass=f=3400",
            "-ac", "1", "-c:a", "libopus", "-b:a", "64k", "-application", "voip", "-f", "webm", "-live", "1", file.path,
        ])
        return file
    }

    /// Runs ffmpeg with its output in a file; returns the wall time in milliseconds.
    @discardableResult
    static func runFFmpeg(_ ffmpeg: String, _ arguments: [String], stdout: URL? = nil) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [ffmpeg] + arguments
        // Output goes to a file of our own, or to the null device; never create or replace a path
        // we were not given (FileManager.createFile on /dev/null would replace the device).
        let handle: FileHandle
        if let stdout {
            _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
            handle = try FileHandle(forWritingTo: stdout)
        } else {
            handle = FileHandle.nullDevice
        }
        defer { if stdout != nil { try? handle.close() } }
        process.standardOutput = handle
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let started = monotonicNanos()
        try process.run()
        process.waitUntilExit()
        let elapsed = Double(monotonicNanos() - started) / 1e6
        guard process.terminationStatus == 0 else { throw BenchError("ffmpeg \(arguments.joined(separator: " ")) failed") }
        return elapsed
    }

    static func median(_ values: [Double]) -> Double { Distribution(values).p50 }

    static func run(
        server: ParleyServer, noteSeconds: Int, runs: Int, ffmpeg: String, listeners: Int, requestsPerListener: Int
    ) async throws -> (Report, Playback) {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-voice-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let note = try makeNote(seconds: noteSeconds, in: work, ffmpeg: ffmpeg)
        let noteBytes = Array(try Data(contentsOf: note))

        // The baseline: the server's own ffmpeg commands, run bare, one after the other.
        var bareAnalysis: [Double] = []
        var bareTranscode: [Double] = []
        for _ in 0..<runs {
            bareAnalysis.append(try runFFmpeg(ffmpeg, AudioAnalyzer.arguments(input: note), stdout: work.appendingPathComponent("pcm")))
            let outputs: [VoiceRendition: URL] = [.opus: work.appendingPathComponent("out.ogg"), .aac: work.appendingPathComponent("out.m4a")]
            bareTranscode.append(try runFFmpeg(ffmpeg, VoiceTranscoder.arguments(input: note, outputs: outputs)))
        }

        let api = server.api
        let agentToken = try await api.login(email: server.adminEmail, password: server.adminPassword)
        let consumer = try await api.consumerSession(appId: server.appId, name: "Voice bench")
        // The agent's socket: when each note is published, and when its renditions are ready.
        let seen = Locked<[MessageID: (published: UInt64?, processed: UInt64?, message: MessageDTO?)]>([:])
        let agent = try await BenchSocket.open(url: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(agentToken)") { text in
            let now = monotonicNanos()
            guard text.contains("\"voice\""), let frame = try? ParleyJSON.makeDecoder().decode(ServerFrame.self, from: Data(text.utf8)) else { return }
            switch frame {
            case .message(let message):
                seen.withLock { $0[message.id, default: (nil, nil, nil)].published = now }
            case .event(let event) where event.kind == .voiceProcessed:
                if let message = event.message {
                    seen.withLock {
                        $0[message.id, default: (nil, nil, nil)].processed = now
                        $0[message.id, default: (nil, nil, nil)].message = message
                    }
                }
            default: break
            }
        }

        var answered: [Double] = []
        var published: [Double] = []
        var ready: [Double] = []
        var last: MessageDTO?
        let port = server.port
        for run in 0..<runs {
            let response = try await api.uploadVoice(token: consumer.token, clientMessageId: "voice-bench-\(run)", note: noteBytes)
            let sent = try ParleyJSON.makeDecoder().decode(SendMessageResponse.self, from: Data(response.body)).message
            answered.append(Double(response.firstByte - response.sent) / 1e6)
            let deadline = ContinuousClock.now + .seconds(120)
            while seen.withLock({ $0[sent.id]?.processed == nil }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            guard let times = seen.withLock({ $0[sent.id] }), let publishedAt = times.published, let processedAt = times.processed else {
                throw BenchError("voice note \(sent.id) was not processed within 120 s")
            }
            published.append(Double(publishedAt - response.sent) / 1e6)
            ready.append(Double(processedAt - response.sent) / 1e6)
            last = times.message
        }
        await agent.close()
        guard let last, let voice = last.voice, voice.state == .ready else { throw BenchError("the voice note did not become ready") }
        var renditions: [String: Int] = [:]
        for rendition in voice.renditions { renditions[rendition.format.rawValue] = rendition.bytes }
        let report = Report(
            noteSeconds: noteSeconds, noteBytes: noteBytes.count, runs: runs, bareAnalysisMs: median(bareAnalysis),
            bareTranscodeMs: median(bareTranscode), uploadAnsweredMs: median(answered), publishedMs: median(published),
            renditionsReadyMs: median(ready), renditionBytes: renditions, durationMs: voice.durationMs, waveformBars: voice.waveform.count)

        // Playback: listeners fetch the Opus rendition with a Range request, as <audio> does.
        guard let opus = voice.renditions.first(where: { $0.format == .opus }) else { throw BenchError("no opus rendition") }
        let playback = try await playback(port: port, path: opus.url, token: agentToken, listeners: listeners, requests: requestsPerListener)
        return (report, playback)
    }

    static func playback(port: Int, path: String, token: String, listeners: Int, requests: Int) async throws -> Playback {
        let samples = Locked<[(ttfb: Double, full: Double, bytes: Int, ok: Bool)]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<listeners {
                group.addTask {
                    try await RawHTTP.onThread {
                        for _ in 0..<requests {
                            let response = try RawHTTP.request(
                                port: port, "GET", path, headers: [("Authorization", "Bearer \(token)"), ("Range", "bytes=0-")])
                            let sample = (
                                ttfb: Double(response.firstByte - response.started) / 1e6,
                                full: Double(response.finished - response.started) / 1e6, bytes: response.body.count,
                                ok: response.status == 206)
                            samples.withLock { $0.append(sample) }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let all = samples.value
        return Playback(
            listeners: listeners, requests: all.count, bytes: all.first?.bytes ?? 0, firstByte: Distribution(all.map(\.ttfb)),
            full: Distribution(all.map(\.full)), errors: all.filter { !$0.ok }.count)
    }
}
