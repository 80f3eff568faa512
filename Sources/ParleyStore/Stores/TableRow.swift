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
    static let encoder = SQLQueryEncoder(keyEncodingStrategy: .convertToSnakeCase, nilEncodingStrategy: .asNil)
    static let decoder = SQLRowDecoder(keyDecodingStrategy: .convertFromSnakeCase)
}

extension SQLDatabase {
    func insert<Row: TableRow>(_ row: Row) async throws {
        try await insert(into: Row.table).model(row, with: RowCoding.encoder).run()
    }

    /// An UPDATE of every column of `row` (the caller adds the WHERE).
    func update<Row: TableRow>(_ row: Row) throws -> SQLUpdateBuilder {
        try update(Row.table).set(model: row, with: RowCoding.encoder)
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

