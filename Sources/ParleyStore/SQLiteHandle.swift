import CParleySQLite
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit
import Synchronization
import VaporCSQLite

/// One SQLite connection, used directly on the calling thread under a lock, with a cache of prepared
/// statements.
///
/// SQLiteNIO runs every statement on a thread pool and hands every row back through the event loop:
/// three thread hops per statement, which cost far more than the statement itself (a message send
/// is about ten statements; SQLite answers each in microseconds from its page cache). Here a
/// statement runs where it is called, so a transaction costs what SQLite costs. The lock is held
/// for one statement at a time; transactions are serialised above, by `SQLiteDatabaseClient`.
final class SQLiteHandle: Sendable {
    private let connection: Mutex<Connection>

    /// The raw handle and its statements. Only touched inside `connection`'s lock.
    private struct Connection: ~Copyable {
        var handle: OpaquePointer?
        var statements: [StatementKey: Prepared] = [:]
    }

    /// A statement's text as the cache's key. A `String` key hashes every byte of its text (SipHash)
    /// on every lookup, and the send path's statements are 0.3-1 KB each: that hashing was 2% of a
    /// message's instructions (bench/instructions.sh). This key hashes the text's length and 96 of
    /// its bytes, the first, middle and last 32 (0.2%). Keys are equal only when their texts are,
    /// compared whole (at once when both are the same string, as a statement kept in a constant is).
    struct StatementKey: Hashable {
        let sql: String

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.sql == rhs.sql }

        func hash(into hasher: inout Hasher) {
            let sampled: Void? = sql.utf8.withContiguousStorageIfAvailable { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                hasher.combine(raw.count)
                guard raw.count >= 32 else { return hasher.combine(bytes: raw) }
                // The 96 bytes as twelve 8-byte words folded into one (FNV-1a's step over words), which
                // the hasher then takes: each `combine` is a round of SipHash, and `combine(bytes:)`
                // took some 5 instructions a byte here. Two texts that fold alike are still told
                // apart by `==`; the texts are the code's (values are bound, never written into
                // them), so no client can choose texts that do.
                var folded: UInt64 = 0xcbf2_9ce4_8422_2325
                func fold(from start: Int) {
                    for offset in stride(from: start, to: start + 32, by: 8) {
                        folded = (folded ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x100_0000_01b3
                    }
                }
                fold(from: 0)
                fold(from: (raw.count - 32) / 2)
                fold(from: raw.count - 32)
                hasher.combine(folded)
            }
            // A string without contiguous UTF-8 (none on Linux): all of it.
            if sampled == nil { hasher.combine(sql) }
        }
    }

    private struct Prepared {
        var statement: OpaquePointer
        var columns: SQLiteColumns
        /// Its parameters (`sqlite3_bind_parameter_count`: the largest index).
        var parameters: Int32
    }

    /// The most bytes of text and blobs a run may leave bound in its statement, so each kept
    /// statement holds at most this much between runs. A run above it clears its values, which
    /// costs nothing more unless the statement's plan read one: a long message (up to 10,000
    /// characters on some channels) clears, and the message path's plans read no bound value.
    static let keptBindBytes = 4 * 1024

    /// Most distinct statements kept prepared; the repository has a few dozen.
    private static let cacheLimit = 256

    init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        // Through the VFS that gathers each commit's WAL writes into one (wal_writes.c).
        let status = sqlite_nio_sqlite3_open_v2(path, &handle, flags, parley_wal_writes_vfs())
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite_nio_sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite_nio_sqlite3_close(handle)
            throw SQLiteStatementError(code: status, message: "cannot open the database at \(path): \(message)")
        }
        connection = Mutex(Connection(handle: handle))
    }

    func close() {
        connection.withLock { connection in
            for prepared in connection.statements.values { sqlite_nio_sqlite3_finalize(prepared.statement) }
            connection.statements.removeAll()
            if let handle = connection.handle { sqlite_nio_sqlite3_close_v2(handle) }
            connection.handle = nil
        }
    }

    /// Runs one statement with its binds and passes each row to `onRow`.
    func run<Bind: SQLiteBindable>(_ sql: String, _ binds: [Bind], _ onRow: (DirectSQLiteRow) -> Void) throws {
        try connection.withLock { connection in
            guard let handle = connection.handle else {
                throw SQLiteStatementError(code: SQLITE_MISUSE, message: "the database is closed")
            }
            let prepared = try Self.prepared(sql, in: &connection, handle: handle)
            let statement = prepared.statement
            // The values stay bound after the run, and the next run binds over them. Clearing
            // them (`sqlite3_clear_bindings`) made SQLite prepare again, on its next run, every
            // statement whose plan depends on a bound value (a `LIMIT ?`, a comparison a partial
            // index depends on): the search indexer's, the job runner's and the revoked sessions'
            // reads, every time (4.5% of the instructions of a text message at 25 a second,
            // bench/RESULTS.md "Statements prepared once"). Only a run that bound more than
            // `keptBindBytes` clears them, so a large text is not kept for as long as its statement.
            var bytes = 0
            defer {
                sqlite_nio_sqlite3_reset(statement)
                if bytes > Self.keptBindBytes { sqlite_nio_sqlite3_clear_bindings(statement) }
            }
            try Self.bind(binds, to: statement, parameters: prepared.parameters, handle: handle, bytes: &bytes)
            let width = prepared.columns.names.count
            while true {
                let status = sqlite_nio_sqlite3_step(statement)
                if status == SQLITE_DONE { return }
                guard status == SQLITE_ROW else {
                    throw SQLiteStatementError(code: status, message: String(cString: sqlite_nio_sqlite3_errmsg(handle)))
                }
                onRow(DirectSQLiteRow(columns: prepared.columns, values: Self.row(of: statement, width: width)))
            }
        }
    }

    /// A PASSIVE checkpoint (`sqlite3_wal_checkpoint_v2`, what `PRAGMA wal_checkpoint(PASSIVE)`
    /// runs, without the statement: SQLite prepares every PRAGMA again each time it runs): the
    /// frames the WAL holds and how many of them are copied, -1 each when another connection's
    /// checkpoint was under way.
    func checkpointPassive() throws -> (log: Int, copied: Int) {
        try connection.withLock { connection in
            guard let handle = connection.handle else {
                throw SQLiteStatementError(code: SQLITE_MISUSE, message: "the database is closed")
            }
            var (log, copied): (Int32, Int32) = (-1, -1)
            let status = sqlite_nio_sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
            // BUSY: another checkpoint held the WAL (the pragma answered it in its `busy` column).
            guard status == SQLITE_OK || status == SQLITE_BUSY else {
                throw SQLiteStatementError(code: status, message: String(cString: sqlite_nio_sqlite3_errmsg(handle)))
            }
            return (Int(log), Int(copied))
        }
    }

    /// Each kept statement's text and one of SQLite's counters for it (`sqlite3_stmt_status`):
    /// `SQLITE_STMTSTATUS_REPREPARE`, how many times it was prepared again;
    /// `SQLITE_STMTSTATUS_MEMUSED`, the heap memory it holds, its bound values included.
    func statementStatus(_ counter: Int32) -> [(sql: String, value: Int)] {
        connection.withLock { connection in
            connection.statements.map { key, prepared in (key.sql, Int(sqlite_nio_sqlite3_stmt_status(prepared.statement, counter, 0))) }
        }
    }

    /// The statement for `sql`, from the cache or prepared now (and kept).
    private static func prepared(_ sql: String, in connection: inout Connection, handle: OpaquePointer) throws -> Prepared {
        let key = StatementKey(sql: sql)
        if let cached = connection.statements[key] { return cached }
        var statement: OpaquePointer?
        let status = sqlite_nio_sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else {
            throw SQLiteStatementError(code: status, message: String(cString: sqlite_nio_sqlite3_errmsg(handle)))
        }
        let count = sqlite_nio_sqlite3_column_count(statement)
        let names = (0..<count).map { String(cString: sqlite_nio_sqlite3_column_name(statement, $0)) }
        let prepared = Prepared(
            statement: statement, columns: SQLiteColumns(names: names), parameters: sqlite_nio_sqlite3_bind_parameter_count(statement))
        if connection.statements.count >= cacheLimit {
            for old in connection.statements.values { sqlite_nio_sqlite3_finalize(old.statement) }
            connection.statements.removeAll()
        }
        connection.statements[key] = prepared
        return prepared
    }

    /// Binds `binds` to the first parameters and NULL to any after them (the last run's values
    /// are still bound there); adds the bytes of text and blobs bound to `bytes`.
    private static func bind<Bind: SQLiteBindable>(
        _ binds: [Bind], to statement: OpaquePointer, parameters: Int32, handle: OpaquePointer, bytes: inout Int
    ) throws {
        for (offset, bind) in binds.enumerated() {
            bytes += bind.byteCount
            let status = bind.bind(to: statement, at: Int32(offset + 1))
            guard status == SQLITE_OK else {
                throw SQLiteStatementError(code: status, message: String(cString: sqlite_nio_sqlite3_errmsg(handle)))
            }
        }
        if binds.count < parameters {
            for index in Int32(binds.count + 1)...parameters { sqlite_nio_sqlite3_bind_null(statement, index) }
        }
    }

    /// The current row's values.
    private static func row(of statement: OpaquePointer, width: Int) -> [SQLiteData] {
        var values: [SQLiteData] = []
        values.reserveCapacity(width)
        for column in 0..<Int32(width) {
            switch sqlite_nio_sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER: values.append(.integer(Int(sqlite_nio_sqlite3_column_int64(statement, column))))
            case SQLITE_FLOAT: values.append(.float(sqlite_nio_sqlite3_column_double(statement, column)))
            case SQLITE_TEXT:
                let bytes = Int(sqlite_nio_sqlite3_column_bytes(statement, column))
                if let text = sqlite_nio_sqlite3_column_text(statement, column) {
                    values.append(.text(String(decoding: UnsafeBufferPointer(start: text, count: bytes), as: UTF8.self)))
                } else {
                    values.append(.text(""))
                }
            case SQLITE_BLOB:
                let bytes = Int(sqlite_nio_sqlite3_column_bytes(statement, column))
                var buffer = ByteBufferAllocator().buffer(capacity: bytes)
                if let blob = sqlite_nio_sqlite3_column_blob(statement, column) {
                    buffer.writeBytes(UnsafeRawBufferPointer(start: blob, count: bytes))
                }
                values.append(.blob(buffer))
            default: values.append(.null)
            }
        }
        return values
    }
}

private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A statement that SQLite refused; `description` carries SQLite's own message (for example
/// "UNIQUE constraint failed: ...", which `isUniqueViolation` looks for).
struct SQLiteStatementError: Error, CustomStringConvertible {
    var code: Int32
    var message: String
    var description: String { "SQLite error \(code): \(message)" }
}

/// Column names of a statement's result and where each is, shared by all its rows.
final class SQLiteColumns: Sendable {
    let names: [String]
    let offsets: [String: Int]

    init(names: [String]) {
        self.names = names
        offsets = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

struct DirectSQLiteRow: SQLRow, @unchecked Sendable {
    // ByteBuffer and String are Sendable; SQLiteData is too. The class holding names is immutable.
    let columns: SQLiteColumns
    let values: [SQLiteData]
    private static let decoder = SQLiteDataDecoder()

    var allColumns: [String] { columns.names }
    func contains(column: String) -> Bool { columns.offsets[column] != nil }

    func decodeNil(column: String) throws -> Bool {
        guard let offset = columns.offsets[column] else { return true }
        return values[offset] == .null
    }

    /// The text in `column`, read as it is (`SQLRow.text` takes this way for a row of this type:
    /// `SQLiteDataDecoder` is an `Decoder` per value, on the writer's thread for every message).
    func directText(_ column: String) throws -> String? {
        guard let offset = columns.offsets[column] else { return nil }
        switch values[offset] {
        case .text(let text): return text
        case .null: return nil
        default: return try decode(column: column, as: String.self)
        }
    }

    /// The integer in `column`, read as it is.
    func directInteger(_ column: String) throws -> Int64? {
        guard let offset = columns.offsets[column] else { return nil }
        switch values[offset] {
        case .integer(let integer): return Int64(integer)
        case .null: return nil
        default: return try decode(column: column, as: Int64.self)
        }
    }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        guard let offset = columns.offsets[column] else {
            throw DecodingError.keyNotFound(
                SQLiteColumnKey(column), .init(codingPath: [], debugDescription: "no column \(column) in the result"))
        }
        return try Self.decoder.decode(D.self, from: values[offset])
    }
}

private struct SQLiteColumnKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// SQLKit on a `SQLiteHandle`: statements run on the calling thread.
struct DirectSQLiteDatabase: SQLDatabase {
    let handle: SQLiteHandle
    let logger: Logger
    private static let encoder = SQLiteDataEncoder()

    var eventLoop: any EventLoop { MultiThreadedEventLoopGroup.singleton.any() }
    var version: (any SQLDatabaseReportedVersion)? { nil }
    var dialect: any SQLDialect { SQLiteDialect() }
    var queryLogLevel: Logger.Level? { nil }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        do {
            try run(query, onRow)
            return eventLoop.makeSucceededVoidFuture()
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        try run(query, onRow)
    }

    /// A statement without values or rows (BEGIN, COMMIT, a savepoint), straight to the handle.
    /// Through `raw(_:).run()` each one built a query, serialized it with SQLKit and went through an
    /// async call: about 1,300 instructions each, and a message at a quiet hour has two of them
    /// (bench/instructions.sh).
    func exec(_ sql: String) throws {
        try handle.run(sql, [SQLiteData]()) { _ in }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }

    private func run(_ query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) throws {
        if let direct = Self.direct(query) {
            return try handle.run(direct.sql, direct.values) { onRow($0) }
        }
        let (sql, binds) = serialize(query)
        let data = try binds.map { try Self.encoder.encode($0) }
        try handle.run(sql, data) { onRow($0) }
    }

    /// `query` when it is a `DirectStatement`, or one inside `PreparedSQL` (SQLite keeps every
    /// statement prepared already: `PreparedSQL` changes nothing here). Told by its type first: an
    /// `as?` that fails looks for every way the cast could succeed, and the send path's statements
    /// made two such casts and more (1% of a message's instructions, bench/instructions.sh).
    static func direct(_ query: any SQLExpression) -> DirectStatement? {
        switch ObjectIdentifier(type(of: query)) {
        case ObjectIdentifier(DirectStatement.self): query as? DirectStatement
        case ObjectIdentifier(PreparedSQL.self): (query as? PreparedSQL).flatMap { direct($0.statement) }
        default: nil
        }
    }
}

/// A value `SQLiteHandle.run` binds to a statement's parameter; returns SQLite's status.
///
/// SQLiteNIO's `SQLiteData` (what SQLKit's statements encode to) and the store's own `ColumnValue`
/// (a `DirectStatement`'s, the message path's): converting the latter to the former first made a
/// new array for each statement and retained and released each text once more.
protocol SQLiteBindable: Sendable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32
    /// The bytes of a text or blob (which SQLite keeps a copy of while it is bound), else 0.
    var byteCount: Int { get }
}

extension SQLiteData: SQLiteBindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        switch self {
        case .integer(let value): sqlite_nio_sqlite3_bind_int64(statement, index, Int64(value))
        case .float(let value): sqlite_nio_sqlite3_bind_double(statement, index, value)
        case .text(let value): bindText(value, to: statement, at: index)
        case .blob(let value):
            value.withUnsafeReadableBytes { sqlite_nio_sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), transient) }
        case .null: sqlite_nio_sqlite3_bind_null(statement, index)
        }
    }

    var byteCount: Int {
        switch self {
        case .text(let value): value.utf8.count
        case .blob(let value): value.readableBytes
        case .integer, .float, .null: 0
        }
    }
}

extension ColumnValue: SQLiteBindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        switch self {
        case .text(let value): bindText(value, to: statement, at: index)
        case .integer(let value): sqlite_nio_sqlite3_bind_int64(statement, index, value)
        case .null: sqlite_nio_sqlite3_bind_null(statement, index)
        }
    }

    var byteCount: Int {
        if case .text(let value) = self { value.utf8.count } else { 0 }
    }
}

/// A text bound through `withCString`, which lends a native string's own bytes (a short one's from
/// the stack): passing the `String` itself converts it through `utf8CString`, a new array for each
/// bound text (some 13 a message, 2% of its instructions, bench/RESULTS.md). The length is the
/// string's, so a NUL inside is stored as sent; SQLite copies the bytes (`SQLITE_TRANSIENT`).
private func bindText(_ value: String, to statement: OpaquePointer, at index: Int32) -> Int32 {
    value.withCString { sqlite_nio_sqlite3_bind_text64(statement, index, $0, UInt64(value.utf8.count), transient, UInt8(SQLITE_UTF8)) }
}
