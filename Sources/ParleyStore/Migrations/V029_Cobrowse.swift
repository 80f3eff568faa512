extension Migration {
    /// Version 29: co-browse. A session's record (nothing of the page is stored), the brand's
    /// switch, sites and mask selectors, and the session an event of the conversation's log records.
    static let v29 = Migration(
        version: 29, name: "cobrowse",
        statements: [
            """
            CREATE TABLE cobrowse_sessions (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                conversation_id TEXT NOT NULL REFERENCES conversations(id),
                consumer_id TEXT NOT NULL,
                agent_id TEXT NOT NULL,
                agent_name TEXT NOT NULL,
                state TEXT NOT NULL,
                version INTEGER NOT NULL,
                agent_connection TEXT NOT NULL,
                consumer_connection TEXT,
                consumer_connected INTEGER NOT NULL,
                origin TEXT,
                offered_at BIGINT NOT NULL,
                started_at BIGINT,
                ended_at BIGINT,
                end_reason TEXT,
                event_seq BIGINT
            )
            """,
            "CREATE INDEX cobrowse_by_conversation ON cobrowse_sessions (conversation_id, offered_at)",
            "CREATE INDEX cobrowse_live ON cobrowse_sessions (ended_at)",
            "ALTER TABLE conversation_events ADD COLUMN cobrowse_id TEXT",
            "ALTER TABLE brand_settings ADD COLUMN cobrowse_enabled INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE brand_settings ADD COLUMN cobrowse_origins TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE brand_settings ADD COLUMN cobrowse_mask_selectors TEXT NOT NULL DEFAULT ''",
        ])
}
