import Foundation
import Synchronization
import Testing

@testable import ParleyMedia

#if canImport(Glibc)
import Glibc
#endif

/// A signal handled without SA_RESTART interrupts the reads of a child's output (EINTR). Foundation's
/// FileHandle stopped the process on it (`readDataToEndOfFile()` is a `try!`: CI's test process died
/// so, "Interrupted system call" at FileHandle.swift:699) or, through `read(upToCount:)`, ended the
/// output early without a word. SIGPROF, because Dispatch's threads (where the server reads its
/// children) block every signal but the synchronous ones, SIGPIPE and SIGPROF: a profiler's timer, or
/// the Swift runtime's crash handler pausing the threads of a crashed process, which is when CI saw it.
///
/// Run in a process of its own (scripts/test.sh: `TEST_PROCESS_SIGNALS=1`): the test signals every
/// thread of the test process, which would reach other tests' threads too.
@Suite(
    "Child processes under signals",
    .enabled(if: ProcessInfo.processInfo.environment["TEST_PROCESS_SIGNALS"] != nil, "scripts/test.sh runs it in a process of its own"))
struct ProcessSignalTests {
    @Test("a child's whole output is read while signals interrupt the reads: nothing is lost, nothing crashes")
    func outputSurvivesSignals() async throws {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: a blocked read(2) returns EINTR
        #expect(sigaction(SIGPROF, &action, nil) == 0)

        let signalling = Atomic<Bool>(true)
        let stopped = Atomic<Bool>(false)
        let sent = Atomic<Int>(0)
        let signaller = Thread {
            defer { stopped.store(true, ordering: .releasing) }
            let me = gettid()
            while signalling.load(ordering: .relaxed) {
                for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
                    guard let tid = Int32(task), tid != me else { continue }
                    if tgkill(getpid(), tid, SIGPROF) == 0 { sent.add(1, ordering: .relaxed) }
                }
                usleep(2000)
            }
        }
        signaller.start()
        // 60 lines on each stream, 20 ms apart: every read waits, and is signalled while it waits.
        let script = "i=0; while [ $i -lt 60 ]; do printf 'out%03d\\n' $i; printf 'err%03d\\n' $i >&2; sleep 0.02; i=$((i+1)); done"
        let outcome = try await ProcessRunner(executable: "/bin/sh").run(["-c", script], timeout: .seconds(60))
        signalling.store(false, ordering: .relaxed)
        // The signaller may be half way through a round: wait for it to end, then ignore SIGPROF
        // (which also drops one still pending). Putting back the default action here, while a
        // signal could still arrive, ended this process once with signal 27 after the test passed.
        while !stopped.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        signal(SIGPROF, SIG_IGN)

        #expect(sent.load(ordering: .relaxed) > 100, "the test sent too few signals to prove anything")
        #expect(outcome.succeeded)
        let lines = String(decoding: outcome.stdout, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 60, "standard output was cut short: \(lines.count) of 60 lines")
        #expect(lines.last == "out059")
        #expect(outcome.stderrTail.hasSuffix("err059\n"), "standard error was cut short: …\(outcome.stderrTail.suffix(40))")
    }
}

/// glibc 2.30's tgkill(2) wrapper, which Glibc's Swift module does not export.
@_silgen_name("tgkill")
private func tgkill(_ tgid: pid_t, _ tid: pid_t, _ signal: Int32) -> Int32

/// glibc 2.30's gettid(2) wrapper, likewise.
@_silgen_name("gettid")
private func gettid() -> pid_t
