import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLiteKit
import Synchronization
import VaporCSQLite

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

    /// Copies the WAL back into the database file in the background (see `checkpointRound`).
    private let checkpointer = Mutex<Task<Void, Never>?>(nil)
    /// The checkpoints' own connection (nil for an in-memory database).
    private let walHandle: SQLiteHandle?
    private let checkpointPolicy: CheckpointPolicy
    /// The WAL's frames when the last hold began: the same count later, all copied, means nothing
    /// was written since.
    private let lastHeldAt = Mutex<Int>(-1)

    /// When the background checkpoints run, and how large the WAL may grow before one of them holds
    /// the writes back (see `checkpointRound`).
    public struct CheckpointPolicy: Sendable {
        /// Nil: no background checkpoints, only `checkpointRound()` (tests).
        public var interval: Duration?
        /// Frames in the WAL (each one page and a 24-byte header) past which a checkpoint holds the
        /// writes back until it has copied them all, so that the WAL starts again from its
        /// beginning. The hold lasts a few milliseconds (the copy of what the background pass left
        /// and two syncs): the larger the WAL may grow, the rarer it is. 128 MB by default
        /// (`PARLEY_SQLITE_WAL_MB`): at 1,000 messages a second, about once every 3 s.
        public var restartFrames: Int

        public init(interval: Duration? = .milliseconds(250), restartFrames: Int = frames(megabytes: 128)) {
            self.interval = interval
            self.restartFrames = restartFrames
        }

        /// A WAL frame: a 4 KB page and its 24-byte header.
        static let frameBytes = 4096 + 24

        /// The frames of 4 KB pages in `megabytes`.
        public static func frames(megabytes: Int) -> Int { megabytes * 1_048_576 / frameBytes }
    }

    /// Where transactions run (a `ThreadExecutor`; typed loosely because stored properties cannot be
    /// limited to newer systems).
    private let writerThread: (any Sendable)?

    private init(writer: SQLiteHandle, reader: SQLiteHandle, walHandle: SQLiteHandle?, policy: CheckpointPolicy, fullSync: Bool, logger: Logger) {
        self.fullSync = fullSync
        self.walHandle = walHandle
        checkpointPolicy = policy
        if #available(macOS 15, iOS 18, *) {
            writerThread = ThreadExecutor(name: "parley-sqlite")
        } else {
            writerThread = nil
        }
        self.writer = writer
        self.reader = reader
        self.logger = logger
    }

    private func startCheckpoints() {
        guard walHandle != nil, let interval = checkpointPolicy.interval else { return }
        let logger = self.logger
        // `@concurrent`: the fallback's `Task.detached` takes a closure with an isolation of its own.
        let loop: @concurrent @Sendable () async -> Void = { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                do {
                    try await self?.checkpointRound()
                } catch {
                    logger.warning("WAL checkpoint failed", metadata: ["error": "\(error)"])
                }
            }
        }
        let task: Task<Void, Never>
        if #available(macOS 15, iOS 18, *) {
            task = ThreadExecutor.task(named: "parley-wal", loop)
        } else {
            task = Task.detached(priority: .utility, operation: loop)
        }
        checkpointer.withLock { $0 = task }
    }

    /// One round of the checkpointer. The writer does not checkpoint (`wal_autocheckpoint = 0`): a
    /// checkpoint copies pages and syncs the file, and inside a commit it would stall every write
    /// queued behind it. The rounds run on their own connection and their own thread instead (the
    /// sync blocks, and tasks may run on the event loops that serve the sockets), every
    /// `interval` (PASSIVE: it never blocks a writer or a reader; what it cannot copy yet it copies
    /// next time).
    ///
    /// A PASSIVE checkpoint alone never lets the WAL start again while writes keep coming: SQLite
    /// goes back to the WAL's beginning only when a transaction starts with every frame copied, and
    /// under steady load a new commit always lands between the copy and the next write. The WAL then
    /// grows for as long as the load lasts (3 GB in two minutes of the text bench), and every page a
    /// commit appends extends the file, which the kernel zeroes first (23% of the server's CPU at
    /// saturation, bench/profiles/step4). So once the WAL holds `restartFrames`, the round copies
    /// once more and, if commits came in meanwhile, holds the writes back (`whileWritesWait`) while
    /// it copies the last few frames and starts the WAL again from its beginning (below), over pages
    /// the kernel already has.
    ///
    /// The first commit into a WAL whose every frame is copied starts it again from its beginning,
    /// and SQLite syncs the WAL's new header inside that commit (a disk flush: 1-10 ms here, and up to
    /// half a second on a busy shared disk). Left to itself that commit would be the next message's,
    /// run on the event loop that serves its socket, and at a quiet hour, when every round copies
    /// everything, that is the first message after every round. So a round that copies every frame
    /// (and finds more than the one frame of its own last restart) starts the WAL again itself with a
    /// one-page write (`restartWAL`), off the sockets' threads; the hold below does the same before
    /// it lets the writes go. A write that slips in between starts the WAL itself, as before.
    func checkpointRound() async throws {
        guard let handle = walHandle else { return }
        let first = try handle.checkpointPassive()
        guard first.log >= checkpointPolicy.restartFrames else {
            if first.copied == first.log, first.log > Self.framesAfterRestart {
                _ = try await write(Self.restartWAL)
            }
            return
        }
        // Once more without holding anything: what is left for the hold is what was committed
        // during this pass, a few milliseconds' worth.
        let second = try handle.checkpointPassive()
        // Nothing written since the last round's hold and everything copied: the WAL waits for the
        // next transaction, which starts it again by itself. (While writes are coming, "everything
        // copied" says nothing: a transaction already under way appends after it.)
        let idle = lastHeldAt.withLock { $0 } == second.log && second.copied == second.log
        guard !idle else { return }
        let held = Mutex<Duration>(.zero)
        try await whileWritesWait {
            let started = ContinuousClock.now
            let last = try handle.checkpointPassive()
            if last.copied == last.log { _ = try await self.transaction(Self.restartWAL) }
            held.withLock { $0 = ContinuousClock.now - started }
        }
        lastHeldAt.withLock { $0 = second.log }
        logger.debug("the WAL starts again", metadata: ["frames": "\(first.log)", "held": "\(held.withLock { $0 })"])
    }

    /// The write that starts the WAL again when every frame in it is copied: one row of its own
    /// table, one page, so the WAL holds exactly `framesAfterRestart` frames after it.
    @Sendable private static func restartWAL(_ db: any SQLDatabase) async throws {
        try await db.raw("UPDATE wal_restart SET count = count + 1 WHERE id = 1").run()
    }

    /// The statements each connection keeps that SQLite prepared again, with how many times.
    func reprepares() -> [(sql: String, count: Int)] {
        [writer, reader, walHandle].compactMap { $0 }.flatMap { $0.statementStatus(SQLITE_STMTSTATUS_REPREPARE) }
            .filter { $0.value > 0 }.map { ($0.sql, $0.value) }
    }

    /// The frames `restartWAL` leaves in the WAL.
    static let framesAfterRestart = 1

    /// The frames the WAL holds and how many of them are copied, by a PASSIVE checkpoint on the
    /// checkpoints' connection (so it copies what it can, as a round would). (0, 0) in memory.
    func walFrames() throws -> (log: Int, copied: Int) {
        guard let walHandle else { return (0, 0) }
        return try walHandle.checkpointPassive()
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
                try await db.raw(SQLQueryString("PRAGMA journal_size_limit = \(unsafeRaw: String(2 * checkpoints.restartFrames * CheckpointPolicy.frameBytes))")).run()
                // The checkpointer's own row (`restartWAL`), outside the migrations: the store
                // needs it before they run, and PostgreSQL has no WAL of this kind.
                try await db.raw("CREATE TABLE IF NOT EXISTS wal_restart (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL)").run()
                try await db.raw("INSERT OR IGNORE INTO wal_restart (id, count) VALUES (1, 0)").run()
            }
        } catch {
            writer.close()
            reader.close()
            throw error
        }
        let walHandle = try path.map { try SQLiteHandle(path: $0) }
        if let walHandle {
            let db = DirectSQLiteDatabase(handle: walHandle, logger: logger)
            try await db.raw("PRAGMA busy_timeout = 5000").run()
            // A read, so that the connection opens the WAL: `sqlite3_wal_checkpoint_v2` on a
            // connection that has read nothing yet checkpoints nothing and answers -1.
            try await db.raw("SELECT count(*) FROM sqlite_schema").run()
        }
        let client = SQLiteDatabaseClient(writer: writer, reader: reader, walHandle: walHandle, policy: checkpoints, fullSync: fullSync, logger: logger)
        client.startCheckpoints()
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
            enqueue(WriteJob(body: { db in try await WorkRequestID.$current.withValue(requestId) { try await body(db) } }, continuation: continuation))
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
        try db.exec("BEGIN IMMEDIATE")
        do {
            let value = try await body(db)
            try db.exec("COMMIT")
            return value
        } catch {
            try? db.exec("ROLLBACK")
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
            enqueue(WriteJob(body: { _ in try await body(); return true }, continuation: continuation, alone: true))
        }
    }

    /// Queues `job` for the writer, and starts draining the queue if nobody is.
    private func enqueue(_ job: WriteJob) {
        let startDrain = queue.withLock { queue -> Bool in
            queue.pending.append(job)
            if queue.draining { return false }
            queue.draining = true
            return true
        }
        if startDrain { startDraining() }
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
            try db.exec("BEGIN IMMEDIATE")
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
                try? db.exec("ROLLBACK")
                group[0].continuation.resume(throwing: error)
                return
            }
        } else {
            for job in group {
                do {
                    try db.exec("SAVEPOINT parley_write")
                    let value = try await job.body(db)
                    try db.exec("RELEASE parley_write")
                    results.append(.success(value))
                } catch {
                    try? db.exec("ROLLBACK TO parley_write")
                    try? db.exec("RELEASE parley_write")
                    results.append(.failure(error))
                }
            }
        }
        do {
            try db.exec("COMMIT")
        } catch {
            try? db.exec("ROLLBACK")
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
        walHandle?.close()
        if #available(macOS 15, iOS 18, *) { (writerThread as? ThreadExecutor)?.stop() }
        writer.close()
        if reader !== writer {
            reader.close()
        }
    }
}
