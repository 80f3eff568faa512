import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresKit
import PostgresNIO

/// PostgreSQL through PostgresNIO's connection pool. Each write runs in its own transaction on one
/// pooled connection; concurrent writers to the same conversation are ordered by its row lock.
public final class PostgresDatabaseClient: DatabaseClient {
    public let flavor = DatabaseFlavor.postgres
    private let client: PostgresClient
    private let runTask: Task<Void, Never>
    private let logger: Logger
    /// The names of the statements kept prepared on every connection (`PreparedSQL`).
    private let statementNames = PreparedStatementNames()

    private init(client: PostgresClient, runTask: Task<Void, Never>, logger: Logger) {
        self.client = client
        self.runTask = runTask
        self.logger = logger
    }

    /// How long the start-up check may take to connect, negotiate TLS and sign in.
    public static let connectTimeout: Duration = .seconds(10)

    /// Opens a pool of `poolSize` connections (all at once, kept open), after one made by hand has shown
    /// that the server answers, TLS is as `sslmode` asks (`PostgresSettings`) and the user may sign
    /// in: a failure ends within `connectTimeout` with PostgreSQL's own message and SQLSTATE, where
    /// the pool would retry for a minute and end in `connectionCreationCircuitBreakerTripped`.
    public static func open(url: String, poolSize: Int = 16, logger: Logger) async throws -> PostgresDatabaseClient {
        let settings = try PostgresSettings(url: url)
        // The check comes before the pool: the pool opens all its connections as soon as it runs
        // (`PostgresSettings.clientConfiguration`), and each failure would be a log line of its own.
        try await check(settings, url: url, logger: logger)
        let client = PostgresClient(
            configuration: try settings.clientConfiguration(poolSize: poolSize, connectTimeout: connectTimeout), backgroundLogger: logger)
        // The pool runs until `close()` cancels this task; the client owns it. The first lease waits
        // for the task to begin: it signals just before it calls `run()`, which marks the client
        // running at once (PostgresNIO warns of a lease before that).
        let (started, signal) = AsyncStream<Void>.makeStream()
        let runTask = Task {
            signal.finish()
            await client.run()
        }
        for await _ in started {}
        let database = PostgresDatabaseClient(client: client, runTask: runTask, logger: logger)
        do {
            _ = try await database.read { db in try await db.raw("SELECT 1 AS ok").first() }
        } catch {
            await database.close()
            throw StoreError.configuration("cannot connect to PostgreSQL at \(DatabaseLocation.redact(url)): \(describe(error, settings))")
        }
        return database
    }

    /// One connection, made and closed, within `connectTimeout`.
    static func check(_ settings: PostgresSettings, url: String, logger: Logger) async throws {
        // The TCP connection gets a second less than the whole check, so that either says "no answer".
        let configuration = try settings.connectionConfiguration(connectTimeout: connectTimeout - .seconds(1))
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                    try await connection.close()
                }
                group.addTask {
                    try await Task.sleep(for: connectTimeout)
                    throw StoreError.configuration("no answer within \(connectTimeout.components.seconds) s")
                }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            throw StoreError.configuration("cannot connect to PostgreSQL at \(DatabaseLocation.redact(url)): \(describe(error, settings))")
        }
    }

    /// The operating system's or TLS's words for why a connection failed, without NIO's wrapping.
    static func reason(_ error: any Error) -> String {
        if let connection = error as? NIOConnectionError, let first = connection.connectionErrors.first {
            return "\(connection.host):\(connection.port): \(reason(first.error))"
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if case .connectTimeout = error as? ChannelError { return "no answer within \(connectTimeout.components.seconds) s" }
        if let tls = error as? NIOSSLError { return "TLS: \(tls)" }
        if let tls = error as? NIOSSLExtraError { return "TLS: \(tls)" }
        return "\(error)"
    }

    /// One line for an operator: PostgreSQL's own message and SQLSTATE, or what stopped the connection.
    static func describe(_ error: any Error, _ settings: PostgresSettings) -> String {
        if let storeError = error as? StoreError { return storeError.description }
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        switch error.code {
        case .sslUnsupported:
            return "the server does not offer TLS, and sslmode=\(settings.sslMode.rawValue) requires it"
        case .connectionError, .failedToAddSSLHandler:
            return error.underlying.map(reason) ?? "the connection failed"
        default:
            return error.underlying.map { "\(error.code): \($0)" } ?? "\(error.code)"
        }
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await self.session(connection).inTransaction(begin: "BEGIN", body)
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await onConnection(body)
    }

    /// Without BEGIN, a statement is its own transaction (PostgreSQL's autocommit).
    public func alone<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await onConnection(body)
    }

    /// `body` on a pooled connection, with no transaction opened around it.
    private func onConnection<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await body(self.session(connection))
        }
    }

    private func session(_ connection: PostgresConnection) -> PostgresSession {
        PostgresSession(connection: connection, logger: logger, statementNames: statementNames)
    }

    public func close() async {
        runTask.cancel()
        _ = await runTask.value
    }
}

/// Whether an error is a unique-constraint violation, in either engine.
public func isUniqueViolation(_ error: any Error) -> Bool {
    if let error = error as? PSQLError {
        return error.serverInfo?[.sqlState] == "23505"
    }
    return String(describing: error).contains("UNIQUE constraint failed")
}
