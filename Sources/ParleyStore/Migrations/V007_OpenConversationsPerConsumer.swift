extension Migration {
    /// Version 7: open conversations per consumer.
    static let v7 = Migration(
        version: 7, name: "open conversations per consumer",
        statements: [
            "ALTER TABLE brand_settings ADD COLUMN open_conversations_per_consumer INTEGER NOT NULL DEFAULT 1",
        ])
}
