import Foundation
import Logging
import NIOCore
import NIOPosix
import ParleyStore
import PostgresKit
import SQLKit
import Synchronization

/// A `DatabaseClient` that records the statements each transaction and each read runs (their SQL
/// text, without binds), around a real database or, with none, answering every statement with no
/// rows (for code that only sends). What a test asserts on: how many round trips a piece of work
/// costs and which, without timing anything.
final class RecordingDatabase: DatabaseClient {
    /// One `write` (a transaction: BEGIN and COMMIT are the client's, not listed), one `read`, or
    /// one `alone` (a statement that is its own transaction).
    struct Unit: Sendable, CustomStringConvertible {
        enum Kind: String, Sendable { case write, read, alone }
        var kind: Kind
        var statements: [String]
        var isWrite: Bool { kind == .write }
        var description: String { "\(kind.rawValue): " + statements.joined(separator: "; ") }
    }

    private let wrapped = Mutex<(any DatabaseClient)?>(nil)
    /// Units by the order they began in (a unit in flight when `reset` clears them is forgotten).
    private let units = Mutex<(next: Int, byOrder: [Int: Unit])>((0, [:]))

    /// `inner`: the database recorded (a test server's is given later, by `wrap`); none: every
    /// statement answers with no rows.
    init(wrapping inner: (any DatabaseClient)? = nil) {
        wrapped.withLock { $0 = inner }
    }

    /// Records `database` from now on (`TestServer.run(recording:)` hands it the one it opened).
    func wrap(_ database: any DatabaseClient) -> any DatabaseClient {
        wrapped.withLock { $0 = database }
        return self
    }

    private var inner: (any DatabaseClient)? { wrapped.withLock { $0 } }

    var flavor: DatabaseFlavor { inner?.flavor ?? .postgres }

    /// Everything recorded so far, in the order the units began.
    var recorded: [Unit] { units.withLock { $0.byOrder.sorted { $0.key < $1.key }.map(\.value) } }

    /// Forgets what was recorded.
    func reset() { units.withLock { $0.byOrder = [:] } }

    /// How many write transactions (`write` and `alone`) were recorded so far.
    var writes: Int { units.withLock { $0.byOrder.values.count { $0.kind != .read } } }
    /// How many reads were recorded so far.
    var reads: Int { units.withLock { $0.byOrder.values.count { $0.kind == .read } } }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await run(.write, body)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await run(.read, body)
    }

    func alone<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await run(.alone, body)
    }

    func close() async { await inner?.close() }

    private func run<T: Sendable>(_ kind: Unit.Kind, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let index = units.withLock { units in
            units.next += 1
            units.byOrder[units.next] = Unit(kind: kind, statements: [])
            return units.next
        }
        let record: @Sendable (String) -> Void = { sql in self.units.withLock { $0.byOrder[index]?.statements.append(sql) } }
        guard let inner else { return try await body(Recording(inner: nil, record: record)) }
        switch kind {
        case .write: return try await inner.write { db in try await body(Recording(inner: db, record: record)) }
        case .read: return try await inner.read { db in try await body(Recording(inner: db, record: record)) }
        case .alone: return try await inner.alone { db in try await body(Recording(inner: db, record: record)) }
        }
    }

    /// The recording `SQLDatabase` handed to a unit's body.
    private struct Recording: SQLDatabase {
        let inner: (any SQLDatabase)?
        let record: @Sendable (String) -> Void

        var logger: Logger { inner?.logger ?? Logger(label: "recording-database") }
        var eventLoop: any EventLoop { inner?.eventLoop ?? MultiThreadedEventLoopGroup.singleton.any() }
        var version: (any SQLDatabaseReportedVersion)? { inner?.version }
        var dialect: any SQLDialect { inner?.dialect ?? PostgresDialect() }
        var queryLogLevel: Logger.Level? { nil }

        func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
            record(serialize(query).sql)
            return inner?.execute(sql: query, onRow) ?? eventLoop.makeSucceededVoidFuture()
        }

        func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
            record(serialize(query).sql)
            try await inner?.execute(sql: query, onRow)
        }

        func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
            try await closure(self)
        }
    }
}
