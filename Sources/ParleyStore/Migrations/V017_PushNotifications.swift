extension Migration {
    /// Version 17: consumers' devices registered for notifications, apps' push credentials (sealed
    /// by the server's key), and whether a brand's notifications show the message text.
    static let v17 = Migration(
        version: 17, name: "push notifications",
        statements: [
            """
            CREATE TABLE push_registrations (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                app_id TEXT NOT NULL,
                consumer_id TEXT NOT NULL,
                provider TEXT NOT NULL,
                token TEXT NOT NULL,
                environment TEXT,
                keys TEXT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                UNIQUE (provider, token)
            )
            """,
            "CREATE INDEX push_registrations_consumer ON push_registrations (consumer_id)",
            """
            CREATE TABLE push_credentials (
                app_id TEXT NOT NULL,
                provider TEXT NOT NULL,
                brand_id TEXT NOT NULL,
                sealed_secrets TEXT NOT NULL,
                settings TEXT,
                updated_at BIGINT NOT NULL,
                PRIMARY KEY (app_id, provider)
            )
            """,
            "ALTER TABLE brand_settings ADD COLUMN push_preview TEXT NOT NULL DEFAULT 'masked'",
        ])
}
