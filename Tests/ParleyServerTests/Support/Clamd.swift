import Foundation
import ParleyMedia

/// A real clamd for a test, started and stopped by `scripts/clamd.sh` with a test database that
/// knows EICAR. `pause()` stops the daemon and `resume()` brings it back on the same port.
final class Clamd: Sendable {
    let directory: URL
    let url: String
    let port: Int

    private init(directory: URL, url: String) {
        self.directory = directory
        self.url = url
        self.port = Int(url.split(separator: ":").last ?? "0") ?? 0
    }

    static func start() throws -> Clamd {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-clamd-\(UUID().uuidString)")
        let url = try script(["start", directory.path])
        return Clamd(directory: directory, url: url)
    }

    func pause() throws { _ = try Self.script(["pause", directory.path]) }
    func resume() throws { _ = try Self.script(["start", directory.path, String(port)]) }
    func stop() { _ = try? Self.script(["stop", directory.path]) }
    /// Runs freshclam once against a mirror serving `databases` (custom databases' URLs); clamd is
    /// told to reload them (`scripts/clamd.sh update`).
    func update(_ databases: [String]) throws { _ = try Self.script(["update", directory.path] + databases) }

    /// Runs the script and returns its last line of output.
    @discardableResult
    private static func script(_ arguments: [String]) throws -> String {
        // Output goes to a file, not a pipe: clamd, started in the background, would inherit the
        // pipe and keep it open, and reading to its end would never finish.
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("parley-clamd-out-\(UUID().uuidString)")
        let errorFile = outputFile.appendingPathExtension("err")
        defer {
            try? FileManager.default.removeItem(at: outputFile)
            try? FileManager.default.removeItem(at: errorFile)
        }
        let script = TestServer.repositoryRoot.appendingPathComponent("scripts/clamd.sh").path
        let outcome = try ProcessRunner(executable: "/bin/bash").runBlocking(
            ["-c", #"out="$1"; err="$2"; shift 2; exec /bin/bash "$@" >"$out" 2>"$err""#, "clamd", outputFile.path, errorFile.path, script]
                + arguments,
            timeout: .seconds(60))
        let output = String(decoding: (try? Data(contentsOf: outputFile)) ?? Data(), as: UTF8.self)
        guard outcome.status == 0 else {
            let errors = String(decoding: (try? Data(contentsOf: errorFile)) ?? Data(), as: UTF8.self)
            throw TestFailure("scripts/clamd.sh \(arguments.joined(separator: " ")) failed: \(errors.suffix(2000))")
        }
        return output.split(separator: "\n").last.map(String.init) ?? ""
    }}

enum Eicar {
    /// The EICAR anti-malware test file: harmless, recognised by every scanner.
    static let bytes = Data(#"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"#.utf8)

    /// A WAV whose data chunk carries EICAR: a "real" audio container with malware inside.
    static func insideWAV() -> Data {
        var samples = Data(count: 16_000)  // a second of silence at 8 kHz, 16 bit
        samples.replaceSubrange(4000..<(4000 + bytes.count), with: bytes)
        var wav = Data("RIFF".utf8)
        wav.append(contentsOf: withUnsafeBytes(of: UInt32(36 + samples.count).littleEndian, Array.init))
        wav.append(contentsOf: Data("WAVEfmt ".utf8))
        for value: UInt32 in [16] { wav.append(contentsOf: withUnsafeBytes(of: value.littleEndian, Array.init)) }
        for value: UInt16 in [1, 1] { wav.append(contentsOf: withUnsafeBytes(of: value.littleEndian, Array.init)) }
        for value: UInt32 in [8000, 16000] { wav.append(contentsOf: withUnsafeBytes(of: value.littleEndian, Array.init)) }
        for value: UInt16 in [2, 16] { wav.append(contentsOf: withUnsafeBytes(of: value.littleEndian, Array.init)) }
        wav.append(contentsOf: Data("data".utf8))
        wav.append(contentsOf: withUnsafeBytes(of: UInt32(samples.count).littleEndian, Array.init))
        wav.append(samples)
        return wav
    }
}
