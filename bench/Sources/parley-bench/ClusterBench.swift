import Foundation

/// Section 6: two nodes on one PostgreSQL (and one SeaweedFS bucket) with the event bus between them:
/// delivery to an agent connected to the other node against the same node; throughput with one node
/// taking all the consumers against both; a voice note stored in the bucket against one on local
/// disk (a one-node SQLite server started in the same run). All in the same run.
enum ClusterBench {
    struct Report: Sendable {
        var rate: Int
        var seconds: Double
        var repeats: Int
        var sameNode: TextBench.Phase
        var crossNode: TextBench.Phase
        var sameRange: (Double, Double)
        var crossRange: (Double, Double)
        var window: Int
        var oneNode: TextBench.Phase
        var twoNodes: TextBench.Phase
        var oneRange: (Double, Double)
        var twoRange: (Double, Double)
        /// The same note through a cluster node (media in S3) and through a one-node server on local disk.
        var voiceS3: VoiceBench.Report?
        var voiceLocal: VoiceBench.Report?
    }

    struct Options: Sendable {
        var consumers: Int
        var rate: Int
        var seconds: Double
        var saturationSeconds: Double
        var window: Int
        var repeats: Int
        /// 0: no voice comparison.
        var noteSeconds: Int
        var voiceRuns: Int
        var ffmpeg: String
    }

    /// Runs a repository script (postgres.sh, seaweedfs.sh) and returns its first line of output.
    static func script(_ root: URL, _ arguments: [String]) async throws -> String {
        let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let text = try await shell("cd '\(root.path)' && scripts/\(quoted.joined(separator: " "))")
        return text.split(separator: "\n").first.map(String.init) ?? ""
    }

    /// Runs a bash command and returns its output. The output goes through a file, not a pipe (a
    /// daemon the command starts may inherit a pipe and keep it open), and the end is seen by the
    /// exit status the shell writes to a second file: this process's executor never blocks a thread
    /// on waiting.
    static func shell(_ command: String) async throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-script-\(UUID().uuidString)")
        let (outputFile, statusFile) = (base.appendingPathExtension("out"), base.appendingPathExtension("status"))
        defer { for file in [outputFile, statusFile] { try? FileManager.default.removeItem(at: file) } }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "\(command) >'\(outputFile.path)' 2>&1 </dev/null; echo $? >'\(statusFile.path)'"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(120)
        var status: String?
        while status == nil {
            status = (try? String(contentsOf: statusFile, encoding: .utf8)).flatMap { $0.hasSuffix("\n") ? $0.trimmingCharacters(in: .whitespacesAndNewlines) : nil }
            if status != nil { break }
            guard ContinuousClock.now < deadline else { throw BenchError("\(command.prefix(200)) did not finish") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        guard status == "0" else { throw BenchError("\(command.prefix(200)) failed: \(text.suffix(500))") }
        return text
    }

    static func run(binary: URL, publicDir: URL, root: URL, options: Options) async throws -> Report {
        let work = URL(fileURLWithPath: "/tmp/parley-bench-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: work.path)
        let pg = work.appendingPathComponent("pg").path, s3 = work.appendingPathComponent("s3").path
        let admin: String, endpoint: String
        do {
            admin = try await script(root, ["postgres.sh", "start", pg, "--durable"])
            endpoint = try await script(root, ["seaweedfs.sh", "start", s3])
        } catch {
            await stopStores()
            throw error
        }
        func stopStores() async {
            _ = try? await script(root, ["postgres.sh", "stop", pg])
            _ = try? await script(root, ["seaweedfs.sh", "stop", s3])
            try? FileManager.default.removeItem(at: work)
        }
        let environment = [
            "PARLEY_CLUSTER": "true", "PARLEY_DATABASE_URL": admin, "PARLEY_S3_ENDPOINT": endpoint, "PARLEY_S3_ACCESS_KEY": "bench",
            "PARLEY_S3_SECRET_KEY": "bench-secret",
        ]
        do {
            let probe = try await PostgresProbe.open(url: admin, dataDirectory: pg + "/data")
            var report = try await measure(binary: binary, publicDir: publicDir, environment: environment, options: options, probe: probe)
            if options.noteSeconds > 0 {
                // The same note on a one-node server with its media on local disk (SQLite), same run.
                let local = try await ParleyServer(binary: binary, publicDir: publicDir)
                report.voiceLocal = try await local.use { local in
                    try await VoiceBench.run(
                        server: local, noteSeconds: options.noteSeconds, runs: options.voiceRuns, ffmpeg: options.ffmpeg, listeners: 1,
                        requestsPerListener: 1
                    ).0
                }
            }
            await stopStores()
            return report
        } catch {
            await stopStores()
            throw error
        }
    }

    private static func measure(
        binary: URL, publicDir: URL, environment: [String: String], options: Options, probe: PostgresProbe
    ) async throws -> Report {
        let (rate, seconds, repeats) = (options.rate, options.seconds, options.repeats)
        let a = try await ParleyServer(binary: binary, publicDir: publicDir, extraEnvironment: environment)
        return try await a.use { a in
            let b = try await ParleyServer(
                binary: binary, publicDir: publicDir, extraEnvironment: environment.merging(["PARLEY_SEED_DEMO": "false"]) { $1 },
                demo: (a.appId, a.adminEmail, a.adminPassword))
            return try await b.use { b in
                let agentToken = try await a.api.login(email: a.adminEmail, password: a.adminPassword)
                let sessions = try await TextBench.openConversations(a, consumers: options.consumers)
                var same: [TextBench.Phase] = []
                var cross: [TextBench.Phase] = []
                var one: [TextBench.Phase] = []
                var two: [TextBench.Phase] = []
                let capacity = rate * Int(seconds.rounded(.up)) + 16
                let saturationCapacity = 60_000 * Int(options.saturationSeconds.rounded(.up)) + 16
                for _ in 0..<repeats {
                    same.append(
                        try await TextBench.phase(
                            "same node", server: a, agentToken: agentToken, sessions: sessions, seconds: seconds, capacity: capacity,
                            mode: .fixedRate(rate), otherNodes: [b.child], database: probe))
                    cross.append(
                        try await TextBench.phase(
                            "across nodes", server: a, agentToken: agentToken, sessions: sessions, seconds: seconds, capacity: capacity,
                            mode: .fixedRate(rate), agentPort: b.port, otherNodes: [b.child], database: probe))
                    // Throughput: every consumer on node A (B idle beside it), then half on each.
                    one.append(
                        try await TextBench.phase(
                            "one node", server: a, agentToken: agentToken, sessions: sessions, seconds: options.saturationSeconds,
                            capacity: saturationCapacity, mode: .window(options.window), otherNodes: [b.child], database: probe))
                    two.append(
                        try await TextBench.phase(
                            "two nodes", server: a, agentToken: agentToken, sessions: sessions, seconds: options.saturationSeconds,
                            capacity: saturationCapacity, mode: .window(options.window), otherNodes: [b.child], consumerPorts: [a.port, b.port], database: probe))
                }
                func median(_ runs: [TextBench.Phase]) -> TextBench.Phase { TextBench.median(runs, by: \.deliveryLatency.p99) }
                func busiest(_ runs: [TextBench.Phase]) -> TextBench.Phase { TextBench.median(runs, by: \.messagesPerSecond) }
                func range(_ runs: [TextBench.Phase]) -> (Double, Double) { TextBench.range(runs, \.deliveryLatency.p99) }
                func throughput(_ runs: [TextBench.Phase]) -> (Double, Double) { TextBench.range(runs, \.messagesPerSecond) }
                var voiceS3: VoiceBench.Report?
                if options.noteSeconds > 0 {
                    voiceS3 = try await VoiceBench.run(
                        server: a, noteSeconds: options.noteSeconds, runs: options.voiceRuns, ffmpeg: options.ffmpeg, listeners: 1,
                        requestsPerListener: 1
                    ).0
                }
                return Report(
                    rate: rate, seconds: seconds, repeats: repeats, sameNode: median(same), crossNode: median(cross), sameRange: range(same),
                    crossRange: range(cross), window: options.window, oneNode: busiest(one), twoNodes: busiest(two), oneRange: throughput(one),
                    twoRange: throughput(two), voiceS3: voiceS3)
            }
        }
    }
}
