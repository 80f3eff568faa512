extension Migration {
    /// Version 20: conversations' lifecycle. A brand's lifecycle settings (automatic close per
    /// channel, the warning, the rating question, business hours and holidays), its automatic
    /// messages per language and which of them are on, and on each conversation: the closed one it
    /// continues, its rating, and when the customer was warned of the close. Consumers get a
    /// language; rating events keep their score. The customer's last message is now kept on every
    /// channel (automatic close counts from it): existing conversations take it from their messages.
    static let v20 = Migration(
        version: 20, name: "lifecycle",
        statements: [
            "CREATE TABLE lifecycle_settings (brand_id TEXT PRIMARY KEY, settings TEXT NOT NULL)",
            """
            CREATE TABLE automatic_messages (
                brand_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                language TEXT NOT NULL,
                text TEXT NOT NULL,
                PRIMARY KEY (brand_id, kind, language)
            )
            """,
            "CREATE TABLE automatic_message_switches (brand_id TEXT NOT NULL, kind TEXT NOT NULL, enabled INTEGER NOT NULL, PRIMARY KEY (brand_id, kind))",
            "ALTER TABLE conversations ADD COLUMN previous_conversation_id TEXT",
            "ALTER TABLE conversations ADD COLUMN survey TEXT",
            "ALTER TABLE conversations ADD COLUMN rating_score INTEGER",
            "ALTER TABLE conversations ADD COLUMN rating_comment TEXT",
            "ALTER TABLE conversations ADD COLUMN rating_agent_id TEXT",
            "ALTER TABLE conversations ADD COLUMN rated_at BIGINT",
            "ALTER TABLE conversations ADD COLUMN close_warned_at BIGINT",
            "ALTER TABLE conversation_events ADD COLUMN score INTEGER",
            "ALTER TABLE consumers ADD COLUMN language TEXT",
            """
            UPDATE conversations SET last_consumer_message_at = (
                SELECT MAX(created_at) FROM messages WHERE messages.conversation_id = conversations.id AND messages.sender_kind = 'consumer')
            WHERE last_consumer_message_at IS NULL
            """,
        ])
}
