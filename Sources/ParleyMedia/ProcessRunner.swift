import Foundation
import ParleyDomain
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
        /// The program's life, from its start to its end: what the program took, without the time
        /// the run waited for a thread of Dispatch's global pool before it, nor the time the caller's
        /// task waited to run again after it (the global pool is what a busy test suite fills).
        public var duration: Duration

        public var succeeded: Bool { status == 0 && !timedOut && !crashed }
    }

    public struct LaunchError: Error, CustomStringConvertible {
        public var description: String
    }

    public let executable: String
    /// The most address space the program may map (RLIMIT_AS, set by util-linux's `prlimit` before
    /// it becomes the program: posix_spawn cannot set limits): past it, allocations fail and the program
    /// ends with an error instead of taking the machine's memory. Nil: no limit.
    public let memoryLimit: Int?
    /// The program's niceness (0-19, set by coreutils' `nice` before it becomes the program): work
    /// that can wait, such as transcription, yields the CPU to the message path when both want it. 0:
    /// the server's own.
    public let niceness: Int

    public init(executable: String) {
        self.init(executable: executable, memoryLimit: nil)
    }

    public init(executable: String, memoryLimit: Int?, niceness: Int = 0) {
        self.executable = executable
        self.memoryLimit = memoryLimit
        self.niceness = min(max(niceness, 0), 19)
    }

    /// The same program at a lower priority (`niceness`).
    public func niced(_ niceness: Int) -> ProcessRunner {
        ProcessRunner(executable: executable, memoryLimit: memoryLimit, niceness: niceness)
    }

    /// util-linux's prlimit (Essential in Debian: always installed).
    static let prlimit = locate("prlimit")
    /// coreutils' nice (Essential too). A wrapper rather than setpriority(2) on the child's pid after
    /// posix_spawn: the program would run at the server's priority until the parent got there.
    static let nice = locate("nice")

    /// What posix_spawn starts: the wrappers that set limits (`prlimit`) and priority (`nice`) and
    /// then become the program, in that order, followed by the program itself.
    func command(_ arguments: [String]) throws -> (executable: String, arguments: [String]) {
        var line = [executable] + arguments
        if niceness > 0 {
            guard let nice = Self.nice else { throw LaunchError(description: "nice (coreutils) is needed to lower \(executable)'s priority") }
            line = [nice, "-n", "\(niceness)", "--"] + line
        }
        if let memoryLimit {
            guard let prlimit = Self.prlimit else { throw LaunchError(description: "prlimit (util-linux) is needed to limit \(executable)'s memory") }
            line = [prlimit, "--as=\(memoryLimit)", "--"] + line
        }
        return (line[0], Array(line.dropFirst()))
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
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.runBlocking(arguments, timeout: timeout, stdout: consume) })
            }
        }
    }

    /// `run`, on the calling thread: it blocks until the program ends or is killed at `timeout`. For
    /// code that is not async (the tests' helpers); the server only calls `run`.
    public func runBlocking(_ arguments: [String], timeout: Duration, stdout consume: (@Sendable (Data) -> Void)? = nil) throws -> Outcome {
        let line = try command(arguments)
        let child = try Self.spawn(line.executable, line.arguments)
        let started = ContinuousClock.now
        let timedOut = Flag()
        let pid = child.pid
        let killer = DispatchWorkItem {
            timedOut.set()
            kill(pid, SIGKILL)
        }
        Self.killers.asyncAfter(deadline: .now() + timeout.seconds, execute: killer)
        // Read both pipes at once so that neither can fill up and stall the child.
        let errorOutput = DataBox()
        let readers = DispatchGroup()
        readers.enter()
        DispatchQueue.global().async {
            var tail = Data()
            while let chunk = PipeReading.read(child.stderr, upTo: 16 * 1024) {
                tail.append(chunk)
                if tail.count > 8000 { tail = tail.suffix(4000) }
            }
            errorOutput.set(tail.suffix(4000))
            readers.leave()
        }
        var output = Data()
        while let chunk = PipeReading.read(child.stdout, upTo: 64 * 1024) {
            if let consume { consume(chunk) } else { output.append(chunk) }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let duration = ContinuousClock.now - started
        // What is left in the stderr pipe is read after the exit (its reader may still be queued).
        readers.wait()
        killer.cancel()
        close(child.stdout)
        close(child.stderr)
        // The wait status as <sys/wait.h> lays it out: a signal in the low 7 bits, else the exit code.
        let signal = status & 0x7f
        let tail = String(decoding: errorOutput.get().suffix(2000), as: UTF8.self)
        return Outcome(
            status: signal == 0 ? (status >> 8) & 0xff : 128 + signal, stdout: output, stderrTail: tail,
            timedOut: timedOut.isSet, crashed: signal != 0 && !timedOut.isSet, duration: duration)
    }

    struct Spawned {
        var pid: pid_t
        /// The read ends of the child's standard output and error (raw descriptors: see `PipeReading`).
        var stdout: Int32
        var stderr: Int32
    }

    /// Starts `executable` with posix_spawn: standard input from /dev/null, standard output and error
    /// into pipes. Foundation's `Process.run()` crashed here (a bad
    /// read inside it) while the server opened and closed thousands of sockets at the same moment;
    /// posix_spawn has no such step, and swift-subprocess is not among our dependencies.
    static func spawn(_ executable: String, _ arguments: [String]) throws -> Spawned {
        // One spawn at a time: a pipe is close-on-exec only after fcntl, and a child spawned in between
        // by another thread would hold its write end (and our read would wait for that child too).
        try launches.withLock { _ in try spawnLocked(executable, arguments) }
    }

    private static func spawnLocked(_ executable: String, _ arguments: [String]) throws -> Spawned {
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0 else { throw LaunchError(description: "pipe failed: errno \(errno)") }
        guard pipe(&errPipe) == 0 else {
            close(outPipe[0]); close(outPipe[1])
            throw LaunchError(description: "pipe failed: errno \(errno)")
        }
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        // No other descriptor is inherited: without this a child (ffmpeg) kept the server's listening
        // socket open, and a restarted server could not bind its port while the child ran.
        _ = closeFrom(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { buffer in
            posix_spawn(&pid, executable, &actions, nil, UnsafeMutablePointer(mutating: buffer.baseAddress!), environ)
        }
        close(outPipe[1])
        close(errPipe[1])
        guard result == 0 else {
            close(outPipe[0]); close(errPipe[0])
            throw LaunchError(description: "cannot start \(executable): error \(result)")
        }
        return Spawned(pid: pid, stdout: outPipe[0], stderr: errPipe[0])
    }
}

/// Reads a pipe with read(2), again when a signal interrupts it.
///
/// Written by hand because Foundation's FileHandle gives up on EINTR: `readDataToEndOfFile()` and
/// `availableData` stop the process (a `try!` inside them), and `read(upToCount:)` throws, so a signal
/// that arrives while ffmpeg runs either crashed the process or cut a rendition short without a word.
/// Dispatch's threads leave SIGPROF and SIGPIPE unblocked; a handler for either without SA_RESTART
/// (a profiler's, a library's) is enough (ProcessSignalTests). swift-system is not among our
/// dependencies for this one loop.
public enum PipeReading {
    /// The next bytes (at most `limit`), or nil at the end of the stream or on an error other than
    /// EINTR (the writer is gone either way).
    public static func read(_ descriptor: Int32, upTo limit: Int) -> Data? {
        var buffer = Data(count: limit)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, limit) }
            if count > 0 { return buffer.prefix(count) }
            if count == 0 { return nil }
            if errno == EINTR { continue }
            return nil
        }
    }

    /// Everything until the end of the stream.
    public static func readToEnd(_ descriptor: Int32) -> Data {
        var data = Data()
        while let chunk = read(descriptor, upTo: 64 * 1024) { data.append(chunk) }
        return data
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+, Debian 12 has 2.36): Glibc's Swift
/// module does not export it without `_GNU_SOURCE`.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32

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
