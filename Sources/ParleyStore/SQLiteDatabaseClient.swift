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
    private let writer: SQLiteConnection
    private let reader: SQLiteConnection
    private let writeLock = AsyncMutex()

    private init(writer: SQLiteConnection, reader: SQLiteConnection) {
        self.writer = writer
        self.reader = reader
    }

    static func prepareDirectory(for path: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.configuration("cannot create the database directory '\(directory)': \(error.localizedDescription)")
        }
    }

    public static func open(storage: SQLiteConnection.Storage, logger: Logger) async throws -> SQLiteDatabaseClient {
        let threadPool = NIOThreadPool.singleton
        let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
        let synchronous = ProcessInfo.processInfo.environment["PARLEY_SQLITE_SYNCHRONOUS"]?.lowercased() == "full" ? "FULL" : "NORMAL"
        let writer = try await SQLiteConnection.open(storage: storage, threadPool: threadPool, logger: logger, on: eventLoop)
        let reader: SQLiteConnection
        switch storage {
        case .memory:
            // A private in-memory database exists on one connection only.
            reader = writer
        default:
            reader = try await SQLiteConnection.open(storage: storage, threadPool: threadPool, logger: logger, on: eventLoop)
        }
        do {
            for connection in Set([ObjectIdentifier(writer), ObjectIdentifier(reader)]).count == 1 ? [writer] : [writer, reader] {
                let db = connection.sql()
                try await db.raw("PRAGMA busy_timeout = 5000").run()
                try await db.raw("PRAGMA foreign_keys = ON").run()
                try await db.raw(SQLQueryString("PRAGMA synchronous = \(unsafeRaw: synchronous)")).run()
            }
            if case .file = storage {
                try await writer.sql().raw("PRAGMA journal_mode = WAL").run()
            }
        } catch {
            try? await writer.close()
            try? await reader.close()
            throw error
        }
        return SQLiteDatabaseClient(writer: writer, reader: reader)
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let db = writer.sql()
        // IMMEDIATE takes the write lock at BEGIN, so a transaction never fails half-way on a busy lock.
        return try await writeLock.withLock { try await db.inTransaction(begin: "BEGIN IMMEDIATE", body) }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if reader === writer {
            let db = writer.sql()
            return try await writeLock.withLock { try await body(db) }
        }
        return try await body(reader.sql())
    }

    public func close() async {
        try? await writer.close()
        if reader !== writer {
            try? await reader.close()
        }
    }
}
