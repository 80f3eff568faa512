import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization
import Tracing

/// How a job's run ended, when it did not simply succeed (returning normally means done).
public enum JobFailure: Error, Sendable {
    /// Try again later (with back-off, or after `after` when the provider said when).
    case retry(String, after: Duration? = nil)
    /// Not ready yet (a voice note still being converted): check again after `after`; no attempt is used.
    case notYet(after: Duration)
    /// Never going to work: the job is kept as failed for admins to see.
    case permanent(String)

    /// The `outcome` label of `parley_job_duration_seconds`.
    var outcome: String {
        switch self {
        case .retry: "retried"
        case .notYet: "not_yet"
        case .permanent: "failed"
        }
    }
}

/// Runs one kind of job (`kind` names it in the jobs table).
public protocol JobHandler: Sendable {
    var kind: String { get }
    /// The handler gives up after this many attempts; the last failure calls `gaveUp`.
    func run(_ job: JobRecord) async throws
    /// Called once when the job is given up on (to tell the agent, for instance).
    func gaveUp(_ job: JobRecord, reason: String) async
}

extension JobHandler {
    public func gaveUp(_ job: JobRecord, reason: String) async {}
}

/// A handler whose job payload is one Codable value: it decodes the payload and hands it to `run`,
/// and to `lost` (when given) once the job is given up on. The channels' webhook and media jobs are
/// all of this shape.
struct PayloadJobHandler<Payload: Decodable & Sendable>: JobHandler {
    let kind: String
    let run: @Sendable (Payload) async throws -> Void
    var lost: (@Sendable (Payload, String) async throws -> Void)? = nil

    func run(_ job: JobRecord) async throws {
        try await run(try JSONDecoder().decode(Payload.self, from: Data(job.payload.utf8)))
    }

    func gaveUp(_ job: JobRecord, reason: String) async {
        guard let lost, let payload = try? JSONDecoder().decode(Payload.self, from: Data(job.payload.utf8)) else { return }
        try? await lost(payload, reason)
    }
}

/// Enqueues durable jobs and wakes the runner. Enqueue inside a transaction (with `repo`) when
/// the job must exist exactly when something else is committed, like an outbound message.
public struct JobQueue: Sendable {
    let store: Store
    let clock: any WallClock
    let signal: JobSignal
    let maxAttempts: Int

    public func enqueue<Payload: Encodable>(
        _ kind: String, _ payload: Payload, brandId: BrandID?, lane: String? = nil, dedupeKey: String? = nil
    ) async throws {
        let job = try make(kind, payload, brandId: brandId, lane: lane, dedupeKey: dedupeKey)
        _ = try await store.write { repo in try await repo.enqueueJob(job) }
        signal.wake()
    }

    /// The row to enqueue in the caller's transaction (`repo.enqueueJob`); call `wake()` after commit.
    /// `after`: due that long from now (a timer), else at once.
    func make<Payload: Encodable>(
        _ kind: String, _ payload: Payload, brandId: BrandID?, lane: String? = nil, dedupeKey: String? = nil, after: TimeInterval = 0
    ) throws -> JobRecord {
        let now = clock.now()
        return JobRecord(
            brandId: brandId, kind: kind, lane: lane, payload: String(decoding: try JSONEncoder().encode(payload), as: UTF8.self),
            dedupeKey: dedupeKey, maxAttempts: maxAttempts, runAt: now.addingTimeInterval(after), createdAt: now,
            requestId: RequestID.current)
    }

    func wake() { signal.wake() }
}

/// Wakes a sleeping runner when a job is enqueued (it polls as well, for jobs other nodes add).
public final class JobSignal: Sendable {
    private let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let pending = Mutex<Bool>(false)

    public init() {}

    func wake() {
        let continuation = waiter.withLock { waiting -> CheckedContinuation<Void, Never>? in
            defer { waiting = nil }
            return waiting
        }
        if let continuation {
            continuation.resume()
        } else {
            pending.withLock { $0 = true }
        }
    }

    /// Returns when woken or after `timeout`, whichever is first.
    func wait(timeout: Duration) async {
        if pending.withLock({ was in defer { was = false }; return was }) { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let woken = self.pending.withLock { was in defer { was = false }; return was }
                    if woken {
                        continuation.resume()
                    } else {
                        let previous = self.waiter.withLock { waiting in
                            defer { waiting = continuation }
                            return waiting
                        }
                        previous?.resume()
                    }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            // Whichever finished first, release the other.
            self.wake()
            group.cancelAll()
            await group.waitForAll()
            self.pending.withLock { $0 = false }
        }
    }
}

/// Runs due jobs (ARCHITECTURE.md, "Durable jobs"): claims them (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL, so each runs on one node), runs at most `concurrency` at once, retries failures with
/// exponential back-off, keeps a job that finally fails for admins, and lets a job whose node died
/// be claimed again when its lease runs out. Due times read the injected clock.
public struct JobRunner: Service {
    let store: Store
    let clock: any WallClock
    let signal: JobSignal
    let handlers: [String: any JobHandler]
    let concurrency: Int
    /// How long a claimed job belongs to this node.
    let lease: TimeInterval
    /// Real time between looks at the table when nothing woke the runner.
    let pollInterval: Duration
    let metrics: ParleyMetrics
    let logger: Logger

    /// The first retry's delay; each further one doubles, up to `maxBackoff`.
    static let firstBackoff: TimeInterval = 5
    static let maxBackoff: TimeInterval = 3600

    public func run() async throws {
        let running = RunningJobs()
        await withDiscardingTaskGroup { group in
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                let free = concurrency - running.count
                var claimed: [JobRecord] = []
                if free > 0 {
                    do {
                        claimed = try await claim(free: free, running: running)
                    } catch {
                        logger.warning("could not claim jobs", metadata: ["error": "\(error)"])
                    }
                }
                for job in claimed {
                    running.start(job)
                    group.addTask {
                        await self.execute(job)
                        running.finish(job)
                        signal.wake()  // a slot is free, and the job's lane may have a next job
                    }
                }
                if claimed.isEmpty || claimed.count == free {
                    // Woken by an enqueue or a finished job, or after a while for jobs other nodes add
                    // and retries coming due.
                    await signal.wait(timeout: pollInterval)
                }
            }
        }
    }

    /// Claims up to `free` jobs due now, shared between brands (`share`). It looks with a read first,
    /// which on SQLite does not wait for the writer: a look that finds nothing due (the runner's
    /// polls while idle, twice a second) takes no write transaction. The write looks again.
    func claim(free: Int, running: RunningJobs) async throws -> [JobRecord] {
        let (mine, owners) = running.snapshot()
        let due = try await store.read { repo in try await repo.claimableJobOwners(now: clock.now(), excluding: mine) }
        guard !due.isEmpty else { return [] }
        return try await store.write { repo in
            let now = clock.now()
            let waiting = try await repo.claimableJobOwners(now: now, excluding: mine)
            var jobs: [JobRecord] = []
            for (owner, slots) in Self.share(free: free, concurrency: concurrency, running: owners, waiting: waiting) {
                jobs += try await repo.claimJobs(now: now, lease: lease, limit: slots, excluding: mine, owner: owner)
            }
            return jobs
        }
    }

    /// Runs every job due now on the injected clock, and what they make due, until none is left;
    /// returns how many ran. For tests that move a `ManualClock`: what a timer or a retry does
    /// happens here, at once, instead of after the runner's next look (a real-time poll, which is
    /// for noticing jobs other nodes add).
    @discardableResult
    public func runDue(limit: Int = 1_000) async throws -> Int {
        var ran = 0
        while ran < limit {
            let room = limit - ran
            let claimed = try await store.write { repo in
                let now = clock.now()
                var jobs: [JobRecord] = []
                for (owner, _) in try await repo.claimableJobOwners(now: now, excluding: []) {
                    jobs += try await repo.claimJobs(now: now, lease: lease, limit: room, excluding: [], owner: owner)
                }
                return jobs
            }
            if claimed.isEmpty { break }
            await withDiscardingTaskGroup { group in
                for job in claimed { group.addTask { await self.execute(job) } }
            }
            ran += claimed.count
        }
        return ran
    }

    /// Shares `free` slots between the owners (brands) that have jobs waiting, so that one brand's
    /// backlog never delays another brand's work: each slot in turn goes to the waiting owner with the
    /// fewest jobs running here (ties: whose oldest job has waited longest), and no owner holds more
    /// than `concurrency - 1` slots, so one is always left for somebody else's job (a brand's 20,000
    /// pushes to a provider that hangs for 30 s each cannot hold every slot). With one slot in all,
    /// that one is shared the same way.
    static func share(free: Int, concurrency: Int, running: [JobOwner: Int], waiting: [(owner: JobOwner, due: Date)]) -> [(JobOwner, Int)] {
        let cap = max(1, concurrency - 1)
        var held = running
        var given: [JobOwner: Int] = [:]
        let oldestFirst = waiting.sorted { $0.due < $1.due }
        var candidates = oldestFirst
        for _ in 0..<max(0, free) {
            candidates.removeAll { held[$0.owner, default: 0] >= cap }
            guard let next = candidates.enumerated().min(by: { a, b in
                let (x, y) = (held[a.element.owner, default: 0], held[b.element.owner, default: 0])
                return x != y ? x < y : a.offset < b.offset
            })?.element else { break }
            held[next.owner, default: 0] += 1
            given[next.owner, default: 0] += 1
        }
        // Oldest first, so that the order of claims follows the order of waiting.
        return oldestFirst.compactMap { candidate in given[candidate.owner].map { (candidate.owner, $0) } }
    }

    /// Runs one claimed job and records what happened, under the id of the request that enqueued it
    /// (or its own, `job_<seq>`): its log lines and the jobs it enqueues carry it.
    func execute(_ job: JobRecord) async {
        await Self.underItsRequest(job) { await run(job) }
    }

    static func underItsRequest(_ job: JobRecord, _ work: () async -> Void) async {
        await RequestID.with(job.requestId ?? "job_\(job.seq)") {
            guard Traces.on else { return await work() }
            await withSpan("job \(job.kind)", ofKind: .consumer) { span in
                span.attributes["parley.request_id"] = RequestID.current
                span.attributes["parley.job.kind"] = job.kind
                span.attributes["parley.job.attempt"] = job.attempts
                await work()
            }
        }
    }

    private func run(_ job: JobRecord) async {
        guard let handler = handlers[job.kind] else {
            logger.error("a job of an unknown kind was given up", metadata: ["kind": "\(job.kind)", "job": "\(job.seq)"])
            try? await store.write { repo in try await repo.failJob(seq: job.seq, error: "no handler for \(job.kind)", at: clock.now()) }
            return
        }
        let started = ContinuousClock.now
        do {
            try await handler.run(job)
            try await store.write { repo in try await repo.completeJob(seq: job.seq) }
            metrics.jobsDone.increment()
            metrics.jobRan(kind: job.kind, outcome: "done", in: .now - started)
        } catch let failure as JobFailure {
            metrics.jobRan(kind: job.kind, outcome: failure.outcome, in: .now - started)
            await record(failure, of: job, handler: handler)
        } catch {
            metrics.jobRan(kind: job.kind, outcome: "retried", in: .now - started)
            await record(.retry("\(error)"), of: job, handler: handler)
        }
    }

    private func record(_ failure: JobFailure, of job: JobRecord, handler: any JobHandler) async {
        let now = clock.now()
        do {
            switch failure {
            case .notYet(let after):
                try await store.write { repo in
                    try await repo.rescheduleJob(seq: job.seq, runAt: now.addingTimeInterval(after.seconds), error: nil, countAttempt: false, at: now)
                }
            case .retry(let reason, let after) where job.attempts < job.maxAttempts:
                let delay = after?.seconds ?? Self.backoff(attempt: job.attempts)
                logger.notice(
                    "a job will be retried", metadata: ["kind": "\(job.kind)", "job": "\(job.seq)", "attempt": "\(job.attempts)", "error": "\(reason)"])
                metrics.jobsRetried.increment()
                try await store.write { repo in
                    try await repo.rescheduleJob(seq: job.seq, runAt: now.addingTimeInterval(delay), error: reason, countAttempt: true, at: now)
                }
            case .retry(let reason, _), .permanent(let reason):
                logger.warning("a job failed", metadata: ["kind": "\(job.kind)", "job": "\(job.seq)", "attempts": "\(job.attempts)", "error": "\(reason)"])
                metrics.jobsFailed.increment()
                try await store.write { repo in try await repo.failJob(seq: job.seq, error: reason, at: now) }
                await handler.gaveUp(job, reason: reason)
            }
        } catch {
            // The lease runs out and the job is claimed again.
            logger.error("could not record a job's outcome", metadata: ["job": "\(job.seq)", "error": "\(error)"])
        }
    }

    /// Seconds before retry `attempt` (1-based): 5 s, 10 s, 20 s... up to an hour, with up to a
    /// fifth more at random so that jobs failed together do not return together.
    static func backoff(attempt: Int) -> TimeInterval {
        let base = min(maxBackoff, firstBackoff * pow(2, Double(max(0, attempt - 1))))
        return base + Double.random(in: 0...(base / 5))
    }
}

/// How many jobs this runner has started and not finished, and whose they are.
final class RunningJobs: Sendable {
    /// The jobs this node is running: never claimed again here, even once their lease has run out
    /// (a slow job is still running; only another node may take it over), and how many each owner has.
    private let state = Mutex<(seqs: Set<Int64>, owners: [JobOwner: Int])>(([], [:]))

    func snapshot() -> (seqs: Set<Int64>, owners: [JobOwner: Int]) { state.withLock { $0 } }

    var count: Int { state.withLock { $0.seqs.count } }

    func start(_ job: JobRecord) {
        state.withLock { state in
            state.seqs.insert(job.seq)
            state.owners[JobOwner(job.brandId), default: 0] += 1
        }
    }

    func finish(_ job: JobRecord) {
        state.withLock { state in
            state.seqs.remove(job.seq)
            let owner = JobOwner(job.brandId)
            let left = state.owners[owner, default: 1] - 1
            state.owners[owner] = left > 0 ? left : nil
        }
    }
}
