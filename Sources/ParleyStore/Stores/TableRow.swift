import Foundation
import SQLKit

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
        let columns = try RowCoding.encoder.encode(row)
        var query = SQLQueryString("INSERT INTO \(unsafeRaw: Row.table) (\(unsafeRaw: columns.map(\.0).joined(separator: ", "))) VALUES (")
        for (index, column) in columns.enumerated() {
            if index > 0 { query.appendInterpolation(unsafeRaw: ", ") }
            query.appendInterpolation(column.1)
        }
        query.appendInterpolation(unsafeRaw: ")")
        try await raw(query).run()
    }

    /// `UPDATE table SET every column = its value WHERE where` (and `suffix`, e.g. RETURNING).
    func update<Row: TableRow>(_ row: Row, where predicate: SQLQueryString, suffix: SQLQueryString = "") throws -> SQLRawBuilder {
        let columns = try RowCoding.encoder.encode(row)
        var query = SQLQueryString("UPDATE \(unsafeRaw: Row.table) SET ")
        for (index, column) in columns.enumerated() {
            query.appendInterpolation(unsafeRaw: index > 0 ? ", \(column.0) = " : "\(column.0) = ")
            query.appendInterpolation(column.1)
        }
        return raw(query + " WHERE " + predicate + suffix)
    }
}

extension SQLRow {
    func decode<Row: TableRow>(_: Row.Type) throws -> Row {
        do {
            return try decode(model: Row.self, with: RowCoding.decoder)
        } catch {
            throw StoreError.corrupt("a row of \(Row.table) that does not decode: \(error)")
        }
    }
}

extension SQLQueryFetcher {
    func first<Row: TableRow>(_: Row.Type) async throws -> Row? {
        try await first().map { try $0.decode(Row.self) }
    }

    func all<Row: TableRow>(_: Row.Type) async throws -> [Row] {
        try await all().map { try $0.decode(Row.self) }
    }
}
