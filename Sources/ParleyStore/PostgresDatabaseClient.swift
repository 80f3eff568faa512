import Foundation
import Logging
import PostgresKit
import PostgresNIO

/// PostgreSQL through PostgresNIO's connection pool. Each write runs in its own transaction on one
/// pooled connection; concurrent writers to the same conversation are ordered by its row lock.
public final class PostgresDatabaseClient: DatabaseClient {
    public let flavor = DatabaseFlavor.postgres
    private let client: PostgresClient
    private let runTask: Task<Void, Never>
    private let logger: Logger

    private init(client: PostgresClient, runTask: Task<Void, Never>, logger: Logger) {
        self.client = client
        self.runTask = runTask
        self.logger = logger
    }

    public static func open(url: String, logger: Logger) async throws -> PostgresDatabaseClient {
        let sqlConfiguration = try SQLPostgresConfiguration(url: url)
        let core = sqlConfiguration.coreConfiguration
        var configuration: PostgresClient.Configuration
        if let host = core.host, let port = core.port {
            configuration = .init(
                host: host, port: port, username: core.username, password: core.password,
                database: core.database, tls: .disable)
        } else if let socket = core.unixSocketPath {
            configuration = .init(
                unixSocketPath: socket, username: core.username, password: core.password, database: core.database)
        } else {
            throw StoreError.configuration("the postgres URL names neither a host nor a socket")
        }
        configuration.options.maximumConnections = 16
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        // The pool runs until `close()` cancels this task; the client owns it.
        let runTask = Task { await client.run() }
        let database = PostgresDatabaseClient(client: client, runTask: runTask, logger: logger)
        do {
            // Fail early, with the real reason, when the server cannot be reached.
            _ = try await database.read { db in try await db.raw("SELECT 1 AS ok").first() }
        } catch {
            await database.close()
            throw StoreError.configuration("cannot connect to PostgreSQL at \(DatabaseLocation.redact(url)): \(String(reflecting: error))")
        }
        return database
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await connection.sql(queryLogLevel: nil, logger: self.logger).inTransaction(begin: "BEGIN", body)
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await body(connection.sql(queryLogLevel: nil, logger: self.logger))
        }
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
