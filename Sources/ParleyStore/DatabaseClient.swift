import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresKit
import SQLiteKit

/// Which SQL engine a `DatabaseClient` talks to. The SQL is the same; a few statements differ.
public enum DatabaseFlavor: String, Sendable {
    case sqlite
    case postgres
}

/// Where the database lives, parsed from a URL: `sqlite:///abs/path.sqlite`, `sqlite://relative/path.sqlite`,
/// `sqlite::memory:`, or `postgres://user:password@host:port/database`.
public enum DatabaseLocation: Sendable, Hashable, CustomStringConvertible {
    case sqliteFile(path: String)
    case sqliteMemory
    case postgres(url: String)

    public init(url: String) throws(StoreError) {
        if url == "sqlite::memory:" {
            self = .sqliteMemory
        } else if url.hasPrefix("sqlite://") {
            let path = String(url.dropFirst("sqlite://".count))
            guard !path.isEmpty else {
                throw StoreError.configuration("a sqlite URL needs a file path, like sqlite://./data/parley.sqlite")
            }
            self = .sqliteFile(path: path)
        } else if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            _ = try PostgresSettings(url: url)  // refuses a bad URL, sslmode or sslrootcert by name
            self = .postgres(url: url)
        } else {
            throw StoreError.configuration("'\(DatabaseLocation.redact(url))' is neither a sqlite:// nor a postgres:// URL")
        }
    }

    public var flavor: DatabaseFlavor {
        switch self {
        case .sqliteFile, .sqliteMemory: .sqlite
        case .postgres: .postgres
        }
    }

    /// The URL with any password removed, for logs and error messages.
    public var description: String {
        switch self {
        case .sqliteFile(let path): "sqlite://\(path)"
        case .sqliteMemory: "sqlite::memory:"
        case .postgres(let url): DatabaseLocation.redact(url)
        }
    }

    static func redact(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }
}

extension SQLPostgresConfiguration {
    fileprivate static func isValid(url: String) -> Bool {
        (try? SQLPostgresConfiguration(url: url)) != nil
    }
}

/// Errors of the storage layer that are not a client's fault.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public static func configuration(_ message: String) -> StoreError { .init(description: message) }
    public static func corrupt(_ message: String) -> StoreError { .init(description: "stored data is inconsistent: \(message)") }
}

/// Runs SQL against one database. Writes run in a transaction; reads see committed data.
public protocol DatabaseClient: Sendable {
    var flavor: DatabaseFlavor { get }
    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    /// Runs read-only `body` outside a write transaction.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    /// Runs `body`, which writes with one statement, as a transaction of its own: no BEGIN and COMMIT
    /// around it (on PostgreSQL one round trip where they made three). A body that runs more than one
    /// statement gets no atomicity across them.
    func alone<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    /// Closes every connection. The client cannot be used afterwards.
    func close() async
}

extension DatabaseClient {
    /// A write transaction like any other where a statement costs no round trip (SQLite's group
    /// commit batches it with the others).
    public func alone<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await write(body)
    }
}

extension SQLDatabase {
    /// Runs `body` between `begin` and COMMIT on this connection; rolls back when it throws.
    func inTransaction<T: Sendable>(begin: SQLQueryString, _ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await raw(begin).run()
        do {
            let result = try await body(self)
            try await raw("COMMIT").run()
            return result
        } catch {
            try? await raw("ROLLBACK").run()
            throw error
        }
    }
}

/// Opens the database named by a location. `fullSync`: SQLite fsyncs every commit
/// (`synchronous=FULL`, survives power loss) instead of at checkpoints (`NORMAL`).
/// `walMegabytes`: how much SQLite's WAL may hold before writes wait for a checkpoint that starts it again.
/// `poolSize`: PostgreSQL's connections, opened at start and kept (SQLite has one writer and one reader).
public func openDatabase(
    _ location: DatabaseLocation, fullSync: Bool = false, walMegabytes: Int = 128, poolSize: Int = 16, logger: Logger
) async throws -> any DatabaseClient {
    switch location {
    case .sqliteFile(let path):
        try SQLiteDatabaseClient.prepareDirectory(for: path)
        return try await SQLiteDatabaseClient.open(
            path: path, fullSync: fullSync, checkpoints: .init(restartFrames: SQLiteDatabaseClient.CheckpointPolicy.frames(megabytes: walMegabytes)),
            logger: logger)
    case .sqliteMemory:
        return try await SQLiteDatabaseClient.open(path: nil, fullSync: fullSync, logger: logger)
    case .postgres(let url):
        return try await PostgresDatabaseClient.open(url: url, poolSize: poolSize, logger: logger)
    }
}
