import Foundation
import ParleyMedia
import Synchronization

/// Real audio made on this machine: speech from espeak-ng, converted by sox and ffmpeg into every
/// container Parley accepts, plus the broken and hostile files the refusals need. Made once per run.
enum AudioFixtures {
    static let phrase = "Hello, I am writing about my order. It has not arrived yet, and I would like to know where it is."

    struct Files: Sendable {
        let directory: URL
        func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
        func data(_ name: String) throws -> Data { try Data(contentsOf: url(name)) }
    }

    private static let made = Mutex<Files?>(nil)

    static func files() throws -> Files {
        try made.withLock { cached in
            if let cached { return cached }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-audio-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let files = Files(directory: directory)
            func run(_ tool: String, _ arguments: [String]) throws {
                let outcome = try ProcessRunner(executable: ProcessRunner.locate(tool) ?? "/usr/bin/\(tool)")
                    .runBlocking(arguments, timeout: .seconds(120))
                guard outcome.status == 0 else {
                    throw TestFailure("\(tool) \(arguments.joined(separator: " ")) failed: \(outcome.stderrTail)")
                }
            }
            let path = { (name: String) in files.url(name).path }
            try run("espeak-ng", ["-w", path("speech.wav"), phrase])
            try run("sox", [path("speech.wav"), "-r", "48000", "-c", "1", path("speech48k.wav")])
            let ffmpeg = { (arguments: [String]) in try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path("speech48k.wav")] + arguments) }
            // What Chrome's MediaRecorder makes: WebM/Opus with no duration in the header.
            try ffmpeg(["-c:a", "libopus", "-b:a", "32k", "-f", "webm", "-live", "1", path("note.webm")])
            try ffmpeg(["-c:a", "libopus", "-b:a", "24k", path("note.ogg")])
            try ffmpeg(["-c:a", "aac", "-b:a", "64k", path("note.m4a")])
            try ffmpeg(["-c:a", "libmp3lame", "-b:a", "64k", path("note.mp3")])
            try ffmpeg(["-c:a", "pcm_s16le", path("note.wav")])
            try ffmpeg(["-c:a", "pcm_s16le", "-f", "caf", path("note.caf")])
            try ffmpeg(["-c:a", "aac", "-b:a", "64k", "-f", "adts", path("note.aac")])
            try run("sox", [path("speech.wav"), "-r", "8000", "-c", "1", "-t", "amr-nb", "-C", "7", path("note.amr")])
            // What Apple's apps record as linear PCM: AIFF, and AIFF-C (little-endian "sowt") under a
            // .caf name, as Apple's AudioFile API saves it.
            try ffmpeg(["-c:a", "pcm_s16be", "-f", "aiff", path("note.aiff")])
            try ffmpeg(["-c:a", "pcm_s16le", "-f", "aiff", path("note-aifc.caf")])
            // FLAC from a stream: its STREAMINFO says 0 samples (the length is unknown until decoded).
            let flac = try ProcessRunner(executable: ProcessRunner.locate("ffmpeg") ?? "/usr/bin/ffmpeg")
                .runBlocking(["-nostdin", "-v", "error", "-i", path("speech48k.wav"), "-c:a", "flac", "-f", "flac", "pipe:1"], timeout: .seconds(120))
            try flac.stdout.write(to: files.url("note-streamed.flac"))
            // AMR-NB in 3GP as Apple Core Media writes it (five frames per MP4 sample), and AMR with an
            // H.263 video track (one frame per sample, as ffmpeg muxes it).
            try threeGP(amr: try files.data("note.amr"), framesPerSample: 5).write(to: files.url("note-amr5.3gp"))
            try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path("note.amr"), "-f", "lavfi", "-i", "testsrc=size=176x144:rate=15",
                               "-shortest", "-c:a", "copy", "-c:v", "h263", path("note-amr-video.3gp")])
            // Accidental taps: a 0.12 s GSM WAV, and a 0.18 s MP3.
            try run("sox", ["-n", "-r", "8000", "-c", "1", "-e", "gsm-full-rate", path("tap.wav"), "synth", "0.12", "sine", "440"])
            try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=0.18", "-c:a", "libmp3lame", path("tap.mp3")])
            // Tones of chosen lengths, for the length limit.
            try run("sox", ["-n", "-r", "48000", "-c", "1", path("tone20s.wav"), "synth", "20", "sine", "440"])
            try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path("tone20s.wav"), "-c:a", "libopus", "-b:a", "12k", "-f", "webm", "-live", "1", path("tone20s.webm")])
            // Hostile and broken files.
            let webm = try files.data("note.webm")
            try (webm.prefix(40) + Data(repeating: 0x5A, count: 4000)).write(to: files.url("corrupt.webm"))
            try Data("#!/bin/sh\nrm -rf /\n".utf8).write(to: files.url("script.mp3"))
            try Data([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 100)).write(to: files.url("program.ogg"))
            cached = files
            return files
        }
    }

    /// A 3GP file (ISO BMFF, `3gp4`) holding raw AMR-NB frames, `framesPerSample` to an MP4 sample,
    /// with a `samr` sample entry and its `damr` box, as 3GPP TS 26.244 describes them. Written by
    /// hand: no tool here muxes several AMR frames into one sample, which is what Apple's recorders do.
    static func threeGP(amr: Data, framesPerSample: Int) throws -> Data {
        let header = Data("#!AMR\n".utf8)
        guard amr.starts(with: header) else { throw TestFailure("not raw AMR-NB") }
        // Frame sizes by frame type (the TOC byte included): modes 4.75 to 12.2 kbit/s, SID, no data.
        let sizes = [13, 14, 16, 18, 20, 21, 27, 32, 6, 1, 1, 1, 1, 1, 1, 1]
        var frames: [Data] = []
        var index = amr.startIndex + header.count
        while index < amr.endIndex {
            let size = sizes[Int((amr[index] >> 3) & 0x0F)]
            guard index + size <= amr.endIndex else { break }
            frames.append(amr[index..<index + size])
            index += size
        }
        let samples = stride(from: 0, to: frames.count, by: framesPerSample).map { Array(frames[$0..<min($0 + framesPerSample, frames.count)]) }
        func u32(_ value: Int) -> Data { withUnsafeBytes(of: UInt32(value).bigEndian) { Data($0) } }
        func u16(_ value: Int) -> Data { withUnsafeBytes(of: UInt16(value).bigEndian) { Data($0) } }
        func box(_ type: String, _ parts: Data...) -> Data {
            let payload = parts.reduce(Data(), +)
            return u32(8 + payload.count) + Data(type.utf8) + payload
        }
        func full(_ type: String, flags: Int = 0, _ parts: Data...) -> Data { box(type, u32(flags), parts.reduce(Data(), +)) }
        let matrix = [0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000].map(u32).reduce(Data(), +)
        let units = frames.count * 160  // 8 kHz, 20 ms a frame
        let milliseconds = frames.count * 20
        let ftyp = box("ftyp", Data("3gp4".utf8), u32(0), Data("isom3gp4".utf8))
        let mdat = box("mdat", samples.map { $0.reduce(Data(), +) }.reduce(Data(), +))
        let damr = box("damr", Data("appl".utf8), Data([0]), u16(0x81FF), Data([0, UInt8(framesPerSample)]))
        let samr = box("samr", Data(count: 6), u16(1), Data(count: 8), u16(2), u16(16), u16(0), u16(0), u32(8000 << 16), damr)
        var stts = [(count: samples.count, delta: framesPerSample * 160)]
        if let last = samples.last, last.count < framesPerSample {
            stts = [(samples.count - 1, framesPerSample * 160), (1, last.count * 160)].filter { $0.0 > 0 }
        }
        let stbl = box(
            "stbl", full("stsd", u32(1), samr),
            full("stts", u32(stts.count), stts.map { u32($0.count) + u32($0.delta) }.reduce(Data(), +)),
            full("stsc", u32(1), u32(1), u32(samples.count), u32(1)),
            full("stsz", u32(0), u32(samples.count), samples.map { u32($0.reduce(0) { $0 + $1.count }) }.reduce(Data(), +)),
            full("stco", u32(1), u32(ftyp.count + 8)))
        let minf = box("minf", full("smhd", u16(0), u16(0)), box("dinf", full("dref", u32(1), full("url ", flags: 1))), stbl)
        let mdia = box(
            "mdia", full("mdhd", u32(0), u32(0), u32(8000), u32(units), u16(0x55C4), u16(0)),
            full("hdlr", u32(0), Data("soun".utf8), Data(count: 12), Data("SoundHandler\0".utf8)), minf)
        let tkhd = full("tkhd", flags: 7, u32(0), u32(0), u32(1), u32(0), u32(milliseconds), Data(count: 8), u16(0), u16(0), u16(0x0100), u16(0), matrix, u32(0), u32(0))
        let mvhd = full("mvhd", u32(0), u32(0), u32(1000), u32(milliseconds), u32(0x10000), u16(0x0100), Data(count: 10), matrix, Data(count: 24), u32(2))
        return ftyp + mdat + box("moov", mvhd, box("trak", tkhd, mdia))
    }

    /// The length of the spoken phrase, measured independently with sox.
    static func speechMilliseconds() throws -> Int {
        let outcome = try ProcessRunner(executable: ProcessRunner.locate("soxi") ?? "/usr/bin/soxi")
            .runBlocking(["-D", try files().url("speech.wav").path], timeout: .seconds(60))
        let output = String(decoding: outcome.stdout, as: UTF8.self)
        guard let seconds = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw TestFailure("soxi said \(output)") }
        return Int(seconds * 1000)
    }
}
