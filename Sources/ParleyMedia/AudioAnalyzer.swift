import Foundation

/// What the server learns from decoding a voice note once: its length and a waveform to draw.
public struct AudioAnalysis: Sendable, Hashable {
    public var durationMs: Int
    /// Peak levels, 0-255, evenly spread over the note.
    public var waveform: [UInt8]
    /// Decoding stopped at the length limit: the note is at least `durationMs` long.
    public var truncated: Bool

    public init(durationMs: Int, waveform: [UInt8], truncated: Bool = false) {
        self.durationMs = durationMs
        self.waveform = waveform
        self.truncated = truncated
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

    /// The ffmpeg arguments that decode `input` to mono PCM on standard output, stopping after
    /// `limitSeconds` of audio (a note longer than that is refused without decoding the rest).
    public static func arguments(input: URL, limitSeconds: Int? = nil) -> [String] {
        var arguments = ["-nostdin", "-v", "error", "-i", input.path, "-map", "0:a:0", "-vn", "-ac", "1", "-ar", "\(sampleRate)"]
        if let limitSeconds { arguments += ["-t", "\(limitSeconds)"] }
        return arguments + ["-f", "s16le", "-"]
    }

    /// Decodes at most `maxSeconds + 1` seconds: a longer note comes back `truncated`, having cost
    /// no more than a note of the limit's length. The samples are counted and reduced to peaks as
    /// they stream in; the PCM is never held whole.
    public func analyze(_ file: URL, maxSeconds: Int? = nil) async throws -> AudioAnalysis {
        // AMR in MP4/3GP is measured from a raw copy of its frames (AMRUnpacking says why).
        let unpacked = try await AMRUnpacking.unpack(file, ffmpeg: ffmpeg, timeout: timeout)
        defer { if let unpacked { try? FileManager.default.removeItem(at: unpacked) } }
        let limit = maxSeconds.map { $0 + 1 }
        let peaks = PeakCollector()
        let outcome = try await ffmpeg.run(Self.arguments(input: unpacked ?? file, limitSeconds: limit), timeout: timeout) { chunk in
            peaks.add(chunk)
        }
        if outcome.timedOut { throw AudioAnalysisError.timedOut }
        let samples = peaks.sampleCount
        // ffmpeg can exit 0 on a file with no audio stream it understands; no samples is a failure too.
        guard outcome.status == 0, !outcome.crashed, samples >= Self.sampleRate / 20 else {
            throw AudioAnalysisError.undecodable(outcome.stderrTail.isEmpty ? "no audio could be decoded" : outcome.stderrTail)
        }
        let truncated = limit.map { samples >= $0 * Self.sampleRate - Self.sampleRate / 100 } ?? false
        return AudioAnalysis(
            durationMs: samples * 1000 / Self.sampleRate, waveform: peaks.waveform(bars: Self.waveformBars), truncated: truncated)
    }

    /// Peaks of 10 ms blocks, gathered from PCM chunks as they arrive (a chunk may end mid-sample).
    final class PeakCollector: @unchecked Sendable {
        // Only the process runner's reading thread calls `add`; the results are read after it is done.
        static let blockSamples = AudioAnalyzer.sampleRate / 100
        private(set) var sampleCount = 0
        private var blockPeaks: [Int] = []
        private var currentPeak = 0
        private var inBlock = 0
        private var leftover: UInt8?

        func add(_ chunk: Data) {
            var bytes = chunk
            if let first = leftover {
                bytes.insert(first, at: bytes.startIndex)
                leftover = nil
            }
            if bytes.count % 2 == 1 { leftover = bytes.removeLast() }
            bytes.withUnsafeBytes { raw in
                let count = raw.count / 2
                for index in 0..<count {
                    let value = Int(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)))
                    currentPeak = max(currentPeak, value < 0 ? -value : value)
                    inBlock += 1
                    if inBlock == Self.blockSamples {
                        blockPeaks.append(currentPeak)
                        currentPeak = 0
                        inBlock = 0
                    }
                }
                sampleCount += count
            }
        }

        func waveform(bars: Int) -> [UInt8] {
            var blocks = blockPeaks
            if inBlock > 0 { blocks.append(currentPeak) }
            guard !blocks.isEmpty, bars > 0 else { return [] }
            var peaks = [Int](repeating: 0, count: bars)
            for bar in 0..<bars {
                let start = bar * blocks.count / bars
                let end = max(start + 1, (bar + 1) * blocks.count / bars)
                peaks[bar] = blocks[min(start, blocks.count - 1)..<min(end, blocks.count)].max() ?? 0
            }
            let loudest = max(peaks.max() ?? 0, 1)
            return peaks.map { UInt8(min(255, $0 * 255 / loudest)) }
        }
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
