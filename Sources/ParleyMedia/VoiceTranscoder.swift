import Foundation
import ParleyDomain

/// Makes every rendition of a voice note with one ffmpeg run (one decode, two encodes).
public struct VoiceTranscoder: Sendable {
    let ffmpeg: ProcessRunner
    let timeout: Duration

    public init(ffmpeg: ProcessRunner, timeout: Duration = .seconds(120)) {
        self.ffmpeg = ffmpeg
        self.timeout = timeout
    }

    /// The ffmpeg arguments for `input` -> `outputs`. Every path is one the server generated.
    public static func arguments(input: URL, outputs: [VoiceRendition: URL]) -> [String] {
        var arguments = ["-nostdin", "-v", "error", "-y", "-i", input.path]
        if let opus = outputs[.opus] {
            // compression_level 5 halves the CPU time of the default 10 for the same size on speech.
            arguments += ["-map", "0:a:0", "-vn", "-ac", "1", "-ar", "48000", "-c:a", "libopus", "-b:a", "24k",
                          "-application", "voip", "-compression_level", "5", "-f", "ogg", opus.path]
        }
        if let aac = outputs[.aac] {
            arguments += ["-map", "0:a:0", "-vn", "-ac", "1", "-c:a", "aac", "-b:a", "48k", "-movflags", "+faststart", "-f", "mp4", aac.path]
        }
        return arguments
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// AMR in MP4/3GP is transcoded from a raw copy of its frames, as it was measured (AMRUnpacking).
    public func transcode(_ input: URL, into outputs: [VoiceRendition: URL]) async throws {
        let unpacked = try await AMRUnpacking.unpack(input, ffmpeg: ffmpeg, timeout: timeout)
        defer { if let unpacked { try? FileManager.default.removeItem(at: unpacked) } }
        let outcome = try await ffmpeg.run(Self.arguments(input: unpacked ?? input, outputs: outputs), timeout: timeout)
        if outcome.timedOut { throw Failure(description: "transcoding took longer than the limit") }
        if outcome.crashed { throw Failure(description: "the transcoder crashed") }
        guard outcome.status == 0 else { throw Failure(description: "the transcoder failed: \(outcome.stderrTail)") }
    }
}
