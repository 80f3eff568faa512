import Foundation
import ParleyDomain
import ParleyMedia
import Testing

/// The embedded engine on real read speech (LibriVox, Fixtures/speech/SOURCES.md), when the
/// machine has it: `TEST_TRANSCRIBER_PYTHON` (scripts/test.sh sets .venv's) with PyPI's pocketsphinx.
@Suite("Embedded transcriber")
struct TranscriberTests {
    static let python = ProcessInfo.processInfo.environment["TEST_TRANSCRIBER_PYTHON"]
    static let speech = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/speech")
    static var ffmpeg: ProcessRunner { ProcessRunner(executable: ProcessRunner.locate("ffmpeg") ?? "/usr/bin/ffmpeg") }

    static func engine() throws -> EmbeddedTranscriber {
        let python = try #require(Self.python, "TEST_TRANSCRIBER_PYTHON names the Python with pocketsphinx")
        return EmbeddedTranscriber(python: ProcessRunner(executable: python, memoryLimit: 1024 * 1024 * 1024), timeout: .seconds(120))
    }

    /// `input` as the server prepares a note (Opus in Ogg first, as the rendition it transcribes).
    static func prepared(_ input: URL, throughOpus: Bool = true) async throws -> (wav: URL, durationMs: Int) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("transcribe-\(UUID().uuidString)")
        var source = input
        if throughOpus {
            source = scratch.appendingPathExtension("ogg")
            try await VoiceTranscoder(ffmpeg: ffmpeg).transcode(input, into: [.opus: source])
        }
        let wav = scratch.appendingPathExtension("wav")
        try await TranscriptionAudio(ffmpeg: ffmpeg, timeout: .seconds(60)).prepare(source, into: wav)
        if throughOpus { try? FileManager.default.removeItem(at: source) }
        let bytes = try FileManager.default.attributesOfItem(atPath: wav.path)[.size] as? Int ?? 44
        return (wav, (bytes - 44) / 32)
    }

    @Test("word error rate on five utterances of real read speech, through the Opus rendition: under 35% (31% measured)",
          .enabled(if: python != nil))
    func readSpeech() async throws {
        let engine = try Self.engine()
        var (errors, words) = (0, 0)
        for name in ["ss01-0870", "ss01-0880", "ss01-0890", "ss01-0920", "ss01-0930"] {
            let (wav, duration) = try await Self.prepared(Self.speech.appendingPathComponent("\(name).wav"))
            defer { try? FileManager.default.removeItem(at: wav) }
            let heard = try await engine.transcribe(wav: wav, language: "en", durationMs: duration)
            let reference = try String(contentsOf: Self.speech.appendingPathComponent("\(name).txt"), encoding: .utf8)
            let result = WordErrorRate.errors(reference: reference, hypothesis: heard.text)
            (errors, words) = (errors + result.errors, words + result.words)
            #expect(!heard.lowConfidence, "\(name): \(heard.text)")
            #expect(heard.language == "en")
        }
        #expect(words == 71)
        print("embedded transcriber: \(errors) errors in \(words) words, WER \(Double(errors) / Double(words))")
        #expect(Double(errors) / Double(words) < 0.35, "\(errors) errors in \(words) words")
    }

    @Test("silence and noise: an empty transcript, never an error; music: a guess at most", .enabled(if: python != nil))
    func notSpeech() async throws {
        let engine = try Self.engine()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("not-speech-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let sources = [
            ("silence", "anullsrc=r=48000:cl=mono"), ("noise", "anoisesrc=r=48000:a=0.3"),
            ("music", "sine=f=262:r=48000,volume=0.5[a];sine=f=330:r=48000,volume=0.5[b];[a][b]amix"),
        ]
        for (name, graph) in sources {
            let file = scratch.appendingPathComponent("\(name).ogg")
            let outcome = try await Self.ffmpeg.run(
                ["-nostdin", "-v", "error", "-f", "lavfi", "-i", graph.contains(";") ? "aevalsrc=0" : graph, "-t", "8"]
                    + (graph.contains(";") ? ["-filter_complex", graph] : []) + ["-c:a", "libopus", file.path], timeout: .seconds(60))
            try #require(outcome.succeeded, "\(name): \(outcome.stderrTail)")
            let (wav, duration) = try await Self.prepared(file, throughOpus: false)
            let heard = try await engine.transcribe(wav: wav, language: "en", durationMs: duration)
            let words = heard.text.split(separator: " ").count
            #expect(words == 0 || heard.lowConfidence, "\(name): '\(heard.text)'")
        }
    }

    @Test("a language the model does not know is refused before any work, and not retried", .enabled(if: python != nil))
    func otherLanguage() async throws {
        let engine = try Self.engine()
        #expect(!engine.supports(language: "fr"))
        do {
            _ = try await engine.transcribe(wav: URL(fileURLWithPath: "/nonexistent.wav"), language: "fr", durationMs: 1_000)
            Issue.record("French was transcribed")
        } catch {
            #expect(!error.retryable)
        }
    }

    @Test("a run over its time limit is killed and may be retried", .enabled(if: python != nil))
    func timeLimit() async throws {
        let python = try #require(Self.python)
        let engine = EmbeddedTranscriber(python: ProcessRunner(executable: python), timeout: .milliseconds(50))
        let (wav, duration) = try await Self.prepared(Self.speech.appendingPathComponent("ss01-0870.wav"), throughOpus: false)
        defer { try? FileManager.default.removeItem(at: wav) }
        do {
            _ = try await engine.transcribe(wav: wav, language: "en", durationMs: duration)
            Issue.record("finished within 50 ms")
        } catch {
            #expect(error.retryable)
            #expect(error.description.contains("limit"))
        }
    }

    @Test("word error rate: substitutions, deletions and insertions over the reference's words")
    func wordErrorRate() {
        #expect(WordErrorRate.errors(reference: "He was not an ill disposed young man", hypothesis: "he was not until this blows young man") == (3, 8))
        #expect(WordErrorRate.errors(reference: "a b c", hypothesis: "") == (3, 3))
        #expect(WordErrorRate.errors(reference: "", hypothesis: "x y") == (2, 0))
        #expect(WordErrorRate.errors(reference: "Mister Dashwood, sir.", hypothesis: "mister dashwood sir") == (0, 3))
    }

    @Test("low confidence: a word or two over many seconds")
    func lowConfidence() {
        #expect(LowConfidence.fewWords("man error", durationMs: 8_000))
        #expect(!LowConfidence.fewWords("he was not an ill disposed young man", durationMs: 3_000))
        #expect(!LowConfidence.fewWords("", durationMs: 8_000))
        #expect(!LowConfidence.fewWords("yes", durationMs: 1_500))
    }
}
