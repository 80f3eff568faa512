extension Migration {
    /// Version 15: durable jobs (outbound channel delivery, provider media fetches, processing of
    /// webhooks after they are acknowledged), each outbound message's delivery through its channel,
    /// and the time of the customer's last message where a channel has a reply window.
    ///
    /// A job's `seq` orders it within its lane (jobs of one lane run one at a time, in order).
    static let v15 = Migration(
        version: 15, name: "jobs and channel delivery",
        statements: [
            """
            CREATE TABLE channel_deliveries (
                message_id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                conversation_id TEXT NOT NULL,
                channel TEXT NOT NULL,
                state TEXT NOT NULL,
                provider_message_id TEXT,
                error_code TEXT,
                error_message TEXT,
                retryable INTEGER NOT NULL,
                updated_at BIGINT NOT NULL,
                template TEXT
            )
            """,
            "CREATE UNIQUE INDEX channel_deliveries_provider ON channel_deliveries (channel, provider_message_id)",
            "ALTER TABLE conversations ADD COLUMN last_consumer_message_at BIGINT",
            // A connection's settings that are not secret (WhatsApp: its message templates), JSON.
            "ALTER TABLE channel_connections ADD COLUMN settings TEXT",
        ],
        sqlite: [
            """
            CREATE TABLE jobs (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                brand_id TEXT,
                kind TEXT NOT NULL,
                lane TEXT,
                payload TEXT NOT NULL,
                dedupe_key TEXT UNIQUE,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                max_attempts INTEGER NOT NULL,
                run_at BIGINT NOT NULL,
                locked_until BIGINT,
                last_error TEXT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX jobs_due ON jobs (state, run_at)",
            "CREATE INDEX jobs_lane ON jobs (lane, seq)",
        ],
        postgres: [
            """
            CREATE TABLE jobs (
                seq BIGSERIAL PRIMARY KEY,
                brand_id TEXT,
                kind TEXT NOT NULL,
                lane TEXT,
                payload TEXT NOT NULL,
                dedupe_key TEXT UNIQUE,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                max_attempts INTEGER NOT NULL,
                run_at BIGINT NOT NULL,
                locked_until BIGINT,
                last_error TEXT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX jobs_due ON jobs (state, run_at)",
            "CREATE INDEX jobs_lane ON jobs (lane, seq)",
        ])
}
