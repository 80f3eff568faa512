extension Migration {
    /// Version 32: voice notes' transcripts, a step of their own beside the renditions and the scan.
    ///
    /// `voice_media` keeps the transcript with its note (retention and erasure remove both in one
    /// statement); the brand's switch and language live in `brand_settings`. Search: SQLite indexes
    /// transcripts in an FTS5 table of their own, written when a transcript is stored (rare, and
    /// never on a message's commit) and cleared by a trigger when the note goes; PostgreSQL, a GIN
    /// index on the `simple` text-search vector as for messages. Rows are found by message id, never by
    /// rowid (which a VACUUM may renumber).
    static let v32 = Migration(
        version: 32, name: "transcripts",
        statements: [
            "ALTER TABLE brand_settings ADD COLUMN transcription INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE brand_settings ADD COLUMN transcription_language TEXT NOT NULL DEFAULT 'en'",
            "ALTER TABLE voice_media ADD COLUMN transcript_state TEXT",
            "ALTER TABLE voice_media ADD COLUMN transcript_text TEXT",
            "ALTER TABLE voice_media ADD COLUMN transcript_language TEXT",
            "ALTER TABLE voice_media ADD COLUMN transcript_low_confidence INTEGER NOT NULL DEFAULT 0",
        ],
        sqlite: [
            "CREATE VIRTUAL TABLE transcript_search USING fts5(body, message_id UNINDEXED, tokenize='unicode61 remove_diacritics 2')",
            """
            CREATE TRIGGER transcript_search_delete AFTER DELETE ON voice_media
            WHEN old.transcript_text IS NOT NULL AND old.transcript_text <> '' BEGIN
                DELETE FROM transcript_search WHERE message_id = old.message_id;
            END
            """,
        ],
        postgres: [
            "CREATE INDEX transcript_search ON voice_media USING gin (to_tsvector('simple', transcript_text)) WHERE transcript_text <> ''"
        ])
}
