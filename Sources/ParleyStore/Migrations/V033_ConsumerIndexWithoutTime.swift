extension Migration {
    /// Version 33: `conversations_by_consumer` without `updated_at`. Every message moves its
    /// conversation's `updated_at`, so every message rewrote this index's entry: on SQLite a 4 KB page
    /// more in each message's commit (8 b-trees instead of 7, Tests/ParleyStoreTests/MessagePagesTests.swift), on PostgreSQL an
    /// index tuple more. Nothing read it in that order: a consumer's latest conversation sorts
    /// resolved ones last first (so by an expression, not the index), and a consumer's past
    /// conversations are a handful of rows to sort. The equality columns are what the lookups use.
    static let v33 = Migration(
        version: 33, name: "consumer_index_without_time",
        statements: [
            "DROP INDEX conversations_by_consumer",
            "CREATE INDEX conversations_by_consumer ON conversations (consumer_id, app_id, channel)",
        ])
}
