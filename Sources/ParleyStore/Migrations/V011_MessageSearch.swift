extension Migration {
    /// Version 11: full-text search over the text of messages (not voice notes' transcript lines).
    /// SQLite: an FTS5 index kept by triggers, with the message row's rowid as its key. PostgreSQL: a
    /// GIN index on the `simple` text-search vector (no stemming: brands write in many languages).
    static let v11 = Migration(
        version: 11, name: "message search",
        statements: [],
        sqlite: [
            "CREATE VIRTUAL TABLE message_search USING fts5(body, content='messages', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')",
            """
            CREATE TRIGGER message_search_insert AFTER INSERT ON messages WHEN new.kind = 'text' BEGIN
                INSERT INTO message_search (rowid, body) VALUES (new.rowid, new.body);
            END
            """,
            """
            CREATE TRIGGER message_search_delete AFTER DELETE ON messages WHEN old.kind = 'text' BEGIN
                INSERT INTO message_search (message_search, rowid, body) VALUES ('delete', old.rowid, old.body);
            END
            """,
            """
            CREATE TRIGGER message_search_update AFTER UPDATE OF body ON messages WHEN old.kind = 'text' BEGIN
                INSERT INTO message_search (message_search, rowid, body) VALUES ('delete', old.rowid, old.body);
                INSERT INTO message_search (rowid, body) VALUES (new.rowid, new.body);
            END
            """,
            "INSERT INTO message_search (rowid, body) SELECT rowid, body FROM messages WHERE kind = 'text'",
        ],
        postgres: [
            "CREATE INDEX message_search ON messages USING gin (to_tsvector('simple', body)) WHERE kind = 'text'"
        ])
}
