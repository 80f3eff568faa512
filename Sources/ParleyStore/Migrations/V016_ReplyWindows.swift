extension Migration {
    /// Version 16: when each conversation's reply window ends, stored when the customer writes. The
    /// window's length depends on the app's connection (Messenger: 24 hours, or 7 days with Meta's
    /// Human Agent permission), so it is kept rather than derived from the channel alone.
    static let v16 = Migration(
        version: 16, name: "reply windows",
        statements: [
            "ALTER TABLE conversations ADD COLUMN reply_window_ends_at BIGINT",
            """
            UPDATE conversations SET reply_window_ends_at = last_consumer_message_at + 86400000
            WHERE last_consumer_message_at IS NOT NULL AND channel IN ('whatsapp', 'messenger')
            """,
        ])
}
