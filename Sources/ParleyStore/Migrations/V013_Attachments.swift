extension Migration {
    /// Version 13: images and files in conversations (one per message), what a brand accepts, and
    /// the brand's logo.
    static let v13 = Migration(
        version: 13, name: "attachments",
        statements: [
            """
            CREATE TABLE attachments (
                message_id TEXT PRIMARY KEY REFERENCES messages(id),
                brand_id TEXT NOT NULL,
                type TEXT NOT NULL,
                file_name TEXT NOT NULL,
                bytes BIGINT NOT NULL,
                width INTEGER,
                height INTEGER,
                original_key TEXT NOT NULL,
                thumbnail_key TEXT,
                thumbnail_bytes BIGINT,
                scan TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "ALTER TABLE brand_settings ADD COLUMN attachment_groups TEXT NOT NULL DEFAULT 'images,pdf,text,office'",
            "ALTER TABLE brand_settings ADD COLUMN attachment_max_megabytes INTEGER NOT NULL DEFAULT 10",
            "ALTER TABLE brand_settings ADD COLUMN logo_version INTEGER NOT NULL DEFAULT 0",
        ])
}
