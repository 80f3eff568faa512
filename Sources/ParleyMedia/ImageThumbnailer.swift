import Foundation
import ParleyAPI
import ParleyDomain

/// Measures an image and makes its thumbnail: a JPEG at most `AttachmentRules.thumbnailWidth` wide.
///
/// The size comes from the header, so that an image claiming more than
/// `AttachmentRules.maxImagePixels` is refused before anything decodes it: ffprobe's for every
/// format ffmpeg reads, the `ispe` properties (`HEIFSize`) for HEIC, which Debian's ffmpeg cannot
/// read and libheif's `heif-convert` decodes. Every decoder runs under a memory limit
/// (`ProcessRunner.memoryLimit`), so that an image that lies in a way no header shows still cannot
/// take the machine's memory.
public struct ImageThumbnailer: Sendable {
    public enum Failure: Error, Equatable {
        /// More pixels than allowed: refused, never decoded.
        case tooManyPixels(width: Int, height: Int)
        /// The bytes could not be decoded as the image they claim to be.
        case undecodable(String)
    }

    public struct Result: Sendable {
        public var width: Int
        public var height: Int
        /// The thumbnail, or nil where the image decodes but cannot be scaled (an animated WebP in
        /// ffmpeg 5): the original is shown instead.
        public var thumbnail: URL?
    }

    let ffmpeg: ProcessRunner
    let ffprobe: ProcessRunner
    let heifConvert: ProcessRunner?
    let timeout: Duration

    public init(ffmpeg: ProcessRunner, ffprobe: ProcessRunner, heifConvert: ProcessRunner?, timeout: Duration) {
        self.ffmpeg = ffmpeg
        self.ffprobe = ffprobe
        self.heifConvert = heifConvert
        self.timeout = timeout
    }

    /// A brand's logo as a PNG at most 256 px wide (transparency kept), from any accepted image;
    /// measured first, like a thumbnail, so that a bomb is refused undecoded.
    public func logo(of file: URL, type: AttachmentType, into output: URL) async throws {
        _ = try await measure(file)
        let scaled = try await ffmpeg.run(
            ["-nostdin", "-v", "error", "-y", "-i", file.path, "-frames:v", "1", "-vf", "scale='min(256,iw)':-2:flags=lanczos",
             "-f", "image2", "-c:v", "png", output.path],
            timeout: timeout)
        guard scaled.succeeded else { throw Failure.undecodable(scaled.stderrTail) }
    }

    /// A HEIC's size from its `ispe` properties, refused over the pixel limit before heif-convert runs.
    private func measureHEIF(_ file: URL) throws -> (width: Int, height: Int) {
        guard let data = try? Data(contentsOf: file, options: .alwaysMapped), let largest = HEIFSize.largestImage(in: data),
            largest.width > 0, largest.height > 0
        else { throw Failure.undecodable("no image size in the HEIF file") }
        if largest.width * largest.height > AttachmentRules.maxImagePixels {
            throw Failure.tooManyPixels(width: largest.width, height: largest.height)
        }
        return largest
    }

    /// The image's size from its header (ffprobe decodes nothing), refused over the pixel limit.
    private func measure(_ file: URL) async throws -> (width: Int, height: Int) {
        let probe = try await ffprobe.run(
            ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0:s=x", file.path],
            timeout: timeout)
        let size = String(decoding: probe.stdout, as: UTF8.self).split(whereSeparator: \.isNewline).first ?? ""
        let parts = size.split(separator: "x").compactMap { Int($0) }
        guard probe.succeeded, parts.count == 2, parts[0] > 0, parts[1] > 0 else {
            throw Failure.undecodable(probe.timedOut ? "ffprobe timed out" : "no image size: \(probe.stderrTail)")
        }
        if parts[0] * parts[1] > AttachmentRules.maxImagePixels { throw Failure.tooManyPixels(width: parts[0], height: parts[1]) }
        return (parts[0], parts[1])
    }

    /// Measures `file` (an image of `type`) and writes its thumbnail next to `output`.
    public func thumbnail(of file: URL, type: AttachmentType, into output: URL) async throws -> Result {
        var source = file
        var intermediate: URL?
        defer { if let intermediate { try? FileManager.default.removeItem(at: intermediate) } }
        if type == .heic {
            _ = try measureHEIF(file)
            guard let heifConvert else { throw Failure.undecodable("HEIC needs heif-convert (libheif-examples)") }
            let converted = output.deletingLastPathComponent().appendingPathComponent("\(UUID().uuidString).heic.jpg")
            intermediate = converted
            let outcome = try await heifConvert.run(["-q", "90", file.path, converted.path], timeout: timeout)
            guard outcome.succeeded, FileManager.default.fileExists(atPath: converted.path) else {
                throw Failure.undecodable(outcome.timedOut ? "heif-convert timed out" : outcome.stderrTail)
            }
            source = converted
        }
        let (width, height) = try await measure(source)
        let scaled = try await ffmpeg.run(
            ["-nostdin", "-v", "error", "-y", "-i", source.path, "-frames:v", "1",
             "-vf", "scale='min(\(AttachmentRules.thumbnailWidth),iw)':-2:flags=lanczos", "-q:v", "4", "-f", "image2", "-c:v", "mjpeg",
             output.path],
            timeout: timeout)
        let made = scaled.succeeded && ((try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0) > 0
        return Result(width: width, height: height, thumbnail: made ? output : nil)
    }
}
