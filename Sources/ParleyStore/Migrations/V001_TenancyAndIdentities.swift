extension Migration {
    /// Version 1: tenancy and identities.
    static let v1 = Migration(
        version: 1, name: "tenancy and identities",
        statements: [
            """
            CREATE TABLE brands (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE apps (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                name TEXT NOT NULL,
                channel TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX apps_by_brand ON apps (brand_id)",
            """
            CREATE TABLE app_keys (
                app_id TEXT NOT NULL REFERENCES apps(id),
                kid TEXT NOT NULL,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                algorithm TEXT NOT NULL,
                key_material TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (app_id, kid)
            )
            """,
            """
            CREATE TABLE agents (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                email TEXT NOT NULL UNIQUE,
                name TEXT NOT NULL,
                password_hash TEXT NOT NULL,
                role TEXT NOT NULL,
                permissions TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX agents_by_brand ON agents (brand_id)",
            """
            CREATE TABLE consumers (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                app_id TEXT NOT NULL REFERENCES apps(id),
                external_id TEXT,
                display_name TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                UNIQUE (brand_id, external_id)
            )
            """,
            """
            CREATE TABLE sessions (
                token_hash TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                subject_kind TEXT NOT NULL,
                subject_id TEXT NOT NULL,
                app_id TEXT,
                created_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                revoked_at BIGINT
            )
            """,
            "CREATE INDEX sessions_by_subject ON sessions (subject_id)",
        ])
}
