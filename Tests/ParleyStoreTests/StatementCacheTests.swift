import Foundation
import SQLiteKit
import Testing

@testable import ParleyStore

extension SQLiteHandle {
    /// Runs `body` with a handle on a new database file in a directory of its own, both removed after.
    static func withTemporary(_ body: (SQLiteHandle) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-handle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let handle = try SQLiteHandle(path: directory.appendingPathComponent("test.sqlite").path)
        defer { handle.close() }
        try body(handle)
    }
}

/// SQLite's prepared statements are kept by their text (`SQLiteHandle.StatementKey`), whose hash
/// reads only the text's length and its first, middle and last 32 bytes.
@Suite struct StatementCacheTests {
    /// `SELECT '<190 characters>'`, 199 bytes, with `mark` at offset 50: outside the sampled bytes
    /// (0..<32, 83..<115, 167..<199).
    static func select(marked mark: Character) -> String {
        var literal = Array(repeating: Character("a"), count: 190)
        literal[50 - "SELECT '".count] = mark
        return "SELECT '" + String(literal) + "'"
    }

    @Test("two statements that differ only where the key's hash does not read hash alike, and each runs as itself")
    func collidingTextsStayApart() throws {
        let (first, second) = (Self.select(marked: "x"), Self.select(marked: "y"))
        #expect(first.utf8.count == 199 && second.utf8.count == 199 && first != second)
        let (firstKey, secondKey) = (SQLiteHandle.StatementKey(sql: first), SQLiteHandle.StatementKey(sql: second))
        // The case under test: the cache finds both in the same place and must compare the texts.
        #expect(firstKey.hashValue == secondKey.hashValue)
        #expect(firstKey != secondKey)
        #expect(firstKey == SQLiteHandle.StatementKey(sql: String(decoding: Array(first.utf8), as: UTF8.self)))

        try SQLiteHandle.withTemporary { (handle: SQLiteHandle) throws in
            func value(of sql: String) throws -> String? {
                var found: String?
                try handle.run(sql, [SQLiteData]()) { row in found = try? row.directText(row.allColumns[0]) }
                return found
            }
            // Each twice: the second run of each comes from the cache, beside the other.
            for _ in 0..<2 {
                #expect(try value(of: first) == String(first.dropFirst("SELECT '".count).dropLast()))
                #expect(try value(of: second) == String(second.dropFirst("SELECT '".count).dropLast()))
            }
        }
    }

    @Test("statements of other lengths, or that differ in a sampled byte, hash apart")
    func sampledBytesAndLengthCount() {
        let base = Self.select(marked: "x")
        var lastChanged = Array(base.utf8)
        lastChanged[lastChanged.count - 2] = UInt8(ascii: "z")
        let others = [base + " ", String(decoding: lastChanged, as: UTF8.self), "SELECT 1"]
        for other in others {
            #expect(SQLiteHandle.StatementKey(sql: base).hashValue != SQLiteHandle.StatementKey(sql: other).hashValue)
        }
    }
}

/// Texts bound to a statement (`SQLiteHandle.bind`) come back as they went in.
@Suite struct BoundTextTests {
    @Test("empty, short, long, non-ASCII and NUL-bearing texts round-trip through a bound parameter")
    func texts() throws {
        try SQLiteHandle.withTemporary { handle in
            let long = String(repeating: "a long text that lives in its own storage ", count: 40)
            let texts = ["", "x", "msg_0123456789", "é日本語 👋🏽", "a\u{0}b", long, String(long.utf8.dropFirst(7))!]
            let sql = "SELECT ?1 AS text, length(CAST(?1 AS BLOB)) AS bytes, typeof(?1) AS type"
            for text in texts {
                // Both kinds of bound value: SQLKit's statements' and a DirectStatement's.
                var found: [(text: String?, bytes: Int?, type: String?)] = []
                let read = { (row: DirectSQLiteRow) in
                    found.append((try? row.directText("text"), try? row.decode(column: "bytes", as: Int.self), try? row.directText("type")))
                }
                try handle.run(sql, [SQLiteData.text(text)], read)
                try handle.run(sql, [ColumnValue.text(text)], read)
                #expect(found.count == 2)
                for one in found {
                    #expect(one.text == text, "\(text.debugDescription)")
                    #expect(one.bytes == text.utf8.count, "\(text.debugDescription)")
                    #expect(one.type == "text", "\(text.debugDescription): an empty text is not NULL")
                }
            }
        }
    }

    @Test("integers at both ends of Int64 and NULL bind alike from SQLKit's values and a DirectStatement's")
    func integersAndNull() throws {
        try SQLiteHandle.withTemporary { handle in
            let sql = "SELECT ?1 AS value, typeof(?1) AS type, ?2 AS second, typeof(?2) AS secondType"
            for integer in [Int64.min, -1, 0, 1, 1_764_400_000_000, Int64.max] {
                var found: [(value: Int?, type: String?, second: String?)] = []
                let read = { (row: DirectSQLiteRow) in
                    found.append((try? row.decode(column: "value", as: Int.self), try? row.directText("type"), try? row.directText("secondType")))
                }
                try handle.run(sql, [SQLiteData.integer(Int(integer)), .null], read)
                try handle.run(sql, [ColumnValue.integer(integer), .null], read)
                #expect(found.count == 2)
                for one in found {
                    #expect(one.value.map(Int64.init) == integer)
                    #expect(one.type == "integer")
                    #expect(one.second == "null")
                }
            }
        }
    }
}
