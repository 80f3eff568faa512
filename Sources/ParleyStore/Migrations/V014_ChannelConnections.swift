extension Migration {
    /// Version 14: an app's connection to a messaging provider (secrets sealed by the server's key).
    static let v14 = Migration(
        version: 14, name: "channel connections",
        statements: [
            """
            CREATE TABLE channel_connections (
                app_id TEXT PRIMARY KEY REFERENCES apps(id),
                brand_id TEXT NOT NULL,
                channel TEXT NOT NULL,
                external_id TEXT NOT NULL,
                sealed_secrets TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                UNIQUE (channel, external_id)
            )
            """
        ])
}
