import Foundation
import ParleyDomain
import ParleyMedia
import Synchronization
import Testing

@Suite("Media building blocks")
struct MediaTests {
    @Test("containers are recognised from their first bytes", arguments: [
        ([0x1A, 0x45, 0xDF, 0xA3, 0x9F], AudioContainer.webm),
        (Array("OggS\u{0}\u{2}".utf8), .ogg),
        ([0, 0, 0, 0x1C] + Array("ftypM4A ".utf8), .mp4),
        (Array("RIFF".utf8) + [0x24, 0, 0, 0] + Array("WAVE".utf8), .wav),
        (Array("#!AMR\n".utf8), .amr),
        (Array("caff".utf8) + [0, 1], .caf),
        (Array("ID3".utf8) + [4, 0], .mp3),
        ([0xFF, 0xFB, 0x90, 0x64], .mp3),
        ([0xFF, 0xF1, 0x4C, 0x40], .aac),
        (Array("FORM".utf8) + [0, 8, 0x4F, 0x22] + Array("AIFF".utf8), .aiff),
        (Array("FORM".utf8) + [0, 8, 0x4F, 0x34] + Array("AIFC".utf8), .aiff),
        (Array("fLaC".utf8) + [0, 0, 0, 0x22], .flac),
    ] as [([UInt8], AudioContainer)])
    func sniffing(bytes: [UInt8], container: AudioContainer) {
        #expect(AudioContainer.sniff(bytes) == container)
    }

    @Test("anything else is not audio")
    func notAudio() {
        for bytes: [UInt8] in [[], Array("#!/bin/sh".utf8), [0x7F, 0x45, 0x4C, 0x46], Array("<html>".utf8), Array("RIFF\0\0\0\0AVI ".utf8), [0xFF],
                               Array("FORM\0\0\0\0ILBM".utf8)] {
            #expect(AudioContainer.sniff(bytes) == nil, "\(bytes)")
        }
    }

    @Test("the waveform is peak per bar, scaled to the loudest")
    func waveform() {
        var samples = [Int16](repeating: 0, count: 800)
        for index in 400..<800 { samples[index] = index % 2 == 0 ? 16000 : -8000 }
        samples[100] = -4000
        let pcm = samples.withUnsafeBufferPointer { Data(buffer: $0) }
        #expect(AudioAnalyzer.waveform(pcm: pcm, bars: 4) == [63, 0, 255, 255])
        #expect(AudioAnalyzer.waveform(pcm: Data(), bars: 4) == [])
    }

    @Test("blob keys cannot climb out of the store")
    func blobKeys() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalBlobStore(root: root)
        for bad in ["../etc/passwd", "voice/../../x", "/abs", "voice//x", ".partial/x", "voice/Ünïcode", ""] {
            #expect(!LocalBlobStore.isValidKey(bad), "\(bad)")
            await #expect(throws: BlobKeyError.self) { try await store.put(Data("x".utf8), key: bad) }
        }
        try await store.put(Data("hello".utf8), key: "voice/brd_1/msg_1/original.webm")
        #expect(try await store.get(key: "voice/brd_1/msg_1/original.webm") == Data("hello".utf8))
        #expect(try await store.size(key: "voice/brd_1/msg_1/original.webm") == 5)
        #expect(try await store.read(key: "voice/brd_1/msg_1/original.webm", range: 1..<4) == Data("ell".utf8))
        // A crash leaves partial files behind; start-up removes them.
        try Data("half".utf8).write(to: store.scratchFile())
        #expect(try store.removePartialWrites() == 1)
    }

    @Test("a hung or crashing helper fails its job, not the caller")
    func processLimits() async throws {
        let shell = ProcessRunner(executable: "/bin/sh")
        let hung = try await shell.run(["-c", "exec sleep 30"], timeout: .milliseconds(300))
        #expect(hung.timedOut)
        #expect(!hung.succeeded)
        let crashed = try await shell.run(["-c", "kill -SEGV $$"], timeout: .seconds(5))
        #expect(crashed.crashed)
        let fine = try await shell.run(["-c", "printf ok; echo oops >&2"], timeout: .seconds(5))
        #expect(fine.succeeded)
        #expect(fine.stdout == Data("ok".utf8))
        #expect(fine.stderrTail == "oops\n")
        await #expect(throws: ProcessRunner.LaunchError.self) { try await ProcessRunner(executable: "/nonexistent").run([], timeout: .seconds(1)) }
    }
    /// CI, 2026-11-28: StartupTests timed `parley serve` from before the run and saw 21 s, while the
    /// suite's busy work filled Dispatch's global pool, where the run waits for a thread to start the
    /// child. An outcome's duration is the child's own life, whatever the wait around it. Run in a
    /// process of its own (scripts/test.sh: `TEST_BUSY_POOL=1`): filling the pool would hold up the
    /// other tests.
    @Test(
        "an outcome's duration is the helper's own life, not the wait for a thread of Dispatch's busy global pool",
        .enabled(if: ProcessInfo.processInfo.environment["TEST_BUSY_POOL"] != nil, "scripts/test.sh runs it in a process of its own"))
    func busyGlobalPool() async throws {
        // More busy blocks than the pool has threads, each spinning until released 2 s from now (by
        // a thread of its own). The pool adds no thread while its threads are runnable, so the run,
        // queued behind them, starts the helper only then.
        let released = Atomic<Bool>(false)
        for _ in 0..<64 {
            DispatchQueue.global().async { while !released.load(ordering: .acquiring) {} }
        }
        Thread {
            Thread.sleep(forTimeInterval: 2)
            released.store(true, ordering: .releasing)
        }.start()
        let asked = ContinuousClock.now
        let outcome = try await ProcessRunner(executable: "/bin/sh").run(["-c", "printf ok; echo oops >&2; exit 3"], timeout: .seconds(30))
        let waited = ContinuousClock.now - asked
        #expect(waited >= .seconds(2), "the pool was not busy: \(waited)")
        #expect(outcome.duration < .seconds(2), "the duration counts the wait: \(outcome.duration) of \(waited)")
        #expect(outcome.status == 3 && outcome.stdout == Data("ok".utf8) && outcome.stderrTail == "oops\n")
    }

    @Test("a helper under a memory limit fails when it needs more, and runs as usual under it")
    func memoryLimit() async throws {
        // python3 holding 150 MB, under a limit of 100 MB and of 1 GB.
        let python = try #require(ProcessRunner.locate("python3"))
        let hold = ["-c", "b = bytearray(150 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print(len(b))"]
        let limited = try await ProcessRunner(executable: python, memoryLimit: 100 * 1_048_576).run(hold, timeout: .seconds(30))
        #expect(!limited.succeeded)
        #expect(limited.stderrTail.contains("MemoryError"), "\(limited.stderrTail)")
        let roomy = try await ProcessRunner(executable: python, memoryLimit: 1024 * 1_048_576).run(hold, timeout: .seconds(30))
        #expect(roomy.succeeded, "\(roomy.stderrTail)")
        #expect(String(decoding: roomy.stdout, as: UTF8.self).hasPrefix("157286400"))
    }

    @Test("a helper with a niceness runs at that priority from its first instruction, under a memory limit too")
    func niceness() async throws {
        // The server's own niceness, then the helper's: coreutils' `nice` with no operand prints it.
        func niceOf(_ runner: ProcessRunner) async throws -> Int? {
            let outcome = try await runner.run(["-c", "nice"], timeout: .seconds(10))
            #expect(outcome.succeeded, "\(outcome.stderrTail)")
            return Int(String(decoding: outcome.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let own = try #require(try await niceOf(ProcessRunner(executable: "/bin/sh")))
        #expect(try await niceOf(ProcessRunner(executable: "/bin/sh", memoryLimit: nil, niceness: 10)) == min(own + 10, 19))
        #expect(try await niceOf(ProcessRunner(executable: "/bin/sh", memoryLimit: 512 * 1_048_576).niced(5)) == min(own + 5, 19))
        // Out of range is clamped to what nice(1) accepts for an unprivileged process.
        #expect(ProcessRunner(executable: "/bin/sh", memoryLimit: nil, niceness: 40).niceness == 19)
        #expect(ProcessRunner(executable: "/bin/sh", memoryLimit: nil, niceness: -5).niceness == 0)
    }

    @Test("HEIF sizes come from the ispe properties, and nothing else is a HEIF size")
    func heifSizes() throws {
        let bomb = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ParleyServerTests/Fixtures/images/bomb-16000x16000.heic"))
        #expect(HEIFSize.largestImage(in: bomb).map { [$0.width, $0.height] } == [16000, 16000])
        // A grid of two tiles: the grid's own size is the largest.
        func be32(_ value: UInt32) -> [UInt8] {
            withUnsafeBytes(of: value.bigEndian) { Array($0) }
        }
        func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
            be32(UInt32(8 + body.count)) + Array(type.utf8) + body
        }
        func ispe(_ w: UInt32, _ h: UInt32) -> [UInt8] {
            let body: [UInt8] = [0, 0, 0, 0] + be32(w) + be32(h)
            return box("ispe", body)
        }
        let properties: [UInt8] = ispe(512, 512) + ispe(9000, 9000) + ispe(512, 512)
        let handler: [UInt8] = box("hdlr", Array(repeating: 0, count: 20))
        let meta: [UInt8] = box("meta", [0, 0, 0, 0] + handler + box("iprp", box("ipco", properties)))
        let grid: [UInt8] = box("ftyp", Array("heic\0\0\0\0mif1".utf8)) + meta + box("mdat", [1, 2, 3])
        #expect(HEIFSize.largestImage(in: Data(grid)).map { [$0.width, $0.height] } == [9000, 9000])
        #expect(HEIFSize.declaredSizes(in: Data(grid))?.count == 3)
        // No meta, a truncated box, a box claiming more than the file: no size, no crash.
        #expect(HEIFSize.largestImage(in: Data(box("ftyp", Array("heic".utf8)))) == nil)
        #expect(HEIFSize.largestImage(in: Data(grid.prefix(40))) == nil)
        #expect(HEIFSize.largestImage(in: Data([0xFF, 0xFF, 0xFF, 0xFF] + Array("meta".utf8) + [0, 0, 0, 0])) == nil)
        #expect(HEIFSize.largestImage(in: Data()) == nil)
    }
}
