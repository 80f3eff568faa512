import Foundation
import SQLKit
import SQLiteKit

/// One table's row as a value: its stored properties are the table's columns, written once
/// (camelCase here, snake_case in SQL). Inserts and updates encode it with SQLKit's `SQLQueryEncoder`,
/// reads decode it with `SQLRowDecoder`; an enum column holding a value the enum does not know fails
/// to decode, so a corrupt row is an error (`StoreError.corrupt`), never a default.
protocol TableRow: Codable, Sendable {
    static var table: String { get }
}

enum RowCoding {
    /// `nil` is written as NULL rather than left out, so that one table's INSERT is always the same
    /// statement (SQLite keeps it prepared).
    static let encoder = SQLQueryEncoder(
        keyEncodingStrategy: .custom { path in SnakeCaseKey(path.last!.stringValue) }, nilEncodingStrategy: .asNil)
    static let decoder = SQLRowDecoder(keyDecodingStrategy: .custom { path in SnakeCaseKey(path.last!.stringValue) })
}

/// `durationMs` → `duration_ms`. Written here because SQLKit's `convertToSnakeCase` asks Unicode
/// for every character's case: on the send path it took a fifth of the SQLite writer thread's time
/// (measured with perf in bench/'s text section). Property names are ASCII.
struct SnakeCaseKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }

    init(_ name: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(name.utf8.count + 4)
        for byte in name.utf8 {
            if byte >= 65 && byte <= 90 {  // A-Z
                bytes.append(95)  // _
                bytes.append(byte + 32)
            } else {
                bytes.append(byte)
            }
        }
        stringValue = String(decoding: bytes, as: UTF8.self)
    }

    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) { nil }
}

extension SQLDatabase {
    /// `INSERT INTO table (columns) VALUES (binds)`, as raw SQL: the builder's identifier quoting
    /// cost more than the statement on the send path, and column names are ours, not input.
    func insert<Row: TableRow>(_ row: Row) async throws {
        try await raw(RowStatements.insert(row)).run()
    }

    /// `UPDATE table SET every column = its value WHERE where` (and `suffix`, e.g. RETURNING).
    func update<Row: TableRow>(_ row: Row, where predicate: SQLQueryString, suffix: SQLQueryString = "") throws -> SQLRawBuilder {
        let columns = try Self.columns(of: row)
        var query = SQLQueryString("UPDATE \(unsafeRaw: Row.table) SET ")
        for (index, column) in columns.enumerated() {
            query.appendInterpolation(unsafeRaw: index > 0 ? ", \(column.0) = " : "\(column.0) = ")
            query.appendInterpolation(column.1)
        }
        return raw(query + " WHERE " + predicate + suffix)
    }

    /// The row's columns and their binds: by hand for a `MappedRow`, else by SQLKit's encoder.
    static func columns<Row: TableRow>(of row: Row) throws -> [(String, any SQLExpression)] {
        try RowStatements.columns(of: row)
    }
}

/// The statements `insert` and `update(_:from:where:)` run, as text with binds, for a repository
/// that puts two of them in one (`updateConversation(_:from:inserting:)`).
enum RowStatements {
    /// `INSERT INTO table (columns) VALUES (binds)`; with `source`, `INSERT INTO table (columns)
    /// SELECT binds FROM source` (one row per row of `source`, none when it has none).
    static func insert<Row: TableRow>(_ row: Row, selectingFrom source: String? = nil) throws -> SQLQueryString {
        let columns = try Self.columns(of: row)
        var query = SQLQueryString(
            "INSERT INTO \(unsafeRaw: Row.table) (\(unsafeRaw: columns.map(\.0).joined(separator: ", "))) \(unsafeRaw: source == nil ? "VALUES (" : "SELECT ")")
        for (index, column) in columns.enumerated() {
            if index > 0 { query.appendInterpolation(unsafeRaw: ", ") }
            query.appendInterpolation(column.1)
        }
        query.appendInterpolation(unsafeRaw: source.map { " FROM \($0)" } ?? ")")
        return query
    }

    /// `UPDATE table SET (the columns whose values differ from previous) WHERE predicate`; nil
    /// when nothing changed.
    static func update<Row: MappedRow>(_ row: Row, from previous: Row, where predicate: SQLQueryString) -> SQLQueryString? {
        let (new, old) = (row.values, previous.values)
        var query = SQLQueryString("UPDATE \(unsafeRaw: Row.table) SET ")
        var first = true
        for (index, name) in Row.columns.enumerated() where new[index] != old[index] {
            query.appendInterpolation(unsafeRaw: first ? "\(name) = " : ", \(name) = ")
            query.appendInterpolation(new[index].bind)
            first = false
        }
        return first ? nil : query + " WHERE " + predicate
    }

    /// The row's columns and their binds: by hand for a `MappedRow`, else by SQLKit's encoder.
    static func columns<Row: TableRow>(of row: Row) throws -> [(String, any SQLExpression)] {
        if let mapped = row as? any MappedRow {
            return zip(type(of: mapped).columns, mapped.values.map(\.bind)).map { ($0, $1) }
        }
        return try RowCoding.encoder.encode(row)
    }
}

extension SQLRow {
    /// A mapped row, without the casts the generic `decode` below needs to find out that it is one.
    func decode<Row: MappedRow>(_: Row.Type) throws -> Row {
        var columns = ColumnCursor(self, columns: Row.columns)
        return try Row.decode(&columns)
    }

    func decode<Row: TableRow>(_: Row.Type) throws -> Row {
        do {
            if let mapped = Row.self as? any MappedRow.Type, let row = try mapped.init(mapping: self) as? Row { return row }
            return try decode(model: Row.self, with: RowCoding.decoder)
        } catch {
            throw StoreError.corrupt("a row of \(Row.table) that does not decode: \(error)")
        }
    }
}

// `@concurrent`, as SQLKit's own `first()` and `all()` are (its module predates nonisolated(nonsending)):
// a fetcher is not Sendable, so it may not cross from the caller's isolation into them.
extension SQLQueryFetcher {
    @concurrent func first<Row: MappedRow>(_: Row.Type) async throws -> Row? {
        try await first().map { try $0.decode(Row.self) }
    }

    @concurrent func all<Row: MappedRow>(_: Row.Type) async throws -> [Row] {
        try await all().map { try $0.decode(Row.self) }
    }

    @concurrent func first<Row: TableRow>(_: Row.Type) async throws -> Row? {
        try await first().map { try $0.decode(Row.self) }
    }

    @concurrent func all<Row: TableRow>(_: Row.Type) async throws -> [Row] {
        try await all().map { try $0.decode(Row.self) }
    }
}

// MARK: Rows mapped by hand

/// A column's value as it is bound: what a `MappedRow` hands to an INSERT or UPDATE.
enum ColumnValue: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case null

    init(_ value: String?) { self = value.map(ColumnValue.text) ?? .null }
    init(_ value: Int64?) { self = value.map(ColumnValue.integer) ?? .null }
    init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    init<Value: RawRepresentable>(_ value: Value?) where Value.RawValue == String { self = value.map { .text($0.rawValue) } ?? .null }

    /// The bind: the same values the Codable encoder produced (strings, 64-bit integers, NULL).
    var bind: any SQLExpression {
        switch self {
        case .text(let text): SQLBind(text)
        case .integer(let integer): SQLBind(integer)
        case .null: SQLLiteral.null
        }
    }
}

/// A row of one of the tables every message writes (conversations, messages), mapped to its columns
/// by hand instead of by `SQLQueryEncoder` and `SQLRowDecoder`: on the send path their Codable
/// containers took a fifth of the SQLite writer thread (perf, bench/profiles/before), and they ran
/// inside the one serial transaction every message waits for. `RowMappingTests` checks that each
/// mapping agrees with the Codable one, column for column, so a property added to the struct and
/// forgotten here fails a test.
protocol MappedRow: TableRow {
    /// The columns, in the order of `values`.
    static var columns: [String] { get }
    var values: [ColumnValue] { get }
    /// Reads `Self.columns` from `columns`, in that order.
    init(reading columns: inout ColumnCursor) throws
}

extension MappedRow {
    /// The row's columns from `row` (by position when it starts with them; `ColumnCursor`).
    init(mapping row: any SQLRow) throws {
        var columns = ColumnCursor(row, columns: Self.columns)
        try self.init(reading: &columns)
    }

    /// The row read from `columns`; a row that does not decode is `StoreError.corrupt`.
    static func decode(_ columns: inout ColumnCursor) throws -> Self {
        do {
            return try Self(reading: &columns)
        } catch {
            throw StoreError.corrupt("a row of \(table) that does not decode: \(error)")
        }
    }
}

extension SQLDatabase {
    /// `UPDATE table SET (the columns whose values differ from previous) WHERE predicate`; nothing
    /// when nothing changed. Writing only what changed leaves the indexes on unchanged columns alone
    /// (SQLite rewrites an index entry for every column named in SET, changed or not).
    func update<Row: MappedRow>(_ row: Row, from previous: Row, where predicate: SQLQueryString) async throws {
        guard let query = RowStatements.update(row, from: previous, where: predicate) else { return }
        try await raw(query).run()
    }
}

/// A mapped row's columns, read one after another in the order of `names`
/// (`MappedRow.init(reading:)` reads `Self.columns` in order).
///
/// A row from the SQLite connections whose first columns are exactly `names`, in that order (a
/// statement that selects `ConversationRow.selectList`, as the send path's read of the conversation
/// does), is read by position. By name, every column was a dynamic cast of the row and a dictionary
/// lookup: decoding the conversation took 2.7% of the server's CPU at 1,000 messages/s
/// (bench/profiles/step9, `ConversationRow.init`; 0.7% by position in step10). Any other row
/// (`SELECT *`, PostgreSQL) is read by name, and a value of an unexpected type takes the by-name way
/// too, for its conversion or error.
struct ColumnCursor {
    private let row: any SQLRow
    private let names: [String]
    private let values: [SQLiteData]?
    private var index = 0

    init(_ row: any SQLRow, columns names: [String]) {
        self.row = row
        self.names = names
        if let direct = row as? DirectSQLiteRow, direct.columns.names.starts(with: names) {
            values = direct.values
        } else {
            values = nil
        }
    }

    /// Whether the columns are read by position (for tests).
    var isPositional: Bool { values != nil }

    /// The next column's name and, read by position, its value.
    private mutating func next() -> (name: String, value: SQLiteData?) {
        defer { index += 1 }
        return (names[index], values?[index])
    }

    mutating func text() throws -> String {
        let (name, value) = next()
        if case .text(let text)? = value { return text }
        return try row.text(name)
    }

    mutating func optionalText() throws -> String? {
        let (name, value) = next()
        switch value {
        case .text(let text)?: return text
        case .null?: return nil
        default: return try row.optionalText(name)
        }
    }

    mutating func int64() throws -> Int64 {
        let (name, value) = next()
        if case .integer(let integer)? = value { return Int64(integer) }
        return try row.int64(name)
    }

    mutating func optionalInt64() throws -> Int64? {
        let (name, value) = next()
        switch value {
        case .integer(let integer)?: return Int64(integer)
        case .null?: return nil
        default: return try row.optionalInt64(name)
        }
    }

    mutating func optionalInt() throws -> Int? { try optionalInt64().map { Int($0) } }

    mutating func value<Value: RawRepresentable>(as _: Value.Type = Value.self) throws -> Value where Value.RawValue == String {
        let (name, value) = next()
        guard case .text(let raw)? = value else { return try row.value(name) }
        return try ColumnCursor.parse(raw, column: name)
    }

    mutating func optionalValue<Value: RawRepresentable>(as _: Value.Type = Value.self) throws -> Value? where Value.RawValue == String {
        let (name, value) = next()
        switch value {
        case .text(let raw)?: return try ColumnCursor.parse(raw, column: name)
        case .null?: return nil
        default: return try row.optionalValue(name)
        }
    }

    fileprivate static func parse<Value: RawRepresentable>(_ raw: String, column: String) throws -> Value where Value.RawValue == String {
        guard let value = Value(rawValue: raw) else { throw StoreError.corrupt("column \(column) holds '\(raw)', which \(Value.self) does not know") }
        return value
    }
}

/// Column reads by name: `ColumnCursor`'s way for a row it does not read by position.
extension SQLRow {
    // A row from the SQLite connections is read directly (`DirectSQLiteRow.directText`); a missing
    // column or NULL then takes the decoder's way, for its error.
    func text(_ column: String) throws -> String {
        if let row = self as? DirectSQLiteRow, let text = try row.directText(column) { return text }
        return try decode(column: column, as: String.self)
    }
    func optionalText(_ column: String) throws -> String? {
        if let row = self as? DirectSQLiteRow, row.contains(column: column) { return try row.directText(column) }
        return try decodeNil(column: column) ? nil : text(column)
    }
    func int64(_ column: String) throws -> Int64 {
        if let row = self as? DirectSQLiteRow, let integer = try row.directInteger(column) { return integer }
        return try decode(column: column, as: Int64.self)
    }
    func optionalInt64(_ column: String) throws -> Int64? {
        if let row = self as? DirectSQLiteRow, row.contains(column: column) { return try row.directInteger(column) }
        return try decodeNil(column: column) ? nil : int64(column)
    }
    func value<Value: RawRepresentable>(_ column: String, as _: Value.Type = Value.self) throws -> Value where Value.RawValue == String {
        try ColumnCursor.parse(try text(column), column: column)
    }
    func optionalValue<Value: RawRepresentable>(_ column: String, as _: Value.Type = Value.self) throws -> Value? where Value.RawValue == String {
        try decodeNil(column: column) ? nil : value(column, as: Value.self)
    }
}
