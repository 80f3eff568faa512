import Foundation
import SQLKit

/// A column whose values are sealed with the server's secret key (`SecretBox` in ParleyServer).
public struct SealedColumn: Sendable, Hashable, CustomStringConvertible {
    public var table: String
    /// The columns that find one row (its primary key).
    public var key: [String]
    public var column: String

    public var description: String { "\(table).\(column)" }
}

/// Every value Parley seals, in one list: `parley reseal-secrets` walks it after a key rotation, so
/// that nothing is left that only the old key opens. A new sealed column is added here; a test
/// seals with one key, rotates, re-seals, and scans every text column of the whole database for a
/// sealed value the new key alone cannot open (the APNs and FCM credentials were once left out, and
/// every push failed once the old key was dropped).
public enum SealedColumns {
    public static let all: [SealedColumn] = [
        // Messaging channels' secrets (app secret, access token, verify token, auth token...).
        SealedColumn(table: "channel_connections", key: ["app_id"], column: "sealed_secrets"),
        // Apps' push credentials (the APNs .p8 key, the FCM service account).
        SealedColumn(table: "push_credentials", key: ["app_id", "provider"], column: "sealed_secrets"),
    ]
}

/// One sealed value and the key of its row.
public struct SealedValue: Sendable, Hashable {
    public var key: [String]
    public var sealed: String
}

public protocol SealedStore: Sendable {
    /// Every row's sealed value in `column`.
    func sealedValues(_ column: SealedColumn) async throws -> [SealedValue]
    /// Replaces one row's sealed value.
    func updateSealed(_ column: SealedColumn, key: [String], sealed: String) async throws
}

extension SQLRepository: SealedStore {
    // Table and column names come from `SealedColumns.all` (constants), never from input.
    public func sealedValues(_ column: SealedColumn) async throws -> [SealedValue] {
        let names = (column.key + [column.column]).joined(separator: ", ")
        let rows = try await db.raw("SELECT \(unsafeRaw: names) FROM \(unsafeRaw: column.table)").all()
        return try rows.map { row in
            SealedValue(key: try column.key.map { try row.decode(column: $0, as: String.self) }, sealed: try row.decode(column: column.column, as: String.self))
        }
    }

    public func updateSealed(_ column: SealedColumn, key: [String], sealed: String) async throws {
        var query = SQLQueryString("UPDATE \(unsafeRaw: column.table) SET \(unsafeRaw: column.column) = \(bind: sealed) WHERE 1 = 1")
        for (name, value) in zip(column.key, key) {
            query = query + SQLQueryString(" AND \(unsafeRaw: name) = \(bind: value)")
        }
        try await db.raw(query).run()
    }
}
