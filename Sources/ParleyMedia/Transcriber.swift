import Foundation
import ParleyDomain

/// What a transcriber heard in a voice note.
public struct Transcription: Sendable, Hashable {
    /// The words, as the engine wrote them (not yet masked).
    public var text: String
    /// The language it was transcribed in (ISO 639-1).
    public var language: String
    /// The engine was unsure: music, noise, or speech in another language.
    public var lowConfidence: Bool

    public init(text: String, language: String, lowConfidence: Bool) {
        self.text = text
        self.language = language
        self.lowConfidence = lowConfidence
    }
}

/// Why a transcription did not come back.
public struct TranscriptionFailure: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// Worth another try later (a timeout, an endpoint that is down or busy); otherwise the note
    /// never gets a transcript from this engine (its language, a request the endpoint refuses).
    public var retryable: Bool

    public init(_ description: String, retryable: Bool) {
        self.description = description
        self.retryable = retryable
    }
}

/// Speech to text, one voice note at a time. Two engines: `EmbeddedTranscriber` (PocketSphinx on
/// this machine, nothing leaves it) and `OpenAITranscriber` in the server (any endpoint that speaks
/// OpenAI's `POST /v1/audio/transcriptions`: whisper.cpp's server, faster-whisper servers, hosted
/// providers). Both take the note as `TranscriptionAudio` made it: 16 kHz mono 16-bit WAV, which
/// every such endpoint accepts.
public protocol Transcriber: Sendable {
    /// `embedded` or `openai`, for logs and metrics.
    var name: String { get }
    /// Whether it can transcribe `language` (ISO 639-1); a note in any other is `unavailable` at once.
    func supports(language: String) -> Bool
    func transcribe(wav: URL, language: String, durationMs: Int) async throws(TranscriptionFailure) -> Transcription
}

/// A voice note made ready for a transcriber: decoded by ffmpeg into 16 kHz mono WAV, under its
/// time limit (a 2-minute note is 3.8 MB).
public struct TranscriptionAudio: Sendable {
    let ffmpeg: ProcessRunner
    let timeout: Duration

    public init(ffmpeg: ProcessRunner, timeout: Duration) {
        self.ffmpeg = ffmpeg
        self.timeout = timeout
    }

    public func prepare(_ input: URL, into wav: URL) async throws(TranscriptionFailure) {
        let outcome: ProcessRunner.Outcome
        do {
            outcome = try await ffmpeg.run(
                ["-nostdin", "-v", "error", "-y", "-i", input.path, "-map", "0:a:0", "-vn", "-ac", "1", "-ar", "16000",
                 "-c:a", "pcm_s16le", "-f", "wav", wav.path], timeout: timeout)
        } catch {
            throw TranscriptionFailure("ffmpeg could not be started: \(error)", retryable: true)
        }
        if outcome.timedOut { throw TranscriptionFailure("decoding for the transcriber took longer than the limit", retryable: true) }
        guard outcome.succeeded else { throw TranscriptionFailure("the note could not be decoded: \(outcome.stderrTail)", retryable: false) }
    }
}

/// PocketSphinx 5 (PyPI's `pocketsphinx`, which ships its US English model) in a Python child
/// process, one per note, under a time and memory limit. There is no Swift binding of a speech
/// engine in our package mirror, and PyPI's PocketSphinx is the only engine installable here whose
/// model comes with the package (docs/transcription.md says how the others were ruled out); the
/// few lines of Python it needs are below, run with `python -c`, so nothing has to be installed
/// beside the binary but the package itself.
///
/// Measured on real read speech (`Tests/ParleyMediaTests/Fixtures/speech`, LibriVox): 31% word
/// error rate through the Opus rendition it is given (28% from the 16 kHz originals), 4.3 times
/// faster than real time on this 2-core machine, process start and model load included
/// (bench/transcription.sh). It reports no usable
/// confidence, so a transcript is marked low-confidence when it has fewer words than speech has
/// (`LowConfidence.wordsPerSecond`): music and noise come out as a word or two.
public struct EmbeddedTranscriber: Transcriber {
    let python: ProcessRunner
    let timeout: Duration

    public var name: String { "embedded" }
    /// The priority its process runs at (`ProcessRunner.niceness`).
    public var niceness: Int { python.niceness }

    public init(python: ProcessRunner, timeout: Duration) {
        self.python = python
        self.timeout = timeout
    }

    /// The model it ships is US English only.
    public func supports(language: String) -> Bool { language == "en" }

    static let script = """
        import json, sys, wave
        from pocketsphinx import Decoder
        w = wave.open(sys.argv[1], "rb")
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit("expected 16 kHz mono 16-bit WAV")
        d = Decoder(samprate=16000, loglevel="FATAL")
        d.start_utt()
        d.process_raw(w.readframes(w.getnframes()), full_utt=True)
        d.end_utt()
        h = d.hyp()
        print(json.dumps({"text": h.hypstr if h else ""}))
        """

    /// Whether `python` can run the engine (at start-up: a server without it has no transcriber).
    public func check() async -> String? {
        do {
            let outcome = try await python.run(["-c", "import pocketsphinx"], timeout: .seconds(30))
            return outcome.succeeded ? nil : "pocketsphinx is not installed for \(python.executable): \(outcome.stderrTail)"
        } catch {
            return "\(python.executable) could not be started: \(error)"
        }
    }

    public func transcribe(wav: URL, language: String, durationMs: Int) async throws(TranscriptionFailure) -> Transcription {
        guard supports(language: language) else { throw TranscriptionFailure("the embedded engine knows only English", retryable: false) }
        let outcome: ProcessRunner.Outcome
        do {
            outcome = try await python.run(["-c", Self.script, wav.path], timeout: timeout)
        } catch {
            throw TranscriptionFailure("the transcriber could not be started: \(error)", retryable: true)
        }
        if outcome.timedOut { throw TranscriptionFailure("transcribing took longer than the limit", retryable: true) }
        if outcome.crashed { throw TranscriptionFailure("the transcriber crashed (or ran out of memory)", retryable: true) }
        guard outcome.status == 0 else { throw TranscriptionFailure("the transcriber failed: \(outcome.stderrTail)", retryable: true) }
        struct Output: Decodable { var text: String }
        guard let output = try? JSONDecoder().decode(Output.self, from: outcome.stdout) else {
            throw TranscriptionFailure("the transcriber's output was not understood", retryable: false)
        }
        let text = output.text.trimmingCharacters(in: .whitespacesAndNewlines)
        return Transcription(text: text, language: language, lowConfidence: LowConfidence.fewWords(text, durationMs: durationMs))
    }
}

/// When a transcript is shown as a guess.
public enum LowConfidence {
    /// Read speech runs at 2-3 words a second; music and noise come out of PocketSphinx as a word or
    /// two over many seconds (8 s of plucked chords: "man error"). Fewer than this over a note
    /// longer than 3 s is marked low-confidence.
    public static let wordsPerSecond = 0.6

    public static func fewWords(_ text: String, durationMs: Int) -> Bool {
        let words = text.split(whereSeparator: \.isWhitespace).count
        guard words > 0, durationMs > 3_000 else { return false }
        return Double(words) / (Double(durationMs) / 1000) < wordsPerSecond
    }
}

/// Word error rate: (substitutions + deletions + insertions) / reference words, over lowercased
/// words without punctuation. How transcribers are compared (tests and bench).
public enum WordErrorRate {
    public static func words(_ text: String) -> [Substring] {
        text.lowercased().split { !($0.isLetter || $0.isNumber || $0 == "'") }
    }

    /// The edit distance in words and the reference's length.
    public static func errors(reference: String, hypothesis: String) -> (errors: Int, words: Int) {
        let (r, h) = (words(reference), words(hypothesis))
        // One row of the edit-distance table at a time.
        var row = Array(0...h.count)
        for i in r.indices {
            let previous = row
            row[0] = i + 1
            for j in h.indices {
                row[j + 1] = min(previous[j + 1] + 1, row[j] + 1, previous[j] + (r[i] == h[j] ? 0 : 1))
            }
        }
        return (row[h.count], r.count)
    }
}
