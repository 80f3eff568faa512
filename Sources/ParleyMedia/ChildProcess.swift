import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A long-running child (a server, a terminal client) started with posix_spawn: standard output and
/// error into one pipe, optionally a pipe for standard input, in a working directory and an
/// environment of the caller's choosing. For the tests and tools that drive `parley` itself:
/// Foundation's `Process.run()` crashed (a bad read inside it) while other threads opened and closed
/// sockets, as `ProcessRunner` notes; this is the same posix_spawn path, kept running.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    /// The read end of the child's standard output and error (read it with `PipeReading`).
    public let output: Int32
    /// The write end of its standard input, when asked for.
    public let input: Int32?
    private let status = Mutex<Int32?>(nil)

    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil, input wantsInput: Bool = false
    ) throws {
        var outPipe: [Int32] = [0, 0]
        var inPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0 else { throw ProcessRunner.LaunchError(description: "pipe failed: errno \(errno)") }
        if wantsInput { guard pipe(&inPipe) == 0 else { throw ProcessRunner.LaunchError(description: "pipe failed: errno \(errno)") } }
        for fd in outPipe + inPipe where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if wantsInput {
            posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 2)
        if let directory { _ = addChdir(&actions, directory) }
        _ = spawnCloseFrom(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var child: pid_t = 0
        let result = argv.withUnsafeBufferPointer { args in
            if let envp {
                return envp.withUnsafeBufferPointer { env in
                    posix_spawn(&child, executable, &actions, nil, UnsafeMutablePointer(mutating: args.baseAddress!), UnsafeMutablePointer(mutating: env.baseAddress!))
                }
            }
            return posix_spawn(&child, executable, &actions, nil, UnsafeMutablePointer(mutating: args.baseAddress!), environ)
        }
        close(outPipe[1])
        if wantsInput { close(inPipe[0]) }
        guard result == 0 else {
            close(outPipe[0])
            if wantsInput { close(inPipe[1]) }
            throw ProcessRunner.LaunchError(description: "cannot start \(executable): error \(result)")
        }
        (pid, output, input) = (child, outPipe[0], wantsInput ? inPipe[1] : nil)
    }

    /// Writes to the child's standard input.
    public func write(_ text: String) {
        guard let input else { return }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if written < 0 { if errno == EINTR { continue } else { return } }
            bytes = bytes.dropFirst(written)
        }
    }

    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Whether it has not exited yet (it is reaped once it has).
    public var isRunning: Bool {
        status.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid { status = raw }
            return status == nil
        }
    }

    /// Blocks until it exits and returns its wait status.
    public func waitForExit() -> Int32 {
        while true {
            if let done = status.withLock({ $0 }) { return done }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, 0)
            if reaped == pid { status.withLock { $0 = raw }; return raw }
            if reaped < 0, errno != EINTR { return status.withLock { $0 } ?? -1 }
        }
    }

    deinit {
        close(output)
        if let input { close(input) }
    }
}

@_silgen_name("posix_spawn_file_actions_addchdir_np")
private func addChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: UnsafePointer<CChar>) -> Int32

@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
