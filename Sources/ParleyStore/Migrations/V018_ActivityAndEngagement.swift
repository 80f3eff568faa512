extension Migration {
    /// Version 18: what consumers' apps report (ParleyKit's `report`), brands' engagement rules, and
    /// when a rule last acted for a consumer (its cool-down).
    static let v18 = Migration(
        version: 18, name: "activity and engagement rules",
        statements: [
            """
            CREATE TABLE activity_events (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                app_id TEXT NOT NULL,
                consumer_id TEXT NOT NULL,
                client_event_id TEXT NOT NULL,
                name TEXT NOT NULL,
                properties TEXT NOT NULL,
                occurred_at BIGINT NOT NULL,
                received_at BIGINT NOT NULL,
                UNIQUE (consumer_id, client_event_id)
            )
            """,
            "CREATE INDEX activity_events_consumer ON activity_events (consumer_id, occurred_at)",
            """
            CREATE TABLE engagement_rules (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                name TEXT NOT NULL,
                app_id TEXT,
                event TEXT NOT NULL,
                property TEXT,
                comparison TEXT,
                value TEXT,
                action TEXT NOT NULL,
                body TEXT NOT NULL,
                cooldown_hours INTEGER NOT NULL,
                enabled INTEGER NOT NULL,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX engagement_rules_brand ON engagement_rules (brand_id, event)",
            """
            CREATE TABLE engagement_firings (
                rule_id TEXT NOT NULL,
                consumer_id TEXT NOT NULL,
                fired_at BIGINT NOT NULL,
                PRIMARY KEY (rule_id, consumer_id)
            )
            """,
        ])
}
