import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLiteKit

/// SQLite in WAL mode: one writer connection, whose transactions run one at a time, and one reader
/// connection, which sees committed data without waiting for the writer.
///
/// Durability: `synchronous=NORMAL` in WAL mode. A committed transaction survives the process being
/// killed at any moment (SIGKILL, crash); a power loss can lose the last commits before a checkpoint.
/// Set `synchronous=FULL` through `PARLEY_SQLITE_SYNCHRONOUS=full` to survive power loss at the cost of
/// one fsync per commit.
public final class SQLiteDatabaseClient: DatabaseClient {
    public let flavor = DatabaseFlavor.sqlite
    private let writer: SQLiteHandle
    private let reader: SQLiteHandle
    private let writeLock = AsyncMutex()
    private let logger: Logger

    private init(writer: SQLiteHandle, reader: SQLiteHandle, logger: Logger) {
        self.writer = writer
        self.reader = reader
        self.logger = logger
    }

    static func prepareDirectory(for path: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.configuration("cannot create the database directory '\(directory)': \(error.localizedDescription)")
        }
    }

    /// Opens a file (a writer and a reader connection) or, with `nil`, a private in-memory database
    /// (one connection: it exists on that connection only).
    public static func open(path: String?, logger: Logger) async throws -> SQLiteDatabaseClient {
        let synchronous = ProcessInfo.processInfo.environment["PARLEY_SQLITE_SYNCHRONOUS"]?.lowercased() == "full" ? "FULL" : "NORMAL"
        let writer = try SQLiteHandle(path: path ?? ":memory:")
        let reader = try path.map { try SQLiteHandle(path: $0) } ?? writer
        do {
            for connection in reader === writer ? [writer] : [writer, reader] {
                let db = DirectSQLiteDatabase(handle: connection, logger: logger)
                try await db.raw("PRAGMA busy_timeout = 5000").run()
                try await db.raw("PRAGMA foreign_keys = ON").run()
                try await db.raw(SQLQueryString("PRAGMA synchronous = \(unsafeRaw: synchronous)")).run()
            }
            if path != nil {
                try await DirectSQLiteDatabase(handle: writer, logger: logger).raw("PRAGMA journal_mode = WAL").run()
            }
        } catch {
            writer.close()
            reader.close()
            throw error
        }
        return SQLiteDatabaseClient(writer: writer, reader: reader, logger: logger)
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let db = DirectSQLiteDatabase(handle: writer, logger: logger)
        // IMMEDIATE takes the write lock at BEGIN, so a transaction never fails half-way on a busy lock.
        return try await writeLock.withLock { try await db.inTransaction(begin: "BEGIN IMMEDIATE", body) }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if reader === writer {
            let db = DirectSQLiteDatabase(handle: writer, logger: logger)
            return try await writeLock.withLock { try await body(db) }
        }
        return try await body(DirectSQLiteDatabase(handle: reader, logger: logger))
    }

    public func close() async {
        writer.close()
        if reader !== writer {
            reader.close()
        }
    }
}
