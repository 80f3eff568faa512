extension Migration {
    /// Version 21: records. A brand's records settings (how long it keeps conversations, how far
    /// back customers see theirs), legal holds on a conversation or a customer, and the audit log of
    /// what retention and erasure removed (counts, never content). Indexes by time for retention,
    /// transcripts of a date range and reports. Every brand's retention job.
    static let v21 = Migration(
        version: 21, name: "records",
        statements: [
            "CREATE TABLE records_settings (brand_id TEXT PRIMARY KEY, settings TEXT NOT NULL)",
            """
            CREATE TABLE legal_holds (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                conversation_id TEXT,
                consumer_id TEXT,
                reason TEXT NOT NULL,
                created_by TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX legal_holds_by_brand ON legal_holds (brand_id)",
            """
            CREATE TABLE purges (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                cutoff BIGINT,
                subject TEXT,
                actor TEXT NOT NULL,
                conversations INTEGER NOT NULL,
                messages INTEGER NOT NULL,
                events INTEGER NOT NULL,
                voice_notes INTEGER NOT NULL,
                attachments INTEGER NOT NULL,
                files INTEGER NOT NULL,
                started_at BIGINT NOT NULL,
                finished_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX purges_by_brand ON purges (brand_id, finished_at)",
            "CREATE INDEX conversations_begun ON conversations (brand_id, created_at, id)",
            "CREATE INDEX messages_by_time ON messages (brand_id, created_at)",
            "CREATE INDEX conversation_events_by_time ON conversation_events (brand_id, created_at)",
            // Each brand's retention job (RecordsService), due at once; new brands get theirs when created.
            """
            INSERT INTO jobs (brand_id, kind, lane, payload, dedupe_key, state, attempts, max_attempts, run_at, locked_until, last_error,
                created_at, updated_at)
            SELECT NULL, 'records.retention', NULL, '{"brandId":"' || id || '"}', 'retention:' || id, 'queued', 0, 8, 0, NULL, NULL, 0, 0
            FROM brands
            """,
        ])
}
