import Foundation
import ParleyDomain
import Logging
import SQLKit

/// One versioned schema change. `statements` are plain SQL that SQLite and PostgreSQL both accept;
/// `sqlite` and `postgres` run after them on that database only (full-text search differs).
public struct Migration: Sendable {
    public var version: Int
    public var name: String
    public var statements: [String]
    public var sqlite: [String] = []
    public var postgres: [String] = []
}

/// The schema, as the ordered list of every change ever made to it, one file per version in this
/// folder (`V007_...swift`). Never edit a released migration: add a new file and list it here.
public enum Migrations {
    public static let all: [Migration] = [.v1, .v2, .v3, .v4, .v5, .v6, .v7, .v8, .v9, .v10, .v11, .v12, .v13, .v14, .v15, .v16, .v17, .v18, .v19, .v20, .v21, .v22, .v23, .v24, .v25, .v26, .v27, .v28, .v29, .v30, .v31, .v32, .v33]

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
        try await refuseNewer(database)
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
                let own = database.flavor == .postgres ? migration.postgres : migration.sqlite
                for statement in migration.statements + own {
                    try await db.raw(SQLQueryString(stringLiteral: statement)).run()
                }
                try await db.raw(
                    """
                    INSERT INTO schema_migrations (version, name, applied_at)
                    VALUES (\(bind: migration.version), \(bind: migration.name), \(bind: StoredTime.millis(Date())))
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

    /// The schema version this binary knows (its last migration).
    public static var latest: Int { all.last?.version ?? 0 }

    /// A database a newer Parley has migrated is not served by this one: its code would read and
    /// write tables as they were, beside columns and rows it knows nothing of.
    static func refuseNewer(_ database: any DatabaseClient) async throws {
        let newest = try await database.read { db in
            try await db.raw("SELECT MAX(version) AS v FROM schema_migrations").first()?.decode(column: "v", as: Int?.self)
        }
        if let newest, newest > latest {
            throw StoreError.configuration(
                "the database's schema is version \(newest), newer than this Parley's \(latest): a newer Parley upgraded it. "
                    + "Run that version or a later one; going back needs the backup taken before the upgrade (docs/upgrading.md)")
        }
    }

    /// The versions recorded as applied.
    public static func appliedVersions(in database: any DatabaseClient) async throws -> [Int] {
        try await database.read { db in
            try await db.raw("SELECT version FROM schema_migrations ORDER BY version").all()
                .map { try $0.decode(column: "version", as: Int.self) }
        }
    }
}
