extension Migration {
    /// Version 22: what history reports read by time: ratings and calls of a brand in a period.
    static let v22 = Migration(
        version: 22, name: "reports",
        statements: [
            "CREATE INDEX conversations_rated ON conversations (brand_id, rated_at)",
            "CREATE INDEX calls_by_brand ON calls (brand_id, invited_at)",
        ])
}
