extension Migration {
    /// Version 30: whether the brand lets customers share their screen in calls (off until an
    /// admin turns it on; agents share with the `share_screen` permission).
    static let v30 = Migration(
        version: 30, name: "screen_share",
        statements: [
            "ALTER TABLE brand_settings ADD COLUMN screen_share_from_consumers INTEGER NOT NULL DEFAULT 0"
        ])
}
