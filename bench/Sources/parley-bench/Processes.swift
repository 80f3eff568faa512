import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A server the benchmarks start as a separate process, with its output in a file (never a pipe: a
/// pipe nobody drains would stall it), and stop by process id.
final class ChildProcess {
    let process: Process
    let logFile: URL
    let directory: URL
    private(set) var output = ""

    var pid: Int32 { process.processIdentifier }
    var cpuSeconds: Double { ProcStats.cpuSeconds(pid: pid) }
    var rssBytes: Int { ProcStats.rssBytes(pid: pid) }

    /// Starts `executable` and waits (up to `readyWithin`) until its output contains `readyMarker`.
    init(
        executable: URL, arguments: [String], environment: [String: String] = [:], readyMarker: String, readyWithin: Duration = .seconds(60)
    ) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logFile = directory.appendingPathComponent("output.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let log = try FileHandle(forWritingTo: logFile)
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? log.close()
        let deadline = ContinuousClock.now + readyWithin
        do {
            while true {
                output = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                if output.contains(readyMarker) { break }
                if !process.isRunning { throw BenchError("\(executable.lastPathComponent) exited:\n\(output)") }
                if ContinuousClock.now > deadline { throw BenchError("\(executable.lastPathComponent) did not start:\n\(output)") }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            // A server that never became ready is stopped here: nobody else has its process id.
            await stop()
            throw error
        }
    }

    /// The first whitespace-separated word after `prefix` in the output.
    func word(after prefix: String) -> String? {
        guard let range = output.range(of: prefix) else { return nil }
        return output[range.upperBound...].split(whereSeparator: { $0 == " " || $0 == "\n" }).first.map(String.init)
    }

    /// SIGTERM, then SIGKILL after 15 s; removes the working directory.
    func stop() async {
        if process.isRunning {
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(15)
            while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
            if process.isRunning { kill(pid, SIGKILL) }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// `parley serve` on 127.0.0.1 with the embedded defaults (SQLite, local disk), a fresh data
/// directory and the demo brand; rate limits off (the load comes from one address) and, unless a
/// scanner is named, no malware scanning.
final class ParleyServer {
    let child: ChildProcess
    let port: Int
    let appId: String
    let adminEmail: String
    let adminPassword: String
    var api: API { API(port: port) }
    var pid: Int32 { child.pid }

    /// `demo`: the brand and admin this server's output names; another node of a cluster (which
    /// creates none) is given its first node's. `launcher`: a program that runs the server (its
    /// path and arguments before the server's, as valgrind for `parley-bench instructions`).
    init(
        binary: URL, publicDir: URL, extraEnvironment: [String: String] = [:], demo: (appId: String, email: String, password: String)? = nil,
        launcher: [String] = [], readyWithin: Duration = .seconds(60)
    ) async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-data-\(UUID().uuidString)")
        var environment = [
            "PARLEY_HOST": "127.0.0.1", "PARLEY_PORT": "0", "PARLEY_DATA_DIR": dataDir.path, "PARLEY_PUBLIC_DIR": publicDir.path,
            "PARLEY_LOG_LEVEL": "warning", "PARLEY_BCRYPT_COST": "4", "PARLEY_CLAMD": "off", "PARLEY_SEED_DEMO": "true",
            "PARLEY_RATE_CONSUMER_MESSAGES": "0", "PARLEY_RATE_IP_WRITES": "0", "PARLEY_RATE_CONSUMER_SESSIONS": "0",
            "PARLEY_RATE_LOGINS": "0",
            // All load comes from this one address: the per-address connection cap would refuse it.
            "PARLEY_MAX_CONNECTIONS_PER_ADDRESS": "0",
            // The text section's consumers send far faster than a person: the per-connection frame
            // budget (20 a second) is lifted like the rate limits. The attack section keeps it.
            "PARLEY_REALTIME_FRAME_RATE": "100000",
        ]
        environment.merge(extraEnvironment) { $1 }
        child = try await ChildProcess(
            executable: launcher.first.map { URL(fileURLWithPath: $0) } ?? binary,
            arguments: launcher.dropFirst() + (launcher.isEmpty ? [] : [binary.path]) + ["serve"], environment: environment,
            readyMarker: "Parley is listening", readyWithin: readyWithin)
        guard let url = child.word(after: "Parley is listening on "), let port = url.split(separator: ":").last.flatMap({ Int($0) }),
            let app = demo?.appId ?? Self.appId(in: child.output),
            let email = demo?.email ?? child.word(after: "\n  admin "), let password = demo?.password ?? child.word(after: "\n  password ")
        else { throw BenchError("unexpected `parley serve` output:\n\(child.output)") }
        self.port = port
        appId = app
        adminEmail = email
        adminPassword = password
        self.dataDir = dataDir
    }

    private let dataDir: URL

    private static func appId(in output: String) -> String? {
        guard let line = output.split(separator: "\n").first(where: { $0.contains("web app") }),
            let open = line.range(of: "(app_"), let close = line[open.lowerBound...].firstIndex(of: ")")
        else { return nil }
        return String(line[line.index(after: open.lowerBound)..<close])
    }

    /// Stops the server, then any helper it left running (a transcriber run outlives a server
    /// that is stopped, and would take the next measurement's CPU).
    func stop() async {
        let helpers = ProcStats.children(of: pid)
        await child.stop()
        for helper in helpers { kill(helper, SIGKILL) }
        try? FileManager.default.removeItem(at: dataDir)
    }

    /// Runs `body` against this server and stops the server afterwards, whether `body` throws or not.
    func use<T>(_ body: (ParleyServer) async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body(self)
        } catch {
            await stop()
            throw error
        }
        await stop()
        return result
    }
}

/// `perf` on the server's process while a phase runs (`--profile DIR`, from bench/profile.sh). The
/// first run of a phase is recorded with call graphs (`DIR/<phase>.perf.data`); the second is
/// counted with `perf stat` (`DIR/<phase>.stat`) for the events `BENCH_PERF_EVENTS` names (system
/// calls and the probes profile.sh places on malloc and on SQLite's statement reset), because those
/// probes slow the process and would bend the recorded profile. Each writes `<file>.messages`: the
/// messages delivered and the server's CPU seconds over the same span. Later runs are not touched,
/// so the medians' other runs carry no recorder.
enum PerfRecorder {
    private static let recording = Mutex<URL?>(nil)
    static var directory: URL? {
        get { recording.withLock { $0 } }
        set { recording.withLock { $0 = newValue } }
    }

    struct Recording {
        var process: Process
        var output: URL
    }

    /// Starts `perf` on `pids` for `seconds`, or returns nil (no `--profile`, or both runs of this phase are done).
    static func start(_ phase: String, pids: [Int32], seconds: Double) -> Recording? {
        guard let directory else { return nil }
        let pidList = pids.map(String.init).joined(separator: ",")
        let duration = ["--", "sleep", String(format: "%.1f", seconds)]
        let record = directory.appendingPathComponent("\(phase).perf.data")
        let stat = directory.appendingPathComponent("\(phase).stat")
        let output: URL
        let arguments: [String]
        if !FileManager.default.fileExists(atPath: record.path) {
            // 999 Hz, frame-pointer call graphs (Swift keeps frame pointers on Linux).
            output = record
            arguments = ["record", "-F", "999", "-g", "-o", record.path, "-p", pidList] + duration
        } else if !FileManager.default.fileExists(atPath: stat.path), let events = ProcessInfo.processInfo.environment["BENCH_PERF_EVENTS"] {
            output = stat
            arguments = ["stat", "-x", ",", "-e", events, "-o", stat.path, "-p", pidList] + duration
        } else {
            return nil
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/perf")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        return Recording(process: process, output: output)
    }

    static func finish(_ recording: Recording?, delivered: Int, serverCPUSeconds: Double) async {
        guard let recording else { return }
        while recording.process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        let sidecar = "messages=\(delivered)\nserver_cpu_seconds=\(serverCPUSeconds)\n"
        try? sidecar.write(to: URL(fileURLWithPath: recording.output.path + ".messages"), atomically: true, encoding: .utf8)
    }
}
