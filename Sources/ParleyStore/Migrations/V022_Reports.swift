extension Migration {
    /// Version 22: what history reports read. Each conversation keeps its first agent reply (when
    /// and who; automatic messages are not replies), written with the reply, so that first-response
    /// times are a column read, not a search of every conversation's messages. Indexes for ratings
    /// and calls of a brand in a period.
    static let v22 = Migration(
        version: 22, name: "reports",
        statements: [
            "ALTER TABLE conversations ADD COLUMN first_reply_at BIGINT",
            "ALTER TABLE conversations ADD COLUMN first_reply_by TEXT",
            """
            UPDATE conversations SET
                first_reply_at = (SELECT m.created_at FROM messages m WHERE m.conversation_id = conversations.id AND m.sender_kind = 'agent'
                    ORDER BY m.seq LIMIT 1),
                first_reply_by = (SELECT m.sender_id FROM messages m WHERE m.conversation_id = conversations.id AND m.sender_kind = 'agent'
                    ORDER BY m.seq LIMIT 1)
            """,
            "CREATE INDEX conversations_rated ON conversations (brand_id, rated_at)",
            "CREATE INDEX calls_by_brand ON calls (brand_id, invited_at)",
        ])
}
