import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs a helper program (ffmpeg) as a child process with a time limit.
///
/// Arguments are passed as an array, never through a shell, and callers only ever pass paths the
/// server generated. A hang is killed at the deadline; a crash is reported, not propagated: either
/// fails the one job that ran it.
public struct ProcessRunner: Sendable {
    public struct Outcome: Sendable {
        public var status: Int32
        public var stdout: Data
        /// The end of what the program wrote to stderr, for logs and failure reasons.
        public var stderrTail: String
        public var timedOut: Bool
        public var crashed: Bool

        public var succeeded: Bool { status == 0 && !timedOut && !crashed }
    }

    public struct LaunchError: Error, CustomStringConvertible {
        public var description: String
    }

    public let executable: String

    public init(executable: String) {
        self.executable = executable
    }

    /// Finds `name` in PATH (or takes an absolute path as it is).
    public static func locate(_ name: String) -> String? {
        if name.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    private static let launches = Mutex(())

    /// Starts a process, one launch at a time in this process. Foundation's `Process.run()` on Linux
    /// crashed (a bad read in its launch code) when several ran at once, as concurrent voice uploads
    /// and renditions make them; the launch is short, the waiting is not serialized.
    public static func launch(_ process: Process) throws {
        try launches.withLock { _ in try process.run() }
    }

    /// The queue of the kill timers: a private serial queue, which gets a thread of its own even when
    /// every thread of the global pool is blocked reading a child's pipes (many ffmpegs at once), so a
    /// deadline is kept however busy the machine is.
    private static let killers = DispatchQueue(label: "parley.process-deadlines")

    public func run(_ arguments: [String], timeout: Duration) async throws -> Outcome {
        try await run(arguments, timeout: timeout, stdout: nil)
    }

    /// Runs the program; with `stdout`, its standard output is handed over in chunks as it arrives
    /// (and not kept), so that a large output never sits in memory whole.
    public func run(_ arguments: [String], timeout: Duration, stdout consume: (@Sendable (Data) -> Void)?) async throws -> Outcome {
        let executable = self.executable
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                let stdout = Pipe()
                let stderr = Pipe()
                process.standardOutput = stdout
                process.standardError = stderr
                process.standardInput = FileHandle.nullDevice
                do {
                    try Self.launch(process)
                } catch {
                    continuation.resume(throwing: LaunchError(description: "cannot start \(executable): \(error)"))
                    return
                }
                let timedOut = Flag()
                let pid = process.processIdentifier
                let killer = DispatchWorkItem {
                    timedOut.set()
                    kill(pid, SIGKILL)
                }
                Self.killers.asyncAfter(deadline: .now() + seconds, execute: killer)
                // Read both pipes at once so that neither can fill up and stall the child.
                let errorOutput = DataBox()
                let readers = DispatchGroup()
                readers.enter()
                DispatchQueue.global().async {
                    errorOutput.set(stderr.fileHandleForReading.readDataToEndOfFile().suffix(4000))
                    readers.leave()
                }
                var output = Data()
                let reader = stdout.fileHandleForReading
                while let chunk = try? reader.read(upToCount: 64 * 1024), !chunk.isEmpty {
                    if let consume { consume(chunk) } else { output.append(chunk) }
                }
                readers.wait()
                process.waitUntilExit()
                killer.cancel()
                let tail = String(decoding: errorOutput.get().suffix(2000), as: UTF8.self)
                continuation.resume(
                    returning: Outcome(
                        status: process.terminationStatus, stdout: output, stderrTail: tail, timedOut: timedOut.isSet,
                        crashed: process.terminationReason == .uncaughtSignal && !timedOut.isSet))
            }
        }
    }
}

private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

private final class DataBox: Sendable {
    private let value = Mutex(Data())
    func set(_ data: Data) { value.withLock { $0 = data } }
    func get() -> Data { value.withLock { $0 } }
}
