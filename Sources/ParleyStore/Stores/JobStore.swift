import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Where a durable job is.
public enum JobState: String, Codable, Sendable, Hashable {
    /// Waiting for its `runAt`.
    case queued
    /// Claimed by a runner until `lockedUntil` (after that another runner may claim it again).
    case running
    /// Given up on: kept for admins to see (`GET /v1/jobs`).
    case failed
}

/// Work that must happen later or be retried: one row of the jobs table (ARCHITECTURE.md,
/// "Durable jobs"). A finished job is deleted; a job that finally fails is kept, `failed`.
public struct JobRecord: Sendable, Hashable {
    /// Assigned by the database; orders the jobs of a lane.
    public var seq: Int64
    public var brandId: BrandID?
    /// What runs it (a `JobHandler`'s kind, like `whatsapp.send`).
    public var kind: String
    /// Jobs with the same lane run one at a time, in `seq` order (nil: no ordering).
    public var lane: String?
    /// The handler's input, JSON.
    public var payload: String
    /// A second job with the same key is not enqueued while the first is kept.
    public var dedupeKey: String?
    public var state: JobState
    /// Runs started so far (a claim counts one).
    public var attempts: Int
    public var maxAttempts: Int
    public var runAt: Date
    public var lockedUntil: Date?
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date
    /// The request, real-time frame or job that enqueued it (its logs carry it on).
    public var requestId: String?

    public init(
        brandId: BrandID?, kind: String, lane: String? = nil, payload: String, dedupeKey: String? = nil, maxAttempts: Int, runAt: Date,
        createdAt: Date, requestId: String? = nil
    ) {
        self.requestId = requestId
        (self.seq, self.brandId, self.kind, self.lane, self.payload, self.dedupeKey) = (0, brandId, kind, lane, payload, dedupeKey)
        (self.state, self.attempts, self.maxAttempts, self.runAt, self.lockedUntil, self.lastError) = (.queued, 0, maxAttempts, runAt, nil, nil)
        (self.createdAt, self.updatedAt) = (createdAt, createdAt)
    }
}

/// Whose a job is, for sharing the runner between brands: a brand's, or the server's own (no brand).
public enum JobOwner: Hashable, Sendable, CustomStringConvertible {
    case brand(BrandID)
    case none

    public init(_ brandId: BrandID?) { self = brandId.map(JobOwner.brand) ?? .none }

    public var description: String {
        switch self {
        case .brand(let id): id.rawValue
        case .none: "(server)"
        }
    }
}

public protocol JobStore: Sendable {
    /// Adds a job; false (and nothing added) when a kept job has the same dedupe key.
    @discardableResult
    func enqueueJob(_ job: JobRecord) async throws -> Bool
    /// Marks up to `limit` of `owner`'s due jobs (a brand's, or the jobs of no brand) running until
    /// `now + lease` and returns them: queued jobs whose time has come and running jobs whose lease
    /// ran out (their runner died), never a job whose lane has an earlier job kept. `FOR UPDATE SKIP LOCKED` on PostgreSQL, so nodes never claim the same
    /// job.
    /// `excluding`: jobs the caller is running itself (not taken over even when their lease ran out).
    func claimJobs(now: Date, lease: TimeInterval, limit: Int, excluding: Set<Int64>, owner: JobOwner) async throws -> [JobRecord]
    /// Who has jobs that could be claimed now, each with when its oldest came due: the runner shares
    /// its slots between them. Reads only the due part of the table (the `jobs_due` index).
    func claimableJobOwners(now: Date, excluding: Set<Int64>) async throws -> [(owner: JobOwner, due: Date)]
    /// The job is done: it is removed.
    func completeJob(seq: Int64) async throws
    /// Back to the queue until `runAt`; `countAttempt: false` gives back the attempt its claim took
    /// (the job was not ready, nothing failed).
    func rescheduleJob(seq: Int64, runAt: Date, error: String?, countAttempt: Bool, at: Date) async throws
    /// Given up on, with the reason.
    func failJob(seq: Int64, error: String, at: Date) async throws
    /// A brand's kept jobs in one state, newest first.
    func jobs(brandId: BrandID, state: JobState, limit: Int) async throws -> [JobRecord]
    /// When the next queued job is due, if any (a runner sleeps until then).
    func nextJobDue() async throws -> Date?
}

extension SQLRepository: JobStore {
    public func enqueueJob(_ job: JobRecord) async throws -> Bool {
        let conflict: SQLQueryString = job.dedupeKey == nil ? "" : " ON CONFLICT (dedupe_key) DO NOTHING"
        let rows = try await db.raw(
            """
            INSERT INTO jobs (brand_id, kind, lane, payload, dedupe_key, state, attempts, max_attempts, run_at, locked_until, last_error,
                created_at, updated_at, request_id)
            VALUES (\(bind: job.brandId), \(bind: job.kind), \(bind: job.lane), \(bind: job.payload), \(bind: job.dedupeKey),
                \(bind: JobState.queued.rawValue), 0, \(bind: job.maxAttempts), \(bind: StoredTime.millis(job.runAt)), NULL, NULL,
                \(bind: StoredTime.millis(job.createdAt)), \(bind: StoredTime.millis(job.createdAt)), \(bind: job.requestId))\(conflict)
            RETURNING seq
            """
        ).all()
        return !rows.isEmpty
    }

    public func claimableJobOwners(now: Date, excluding: Set<Int64>) async throws -> [(owner: JobOwner, due: Date)] {
        let at = StoredTime.millis(now)
        let rows = try await db.raw(
            """
            SELECT j.brand_id AS brand_id, MIN(j.run_at) AS due FROM jobs j
            WHERE \(Self.claimable(at: at, excluding: excluding))
            GROUP BY j.brand_id
            """
        ).all()
        return try rows.map { row in
            let brand = try row.decode(column: "brand_id", as: BrandID?.self)
            return (JobOwner(brand), StoredTime.date(try row.decode(column: "due", as: Int64.self)))
        }
    }

    /// Which rows of `jobs j` could be claimed at `at`: queued and due, or running with a lease that
    /// ran out, and not one of `excluding` (sequence numbers this node made itself: integers, written
    /// as literals).
    private static func claimable(at: Int64, excluding: Set<Int64>) -> SQLQueryString {
        let due: SQLQueryString = """
            ((j.state = \(bind: JobState.queued.rawValue) AND j.run_at <= \(bind: at))
                OR (j.state = \(bind: JobState.running.rawValue) AND j.locked_until < \(bind: at)))
            """
        return excluding.isEmpty
            ? due : due + SQLQueryString(" AND j.seq NOT IN (\(unsafeRaw: excluding.sorted().map(String.init).joined(separator: ",")))")
    }

    public func claimJobs(now: Date, lease: TimeInterval, limit: Int, excluding: Set<Int64>, owner: JobOwner) async throws -> [JobRecord] {
        let at = StoredTime.millis(now)
        let owned: SQLQueryString = switch owner {
        case .brand(let brandId): " AND j.brand_id = \(bind: brandId)"
        case .none: " AND j.brand_id IS NULL"
        }
        let until = StoredTime.millis(now.addingTimeInterval(lease))
        let skipLocked: SQLQueryString = flavor == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try await db.raw(
            """
            UPDATE jobs SET state = \(bind: JobState.running.rawValue), attempts = attempts + 1, locked_until = \(bind: until),
                updated_at = \(bind: at)
            WHERE seq IN (
                SELECT seq FROM jobs j
                WHERE \(Self.claimable(at: at, excluding: excluding))\(owned)
                  AND (j.lane IS NULL OR NOT EXISTS (
                    SELECT 1 FROM jobs e WHERE e.lane = j.lane AND e.seq < j.seq AND e.state <> \(bind: JobState.failed.rawValue)))
                ORDER BY j.run_at, j.seq LIMIT \(bind: limit)\(skipLocked)
            )
            RETURNING *
            """
        ).all(JobRow.self).map(\.record).sorted { $0.seq < $1.seq }
    }

    public func completeJob(seq: Int64) async throws {
        try await db.raw("DELETE FROM jobs WHERE seq = \(bind: seq)").run()
    }

    public func rescheduleJob(seq: Int64, runAt: Date, error: String?, countAttempt: Bool, at: Date) async throws {
        let attempts: SQLQueryString = countAttempt ? "attempts" : "attempts - 1"
        try await db.raw(
            """
            UPDATE jobs SET state = \(bind: JobState.queued.rawValue), run_at = \(bind: StoredTime.millis(runAt)), locked_until = NULL,
                attempts = \(attempts), last_error = COALESCE(\(bind: error), last_error), updated_at = \(bind: StoredTime.millis(at))
            WHERE seq = \(bind: seq)
            """
        ).run()
    }

    public func failJob(seq: Int64, error: String, at: Date) async throws {
        try await db.raw(
            """
            UPDATE jobs SET state = \(bind: JobState.failed.rawValue), locked_until = NULL, last_error = \(bind: error),
                updated_at = \(bind: StoredTime.millis(at))
            WHERE seq = \(bind: seq)
            """
        ).run()
    }

    public func jobs(brandId: BrandID, state: JobState, limit: Int) async throws -> [JobRecord] {
        try await db.raw(
            "SELECT * FROM jobs WHERE brand_id = \(bind: brandId) AND state = \(bind: state.rawValue) ORDER BY seq DESC LIMIT \(bind: limit)"
        ).all(JobRow.self).map(\.record)
    }

    public func nextJobDue() async throws -> Date? {
        let row = try await db.raw(
            "SELECT MIN(run_at) AS due FROM jobs WHERE state = \(bind: JobState.queued.rawValue)"
        ).first()
        return try row?.decode(column: "due", as: Int64?.self).map(StoredTime.date)
    }
}

struct JobRow: TableRow {
    static let table = "jobs"
    var seq: Int64
    var brandId: BrandID?
    var kind: String
    var lane: String?
    var payload: String
    var dedupeKey: String?
    var state: JobState
    var attempts: Int
    var maxAttempts: Int
    var runAt: Int64
    var lockedUntil: Int64?
    var lastError: String?
    var createdAt: Int64
    var updatedAt: Int64
    var requestId: String?

    var record: JobRecord {
        var job = JobRecord(
            brandId: brandId, kind: kind, lane: lane, payload: payload, dedupeKey: dedupeKey, maxAttempts: maxAttempts,
            runAt: StoredTime.date(runAt), createdAt: StoredTime.date(createdAt), requestId: requestId)
        job.seq = seq
        job.state = state
        job.attempts = attempts
        job.lockedUntil = lockedUntil.map(StoredTime.date)
        job.lastError = lastError
        job.updatedAt = StoredTime.date(updatedAt)
        return job
    }
}
