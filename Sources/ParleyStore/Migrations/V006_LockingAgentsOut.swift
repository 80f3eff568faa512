extension Migration {
    /// Version 6: locking agents out.
    static let v6 = Migration(
        version: 6, name: "locking agents out",
        statements: [
            "ALTER TABLE agents ADD COLUMN disabled_at BIGINT",
            "ALTER TABLE agents ADD COLUMN deleted_at BIGINT",
        ])
}
