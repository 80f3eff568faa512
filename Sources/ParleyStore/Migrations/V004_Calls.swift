extension Migration {
    /// Version 4: calls.
    static let v4 = Migration(
        version: 4, name: "calls",
        statements: [
            """
            CREATE TABLE calls (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                conversation_id TEXT NOT NULL REFERENCES conversations(id),
                media TEXT NOT NULL,
                state TEXT NOT NULL,
                invited_by TEXT NOT NULL,
                inviter_name TEXT NOT NULL,
                answered_by TEXT,
                invited_at BIGINT NOT NULL,
                answered_at BIGINT,
                connected_at BIGINT,
                ended_at BIGINT,
                outcome TEXT,
                end_reason TEXT,
                ended_by TEXT,
                duration_seconds INTEGER,
                event_seq BIGINT
            )
            """,
            "CREATE INDEX calls_by_conversation ON calls (conversation_id, invited_at)",
            "CREATE INDEX calls_unfinished ON calls (ended_at)",
            "ALTER TABLE conversation_events ADD COLUMN call_id TEXT",
        ])
}
