import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Instructions per message, counted by valgrind's callgrind (`bench/instructions.sh`, bench/README.md
/// "Instructions per message"). This machine is a virtual one on a shared host: a timed run's CPU per
/// message moves by ±40 µs with the host's load (the text section's *Stolen* column), far more than
/// most changes to the message path, and the machine has no hardware counters. Callgrind counts the
/// instructions a process executes in user space whatever else the host does, so a change of a few
/// per cent shows in one run. It does not count the kernel's side (system calls, wake-ups): that is
/// the text section's and the profile's.
///
/// Each server runs under callgrind: Parley (`parley serve`, the bench's consumers and agent), the
/// durable-message floor and the WebSocket echo (both this binary's). After a warm-up the counters
/// are zeroed (`callgrind_control -z`), `messages` are sent at `rate` and all acked and delivered,
/// and the counters dumped (`-d`); then the same span idle, with the same connections open, is
/// counted the same way and taken off: what is left is what the messages cost.
struct Instructions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "User-space instructions per message under callgrind: Parley, the durable floor and the echo (bench/instructions.sh).")

    @Option(help: "The parley binary, without debug information (valgrind 3.19 cannot read the toolchain's DWARF).") var parley: String
    @Option(name: .customLong("servers-binary"), help: "This benchmark binary without debug information: it runs the echo and the floor.")
    var serversBinary: String
    @Option(help: "A library for LD_PRELOAD in the counted processes (bench/valgrind/sigsuspend.c, built by bench/instructions.sh).")
    var preload: String
    @Option(help: "valgrind, by name or path.") var valgrind = "valgrind"
    @Option(name: .customLong("public-dir"), help: "The web pages directory.") var publicDir = "Public"
    @Option(help: "Messages counted per server.") var messages = 500
    @Option(help: "Messages a second (callgrind runs a process some 50 times slower than it runs).") var rate = 25
    @Option(help: "Consumers, each with its conversation (the agent receives them all).") var consumers = 10
    @Option(help: "Only these, comma-separated: parley, floor, echo.") var only = "parley,floor,echo"
    @Option(help: "Keep callgrind's dumps here (for callgrind_annotate).") var keep: String?

    func run() async throws {
        _ = ProcStats.raiseFileLimit()
        let which = Set(only.split(separator: ","))
        let counter = Counter(valgrind: valgrind, preload: preload, keep: keep.map { URL(fileURLWithPath: $0) })
        var rows: [(String, Count)] = []
        func log(_ line: String) { FileHandle.standardError.write(Data("parley-bench: \(line)\n".utf8)) }
        if which.contains("parley") {
            log("instructions: parley serve")
            rows.append(("Parley", try await counter.parley(binary: parley, publicDir: publicDir, messages: messages, rate: rate, consumers: consumers)))
        }
        if which.contains("floor") {
            log("instructions: the durable floor")
            rows.append(("Floor", try await counter.floor(binary: serversBinary, messages: messages, rate: rate, consumers: consumers)))
        }
        if which.contains("echo") {
            log("instructions: the echo")
            rows.append(("Echo", try await counter.echo(binary: serversBinary, messages: messages, rate: rate)))
        }
        print(Self.table(rows, messages: messages, rate: rate, consumers: consumers))
    }

    static func table(_ rows: [(String, Count)], messages: Int, rate: Int, consumers: Int) -> String {
        var lines = [
            "| Server | Instructions per message | Counted with the messages | Counted idle (same span) | Span (s) |",
            "|---|---:|---:|---:|---:|",
        ]
        for (name, count) in rows {
            lines.append(
                "| \(name) | \(Report.f(count.perMessage, 0)) | \(count.busy) | \(count.idle) | \(Report.f(count.seconds, 1)) |")
        }
        let by = Dictionary(rows, uniquingKeysWith: { first, _ in first })
        var ratios: [String] = []
        if let parley = by["Parley"], let echo = by["Echo"] { ratios.append("Parley \(Report.f(parley.perMessage / echo.perMessage, 2))× the echo") }
        if let floor = by["Floor"], let echo = by["Echo"] { ratios.append("the floor \(Report.f(floor.perMessage / echo.perMessage, 2))× the echo") }
        if let parley = by["Parley"], let floor = by["Floor"] { ratios.append("Parley \(Report.f(parley.perMessage / floor.perMessage, 2))× the floor") }
        lines += [
            "",
            "\(messages) messages a server at \(rate)/s (\(consumers) consumers to one agent; the echo from one socket), user space only, "
                + "the idle span's count taken off. " + ratios.joined(separator: "; ") + ".",
        ]
        return lines.joined(separator: "\n")
    }

    struct Count {
        var busy: Int
        var idle: Int
        var messages: Int
        var seconds: Double
        var perMessage: Double { Double(busy - idle) / Double(messages) }
    }

    struct Counter {
        var valgrind: String
        var preload: String
        var keep: URL?

        /// valgrind (found on the PATH by env, which becomes it: the process id is the counted
        /// process's), then its options, before the counted program and its arguments.
        func launcher(dumps: URL) -> [String] {
            [
                "/usr/bin/env", valgrind, "--tool=callgrind", "--callgrind-out-file=\(dumps.path)/callgrind.out.%p",
                // Counted from the start, zeroed before the measured span: what ran before is not in the dump.
                "--dump-instr=no", "--collect-jumps=no",
            ]
        }

        /// The environment of a counted process. valgrind 3.19's rt_sigsuspend wrapper takes its own
        /// signal out of the caller's mask in place (syswrap-linux.c, PRE(sys_rt_sigsuspend)), and
        /// libdispatch's main thread passes a `static const` mask (`_dispatch_sigsuspend`, where an
        /// async main parks): valgrind faults writing to read-only memory. The preloaded
        /// `sigsuspend` passes a copy.
        var environment: [String: String] { ["LD_PRELOAD": preload] }

        func dumpDirectory() throws -> URL {
            let directory = keep ?? FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-callgrind-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return directory
        }

        func parley(binary: String, publicDir: String, messages: Int, rate: Int, consumers: Int) async throws -> Count {
            let dumps = try dumpDirectory()
            let server = try await ParleyServer(
                binary: URL(fileURLWithPath: binary), publicDir: URL(fileURLWithPath: publicDir).standardizedFileURL,
                extraEnvironment: environment, launcher: launcher(dumps: dumps), readyWithin: .seconds(300))
            return try await server.use { server in
                let agentToken = try await server.api.login(email: server.adminEmail, password: server.adminPassword)
                let sessions = try await TextBench.openConversations(server, consumers: consumers)
                return try await relay(
                    agent: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(agentToken)",
                    consumers: sessions.map { ("ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\($0.0)", $0.1) },
                    pid: server.pid, dumps: dumps, messages: messages, rate: rate, run: "count000")
            }
        }

        func floor(binary: String, messages: Int, rate: Int, consumers: Int) async throws -> Count {
            try await underCallgrind([binary, "relay-floor-server", "--database", "floor.sqlite"], readyMarker: "relay floor on port ") {
                pid, port, dumps in
                let conversations = (0..<consumers).map { "cnv_floor\(String(format: "%015d", $0))" }
                return try await relay(
                    agent: "ws://127.0.0.1:\(port)/relay?agent", consumers: conversations.map { ("ws://127.0.0.1:\(port)/relay?conversation=\($0)", $0) },
                    pid: pid, dumps: dumps, messages: messages, rate: rate, run: "floor000")
            }
        }

        func echo(binary: String, messages: Int, rate: Int) async throws -> Count {
            try await underCallgrind([binary, "echo-server"], readyMarker: "echo server on port ") { pid, port, dumps in
                let timeline = Timeline(capacity: 2 * messages + 16)
                let socket = try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/echo") { text in
                    if let index = TextBench.ackIndex(text) {
                        timeline.markAcked(index)
                        timeline.markDelivered(index)
                    }
                }
                let count = try await measure(pid: pid, dumps: dumps, messages: messages, rate: rate, timeline: timeline) { index in
                    socket.send(TextBench.echoFrame(index: index))
                }
                await socket.close()
                return count
            }
        }

        /// Starts `command` (one of this binary's servers) under callgrind, reads the port its output
        /// gives after `readyMarker`, runs `body` with its process id, port and dump directory, and
        /// stops it, whether `body` throws or not.
        func underCallgrind(
            _ command: [String], readyMarker: String, _ body: (_ pid: Int32, _ port: Int, _ dumps: URL) async throws -> Count
        ) async throws -> Count {
            let dumps = try dumpDirectory()
            let launcher = launcher(dumps: dumps)
            let child = try await ChildProcess(
                executable: URL(fileURLWithPath: launcher[0]), arguments: launcher.dropFirst() + command, environment: environment,
                readyMarker: readyMarker, readyWithin: .seconds(300))
            do {
                guard let port = child.word(after: readyMarker).flatMap({ Int($0) }) else { throw BenchError("no port after \"\(readyMarker)\"") }
                let count = try await body(child.pid, port, dumps)
                await child.stop()
                return count
            } catch {
                await child.stop()
                throw error
            }
        }

        /// One agent socket and one per consumer (its URL and conversation), the consumers' sends counted
        /// (`measure`): Parley's and the floor's shape.
        func relay(
            agent agentURL: String, consumers: [(url: String, conversation: String)], pid: Int32, dumps: URL, messages: Int, rate: Int, run: String
        ) async throws -> Count {
            let timeline = Timeline(capacity: 2 * messages + 16)
            let agent = try await BenchSocket.open(url: agentURL) { text in
                if let index = TextBench.deliveredIndex(text) { timeline.markDelivered(index) }
            }
            var sockets: [BenchSocket] = []
            for consumer in consumers {
                sockets.append(
                    try await BenchSocket.open(url: consumer.url) { text in
                        if let index = TextBench.ackIndex(text) { timeline.markAcked(index) }
                    })
            }
            let count = try await measure(pid: pid, dumps: dumps, messages: messages, rate: rate, timeline: timeline) { index in
                let position = index % sockets.count
                sockets[position].send(TextBench.sendFrame(conversationId: consumers[position].conversation, index: index, run: run))
            }
            for socket in sockets { await socket.close() }
            await agent.close()
            return count
        }

        /// A warm-up of a tenth of `messages` (at least 20), then the counted messages, then the same
        /// span idle. Every message must be acked and delivered, or the count would be of less work.
        func measure(pid: Int32, dumps: URL, messages: Int, rate: Int, timeline: Timeline, send: (Int) -> Void) async throws -> Count {
            let warmUp = max(20, messages / 10)
            func sendAll(_ count: Int) async throws {
                let already = timeline.sentCount.load(ordering: .relaxed)
                let started = monotonicNanos()
                // Due times run from 0 to (count - 1) / rate; the end is half an interval after the last.
                let end = started + UInt64((Double(count) - 0.5) / Double(rate) * 1e9)
                let sent = try await TextBench.paced(rate: rate, from: started, until: end, timeline: timeline, send: send)
                try await timeline.settle(already + sent, within: .seconds(120))
                let (acked, delivered) = (timeline.ackCount.load(ordering: .relaxed), timeline.deliveredCount.load(ordering: .relaxed))
                guard sent == count, acked == already + sent, delivered == already + sent else {
                    throw BenchError("sent \(sent) of \(count); \(acked) acked and \(delivered) delivered of \(already + sent)")
                }
            }
            try await sendAll(warmUp)
            try await control("-z", pid: pid)
            let started = ContinuousClock.now
            try await sendAll(messages)
            let span = ContinuousClock.now - started
            let busy = try await dump(pid: pid, dumps: dumps)
            try await control("-z", pid: pid)
            try await Task.sleep(for: span)
            let idle = try await dump(pid: pid, dumps: dumps)
            guard busy > idle else { throw BenchError("the messages' span counted \(busy) instructions, the idle one \(idle): nothing was counted") }
            return Count(busy: busy, idle: idle, messages: messages, seconds: Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18)
        }

        /// `callgrind_control OPTION pid`; it returns once the process has done it.
        func control(_ option: String, pid: Int32) async throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["callgrind_control", option, String(pid)]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            guard process.terminationStatus == 0 else { throw BenchError("callgrind_control \(option) \(pid) failed (\(process.terminationStatus))") }
        }

        /// Dumps the counters and returns the dump's instructions (its `summary:` line: every
        /// instruction since the last zeroing, in every thread).
        func dump(pid: Int32, dumps: URL) async throws -> Int {
            let before = Set(try FileManager.default.contentsOfDirectory(atPath: dumps.path))
            try await control("-d", pid: pid)
            let added = try FileManager.default.contentsOfDirectory(atPath: dumps.path).filter { !before.contains($0) && $0.hasPrefix("callgrind.out.\(pid).") }
            var total = 0
            for name in added {
                let text = try String(contentsOf: dumps.appendingPathComponent(name), encoding: .utf8)
                guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("summary:") }),
                    let value = Int(line.dropFirst("summary:".count).trimmingCharacters(in: .whitespaces))
                else { throw BenchError("no summary line in callgrind's \(name)") }
                total += value
            }
            guard !added.isEmpty else { throw BenchError("callgrind wrote no dump for \(pid) in \(dumps.path)") }
            return total
        }
    }
}
