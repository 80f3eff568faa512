extension Migration {
    /// Version 10: a brand's saved replies, one per shortcut.
    static let v10 = Migration(
        version: 10, name: "saved replies",
        statements: [
            """
            CREATE TABLE saved_replies (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                shortcut TEXT NOT NULL,
                body TEXT NOT NULL,
                created_by TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                UNIQUE (brand_id, shortcut)
            )
            """
        ])
}
