extension Migration {
    /// Version 8: what a conversation's last message is (text or voice), for lists; filled in for
    /// the conversations that exist.
    static let v8 = Migration(
        version: 8, name: "last message kind",
        statements: [
            "ALTER TABLE conversations ADD COLUMN last_message_kind TEXT",
            """
            UPDATE conversations SET last_message_kind = (
                SELECT kind FROM messages WHERE messages.conversation_id = conversations.id ORDER BY seq DESC LIMIT 1)
            """,
        ])
}
