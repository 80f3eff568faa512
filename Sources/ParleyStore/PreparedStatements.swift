import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresKit
import PostgresNIO
import SQLKit

// MARK: Statements kept prepared

/// A statement that the database may keep prepared on its connection: on PostgreSQL it is parsed,
/// analysed and planned once per connection instead of on every run (perf of PostgreSQL on the
/// message path, bench/RESULTS.md: parsing, analysis and planning were 42% of its CPU); on SQLite,
/// which keeps every statement prepared already, it runs as any other. Only statements the message
/// path runs on every message are marked: each kept statement costs the server memory on every
/// connection for as long as the connection lives.
struct PreparedSQL: SQLExpression {
    let statement: any SQLExpression

    func serialize(to serializer: inout SQLSerializer) {
        statement.serialize(to: &serializer)
    }
}

extension SQLDatabase {
    /// `raw(query)`, kept prepared where the database can (`PreparedSQL`).
    func prepared(_ query: SQLQueryString) -> PreparedQueryBuilder {
        PreparedQueryBuilder(query: PreparedSQL(statement: query), database: self)
    }

    func prepared(_ statement: DirectStatement) -> PreparedQueryBuilder {
        PreparedQueryBuilder(query: PreparedSQL(statement: statement), database: self)
    }
}

/// `SQLRawBuilder` for a `PreparedSQL` (whose query cannot be replaced): `run()`, `first()`, `all()`.
final class PreparedQueryBuilder: SQLQueryFetcher {
    let query: any SQLExpression
    let database: any SQLDatabase

    init(query: PreparedSQL, database: any SQLDatabase) {
        self.query = query
        self.database = database
    }
}

// MARK: PostgreSQL

/// The `SQLDatabase` a PostgreSQL connection's work gets: PostgresKit's, except that a statement
/// marked `PreparedSQL` runs as a named prepared statement of the connection.
struct PostgresSession: SQLDatabase {
    let connection: PostgresConnection
    let plain: any SQLDatabase
    let statementNames: PreparedStatementNames

    init(connection: PostgresConnection, logger: Logger, statementNames: PreparedStatementNames) {
        self.connection = connection
        self.plain = connection.sql(queryLogLevel: nil, logger: logger)
        self.statementNames = statementNames
    }

    var logger: Logger { plain.logger }
    var eventLoop: any EventLoop { plain.eventLoop }
    var dialect: any SQLDialect { plain.dialect }
    var version: (any SQLDatabaseReportedVersion)? { plain.version }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        plain.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        guard query is PreparedSQL else { return try await plain.execute(sql: query, onRow) }
        let (sql, binds) = serialize(query)
        guard let bindings = Self.bindings(binds), let name = statementNames.name(for: sql) else {
            return try await plain.execute(sql: query, onRow)
        }
        try await NamedStatement.$current.withValue(NamedStatement.Text(name: name, sql: sql)) {
            for try await row in try await connection.execute(NamedStatement(bindings: bindings), logger: logger) {
                onRow(row.sql())
            }
        }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }

    /// The binds as PostgreSQL values, typed as PostgresKit types them (text, 64-bit integers,
    /// booleans, doubles, text arrays, NULL); nil when one is of another type, and the statement
    /// then runs unprepared, as PostgresKit would run it.
    static func bindings(_ binds: [any Encodable & Sendable]) -> PostgresBindings? {
        var bindings = PostgresBindings(capacity: binds.count)
        for bind in binds {
            guard append(bind, to: &bindings) else { return nil }
        }
        return bindings
    }

    private static func append(_ bind: Any, to bindings: inout PostgresBindings) -> Bool {
        switch bind {
        case let value as String: bindings.append(value)
        case let value as Int64: bindings.append(value)
        case let value as Int: bindings.append(Int64(value))
        case let value as Bool: bindings.append(value)
        case let value as Double: bindings.append(value)
        case let value as [String]: bindings.append(value)
        case let value as any RawRepresentable:
            guard let text = value.rawValue as? String else { return false }
            bindings.append(text)
        case let value as any OptionalBind:
            guard let wrapped = value.wrapped else {
                bindings.appendNull()
                return true
            }
            return append(wrapped, to: &bindings)
        default: return false
        }
        return true
    }
}

/// Optional binds, seen through their existential.
private protocol OptionalBind {
    var wrapped: Any? { get }
}

extension Optional: OptionalBind {
    fileprivate var wrapped: Any? { self.map { $0 as Any } }
}

/// PostgresNIO keeps a statement prepared on each connection under its type's static `name` and
/// `sql` (`PostgresPreparedStatement`, its only public way to run a named statement: the older
/// `prepare(query:)` leaves the parameters' types for PostgreSQL to guess, and a 64-bit integer
/// bound to an INTEGER column then fails). Our statements' text is known only when they run (an
/// UPDATE names the columns that changed), so this one type reads its name and text from a task
/// local, set around the one call that reads them (`PostgresConnection.execute(_:logger:)` reads
/// both before it suspends, and again only if the statement fails, still inside the scope).
private struct NamedStatement: PostgresPreparedStatement {
    struct Text: Sendable {
        var name: String
        var sql: String
    }

    @TaskLocal static var current = Text(name: "", sql: "")
    static var name: String { current.name }
    static var sql: String { current.sql }

    typealias Row = PostgresRow
    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// Each statement's name on every connection: `parley_1`, `parley_2`, ... in the order this
/// process first ran them (PostgreSQL names are 63 bytes at most, statements are longer, and a
/// hash could collide and run another statement). At most `limit` statements: past it, a new text
/// runs unprepared, so that a statement marked by mistake with text that varies (a list of ids)
/// cannot fill every connection's memory.
public final class PreparedStatementNames: Sendable {
    public static let defaultLimit = 64
    private let names = NIOLockedValueBox<[String: String]>([:])
    let limit: Int

    public init(limit: Int = PreparedStatementNames.defaultLimit) {
        self.limit = limit
    }

    func name(for sql: String) -> String? {
        names.withLockedValue { names in
            if let name = names[sql] { return name }
            guard names.count < limit else { return nil }
            let name = "parley_\(names.count + 1)"
            names[sql] = name
            return name
        }
    }

    /// How many statements have a name (for tests).
    public var count: Int { names.withLockedValue(\.count) }
}
