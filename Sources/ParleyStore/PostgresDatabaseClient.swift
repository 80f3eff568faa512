import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresKit
import NIOConcurrencyHelpers
import PostgresNIO

/// PostgreSQL through PostgresNIO's connection pool. Each write runs in its own transaction on one
/// pooled connection; concurrent writers to the same conversation are ordered by its row lock.
public final class PostgresDatabaseClient: DatabaseClient {
    public let flavor = DatabaseFlavor.postgres
    /// One pool per event loop, its connections on that loop (`LoopPools`).
    private let pools: LoopPools
    private let runTask: Task<Void, Never>
    private let logger: Logger
    /// The names of the statements kept prepared on every connection (`PreparedSQL`).
    private let statementNames = PreparedStatementNames()

    private init(pools: LoopPools, runTask: Task<Void, Never>, logger: Logger) {
        self.pools = pools
        self.runTask = runTask
        self.logger = logger
    }

    /// How long the start-up check may take to connect, negotiate TLS and sign in.
    public static let connectTimeout: Duration = .seconds(10)

    /// Opens `poolSize` connections (all at once, kept open), after one made by hand has shown that
    /// the server answers, TLS is as `sslmode` asks (`PostgresSettings`) and the user may sign in: a
    /// failure ends within `connectTimeout` with PostgreSQL's own message and SQLSTATE, where the pool
    /// would retry for a minute and end in `connectionCreationCircuitBreakerTripped`.
    ///
    /// The connections are shared out between `eventLoopGroup`'s loops, one pool per loop (`LoopPools`).
    public static func open(
        url: String, poolSize: Int = 16, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) async throws -> PostgresDatabaseClient {
        let settings = try PostgresSettings(url: url)
        // The check comes before the pool: the pool opens all its connections as soon as it runs
        // (`PostgresSettings.clientConfiguration`), and each failure would be a log line of its own.
        try await check(settings, url: url, logger: logger)
        let pools = try LoopPools(
            loops: Array(eventLoopGroup.makeIterator()), poolSize: poolSize, logger: logger
        ) { size in try settings.clientConfiguration(poolSize: size, connectTimeout: connectTimeout) }
        // The pools run until `close()` cancels this task; the client owns it. The first lease waits
        // for the task to begin: it signals just before it calls each `run()`, which marks the pool
        // running at once (PostgresNIO warns of a lease before that).
        let (started, signal) = AsyncStream<Void>.makeStream()
        let runTask = Task {
            await withDiscardingTaskGroup { group in
                for pool in pools.all {
                    group.addTask {
                        signal.yield()
                        await pool.client.run()
                    }
                }
            }
        }
        var running = 0
        for await _ in started {
            running += 1
            if running == pools.all.count { break }
        }
        // The signal comes just before `run()`, whose first statement marks the pool running. A
        // thread preempted between the two let the first lease in first (CI once, with both cores
        // busy: one warning). PostgresNIO offers no way to see that `run()` has begun, so start-up
        // gives those tasks a moment (once per pool opened, not per request).
        try? await Task.sleep(for: .milliseconds(20))
        let database = PostgresDatabaseClient(pools: pools, runTask: runTask, logger: logger)
        do {
            for pool in pools.all {
                _ = try await pool.client.withConnection { connection in
                    try await database.session(connection).raw("SELECT 1 AS ok").first()
                }
            }
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
        try await pools.current.withConnection { connection in
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
        try await pools.current.withConnection { connection in
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

/// The connection pools of one database, one per event loop, each with its connections on its loop:
/// a task takes a connection of the loop it runs on, so the answer resumes it on the same thread.
///
/// `parley serve` runs Swift Concurrency on NIO's loops (`Parley.swift`), and a task resumes on the
/// loop whose connection answered it. PostgresNIO opens every connection of one pool on the group's
/// `any()`, which NIO answers with the caller's own loop: all of them landed on one loop, and nearly
/// all of a node's work followed them onto one thread (perf of the cluster bench: 87% of node A's CPU
/// on one of its two loops). Spreading one pool's connections over the loops (`next()`) balanced
/// the threads but cost a thread hop for most statements, and more CPU per message (one run of the
/// cluster bench; docs/architecture.md, "What a message costs"). With a pool per loop, a socket's frames, its statements and its answers stay
/// on the socket's loop, and the sockets are shared out between the loops as they are accepted.
/// PostgresNIO's pool has no way to prefer a loop, hence this.
final class LoopPools: Sendable {
    struct Pool: Sendable {
        let loop: any EventLoop
        let client: PostgresClient
        /// Its connections.
        let size: Int
    }

    let all: [Pool]
    private let byLoop: [ObjectIdentifier: Int]
    /// For tasks that run off the loops (tests, tools): the pools in turn.
    private let turn = NIOLockedValueBox(0)

    /// `poolSize` connections shared out between the loops (the first loops get one more where it
    /// does not divide); with fewer connections than loops, the first `poolSize` loops get one each.
    init(
        loops: [any EventLoop], poolSize: Int, logger: Logger,
        configuration: (Int) throws -> PostgresClient.Configuration
    ) throws {
        let loops = loops.isEmpty ? [MultiThreadedEventLoopGroup.singleton.next()] : loops
        let count = max(1, min(poolSize, loops.count))
        var pools: [Pool] = []
        for index in 0..<count {
            let size = max(1, poolSize / count + (index < poolSize % count ? 1 : 0))
            let loop = loops[index]
            pools.append(Pool(
                loop: loop,
                client: PostgresClient(configuration: try configuration(size), eventLoopGroup: loop, backgroundLogger: logger),
                size: size))
        }
        all = pools
        byLoop = Dictionary(uniqueKeysWithValues: pools.enumerated().map { (ObjectIdentifier($0.element.loop), $0.offset) })
    }

    /// The pool of the loop this code runs on, else the next in turn.
    var current: PostgresClient {
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop, let index = byLoop[ObjectIdentifier(loop)] {
            return all[index].client
        }
        if all.count == 1 { return all[0].client }
        let index = turn.withLockedValue { turn in
            turn = (turn + 1) % all.count
            return turn
        }
        return all[index].client
    }
}

/// Whether an error is a unique-constraint violation, in either engine.
public func isUniqueViolation(_ error: any Error) -> Bool {
    if let error = error as? PSQLError {
        return error.serverInfo?[.sqlState] == "23505"
    }
    return String(describing: error).contains("UNIQUE constraint failed")
}
