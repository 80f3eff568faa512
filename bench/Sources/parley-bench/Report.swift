import Foundation

/// Everything one run measured, and its Markdown form (bench/RESULTS.md).
struct Report {
    var scale: Scale
    var command: String
    var binary: URL
    var fileLimit: Int
    var text: TextBench.Report?
    var cluster: ClusterBench.Report?
    var connections: [ConnectionsBench.Row]?
    var connectionBaseline: ConnectionsBench.Row?
    var connectionFloor: ConnectionsBench.Row?
    var voice: VoiceBench.Report?
    var playback: VoiceBench.Playback?
    var wire: [WireBench.Row]?
    var attack: AttackBench.Report?
    var transcribing: TranscribingBench.Report?

    static func f(_ value: Double, _ digits: Int = 1) -> String {
        value.isNaN ? "n/a" : String(format: "%.\(digits)f", value)
    }

    static func kb(_ bytes: Int) -> String { String(format: "%.1f KB", Double(bytes) / 1024) }

    static func git(_ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-git-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: file) }
        guard let handle = try? FileHandle(forWritingTo: file) else { return "" }
        process.standardOutput = handle
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "" }
        process.waitUntilExit()
        try? handle.close()
        return ((try? String(contentsOf: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func markdown() -> String {
        var lines: [String] = []
        let commit = Self.git(["rev-parse", "--short", "HEAD"])
        let dirty = Self.git(["status", "--porcelain", "--untracked-files=no"]).isEmpty ? "" : " (with uncommitted changes)"
        let build = binary.path.contains("/release/") ? "release" : (binary.path.contains("/debug/") ? "debug" : "unknown")
        let date = ISO8601DateFormatter().string(from: Date())
        lines += [
            "# Parley benchmarks", "",
            "| | |", "|---|---|",
            "| Date | \(date) |",
            "| Commit | \(commit.isEmpty ? "unknown" : commit)\(dirty) |",
            "| Machine | \(Machine.cores) cores (\(Machine.cpuModel)), \(Self.f(Machine.memoryGiB)) GiB memory, Linux \(Machine.kernel) |",
            "| Build | \(build) (`\(binary.path)`) |",
            "| Command | \(ProcessInfo.processInfo.environment["BENCH_INVOCATION"].map { "`\($0)`, which ran " } ?? "")`\(command)` |",
            "| Scale | \(scale.rawValue)\(scale == .tiny ? " (a check that each benchmark runs; the numbers mean nothing)" : "") |",
            "",
            "Server and load generator share this machine's cores; every server is a fresh `parley serve` on SQLite and local disk",
            "(the embedded defaults), rate limits, the per-address connection cap and the per-connection frame budget off (the load comes from one address; the attack section keeps the frame budget), no malware scanner, log level `warning`.",
            "",
        ]
        lines += targets()
        if let text { lines += textSection(text) }
        if let connections { lines += connectionSection(connections) }
        if let voice { lines += voiceSection(voice) }
        if let wire { lines += wireSection(wire) }
        if let playback { lines += playbackSection(playback) }
        if let attack { lines += attackSection(attack) }
        if let cluster { lines += clusterSection(cluster) }
        if let transcribing { lines += transcribingSection(transcribing) }
        return lines.joined(separator: "\n") + "\n"
    }

    private func targets() -> [String] {
        var rows: [(String, String, Bool)] = []
        if let text {
            rows.append(("Text: ≥ 10,000 messages/s acknowledged after commit", "\(Self.f(text.saturation.messagesPerSecond, 0)) /s", text.saturation.messagesPerSecond >= 10_000))
            rows.append(("Text: p99 delivery < 5 ms at 1,000 messages/s", "\(Self.f(text.fixed.deliveryLatency.p99, 2)) ms", text.fixed.deliveryLatency.p99 < 5))
            let p99Ratio = text.fixed.deliveryLatency.p99 / text.echo.deliveryLatency.p99
            rows.append(("Text: delivery p99 at 1,000 messages/s ≤ 3× the echo's, same run", "\(Self.f(p99Ratio, 1))×", p99Ratio <= 3))
            let cpuRatio = text.fixed.cpuMicrosPerMessage / text.echo.cpuMicrosPerMessage
            rows.append((
                "Text: server CPU per message delivered to one agent ≤ 2× the echo's, same run",
                "\(Self.f(cpuRatio, 1))× (\(Self.f(text.fixed.cpuMicrosPerMessage, 0)) µs)"
                    + (text.floor == nil ? "" : "; the durable floor (section 1) is \(Self.f(text.floorVsEcho, 1))× the echo's, Parley \(Self.f(text.parleyVsFloor, 1))× the floor's"),
                cpuRatio <= 2
            ))
        }
        if let largest = connections?.filter({ !$0.compression }).max(by: { $0.connections < $1.connections }) {
            rows.append(("\(largest.connections) idle connections at ≤ 10 KB each", "\(Self.f(largest.bytesPerConnection / 1024, 1)) KB", largest.bytesPerConnection <= 10 * 1024 && largest.open == largest.connections))
        }
        if let voice {
            rows.append(("Voice: duration and waveform published ≤ 0.5 s after upload", "\(Self.f(voice.publishedMs / 1000, 2)) s", voice.publishedMs <= 500))
            rows.append(("Voice: all renditions ≤ 1.2× bare ffmpeg", "\(Self.f(voice.overhead, 2))×", voice.overhead <= 1.2))
            let opus = voice.renditionBytes["opus"] ?? 0
            rows.append(("Voice: Opus rendition ≤ 400 KB", Self.kb(opus), opus <= 400 * 1024))
        }
        if let kit = wire?.first(where: { $0.client == "ParleyKit" }) {
            rows.append(("12-message chat from ParleyKit ≤ 8 KB down", Self.kb(kit.down), kit.down <= 8 * 1024))
            rows.append(("12-message chat from ParleyKit ≤ 3 KB up", Self.kb(kit.up), kit.up <= 3 * 1024))
        }
        if let compressed = wire?.first(where: { $0.compression }) {
            // Browsers always offer permessage-deflate and Parley accepts it: that is what a consumer pays.
            rows.append(("12-message chat ≤ 8 KB down (WebSocket compressed, as browsers connect)", Self.kb(compressed.down), compressed.down <= 8 * 1024))
            rows.append(("12-message chat ≤ 3 KB up (WebSocket compressed, as browsers connect)", Self.kb(compressed.up), compressed.up <= 3 * 1024))
        }
        if let attack {
            let ratio = attack.attacked.p99 / attack.quiet.p99
            rows.append(("Under attack (silent sockets, typing flood): /health p99 within 2× of quiet", "\(Self.f(ratio, 2))×", ratio <= 2))
            rows.append(("Under a typing flood: another consumer's send p99 < 50 ms", "\(Self.f(attack.sendAttacked.p99, 2)) ms", attack.sendAttacked.p99 < 50))
            if let bomb = attack.bomb {
                let growth = bomb.peakRSS - bomb.idleRSS
                rows.append(("10 decoder bombs at once: RSS within 64 MB of idle", "+\(Self.f(Double(growth) / 1_048_576, 1)) MB", growth <= 64 << 20))
            }
        }
        if let cluster {
            let ratio = cluster.crossNode.deliveryLatency.p99 / cluster.sameNode.deliveryLatency.p99
            rows.append(("Across nodes: delivery p99 ≤ 2× same-node", "\(Self.f(ratio, 2))×", ratio <= 2))
            rows.append(("Across nodes: delivery p99 < 10 ms", "\(Self.f(cluster.crossNode.deliveryLatency.p99, 2)) ms", cluster.crossNode.deliveryLatency.p99 < 10))
        }
        if let transcribing, let quiet = transcribing.rows.first(where: { $0.niceness == nil }),
            let defaults = transcribing.rows.first(where: { $0.niceness == 10 && $0.workers == 1 })
        {
            let ratio = defaults.phase.deliveryLatency.p99 / quiet.phase.deliveryLatency.p99
            rows.append(("While voice notes are transcribed (the defaults): delivery p99 at \(transcribing.rate)/s within 2× of quiet", "\(Self.f(ratio, 2))×", ratio <= 2))
        }
        guard !rows.isEmpty else { return [] }
        var lines = ["## Targets", "", "| Target | Measured | Met |", "|---|---:|:---:|"]
        for (target, measured, met) in rows { lines.append("| \(target) | \(measured) | \(met ? "yes" : "**no**") |") }
        return lines + [""]
    }

    private func transcribingSection(_ report: TranscribingBench.Report) -> [String] {
        guard let quiet = report.rows.first(where: { $0.niceness == nil }) else { return [] }
        var lines = [
            "## Messages while voice notes are transcribed", "",
            "The text section's fixed rate (\(report.consumers) consumers, \(report.rate) messages/s for \(Self.f(report.seconds, 0)) s, one agent) on a server whose brand",
            "transcribes, first quiet, then while the embedded engine (PocketSphinx, `PARLEY_TRANSCRIBER=embedded`) transcribes \(report.noteSeconds)-second",
            "notes of real read speech (the tests' LibriVox recordings, looped) queued before the phases, their renditions already made. One",
            "fresh server per setting (`PARLEY_TRANSCRIBER_WORKERS`, `PARLEY_TRANSCRIBER_NICE`); each row is the median of \(report.repeats) runs by delivery",
            "p99. *Transcriber CPU* is the server's helper processes' over the phases, as a share of one core; *busy* says whether",
            "transcripts were still pending when every phase ended.", "",
            "| Setting | Delivery p50 / p99 (ms) | p99 over the runs (ms) | p99 against quiet | Server CPU per message (µs) | Transcriber CPU | Busy throughout |",
            "|---|---:|---:|---:|---:|---:|:---:|",
        ]
        for row in report.rows {
            let d = row.phase.deliveryLatency
            let share = row.niceness == nil ? "" : "\(Self.f(row.transcriberCPUSeconds / row.phaseSeconds * 100, 0))%"
            lines.append(
                "| \(row.label) | \(Self.f(d.p50, 2)) / \(Self.f(d.p99, 2)) | \(Self.f(row.p99Range.0, 2))–\(Self.f(row.p99Range.1, 2)) | "
                    + "\(Self.f(d.p99 / quiet.phase.deliveryLatency.p99, 2))× | \(Self.f(row.phase.cpuMicrosPerMessage, 0)) | \(share) | "
                    + "\(row.niceness == nil ? "" : (row.busyThroughout ? "yes" : "**no**")) |")
        }
        return lines + [""]
    }

    private func clusterSection(_ cluster: ClusterBench.Report) -> [String] {
        func row(_ phase: TextBench.Phase, _ range: (Double, Double)) -> String {
            "| \(phase.name) | \(phase.delivered) | \(Self.f(phase.deliveryLatency.p50, 2)) / \(Self.f(phase.deliveryLatency.p99, 2)) / "
                + "\(Self.f(phase.deliveryLatency.max, 2)) | \(Self.f(range.0, 2))–\(Self.f(range.1, 2)) | \(Self.f(phase.cpuMicrosPerMessage, 1)) | "
                + "\(Self.f(phase.databaseMicrosPerMessage, 1)) | \(Self.f(phase.statementsPerMessage, 2)) |"
        }
        return [
            "## Across nodes", "",
            "Two `parley serve --cluster` nodes on one PostgreSQL (scripts/postgres.sh --durable: fsync on, as in production) and one SeaweedFS bucket; the consumers are",
            "connected to node A and send at \(cluster.rate) messages/s for \(Self.f(cluster.seconds, 0)) s; the agent is connected to node A",
            "(*same node*) or node B (*across nodes*: every frame goes through PostgreSQL LISTEN/NOTIFY). The runs interleave; each",
            "row is the median of \(cluster.repeats) by delivery p99. CPU is both nodes' per message delivered; PostgreSQL's is its",
            "processes' (the postmaster and its backends), and its statements are counted by pg_stat_statements (BEGIN and",
            "COMMIT included) per message acknowledged.", "",
            "| Agent on | Delivered | Delivery p50 / p99 / max (ms) | p99 over the runs (ms) | Server CPU per message (µs) | PostgreSQL CPU per message (µs) | PostgreSQL statements per message |",
            "|---|---:|---:|---:|---:|---:|---:|",
            row(cluster.sameNode, cluster.sameRange),
            row(cluster.crossNode, cluster.crossRange),
            "",
        ] + clusterThroughput(cluster) + clusterVoice(cluster)
    }

    private func clusterThroughput(_ cluster: ClusterBench.Report) -> [String] {
        func row(_ phase: TextBench.Phase, _ range: (Double, Double)) -> String {
            "| \(phase.name) | \(phase.acked) | \(Self.f(phase.messagesPerSecond, 0)) | \(Self.f(range.0, 0))–\(Self.f(range.1, 0)) | "
                + "\(Self.f(phase.ackLatency.p50, 2)) / \(Self.f(phase.ackLatency.p99, 2)) | \(Self.f(phase.cpuMicrosPerMessage, 1)) | "
                + "\(Self.f(phase.databaseMicrosPerMessage, 1)) | \(Self.f(phase.statementsPerMessage, 2)) | "
                + "\(Self.f(phase.generatorCPUSeconds / phase.seconds * 100, 0))% |"
        }
        let ratio = cluster.twoNodes.messagesPerSecond / cluster.oneNode.messagesPerSecond
        return [
            "Throughput on the same PostgreSQL: each consumer keeps \(cluster.window) messages in flight; *one node* has every consumer on",
            "node A (B runs beside it, idle but hearing every event), *two nodes* half on each; the agent is on A. Median of",
            "\(cluster.repeats) by messages/s; CPU is both nodes' per message delivered. Two nodes over one node: \(Self.f(ratio, 2))×.",
            "",
            "| Consumers on | Acknowledged | Messages/s | Messages/s over the runs | Ack p50 / p99 (ms) | Server CPU per message (µs) | PostgreSQL CPU per message (µs) | PostgreSQL statements per message | Generator CPU |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            row(cluster.oneNode, cluster.oneRange),
            row(cluster.twoNodes, cluster.twoRange),
            "",
        ] + clusterStatements(cluster.oneNode)
    }

    /// The statements behind a phase's count, per message acknowledged.
    private func clusterStatements(_ phase: TextBench.Phase) -> [String] {
        guard let database = phase.database, !database.top.isEmpty else { return [] }
        let messages = Double(max(phase.acked, 1))
        return [
            "What PostgreSQL ran in the *\(phase.name)* row above, most frequent first (pg_stat_statements' normalised text):", "",
            "| Statement | Per message |", "|---|---:|",
        ] + database.top.filter { Double($0.calls) / messages >= 0.005 }.map { "| `\($0.query.replacingOccurrences(of: "|", with: "\\|"))` | \(Self.f(Double($0.calls) / messages, 2)) |" } + [""]
    }

    private func clusterVoice(_ cluster: ClusterBench.Report) -> [String] {
        guard let s3 = cluster.voiceS3, let local = cluster.voiceLocal else { return [] }
        func row(_ label: String, _ voice: VoiceBench.Report) -> String {
            "| \(label) | \(Self.f(voice.uploadAnsweredMs, 0)) | \(Self.f(voice.publishedMs, 0)) | \(Self.f(voice.renditionsReadyMs, 0)) |"
        }
        return [
            "A \(s3.noteSeconds)-second voice note (\(s3.noteBytes / 1024) KB, WebM/Opus), uploaded \(s3.runs) times to a cluster node with media in",
            "SeaweedFS and to a one-node server with media on local disk, in the same run (medians, ms from the upload's first byte):",
            "",
            "| Media in | Upload answered | Published (duration, waveform) | Renditions ready |",
            "|---|---:|---:|---:|",
            row("S3 (SeaweedFS), PostgreSQL, two nodes", s3),
            row("local disk, SQLite, one node", local),
            "",
        ]
    }

    private func textSection(_ text: TextBench.Report) -> [String] {
        func row(_ label: String, _ phase: TextBench.Phase) -> String {
            "| \(label) | \(phase.acked) | \(Self.f(phase.messagesPerSecond, 0)) | "
                + "\(Self.f(phase.ackLatency.p50, 2)) / \(Self.f(phase.ackLatency.p99, 2)) / \(Self.f(phase.ackLatency.max, 2)) | "
                + "\(Self.f(phase.deliveryLatency.p50, 2)) / \(Self.f(phase.deliveryLatency.p99, 2)) / \(Self.f(phase.deliveryLatency.max, 2)) | "
                + "\(Self.f(phase.cpuMicrosPerMessage, 1)) | \(Self.f(phase.generatorCPUSeconds / phase.seconds * 100, 0))% | "
                + (phase.stolenShare.isNaN ? "n/a |" : "\(Self.f(phase.stolenShare * 100, 0))% |")
        }
        let rate = Int((Double(text.fixed.sent) / text.fixed.seconds).rounded())
        return [
            "## 1. Text messaging", "",
            "\(text.consumers) consumers, each on its own WebSocket with its own open conversation, send `send` frames; one agent",
            "is connected. *Ack* is send to the consumer's `ack` (sent after the commit); *delivery* is send to the agent receiving the",
            "`message` frame. CPU is the server process's user+system time (`/proc/<pid>/stat`) over the run, divided by messages",
            "delivered. *Stolen* is the share of the machine's CPU time in the run that the hypervisor gave to other machines",
            "(`/proc/stat`'s steal): on a shared host, the runs of a busy minute are slower for every server, the echo's too.", "",
            "| Run | Messages | Per second | Ack p50 / p99 / max (ms) | Delivery p50 / p99 / max (ms) | Server CPU per message (µs) | Load generator CPU (of one core) | Stolen |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            row("Fixed rate, \(rate)/s for \(Self.f(text.fixed.seconds, 0)) s", text.fixed),
            row("Saturation, \(text.window) in flight per consumer, \(Self.f(text.saturation.seconds, 0)) s", text.saturation),
            row("Baseline: plain WebSocket echo, \(rate)/s (echo = ack = delivery)", text.echo),
        ] + (text.quiet.map { [row("Quiet, \(TextBench.quietRate)/s for \(Self.f($0.seconds, 0)) s", $0)] } ?? [])
            + (text.quietEcho.map { [row("Baseline: the echo, \(TextBench.quietRate)/s", $0)] } ?? [])
            + (text.floor.map { [row("Floor: a durable relay (SwiftNIO, SQLite as Parley opens it, ack after commit), \(rate)/s", $0)] } ?? []) + [
            "",
            "Each row is the median of \(text.repeats) runs (fixed rate, echo and quiet by delivery p99, saturation by throughput), interleaved on one server. "
                + "Ranges over the runs: fixed-rate delivery p99 \(Self.f(text.fixedP99Range.0, 2))–\(Self.f(text.fixedP99Range.1, 2)) ms, "
                + "echo p99 \(Self.f(text.echoP99Range.0, 2))–\(Self.f(text.echoP99Range.1, 2)) ms, "
                + "saturation \(Self.f(text.throughputRange.0, 0))–\(Self.f(text.throughputRange.1, 0)) messages/s, "
                + "server CPU per message at the fixed rate \(Self.f(text.fixedCPURange.0, 0))–\(Self.f(text.fixedCPURange.1, 0)) µs (median \(Self.f(text.fixedCPUMedian, 0)))"
                + (text.quiet == nil ? "." : ", quiet delivery p99 \(Self.f(text.quietP99Range.0, 2))–\(Self.f(text.quietP99Range.1, 2)) ms."),
            "",
            "Delivery p99 at the fixed rate is \(Self.f(text.fixed.deliveryLatency.p99 / text.echo.deliveryLatency.p99, 1))× the echo's p99; "
                + "p50 is \(Self.f(text.fixed.deliveryLatency.p50 / text.echo.deliveryLatency.p50, 1))×. "
                + "Server CPU per message is \(Self.f(text.fixed.cpuMicrosPerMessage / max(text.echo.cpuMicrosPerMessage, 0.001), 1))× the echo server's.",
            "",
        ] + (text.floor.map { floor in
            [
                "*Floor* is `parley-bench relay-floor-server`: SwiftNIO's WebSocket handlers and one SQLite connection opened as Parley opens its "
                    + "own (WAL, `synchronous=NORMAL`, foreign keys, the WAL write gathering) with Parley's `conversations` and `messages` tables and "
                    + "all their indexes; per `send`, on the socket's event loop, one transaction (the conversation's next sequence number, checked "
                    + "against the sender, and the message row), then the ack and the agent's copy in Parley's frame shapes. No sessions, limits, "
                    + "hub or anything else: the least a server can do and still ack after commit. Medians of the CPU per message over the runs: "
                    + "Parley \(Self.f(text.fixedCPUMedian, 0)) µs, the floor \(Self.f(text.floorCPUMedian, 0)) µs "
                    + "(\(Self.f(text.floorCPURange.0, 0))–\(Self.f(text.floorCPURange.1, 0))), the echo \(Self.f(text.echoCPUMedian, 0)) µs: "
                    + "the floor is \(Self.f(text.floorVsEcho, 1))× the echo, Parley \(Self.f(text.parleyVsFloor, 1))× the floor. "
                    + "It is a floor for CPU, not for latency (its delivery p99, \(Self.f(floor.deliveryLatency.p99, 2)) ms, is in the table): "
                    + "its WAL checkpoints run where SQLite runs them by default, in the commit that crosses 1,000 pages, on the event loop, "
                    + "so the messages behind a checkpoint wait for its copying and syncs; Parley checkpoints on a thread of its own.",
                "",
            ]
        } ?? [])
    }

    private func connectionSection(_ rows: [ConnectionsBench.Row]) -> [String] {
        var lines = [
            "## 2. Idle connections", "",
            "Each connection is a different anonymous consumer with its own session token, connected to `/v1/realtime` and idle after",
            "`hello`. Memory is the server's resident set (`VmRSS`) after the sessions exist and before connecting, and 3 s after the",
            "last connection opened; each count runs on a fresh server. *Open* is the server's own `parley_realtime_connections`.",
            "All connections come from 127.0.0.1 (10,000 fit in the ephemeral port range \(portRange())); open files limit \(fileLimit).", "",
            "| Connections | Open | RSS before | RSS after | Per connection | Time to open all | Server CPU to open (s) |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        func line(_ label: String, _ row: ConnectionsBench.Row) -> String {
            "| \(label) | \(row.open) | \(Self.f(Double(row.rssBefore) / 1_048_576)) MB | \(Self.f(Double(row.rssAfter) / 1_048_576)) MB | "
                + "\(Self.f(row.bytesPerConnection / 1024, 1)) KB | \(Self.f(row.openSeconds, 2)) s | \(Self.f(row.serverCPUSeconds, 2)) |"
        }
        for row in rows { lines.append(line("\(row.connections)\(row.compression ? " with permessage-deflate" : "")", row)) }
        if let baseline = connectionBaseline {
            lines.append(line("Baseline: \(baseline.connections) to a plain Hummingbird WebSocket server", baseline))
        }
        if let floor = connectionFloor {
            lines.append(line("Floor: \(floor.connections) to SwiftNIO's own WebSocket handlers (no task per connection)", floor))
        }
        if let largest = rows.filter({ !$0.compression }).max(by: { $0.connections < $1.connections }) {
            var sentences: [String] = []
            if let baseline = connectionBaseline {
                sentences.append("Parley's \(largest.connections) connections cost \(Self.f(largest.bytesPerConnection / max(baseline.bytesPerConnection, 1), 1))× the plain Hummingbird server's memory per connection")
            }
            if let floor = connectionFloor {
                sentences.append("\(Self.f(largest.bytesPerConnection / max(floor.bytesPerConnection, 1), 1))× SwiftNIO's own handlers'")
                if let baseline = connectionBaseline {
                    sentences.append("Hummingbird's WebSocket layer costs \(Self.f((baseline.bytesPerConnection - floor.bytesPerConnection) / 1024, 1)) KB per connection over that floor")
                }
            }
            if !sentences.isEmpty { lines += ["", sentences.joined(separator: "; ") + "."] }
        }
        return lines + [""]
    }

    private func portRange() -> String {
        ((try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? "?")
            .split(whereSeparator: { $0 == "\t" || $0 == " " || $0 == "\n" }).joined(separator: "-")
    }

    private func voiceSection(_ voice: VoiceBench.Report) -> [String] {
        var lines = [
            "## 3. Voice pipeline", "",
            "A \(voice.noteSeconds / 60 > 0 ? "\(voice.noteSeconds / 60)-minute" : "\(voice.noteSeconds)-second") browser-style note (WebM/Opus 64 kb/s mono written as a live stream, no duration in the header,",
            "\(Self.kb(voice.noteBytes))) uploaded by a consumer; medians of \(voice.runs) runs, one note at a time. Times start when the last byte of the",
            "upload is handed to the kernel. The baseline runs the server's own ffmpeg command lines (`AudioAnalyzer.arguments`,",
            "`VoiceTranscoder.arguments`) bare, in the same run.", "",
            "| Step | Parley | Bare ffmpeg | Ratio |", "|---|---:|---:|---:|",
            "| Upload answered (201, with duration and waveform) | \(Self.f(voice.uploadAnsweredMs)) ms | | |",
            "| Duration and waveform published (agent's `message` frame) | \(Self.f(voice.publishedMs)) ms | \(Self.f(voice.bareAnalysisMs)) ms (decode) | \(Self.f(voice.publishedMs / voice.bareAnalysisMs, 2))× |",
            "| All renditions ready (agent's `voice_processed` event) | \(Self.f(voice.renditionsReadyMs)) ms | \(Self.f(voice.bareTotalMs)) ms (decode + transcode) | \(Self.f(voice.overhead, 2))× |",
            "",
            "Measured duration \(voice.durationMs) ms, \(voice.waveformBars) waveform bars.", "",
            "| Rendition | Bytes |", "|---|---:|",
        ]
        for (format, bytes) in voice.renditionBytes.sorted(by: { $0.key < $1.key }) { lines.append("| \(format) | \(Self.kb(bytes)) (\(bytes)) |") }
        return lines + [""]
    }

    private func wireSection(_ rows: [WireBench.Row]) -> [String] {
        var lines = [
            "## 4. Bytes on the wire: a 12-message chat", "",
            "The consumer's side of a first visit, counted by a TCP proxy between client and server (HTTP and WebSocket framing",
            "included): a session and the brand's settings over HTTP with a mobile Chromium's headers (a new visitor has no history to fetch),",
            "then the socket: 6 lines sent as `send` frames, 6 answers received, a read receipt for each answer, and the agent's read",
            "receipts received. Page assets are not counted (cached after the first visit).", "",
            "| Client | WebSocket compression | HTTP up | HTTP down | Socket up | Socket down | Total up | Total down |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows where row.client == "widget" {
            lines.append(
                "| widget | \(row.compression ? "permessage-deflate" : "off") | \(row.httpUp) B | \(row.httpDown) B | \(row.socketUp) B | \(row.socketDown) B | "
                    + "\(Self.kb(row.up)) | \(Self.kb(row.down)) |")
        }
        for row in rows where row.client == "ParleyKit" {
            lines.append("| ParleyKit (Linux: URLSession over libcurl, NIO's WebSocket) | permessage-deflate | | | | | \(Self.kb(row.up)) | \(Self.kb(row.down)) |")
        }
        if rows.contains(where: { $0.client == "ParleyKit" }) {
            lines += [
                "", "ParleyKit's row is the same chat from an app: the session over HTTP, then the socket (the customer's lines leave the",
                "sealed outbox as `send` frames while connected), each answer acknowledged as delivered on arrival, then read. Its",
                "client compresses frames of 24 bytes and more; HTTP and socket bytes share the proxy, so only totals are shown.",
            ]
        }
        return lines + [""]
    }

    private func attackSection(_ attack: AttackBench.Report) -> [String] {
        func row(_ label: String, _ d: Distribution) -> String {
            "| \(label) | \(d.count) | \(Self.f(d.p50, 2)) ms | \(Self.f(d.p99, 2)) ms | \(Self.f(d.max, 2)) ms |"
        }
        return [
            "", "## Under attack: `/health` while silent sockets and a typing flood are held", "",
            "Each request is a new connection (`GET /health`, `Connection: close`), one at a time, timed from connect to the last byte.",
            "The attacked row holds \(attack.silentSockets) connected sockets that never send a byte, and one consumer sending typing",
            "frames as fast as it can: \(attack.floodFrames) frames over \(attack.floodConnections) connections (the server closes each with 4008",
            "once it has refused a burst's worth; the flooder reconnects at once, 50 ms after a refusal, and \(attack.floodRefused) reconnects",
            "were refused with 429 during the session's flood cool-down).", "",
            "| /health | requests | p50 | p99 | max |", "|---|---:|---:|---:|---:|",
            row("quiet", attack.quiet),
            row("attacked", attack.attacked),
            "",
            "Ratio attacked / quiet: p50 \(Self.f(attack.attacked.p50 / attack.quiet.p50, 2))x, p99 \(Self.f(attack.attacked.p99 / attack.quiet.p99, 2))x (target: within 2x).",
            "",
            "Another consumer meanwhile sends `send` frames on its own socket, ten a second, and times each `ack` (after the commit):", "",
            "| send → ack | sends | p50 | p99 | max |", "|---|---:|---:|---:|---:|",
            row("quiet", attack.sendQuiet),
            row("during the flood", attack.sendAttacked),
        ] + (attack.bomb.map { bomb in [
            "",
            "Decoder bombs: a ten-hour silent Opus file (13 MB) uploaded alone took \(Self.f(bomb.oneMs, 0)) ms to be refused; then \(bomb.files) at once,",
            "from \(bomb.files) consumers: server RSS \(Self.kb(bomb.idleRSS)) before, \(Self.kb(bomb.peakRSS)) at most (+\(Self.f(Double(bomb.peakRSS - bomb.idleRSS) / 1_048_576, 1)) MB; target ≤ 64 MB).",
            "Answers: \(Dictionary(grouping: bomb.codes, by: { $0 }).map { "\($0.key) × \($0.value.count)" }.sorted().joined(separator: ", ")).",
        ] } ?? [])
    }

    private func playbackSection(_ playback: VoiceBench.Playback) -> [String] {
        [
            "## 5. Playback", "",
            "\(playback.listeners) listeners at once, each fetching the stored note's Opus rendition (\(Self.kb(playback.bytes))) with `Range: bytes=0-`",
            "on a new connection, \(playback.requests / max(playback.listeners, 1)) times each. Times include connecting.", "",
            "| Requests | Errors | First byte p50 / p99 / max (ms) | Full response p50 / p99 / max (ms) |", "|---:|---:|---:|---:|",
            "| \(playback.requests) | \(playback.errors) | \(Self.f(playback.firstByte.p50, 2)) / \(Self.f(playback.firstByte.p99, 2)) / \(Self.f(playback.firstByte.max, 2)) | "
                + "\(Self.f(playback.full.p50, 2)) / \(Self.f(playback.full.p99, 2)) / \(Self.f(playback.full.max, 2)) |",
            "",
        ]
    }
}
