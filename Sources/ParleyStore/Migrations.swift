import Foundation
import Logging
import SQLKit

/// One versioned schema change. Statements are plain SQL that SQLite and PostgreSQL both accept.
public struct Migration: Sendable {
    public var version: Int
    public var name: String
    public var statements: [String]
}

/// The schema, as the ordered list of every change ever made to it. Never edit a released migration:
/// add a new one.
public enum Migrations {
    public static let all: [Migration] = [
        Migration(
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
            ]),
        Migration(
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
            ]),
        Migration(
            version: 3, name: "voice messages and brand settings",
            statements: [
                """
                CREATE TABLE brand_settings (
                    brand_id TEXT PRIMARY KEY REFERENCES brands(id),
                    voice_max_seconds INTEGER NOT NULL,
                    voice_from_consumers INTEGER NOT NULL,
                    voice_from_agents INTEGER NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE voice_media (
                    message_id TEXT PRIMARY KEY REFERENCES messages(id),
                    brand_id TEXT NOT NULL,
                    container TEXT NOT NULL,
                    original_key TEXT NOT NULL,
                    original_bytes BIGINT NOT NULL,
                    duration_ms INTEGER NOT NULL,
                    waveform TEXT NOT NULL,
                    state TEXT NOT NULL,
                    failure_reason TEXT,
                    opus_key TEXT,
                    opus_bytes BIGINT,
                    aac_key TEXT,
                    aac_bytes BIGINT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX voice_media_by_state ON voice_media (state)",
                "ALTER TABLE conversation_events ADD COLUMN message_id TEXT",
            ]),
        Migration(
            version: 4, name: "calls",
            statements: [
                """
                CREATE TABLE calls (
                    id TEXT PRIMARY KEY,
                    brand_id TEXT NOT NULL REFERENCES brands(id),
                    conversation_id TEXT NOT NULL REFERENCES conversations(id),
                    media TEXT NOT NULL,
                    state TEXT NOT NULL,
                    invited_by TEXT NOT NULL,
                    inviter_name TEXT NOT NULL,
                    answered_by TEXT,
                    invited_at BIGINT NOT NULL,
                    answered_at BIGINT,
                    connected_at BIGINT,
                    ended_at BIGINT,
                    outcome TEXT,
                    end_reason TEXT,
                    ended_by TEXT,
                    duration_seconds INTEGER,
                    event_seq BIGINT
                )
                """,
                "CREATE INDEX calls_by_conversation ON calls (conversation_id, invited_at)",
                "CREATE INDEX calls_unfinished ON calls (ended_at)",
                "ALTER TABLE conversation_events ADD COLUMN call_id TEXT",
            ]),
        Migration(
            version: 5, name: "malware scanning and card masking",
            statements: [
                "ALTER TABLE voice_media ADD COLUMN scan_state TEXT NOT NULL DEFAULT 'clean'",
                "ALTER TABLE voice_media ADD COLUMN scan_detail TEXT",
                "ALTER TABLE voice_media ADD COLUMN scan_attempts INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE voice_media ADD COLUMN scan_next_at BIGINT",
                "CREATE INDEX voice_media_by_scan ON voice_media (scan_state, scan_next_at)",
                "ALTER TABLE brand_settings ADD COLUMN scan_failure_policy TEXT NOT NULL DEFAULT 'closed'",
                "ALTER TABLE brand_settings ADD COLUMN card_masking TEXT NOT NULL DEFAULT 'off'",
            ]),
        Migration(
            version: 6, name: "locking agents out",
            statements: [
                "ALTER TABLE agents ADD COLUMN disabled_at BIGINT",
                "ALTER TABLE agents ADD COLUMN deleted_at BIGINT",
            ]),
        Migration(
            version: 7, name: "open conversations per consumer",
            statements: [
                "ALTER TABLE brand_settings ADD COLUMN open_conversations_per_consumer INTEGER NOT NULL DEFAULT 1",
            ]),
    ]

    /// Applies every migration not yet recorded in `schema_migrations`, each in its own transaction,
    /// and returns the versions it applied. Safe to run from several nodes at once on PostgreSQL.
    @discardableResult
    public static func apply(to database: any DatabaseClient, logger: Logger) async throws -> [Int] {
        try await database.write { db in
            try await db.raw(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version INTEGER PRIMARY KEY,
                    name TEXT NOT NULL,
                    applied_at BIGINT NOT NULL
                )
                """
            ).run()
        }
        var applied: [Int] = []
        for migration in all {
            let didApply = try await database.write { db -> Bool in
                if database.flavor == .postgres {
                    // Serializes migrating nodes; released at commit.
                    try await db.raw("SELECT pg_advisory_xact_lock(72717375)").run()
                }
                let existing = try await db.raw(
                    "SELECT version FROM schema_migrations WHERE version = \(bind: migration.version)"
                ).first()
                if existing != nil { return false }
                for statement in migration.statements {
                    try await db.raw(SQLQueryString(stringLiteral: statement)).run()
                }
                try await db.raw(
                    """
                    INSERT INTO schema_migrations (version, name, applied_at)
                    VALUES (\(bind: migration.version), \(bind: migration.name), \(bind: Clock.nowMillis()))
                    """
                ).run()
                return true
            }
            if didApply {
                logger.info("applied migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
                applied.append(migration.version)
            }
        }
        return applied
    }

    /// The versions recorded as applied.
    public static func appliedVersions(in database: any DatabaseClient) async throws -> [Int] {
        try await database.read { db in
            try await db.raw("SELECT version FROM schema_migrations ORDER BY version").all()
                .map { try $0.decode(column: "version", as: Int.self) }
        }
    }
}

/// Milliseconds since 1970: how every timestamp is stored.
public enum Clock {
    public static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    /// Now, at the millisecond precision that is stored, so that what a write returns equals what a
    /// later read finds.
    public static func now() -> Date { date(nowMillis()) }
    public static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
    public static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}
