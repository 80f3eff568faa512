import Foundation

/// AMR inside MP4 or 3GP, copied out to a raw `.amr` stream before anything decodes it.
///
/// Debian's ffmpeg 5.1 decodes only the first AMR frame of each MP4 sample. Apple Core Media writes
/// five frames per sample (and an H.263 video track), so such a 9.7 s note measured 1.9 s and its
/// renditions held about 2 s of audio full of gaps. Upstream ffmpeg fixed the decoder in 2023; until
/// every distribution has it, copying the frames out (`-c:a copy -f amr`, no decoding) lets the AMR
/// demuxer hand them over one at a time, and the length, the waveform and every rendition are made
/// from that. Nothing here is hand-written parsing: ffmpeg's own AMR muxer refuses any other codec,
/// which is how non-AMR MP4 files (an iPhone's AAC) are told apart.
public enum AMRUnpacking {
    /// The ffmpeg arguments that copy the first audio stream, without video, into raw AMR.
    public static func arguments(input: URL, output: URL) -> [String] {
        ["-nostdin", "-v", "error", "-y", "-i", input.path, "-map", "0:a:0", "-vn", "-c:a", "copy", "-f", "amr", output.path]
    }

    /// Whether the file is ISO BMFF (MP4, M4A, 3GP): `ftyp` at byte 4.
    static func isMP4(_ file: URL) -> Bool {
        guard let handle = try? FileHandle(forReadingFrom: file) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 8)) ?? Data()
        return header.count == 8 && header[header.startIndex + 4..<header.startIndex + 8] == Data("ftyp".utf8)
    }

    /// A raw AMR copy of an MP4/3GP file's AMR audio, in the temporary directory (the caller removes
    /// it), or nil when the file is not MP4 or its audio is not AMR.
    public static func unpack(_ file: URL, ffmpeg: ProcessRunner, timeout: Duration) async throws -> URL? {
        guard isMP4(file) else { return nil }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("parley-amr-\(UUID().uuidString).amr")
        let outcome = try await ffmpeg.run(arguments(input: file, output: output), timeout: timeout)
        let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
        guard outcome.succeeded, size > 6 else {
            try? FileManager.default.removeItem(at: output)
            return nil
        }
        return output
    }
}
