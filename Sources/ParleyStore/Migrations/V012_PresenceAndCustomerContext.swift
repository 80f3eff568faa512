extension Migration {
    /// Version 12: agents' presence; the name on an agent's message; what agents see about a consumer (contact claims, the claims the
    /// brand exposes, the page and browser the widget last reported); the brand's widget look,
    /// availability texts, idle time and exposed claims.
    static let v12 = Migration(
        version: 12, name: "presence and customer context",
        statements: [
            "ALTER TABLE agents ADD COLUMN presence TEXT NOT NULL DEFAULT 'online'",
            "ALTER TABLE agents ADD COLUMN presence_automatic INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE agents ADD COLUMN presence_at BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN sender_name TEXT",
            "ALTER TABLE consumers ADD COLUMN email TEXT",
            "ALTER TABLE consumers ADD COLUMN phone TEXT",
            "ALTER TABLE consumers ADD COLUMN attributes TEXT",
            "ALTER TABLE consumers ADD COLUMN last_page_url TEXT",
            "ALTER TABLE consumers ADD COLUMN last_page_title TEXT",
            "ALTER TABLE consumers ADD COLUMN last_browser TEXT",
            "ALTER TABLE consumers ADD COLUMN last_seen_at BIGINT",
            "ALTER TABLE brand_settings ADD COLUMN auto_away_minutes INTEGER NOT NULL DEFAULT 10",
            "ALTER TABLE brand_settings ADD COLUMN exposed_claims TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE brand_settings ADD COLUMN preview_origins TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE brand_settings ADD COLUMN widget_color TEXT NOT NULL DEFAULT '#4f46e5'",
            "ALTER TABLE brand_settings ADD COLUMN available_text TEXT NOT NULL DEFAULT 'Typically replies in a few minutes'",
            "ALTER TABLE brand_settings ADD COLUMN away_text TEXT NOT NULL DEFAULT 'We''re away right now. Leave a message and we''ll reply here.'",
        ])
}
