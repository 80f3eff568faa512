import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLiteKit
import Synchronization

/// SQLite in WAL mode: one writer connection, whose transactions run one at a time, and one reader
/// connection, which sees committed data without waiting for the writer.
///
/// Durability: `synchronous=NORMAL` in WAL mode. A committed transaction survives the process being
/// killed at any moment (SIGKILL, crash); a power loss can lose the last commits before a checkpoint.
/// Set `synchronous=FULL` through `PARLEY_SQLITE_SYNCHRONOUS=full` (`fullSync`) to survive power loss at the cost of
/// one fsync per commit.
public final class SQLiteDatabaseClient: DatabaseClient {
    public let flavor = DatabaseFlavor.sqlite
    private let writer: SQLiteHandle
    private let reader: SQLiteHandle
    private let writeLock = AsyncMutex()
    /// `synchronous=FULL`: every commit waits for the disk.
    private let fullSync: Bool
    private let logger: Logger

    /// Copies the WAL back into the database file in the background (see `checkpoints`).
    private let checkpointer = Mutex<Task<Void, Never>?>(nil)

    /// When the background checkpoints run, and how large the WAL may grow before one of them holds
    /// the writes back (see `checkpoints`).
    public struct CheckpointPolicy: Sendable {
        public var interval: Duration
        /// Frames in the WAL (each one page and a 24-byte header) past which the next checkpoint
        /// holds the writes back until it has copied them all, so that the WAL starts again from its
        /// beginning. The hold lasts a few milliseconds (the copy of what the background pass left
        /// and two syncs): the larger the WAL may grow, the rarer it is. 128 MB by default
        /// (`PARLEY_SQLITE_WAL_MB`): at 1,000 messages a second, about once every 3 s.
        public var restartFrames: Int

        public init(interval: Duration = .milliseconds(250), restartFrames: Int = frames(megabytes: 128)) {
            self.interval = interval
            self.restartFrames = restartFrames
        }

        /// The frames of 4 KB pages (4,120 bytes each with its header) in `megabytes`.
        public static func frames(megabytes: Int) -> Int { megabytes * 1_048_576 / 4120 }
    }

    /// Where transactions run (a `ThreadExecutor`; typed loosely because stored properties cannot be
    /// limited to newer systems).
    private let writerThread: (any Sendable)?

    private init(writer: SQLiteHandle, reader: SQLiteHandle, fullSync: Bool, logger: Logger) {
        self.fullSync = fullSync
        if #available(macOS 15, iOS 18, *) {
            writerThread = ThreadExecutor(name: "parley-sqlite")
        } else {
            writerThread = nil
        }
        self.writer = writer
        self.reader = reader
        self.logger = logger
    }

    private func startCheckpoints(_ handle: SQLiteHandle, policy: CheckpointPolicy) {
        let logger = self.logger
        let task: Task<Void, Never>
        if #available(macOS 15, iOS 18, *) {
            task = ThreadExecutor.task(named: "parley-wal") { [weak self] in
                await Self.checkpoints(handle, policy: policy, client: { [weak self] in self }, logger: logger)
            }
        } else {
            task = Task.detached(priority: .utility) { [weak self] in
                await Self.checkpoints(handle, policy: policy, client: { [weak self] in self }, logger: logger)
            }
        }
        checkpointer.withLock { $0 = task }
    }

    /// The writer does not checkpoint (`wal_autocheckpoint = 0`): a checkpoint copies pages and
    /// syncs the file, and inside a commit it would stall every write queued behind it. This loop
    /// does it on its own connection and its own thread instead (the sync blocks, and tasks may run
    /// on the event loops that serve the sockets), every `policy.interval` while the WAL grows
    /// (PASSIVE: it never blocks a writer or a reader; what it cannot copy yet it copies next time).
    ///
    /// A PASSIVE checkpoint alone never lets the WAL start again while writes keep coming: SQLite
    /// goes back to the WAL's beginning only when a transaction starts with every frame copied, and
    /// under steady load a new commit always lands between the copy and the next write. The WAL then
    /// grows for as long as the load lasts (3 GB in two minutes of the text bench), and every page a
    /// commit appends extends the file, which the kernel zeroes first (23% of the server's CPU at
    /// saturation, bench/profiles/step4). So once the WAL holds `policy.restartFrames`, the next
    /// checkpoint holds the writes back (`whileWritesWait`) while it copies what is left, a few
    /// milliseconds after the background copy, and the writer's next transaction starts the WAL
    /// again from its beginning, over pages the kernel already has.
    private static func checkpoints(
        _ handle: SQLiteHandle, policy: CheckpointPolicy, client: @escaping @Sendable () -> SQLiteDatabaseClient?, logger: Logger
    ) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: policy.interval)
            do {
                let frames = try checkpoint(handle)
                if frames >= policy.restartFrames, let client = client() {
                    // Once more without holding anything: what is left for the hold is what was
                    // committed during this pass, a few milliseconds' worth.
                    _ = try checkpoint(handle)
                    let held = Mutex<Duration>(.zero)
                    try await client.whileWritesWait {
                        let started = ContinuousClock.now
                        _ = try checkpoint(handle)
                        held.withLock { $0 = ContinuousClock.now - started }
                    }
                    logger.debug("the WAL starts again", metadata: ["frames": "\(frames)", "held": "\(held.withLock { $0 })"])
                }
            } catch {
                logger.warning("WAL checkpoint failed", metadata: ["error": "\(error)"])
            }
        }
        handle.close()
    }

    /// A PASSIVE checkpoint on `handle`; returns the frames the WAL holds (SQLite's `log` column).
    private static func checkpoint(_ handle: SQLiteHandle) throws -> Int {
        var frames = 0
        try handle.run("PRAGMA wal_checkpoint(PASSIVE)", []) { row in frames = Int(((try? row.directInteger("log")) ?? nil) ?? 0) }
        return frames
    }

    static func prepareDirectory(for path: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.configuration("cannot create the database directory '\(directory)': \(error.localizedDescription)")
        }
    }

    /// Opens a file (a writer and a reader connection) or, with `nil`, a private in-memory database
    /// (one connection: it exists on that connection only).
    public static func open(
        path: String?, fullSync: Bool = false, checkpoints: CheckpointPolicy = .init(), logger: Logger
    ) async throws -> SQLiteDatabaseClient {
        let synchronous = fullSync ? "FULL" : "NORMAL"
        let writer = try SQLiteHandle(path: path ?? ":memory:")
        let reader = try path.map { try SQLiteHandle(path: $0) } ?? writer
        do {
            for connection in reader === writer ? [writer] : [writer, reader] {
                let db = DirectSQLiteDatabase(handle: connection, logger: logger)
                try await db.raw("PRAGMA busy_timeout = 5000").run()
                try await db.raw("PRAGMA foreign_keys = ON").run()
                try await db.raw(SQLQueryString("PRAGMA synchronous = \(unsafeRaw: synchronous)")).run()
                // A group commit runs each write in a savepoint, and SQLite journals the pages a
                // savepoint changes to a temporary file by default: a write(2) per page per message
                // (9% of the writer thread at saturation, bench/profiles/before). In memory instead.
                try await db.raw("PRAGMA temp_store = MEMORY").run()
                // 16 MB of page cache per connection (SQLite's default is 2 MB): the hot pages of the
                // conversations and messages indexes stay in memory instead of being read again.
                try await db.raw("PRAGMA cache_size = -16384").run()
            }
            if path != nil {
                let db = DirectSQLiteDatabase(handle: writer, logger: logger)
                try await db.raw("PRAGMA journal_mode = WAL").run()
                try await db.raw("PRAGMA wal_autocheckpoint = 0").run()
                // After a burst the WAL's file is cut back to twice the size that makes writes wait
                // for a checkpoint when it starts again (below that it is reused, never shrunk).
                try await db.raw(SQLQueryString("PRAGMA journal_size_limit = \(unsafeRaw: String(2 * checkpoints.restartFrames * 4120))")).run()
            }
        } catch {
            writer.close()
            reader.close()
            throw error
        }
        let client = SQLiteDatabaseClient(writer: writer, reader: reader, fullSync: fullSync, logger: logger)
        if let path {
            let checkpointHandle = try SQLiteHandle(path: path)
            try await DirectSQLiteDatabase(handle: checkpointHandle, logger: logger).raw("PRAGMA busy_timeout = 5000").run()
            client.startCheckpoints(checkpointHandle, policy: checkpoints)
        }
        return client
    }

    /// Runs `body` atomically and returns once its changes are committed.
    ///
    /// Group commit: writes that arrive while a transaction runs wait, then commit together in the
    /// next one, each inside its own savepoint. A body that throws rolls back to its savepoint and
    /// only its caller sees the error; the others commit. One commit writes each changed page to the
    /// WAL once for the whole group, which is most of what a commit costs.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        // Nobody is writing and nothing waits: this write runs alone, here, in the caller's task.
        // Handing it to the writer's thread and back costs two thread wake-ups, more than a short
        // transaction itself (a quarter of the server's CPU per message at 1,000 messages a second,
        // bench/profiles/before). Writes that arrive meanwhile queue and go to the writer's thread
        // as a group, as below, so a busy server keeps its sockets' threads free. With
        // `synchronous=FULL` every commit waits for the disk: those always go to the writer's thread.
        if !fullSync, claimIdleWriter() {
            let result: Result<T, any Error>
            do {
                result = .success(try await exclusive { try await self.transaction(body) })
            } catch {
                result = .failure(error)
            }
            releaseWriter()
            return try result.get()
        }
        let value = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Sendable, any Error>) in
            // The batch runs in the first writer's task: each body gets its own caller's request id back.
            let requestId = WorkRequestID.current
            let job = WriteJob(body: { db in try await WorkRequestID.$current.withValue(requestId) { try await body(db) } }, continuation: continuation)
            let startDrain = queue.withLock { queue -> Bool in
                queue.pending.append(job)
                if queue.draining { return false }
                queue.draining = true
                return true
            }
            if startDrain { startDraining() }
        }
        guard let typed = value as? T else { throw StoreError.corrupt("a write returned an unexpected type") }
        return typed
    }

    /// Takes the writer when it is idle and nothing is queued.
    private func claimIdleWriter() -> Bool {
        queue.withLock { queue in
            guard !queue.draining, queue.pending.isEmpty else { return false }
            queue.draining = true
            return true
        }
    }

    /// Gives the writer back after a write run alone: writes queued meanwhile go to the writer's thread.
    private func releaseWriter() {
        let more = queue.withLock { queue -> Bool in
            if queue.pending.isEmpty {
                queue.draining = false
                return false
            }
            return true
        }
        if more { startDraining() }
    }

    private func startDraining() {
        if #available(macOS 15, iOS 18, *), let writerThread = writerThread as? ThreadExecutor {
            Task(executorPreference: writerThread) { await self.drain() }
        } else {
            Task { await self.drain() }
        }
    }

    /// One write in a transaction of its own.
    private func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let db = DirectSQLiteDatabase(handle: writer, logger: logger)
        try await db.raw("BEGIN IMMEDIATE").run()
        do {
            let value = try await body(db)
            try await db.raw("COMMIT").run()
            return value
        } catch {
            try? await db.raw("ROLLBACK").run()
            throw error
        }
    }

    /// Runs `body` as the only user of the writer connection. The `draining` flag already makes one
    /// writer at a time; an in-memory database (one connection) also reads on it, so its writes
    /// take the lock that its reads take.
    private func exclusive<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if reader === writer { return try await writeLock.withLock(body) }
        return try await body()
    }

    /// Most writes committed in one transaction: bounds how long the first of a group waits.
    static let maxGroup = 128

    private struct WriteJob: Sendable {
        let body: @Sendable (any SQLDatabase) async throws -> any Sendable
        let continuation: CheckedContinuation<any Sendable, any Error>
        /// Runs with the writer held but outside any transaction, alone (`whileWritesWait`).
        var alone = false
    }

    /// Runs `body` while no write runs: it waits its turn behind the writes queued before it, and the
    /// writes that come meanwhile wait for it (then commit together, as a group). For maintenance
    /// that needs the WAL still for a moment, never for a write of data.
    func whileWritesWait(_ body: @escaping @Sendable () async throws -> Void) async throws {
        _ = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Sendable, any Error>) in
            let job = WriteJob(body: { _ in try await body(); return true }, continuation: continuation, alone: true)
            let startDrain = queue.withLock { queue -> Bool in
                queue.pending.append(job)
                if queue.draining { return false }
                queue.draining = true
                return true
            }
            if startDrain { startDraining() }
        }
    }

    private let queue = Mutex<(pending: [WriteJob], draining: Bool)>(([], false))

    private func drain() async {
        while true {
            let group = queue.withLock { queue -> [WriteJob] in
                let count = queue.pending.first?.alone == true ? 1 : queue.pending.prefix(Self.maxGroup).prefix { !$0.alone }.count
                let group = Array(queue.pending.prefix(count))
                queue.pending.removeFirst(group.count)
                if group.isEmpty { queue.draining = false }
                return group
            }
            if group.isEmpty { return }
            if group.count == 1, group[0].alone {
                let db = DirectSQLiteDatabase(handle: writer, logger: logger)
                do {
                    group[0].continuation.resume(returning: try await group[0].body(db))
                } catch {
                    group[0].continuation.resume(throwing: error)
                }
                continue
            }
            if reader === writer {
                await writeLock.withLock { await self.commit(group) }
            } else {
                await commit(group)
            }
        }
    }

    private func commit(_ group: [WriteJob]) async {
        let db = DirectSQLiteDatabase(handle: writer, logger: logger)
        do {
            // IMMEDIATE takes the write lock at BEGIN, so a transaction never fails half-way on a busy lock.
            try await db.raw("BEGIN IMMEDIATE").run()
        } catch {
            for job in group { job.continuation.resume(throwing: error) }
            return
        }
        var results: [Result<any Sendable, any Error>] = []
        results.reserveCapacity(group.count)
        if group.count == 1 {
            do {
                results.append(.success(try await group[0].body(db)))
            } catch {
                try? await db.raw("ROLLBACK").run()
                group[0].continuation.resume(throwing: error)
                return
            }
        } else {
            for job in group {
                do {
                    try await db.raw("SAVEPOINT parley_write").run()
                    let value = try await job.body(db)
                    try await db.raw("RELEASE parley_write").run()
                    results.append(.success(value))
                } catch {
                    try? await db.raw("ROLLBACK TO parley_write").run()
                    try? await db.raw("RELEASE parley_write").run()
                    results.append(.failure(error))
                }
            }
        }
        do {
            try await db.raw("COMMIT").run()
        } catch {
            try? await db.raw("ROLLBACK").run()
            for job in group { job.continuation.resume(throwing: error) }
            return
        }
        for (job, result) in zip(group, results) { job.continuation.resume(with: result) }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if reader === writer {
            let db = DirectSQLiteDatabase(handle: writer, logger: logger)
            return try await writeLock.withLock { try await body(db) }
        }
        return try await body(DirectSQLiteDatabase(handle: reader, logger: logger))
    }

    public func close() async {
        let checkpoints = checkpointer.withLock { $0 }
        checkpoints?.cancel()
        await checkpoints?.value
        if #available(macOS 15, iOS 18, *) { (writerThread as? ThreadExecutor)?.stop() }
        writer.close()
        if reader !== writer {
            reader.close()
        }
    }
}
