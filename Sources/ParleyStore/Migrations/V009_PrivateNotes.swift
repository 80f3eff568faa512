extension Migration {
    /// Version 9: agents' private notes are conversation events with a text and the id the agent's
    /// page chose (unique per author, so a retry finds the stored note).
    static let v9 = Migration(
        version: 9, name: "private notes",
        statements: [
            "ALTER TABLE conversation_events ADD COLUMN body TEXT",
            "ALTER TABLE conversation_events ADD COLUMN client_id TEXT",
            "CREATE UNIQUE INDEX conversation_events_by_client ON conversation_events (actor_id, client_id)",
        ])
}
