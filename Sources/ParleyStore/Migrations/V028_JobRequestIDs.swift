extension Migration {
    /// Version 28: the request, real-time frame or job that enqueued a job, so that the job's logs
    /// carry its id (`RequestID`, docs/operations.md "Logs").
    static let v28 = Migration(
        version: 28, name: "job_request_ids",
        statements: [
            "ALTER TABLE jobs ADD COLUMN request_id TEXT",
        ])
}
