import Foundation

/// What the server learns from decoding a voice note once: its length and a waveform to draw.
public struct AudioAnalysis: Sendable, Hashable {
    public var durationMs: Int
    /// Peak levels, 0-255, evenly spread over the note.
    public var waveform: [UInt8]

    public init(durationMs: Int, waveform: [UInt8]) {
        self.durationMs = durationMs
        self.waveform = waveform
    }
}

public enum AudioAnalysisError: Error, Sendable, Equatable {
    /// The bytes do not decode as audio (corrupt, truncated, or not audio at all).
    case undecodable(String)
    /// The decoder ran past its time limit.
    case timedOut
}

/// Decodes a file once to 8 kHz mono PCM and derives duration and waveform from the samples.
///
/// Browser WebM has no duration in its header, so counting decoded samples is the only reliable
/// measure; it costs about 0.1 s of CPU for a 2-minute note.
public struct AudioAnalyzer: Sendable {
    public static let sampleRate = 8000
    public static let waveformBars = 64

    let ffmpeg: ProcessRunner
    let timeout: Duration

    public init(ffmpeg: ProcessRunner, timeout: Duration = .seconds(30)) {
        self.ffmpeg = ffmpeg
        self.timeout = timeout
    }

    /// The ffmpeg arguments that decode `input` to mono PCM on standard output.
    public static func arguments(input: URL) -> [String] {
        ["-nostdin", "-v", "error", "-i", input.path, "-map", "0:a:0", "-ac", "1", "-ar", "\(sampleRate)", "-f", "s16le", "-"]
    }

    public func analyze(_ file: URL) async throws -> AudioAnalysis {
        let outcome = try await ffmpeg.run(Self.arguments(input: file), timeout: timeout)
        if outcome.timedOut { throw AudioAnalysisError.timedOut }
        let samples = outcome.stdout.count / 2
        // ffmpeg can exit 0 on a file with no audio stream it understands; no samples is a failure too.
        guard outcome.status == 0, !outcome.crashed, samples >= Self.sampleRate / 20 else {
            throw AudioAnalysisError.undecodable(outcome.stderrTail.isEmpty ? "no audio could be decoded" : outcome.stderrTail)
        }
        return AudioAnalysis(
            durationMs: samples * 1000 / Self.sampleRate,
            waveform: Self.waveform(pcm: outcome.stdout, bars: Self.waveformBars))
    }

    /// Peak amplitude per bar, scaled so that the loudest bar is 255.
    public static func waveform(pcm: Data, bars: Int) -> [UInt8] {
        let count = pcm.count / 2
        guard count > 0, bars > 0 else { return [] }
        var peaks = [Int](repeating: 0, count: bars)
        pcm.withUnsafeBytes { raw in
            let samples = raw.bindMemory(to: Int16.self)
            for bar in 0..<bars {
                let start = bar * count / bars
                let end = max(start + 1, (bar + 1) * count / bars)
                var peak = 0
                for index in start..<min(end, count) {
                    let value = Int(Int16(littleEndian: samples[index]))
                    peak = max(peak, value < 0 ? -value : value)
                }
                peaks[bar] = peak
            }
        }
        let loudest = max(peaks.max() ?? 0, 1)
        return peaks.map { UInt8(min(255, $0 * 255 / loudest)) }
    }
}
