extension Migration {
    /// Version 3: voice messages and brand settings.
    static let v3 = Migration(
        version: 3, name: "voice messages and brand settings",
        statements: [
            """
            CREATE TABLE brand_settings (
                brand_id TEXT PRIMARY KEY REFERENCES brands(id),
                voice_max_seconds INTEGER NOT NULL,
                voice_from_consumers INTEGER NOT NULL,
                voice_from_agents INTEGER NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE voice_media (
                message_id TEXT PRIMARY KEY REFERENCES messages(id),
                brand_id TEXT NOT NULL,
                container TEXT NOT NULL,
                original_key TEXT NOT NULL,
                original_bytes BIGINT NOT NULL,
                duration_ms INTEGER NOT NULL,
                waveform TEXT NOT NULL,
                state TEXT NOT NULL,
                failure_reason TEXT,
                opus_key TEXT,
                opus_bytes BIGINT,
                aac_key TEXT,
                aac_bytes BIGINT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX voice_media_by_state ON voice_media (state)",
            "ALTER TABLE conversation_events ADD COLUMN message_id TEXT",
        ])
}
