extension Migration {
    /// Version 2: conversations and messages.
    static let v2 = Migration(
        version: 2, name: "conversations and messages",
        statements: [
            """
            CREATE TABLE conversations (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                app_id TEXT NOT NULL REFERENCES apps(id),
                consumer_id TEXT NOT NULL REFERENCES consumers(id),
                channel TEXT NOT NULL,
                state TEXT NOT NULL,
                assignee_id TEXT REFERENCES agents(id),
                last_seq BIGINT NOT NULL DEFAULT 0,
                last_message_preview TEXT,
                last_message_at BIGINT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX conversations_by_brand ON conversations (brand_id, updated_at, id)",
            "CREATE INDEX conversations_by_consumer ON conversations (consumer_id, app_id, channel, updated_at)",
            """
            CREATE TABLE messages (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                conversation_id TEXT NOT NULL REFERENCES conversations(id),
                seq BIGINT NOT NULL,
                sender_kind TEXT NOT NULL,
                sender_id TEXT NOT NULL,
                client_message_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                body TEXT NOT NULL,
                delivery_state INTEGER NOT NULL DEFAULT 0,
                created_at BIGINT NOT NULL,
                delivered_at BIGINT,
                read_at BIGINT,
                UNIQUE (conversation_id, seq),
                UNIQUE (sender_id, client_message_id)
            )
            """,
            """
            CREATE TABLE conversation_events (
                conversation_id TEXT NOT NULL REFERENCES conversations(id),
                seq BIGINT NOT NULL,
                brand_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                actor_kind TEXT NOT NULL,
                actor_id TEXT NOT NULL,
                up_to_seq BIGINT,
                delivery_state TEXT,
                state TEXT,
                assignee_id TEXT,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (conversation_id, seq)
            )
            """,
        ])
}
