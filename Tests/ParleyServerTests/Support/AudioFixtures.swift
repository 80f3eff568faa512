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

    /// The length of the spoken phrase, measured independently with sox.
    static func speechMilliseconds() throws -> Int {
        let outcome = try ProcessRunner(executable: ProcessRunner.locate("soxi") ?? "/usr/bin/soxi")
            .runBlocking(["-D", try files().url("speech.wav").path], timeout: .seconds(60))
        let output = String(decoding: outcome.stdout, as: UTF8.self)
        guard let seconds = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw TestFailure("soxi said \(output)") }
        return Int(seconds * 1000)
    }
}
