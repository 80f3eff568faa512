import ArgumentParser
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix

@main
enum ParleyBenchMain {
    static func main() async {
        // As in `parley serve`: tasks run on NIO's event loops, for the load generator and the echo
        // baseline alike, so that the baseline is built the way the server is.
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await ParleyBench.main()
    }
}

struct ParleyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-bench",
        abstract: "Parley's benchmarks: runs `parley serve` as a separate process, loads it, and reports numbers next to their baselines.",
        subcommands: [Run.self, Quick.self, Instructions.self, EchoServer.self, NIOEchoServer.self, RelayFloorServer.self],
        defaultSubcommand: Run.self)
}

extension AsyncParsableCommand {
    /// This benchmark binary (it also serves the echo baselines) and the `parley` to measure: `--parley`,
    /// else the one next to this binary, so that a release bench runs a release server.
    static func binaries(parley: String?) throws -> (own: URL, parley: URL) {
        let own = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let binary = parley.map { URL(fileURLWithPath: $0) } ?? own.deletingLastPathComponent().appendingPathComponent("parley")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw ValidationError("no parley binary at \(binary.path); build it first or pass --parley")
        }
        return (own, binary)
    }
}

/// How big each benchmark runs. `full` is what bench/RESULTS.md reports; `tiny` proves in the test
/// suite that every benchmark still works, in seconds, and its numbers mean nothing.
enum Scale: String, ExpressibleByArgument, CaseIterable {
    case full, tiny
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the benchmarks and print (and optionally write) the results table.")

    @Option(help: "full (the numbers to report) or tiny (a seconds-long check that each benchmark works).") var scale: Scale = .full
    @Option(help: "The parley binary (default: next to this one, so a release bench runs a release server).") var parley: String?
    @Option(name: .customLong("public-dir"), help: "The web pages directory.") var publicDir = "Public"
    @Option(help: "ffmpeg, by name or path.") var ffmpeg = "ffmpeg"
    @Option(help: "Write the Markdown report here (bench/RESULTS.md for the record).") var output: String?
    @Option(help: "Comma-separated sections: text, connections, voice, wire (playback runs with voice), attack, cluster (two nodes on PostgreSQL and SeaweedFS), transcribing (messages while voice notes are transcribed).")
    var only = "text,connections,voice,wire,attack,cluster,transcribing"
    @Option(name: .customLong("transcriber-python"), help: "The Python with pocketsphinx, for the transcribing section.") var transcriberPython = ".venv/bin/python"
    @Option(help: "Record the text phases' first runs with `perf record -g` into this directory (bench/profile.sh).") var profile: String?

    func run() async throws {
        let (ownPath, binary) = try Self.binaries(parley: parley)
        let publicDir = URL(fileURLWithPath: self.publicDir).standardizedFileURL
        let fileLimit = ProcStats.raiseFileLimit()
        let sections = Set(only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        let tiny = scale == .tiny
        if let profile {
            try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
            PerfRecorder.directory = URL(fileURLWithPath: profile)
        }
        var report = Report(scale: scale, command: CommandLine.arguments.joined(separator: " "), binary: binary, fileLimit: fileLimit)
        func server() async throws -> ParleyServer { try await ParleyServer(binary: binary, publicDir: publicDir) }
        func log(_ line: String) { FileHandle.standardError.write(Data("parley-bench: \(line)\n".utf8)) }

        if sections.contains("text") {
            log("text messaging")
            report.text = try await server().use { running in
                try await TextBench.run(
                    server: running, consumers: tiny ? 4 : 100, rate: tiny ? 50 : 1000, seconds: tiny ? 1 : 10,
                    saturationSeconds: tiny ? 1 : 10, window: tiny ? 2 : 8, repeats: tiny ? 1 : 3, echoBinary: ownPath,
                    quietSeconds: tiny ? 1 : 10)
            }
        }
        if sections.contains("connections") {
            log("idle connections")
            report.connections = try await ConnectionsBench.run(makeServer: server, counts: tiny ? [20] : [1000, 10_000], compressed: tiny ? 20 : 1000)
            report.connectionBaseline = try await ConnectionsBench.baseline(.hummingbird, echoBinary: ownPath, count: tiny ? 20 : 10_000)
            report.connectionFloor = try await ConnectionsBench.baseline(.nio, echoBinary: ownPath, count: tiny ? 20 : 10_000)
        }
        if sections.contains("voice") {
            log("voice pipeline and playback")
            (report.voice, report.playback) = try await server().use { running in
                try await VoiceBench.run(
                    server: running, noteSeconds: tiny ? 3 : 120, runs: tiny ? 1 : 3, ffmpeg: ffmpeg, listeners: tiny ? 4 : 50,
                    requestsPerListener: tiny ? 2 : 20)
            }
        }
        if sections.contains("wire") {
            log("bytes on the wire")
            report.wire = try await server().use { try await WireBench.run(server: $0) }
        }
        if sections.contains("attack") {
            log("under attack: silent sockets and a typing flood")
            // The silent sockets are held for the whole measurement (the header timeout would close
            // them after 10 s) and all come from this one address (the per-address cap would refuse them).
            let attacked = try await ParleyServer(
                binary: binary, publicDir: publicDir,
                extraEnvironment: ["PARLEY_HEADER_TIMEOUT": "120", "PARLEY_UPLOADS_PER_ADDRESS": "100", "PARLEY_REALTIME_FRAME_RATE": "20"])
            report.attack = try await attacked.use { running in
                try await AttackBench.run(
                    server: running, silentSockets: tiny ? 50 : 2000, requests: tiny ? 10 : 300, sends: tiny ? 5 : 60, bombs: tiny ? 0 : 10,
                    ffmpeg: ffmpeg)
            }
        }
        if sections.contains("cluster") {
            log("two nodes: delivery across them")
            let root = ownPath.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            report.cluster = try await ClusterBench.run(
                binary: binary, publicDir: publicDir, root: FileManager.default.fileExists(atPath: "scripts/postgres.sh") ? URL(fileURLWithPath: ".") : root,
                options: .init(
                    consumers: tiny ? 4 : 100, rate: tiny ? 50 : 1000, seconds: tiny ? 1 : 10, saturationSeconds: tiny ? 1 : 5,
                    window: tiny ? 2 : 8, repeats: tiny ? 1 : 3, noteSeconds: tiny ? 5 : 120, voiceRuns: tiny ? 1 : 3, ffmpeg: ffmpeg))
        }
        if sections.contains("transcribing") {
            log("messages while voice notes are transcribed")
            report.transcribing = try await TranscribingBench.run(
                binary: binary, publicDir: publicDir,
                options: .init(
                    consumers: tiny ? 4 : 100, rate: tiny ? 50 : 1000, seconds: tiny ? 1 : 10, repeats: tiny ? 1 : 3, noteSeconds: tiny ? 5 : 120,
                    python: URL(fileURLWithPath: transcriberPython).standardizedFileURL.path, ffmpeg: ffmpeg,
                    speech: URL(fileURLWithPath: "Tests/ParleyMediaTests/Fixtures/speech").standardizedFileURL))
        }
        var markdown = report.markdown()
        print(markdown)
        if let output {
            // The records section comes from bench/records.py, run on its own: it is kept as it was.
            if let previous = try? String(contentsOfFile: output, encoding: .utf8), let start = previous.range(of: "\n## Records at scale") {
                markdown += String(previous[start.lowerBound...])
            }
            try markdown.write(toFile: output, atomically: true, encoding: .utf8)
            log("wrote \(output)")
            // The hot-path figures for `bench/run.sh --quick`, beside the report, when it ran at full scale.
            if scale == .full {
                let values = Figures.values(text: report.text, connections: report.connections, baseline: report.connectionBaseline)
                let json = URL(fileURLWithPath: output).deletingLastPathComponent().appendingPathComponent("results.json")
                var figures = Figures.read(from: json) ?? Figures()
                figures.merge(values, commit: Report.git(["rev-parse", "--short", "HEAD"]), date: ISO8601DateFormatter().string(from: Date()))
                try figures.write(to: json)
                log("wrote \(json.path)")
            }
        }
    }
}

/// The regression guard (`bench/run.sh --quick`, under 3 minutes): the text section at 5 s a phase and
/// 1,000 idle connections beside plain Hummingbird's, printed against the figures committed in
/// bench/results.json. It writes nothing: the record is made by full runs.
struct Quick: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The hot-path figures in under 3 minutes, against the committed ones (bench/results.json).")

    @Option(help: "The parley binary (default: next to this one).") var parley: String?
    @Option(name: .customLong("public-dir"), help: "The web pages directory.") var publicDir = "Public"
    @Option(help: "The committed figures: read from git's HEAD, else from the file.") var committed = "bench/results.json"

    func run() async throws {
        let (ownPath, binary) = try Self.binaries(parley: parley)
        let publicDir = URL(fileURLWithPath: self.publicDir).standardizedFileURL
        _ = ProcStats.raiseFileLimit()
        func log(_ line: String) { FileHandle.standardError.write(Data("parley-bench: \(line)\n".utf8)) }
        let started = ContinuousClock.now
        log("quick: text messaging (3 interleaved runs of 5 s a phase, the quiet rate included)")
        let text = try await ParleyServer(binary: binary, publicDir: publicDir).use { running in
            try await TextBench.run(
                server: running, consumers: 100, rate: 1000, seconds: 5, saturationSeconds: 5, window: 8, repeats: 3, echoBinary: ownPath,
                quietSeconds: 5)
        }
        log("quick: 1,000 idle connections, and to plain Hummingbird")
        let connections = try await ParleyServer(binary: binary, publicDir: publicDir).use {
            try await ConnectionsBench.round(server: $0, count: 1000, compression: false)
        }
        let baseline = try await ConnectionsBench.baseline(.hummingbird, echoBinary: ownPath, count: 1000)
        let now = Figures.values(text: text, connections: [connections], baseline: baseline)
        let build = binary.path.contains("/release/") ? "release" : "not release: the figures compare only with a release build's"
        var lines = [
            "# Quick bench: the hot path against the committed figures", "",
            "Commit \(Report.git(["rev-parse", "--short", "HEAD"])), build \(build), \(Report.f(ContinuousClock.now.milliseconds(since: started) / 1000, 0)) s. "
                + "Saturation \(Report.f(text.throughputRange.0, 0))–\(Report.f(text.throughputRange.1, 0))/s over 3 runs; server CPU per message at 1,000/s \(Report.f(text.fixedCPURange.0, 0))–\(Report.f(text.fixedCPURange.1, 0)) µs; load generator \(Report.f(text.saturation.generatorCPUSeconds / text.saturation.seconds * 100, 0))% of one core at saturation; "
                + "the host took \(Report.f(text.fixed.stolenShare * 100, 0))% of this machine's CPU time during the 1,000/s run (steal: a busy host slows every figure, the echo's too).",
            "",
        ]
        lines += Figures.comparison(now: now, committed: Figures.committed(path: committed))
        print(lines.joined(separator: "\n"))
    }
}

/// The baseline for real-time latency: a plain Hummingbird WebSocket echo on loopback. It greets
/// each connection with one frame (so clients know it is ready), then sends every text frame back.
struct EchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "echo-server", abstract: "A plain WebSocket echo server (the latency baseline).")

    func run() async throws {
        var logger = Logger(label: "echo")
        logger.logLevel = .warning
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("/echo") { inbound, outbound, _ in
            try await outbound.write(.text(#"{"type":"ready"}"#))
            for try await message in inbound.messages(maxSize: 1 << 20) {
                if case .text(let text) = message { try await outbound.write(.text(text)) }
            }
        }
        let app = Application(
            router: Router(),
            server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                FileHandle.standardOutput.write(Data("echo server on port \(channel.localAddress?.port ?? 0)\n".utf8))
            },
            logger: logger)
        try await app.runService()
    }
}
