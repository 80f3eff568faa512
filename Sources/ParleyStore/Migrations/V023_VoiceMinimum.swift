extension Migration {
    /// Version 23: the shortest voice note a brand accepts (1 second unless it says otherwise).
    static let v23 = Migration(
        version: 23, name: "voice minimum",
        statements: [
            "ALTER TABLE brand_settings ADD COLUMN voice_min_seconds INTEGER NOT NULL DEFAULT 1",
        ])
}
