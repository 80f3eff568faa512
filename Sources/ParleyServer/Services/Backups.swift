import Crypto
import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore
import SQLKit

/// `parley backup`, `parley restore` and `parley check` (docs/operations.md, "Backup and restore").
///
/// A backup is a folder: the database (SQLite: `VACUUM INTO`, a consistent copy taken while the
/// server runs; PostgreSQL: `pg_dump --format=custom`), the media when they are on local disk, the
/// secret key files, and `manifest.json` with every file's size and SHA-256, written last (a
/// backup without it is incomplete). With media in S3 the backup holds the database and the keys;
/// the bucket is protected by its own versioning and replication.
///
/// Restore refuses a backup whose files do not match their manifest, and a data directory or a
/// database that is not empty; it changes nothing then. Check verifies a data directory: the
/// database's integrity and that every file a row refers to is in the media store.
public enum Backups {
    public struct Manifest: Codable, Sendable, Equatable {
        public struct File: Codable, Sendable, Equatable {
            public var path: String
            public var bytes: Int
            public var sha256: String
        }

        public var format = 1
        public var parley: String
        public var schema: Int
        public var createdAt: Date
        /// `sqlite` or `postgres`.
        public var database: String
        /// Whether the media are in the backup (local disk) or in the object store.
        public var media: String
        public var files: [File]
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    static let manifestName = "manifest.json"
    static let sqliteName = "parley.sqlite"
    static let dumpName = "parley.pgdump"
    static let keyNames = ["secret.key", "vapid.key"]

    static var coders: (JSONEncoder, JSONDecoder) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return (encoder, decoder)
    }

    // MARK: Backup

    /// Writes a backup of the running (or stopped) installation to `folder`, which must not exist
    /// or be empty.
    public static func create(_ services: ParleyServices, to folder: URL) async throws -> Manifest {
        let configuration = services.configuration
        try requireEmpty(folder, what: "The backup folder")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let schema = try await Migrations.appliedVersions(in: services.store.database).last ?? 0
        let database: String
        switch services.store.flavor {
        case .sqlite:
            database = "sqlite"
            let target = folder.appendingPathComponent(sqliteName).path
            // One consistent snapshot, even while the server writes (WAL).
            try await services.store.database.read { db in try await db.raw("VACUUM INTO \(bind: target)").run() }
        case .postgres:
            database = "postgres"
            try await pgTool("pg_dump", ["--format=custom", "--no-owner", "--file", folder.appendingPathComponent(dumpName).path, configuration.resolvedDatabaseURL])
        }
        for name in keyNames {
            let source = URL(fileURLWithPath: configuration.dataDirectory).appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: source.path) {
                try FileManager.default.copyItem(at: source, to: folder.appendingPathComponent(name))
            }
        }
        // Media after the database: a file written meanwhile is copied too (no row refers to it yet:
        // the janitor removes it after a restore); every row in the copy has its file.
        let local = configuration.s3Endpoint == nil
        if local {
            try copyTree(URL(fileURLWithPath: configuration.mediaDirectory), to: folder.appendingPathComponent("media"), skipping: [".partial"])
        }
        var manifest = Manifest(
            parley: BuildInfo.current.version, schema: schema, createdAt: Date(), database: database, media: local ? "local" : "s3",
            files: try files(in: folder))
        manifest.files.sort { $0.path < $1.path }
        try coders.0.encode(manifest).write(to: folder.appendingPathComponent(manifestName), options: .atomic)
        return manifest
    }

    // MARK: Restore

    /// Verifies the backup in `folder` against its manifest, then restores it into the data
    /// directory of `configuration` (which must be empty) and, for PostgreSQL, into its database
    /// (which must have no tables). Returns the manifest.
    public static func restore(from folder: URL, into configuration: ParleyConfiguration) async throws -> Manifest {
        let manifest = try verify(folder)
        let dataDirectory = URL(fileURLWithPath: configuration.dataDirectory)
        try requireEmpty(dataDirectory, what: "The data directory")
        let wantsPostgres = configuration.resolvedDatabaseURL.hasPrefix("postgres")
        switch (manifest.database, wantsPostgres) {
        case ("sqlite", false), ("postgres", true): break
        case ("sqlite", true): throw Failure("This backup is of a SQLite installation; restore it without --database-url.")
        default: throw Failure("This backup is of a PostgreSQL installation; give --database-url of an empty database.")
        }
        if wantsPostgres {
            let database = try await PostgresDatabaseClient.open(url: configuration.resolvedDatabaseURL, poolSize: 1, logger: Logger(label: "parley-restore"))
            let tables = try await database.read { db in
                try await db.raw("SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = 'public'").first()?.decode(column: "n", as: Int.self) ?? 0
            }
            await database.close()
            guard tables == 0 else { throw Failure("The database is not empty (\(tables) tables); restore into an empty one.") }
        }
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        do {
            if wantsPostgres {
                try await pgTool("pg_restore", ["--no-owner", "--exit-on-error", "--dbname", configuration.resolvedDatabaseURL, folder.appendingPathComponent(dumpName).path])
            } else {
                try FileManager.default.copyItem(at: folder.appendingPathComponent(sqliteName), to: dataDirectory.appendingPathComponent(sqliteName))
            }
            for name in keyNames where FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path) {
                try FileManager.default.copyItem(at: folder.appendingPathComponent(name), to: dataDirectory.appendingPathComponent(name))
                _ = chmod(dataDirectory.appendingPathComponent(name).path, 0o600)
            }
            let media = folder.appendingPathComponent("media")
            if FileManager.default.fileExists(atPath: media.path) {
                try FileManager.default.copyItem(at: media, to: dataDirectory.appendingPathComponent("media"))
            }
        } catch {
            // Leave nothing half-restored in the directory the operator gave.
            if let contents = try? FileManager.default.contentsOfDirectory(at: dataDirectory, includingPropertiesForKeys: nil) {
                for item in contents { try? FileManager.default.removeItem(at: item) }
            }
            throw error
        }
        return manifest
    }

    /// The manifest, once every file it lists is there with its size and checksum, and nothing else is.
    public static func verify(_ folder: URL) throws -> Manifest {
        let manifestURL = folder.appendingPathComponent(manifestName)
        guard let data = try? Data(contentsOf: manifestURL) else {
            throw Failure("\(folder.path) has no \(manifestName): it is not a backup, or the backup did not finish.")
        }
        let manifest: Manifest
        do {
            manifest = try coders.1.decode(Manifest.self, from: data)
        } catch {
            throw Failure("\(manifestURL.path) cannot be read: \(error)")
        }
        guard manifest.format == 1 else { throw Failure("This backup's format (\(manifest.format)) is newer than this Parley reads.") }
        let present = Dictionary(uniqueKeysWithValues: try files(in: folder).map { ($0.path, $0) })
        for file in manifest.files {
            guard let found = present[file.path] else { throw Failure("The backup is damaged: \(file.path) is missing.") }
            guard found == file else { throw Failure("The backup is damaged: \(file.path) is not the file that was backed up (size or checksum differs).") }
        }
        let extra = Set(present.keys).subtracting(manifest.files.map(\.path)).subtracting([manifestName])
        if let first = extra.sorted().first { throw Failure("The backup holds a file its manifest does not list: \(first).") }
        return manifest
    }

    // MARK: Check

    public struct CheckReport: Sendable {
        public var database: String
        public var referenced: Int
        public var missing: [String]
    }

    /// The database's integrity, and every media file a row refers to.
    public static func check(_ services: ParleyServices) async throws -> CheckReport {
        var integrity = "ok"
        if services.store.flavor == .sqlite {
            let rows = try await services.store.database.read { db in try await db.raw("PRAGMA integrity_check").all() }
            let lines = try rows.map { try $0.decode(column: "integrity_check", as: String.self) }
            integrity = lines == ["ok"] ? "ok" : lines.prefix(5).joined(separator: "; ")
        } else {
            _ = try await services.store.read { repo in try await repo.brandCount() }
        }
        let keys = try await referencedKeys(services.store)
        // One listing per folder (a message's files share one), not one per file.
        var present: [String: Set<String>] = [:]
        var missing: [String] = []
        for key in keys {
            let folder = key.split(separator: "/").dropLast().joined(separator: "/")
            if present[folder] == nil { present[folder] = Set(try await services.blobs.list(prefix: folder).map(\.key)) }
            if present[folder]?.contains(key) != true { missing.append(key) }
        }
        return CheckReport(database: integrity, referenced: keys.count, missing: missing)
    }

    /// Every media key a row names: voice originals and renditions, attachments and thumbnails, logos.
    static func referencedKeys(_ store: Store) async throws -> [String] {
        try await store.database.read { db in
            var keys: [String] = []
            for row in try await db.raw("SELECT original_key, opus_key, aac_key FROM voice_media").all() {
                for column in ["original_key", "opus_key", "aac_key"] {
                    if let key = try row.decodeNil(column: column) ? nil : row.decode(column: column, as: String.self) { keys.append(key) }
                }
            }
            for row in try await db.raw("SELECT original_key, thumbnail_key FROM attachments").all() {
                for column in ["original_key", "thumbnail_key"] {
                    if let key = try row.decodeNil(column: column) ? nil : row.decode(column: column, as: String.self) { keys.append(key) }
                }
            }
            for row in try await db.raw("SELECT brand_id, logo_version FROM brand_settings WHERE logo_version > 0").all() {
                keys.append(
                    AttachmentService.logoKey(BrandID(rawValue: try row.decode(column: "brand_id", as: String.self)), try row.decode(column: "logo_version", as: Int.self)))
            }
            return keys
        }
    }

    // MARK: Files

    static func requireEmpty(_ folder: URL, what: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) else { return }
        guard isDirectory.boolValue else { throw Failure("\(what) \(folder.path) is a file.") }
        let contents = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        guard contents.isEmpty else { throw Failure("\(what) \(folder.path) is not empty; give an empty or new one.") }
    }

    /// Every regular file under `folder`, with its size and SHA-256 (read in 1 MB pieces).
    static func files(in folder: URL) throws -> [Manifest.File] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        let base = folder.standardizedFileURL.path
        var found: [Manifest.File] = []
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            let path = String(url.standardizedFileURL.path.dropFirst(base.count + 1))
            guard path != manifestName else { continue }
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            var hash = SHA256()
            var bytes = 0
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                hash.update(data: chunk)
                bytes += chunk.count
            }
            found.append(Manifest.File(path: path, bytes: bytes, sha256: hash.finalize().map { String(format: "%02x", $0) }.joined()))
        }
        return found
    }

    static func copyTree(_ source: URL, to target: URL, skipping: Set<String>) throws {
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        guard FileManager.default.fileExists(atPath: source.path) else { return }
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) where !skipping.contains(name) {
            try FileManager.default.copyItem(at: source.appendingPathComponent(name), to: target.appendingPathComponent(name))
        }
    }

    /// Runs a PostgreSQL client tool (pg_dump, pg_restore) from PATH or the server's bin folder.
    static func pgTool(_ name: String, _ arguments: [String]) async throws {
        let candidates = [ProcessRunner.locate(name)]
            + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin/\(name)" }
        guard let tool = candidates.compactMap({ $0 }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure("\(name) is needed for a PostgreSQL backup (apt-get install postgresql-client).")
        }
        let outcome = try await ProcessRunner(executable: tool).run(arguments, timeout: .seconds(3600))
        guard outcome.status == 0 else { throw Failure("\(name) failed: \(outcome.stderrTail.suffix(500))") }
    }
}
