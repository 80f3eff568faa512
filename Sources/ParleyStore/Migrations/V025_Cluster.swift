extension Migration {
    /// Version 25: several nodes. Envelopes of the PostgreSQL event bus too large for a NOTIFY
    /// payload (`PostgresBusTransport`), and token buckets every node shares (`SharedTokenBuckets`).
    static let v25 = Migration(
        version: 25, name: "cluster",
        statements: [
            """
            CREATE TABLE rate_buckets (
                key TEXT PRIMARY KEY,
                tokens DOUBLE PRECISION NOT NULL,
                allowed INTEGER NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX rate_buckets_updated ON rate_buckets (updated_at)",
        ],
        sqlite: [
            "CREATE TABLE bus_payloads (id INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL, created_at BIGINT NOT NULL)",
        ],
        postgres: [
            "CREATE TABLE bus_payloads (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL, created_at BIGINT NOT NULL)",
        ])
}
