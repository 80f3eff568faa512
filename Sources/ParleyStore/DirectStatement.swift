import SQLKit
import SQLiteKit
import Synchronization

/// A statement made as text with `?` placeholders and its values, without SQLKit's builders.
///
/// On the SQLite writer's thread, building a message's statements through `SQLQueryString`, then
/// serializing them (a walk over an array of existential fragments) and encoding every bind with
/// `SQLiteDataEncoder` (an `Encoder` per value) took about a fifth of the thread's Swift time at
/// saturation (bench/profiles/step3: RowStatements.insert 2.9%, serialize 3.5%, the bind encoder
/// 1.5% of all server CPU; the writer's thread is what limits messages per second on SQLite).
/// `DirectSQLiteDatabase` runs a `DirectStatement` as it is: the text goes to the statement cache
/// and the values are bound as they are. SQLKit has no way to hand a database pre-built text, so
/// this type exists; on any other database it serializes like any expression (each `?` a bind).
struct DirectStatement: SQLExpression, Sendable {
    /// SQL with one `?` per value, in order, and no other `?` (our statements have no string
    /// literals; the text never holds input).
    let sql: String
    let values: [ColumnValue]

    init(_ sql: String, _ values: [ColumnValue]) {
        self.sql = sql
        self.values = values
    }

    func serialize(to serializer: inout SQLSerializer) {
        var values = self.values.makeIterator()
        var pieces = sql.split(separator: "?", omittingEmptySubsequences: false).makeIterator()
        if let first = pieces.next() { serializer.write(String(first)) }
        while let piece = pieces.next() {
            values.next().map { $0.bind.serialize(to: &serializer) }
            serializer.write(String(piece))
        }
    }
}

extension RowStatements {
    /// `INSERT INTO table (columns) VALUES (?, ...)` for a mapped row; the text is made once per table.
    static func directInsert<Row: MappedRow>(_ row: Row) -> DirectStatement {
        DirectStatement(insertText(Row.self), row.values)
    }

    /// `UPDATE table SET (the columns whose values differ from previous) WHERE predicate`, the
    /// predicate's `?` bound to `predicateValues`; nil when nothing changed.
    static func directUpdate<Row: MappedRow>(
        _ row: Row, from previous: Row, where predicate: String, _ predicateValues: [ColumnValue]
    ) -> DirectStatement? {
        let (new, old) = (row.values, previous.values)
        precondition(new.count <= 64, "an update's changed columns are kept as the bits of a UInt64")
        var changed: UInt64 = 0
        var values: [ColumnValue] = []
        values.reserveCapacity(new.count + predicateValues.count)
        for index in new.indices where new[index] != old[index] {
            changed |= 1 << UInt64(index)
            values.append(new[index])
        }
        guard changed != 0 else { return nil }
        values.append(contentsOf: predicateValues)
        return DirectStatement(updateText(Row.self, changed: changed, where: predicate), values)
    }

    /// The text of an UPDATE that sets the columns whose bits are in `changed`, made once for each
    /// such set and predicate: a message's update built its text anew, appending each column's name,
    /// and that was 2.5% of the message's instructions (bench/instructions.sh).
    private static func updateText<Row: MappedRow>(_: Row.Type, changed: UInt64, where predicate: String) -> String {
        let shape = UpdateShape(table: ObjectIdentifier(Row.self), changed: changed, predicate: predicate)
        if let text = updateTexts.withLock({ $0[shape] }) { return text }
        var text = "UPDATE " + Row.table + " SET "
        var first = true
        for (index, name) in Row.columns.enumerated() where changed & (1 << UInt64(index)) != 0 {
            text += (first ? "" : ", ") + name + " = ?"
            first = false
        }
        text += " WHERE " + predicate
        updateTexts.withLock { texts in
            // The shapes come from the code's few kinds of update; a bound all the same.
            if texts.count >= 1024 { texts.removeAll() }
            texts[shape] = text
        }
        return text
    }

    private struct UpdateShape: Hashable {
        var table: ObjectIdentifier
        var changed: UInt64
        var predicate: String
    }

    private static let updateTexts = Mutex<[UpdateShape: String]>([:])

    private static let insertTexts = Mutex<[String: String]>([:])

    private static func insertText<Row: MappedRow>(_: Row.Type) -> String {
        if let text = insertTexts.withLock({ $0[Row.table] }) { return text }
        let columns = Row.columns
        let text = "INSERT INTO \(Row.table) (\(columns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
        insertTexts.withLock { $0[Row.table] = text }
        return text
    }
}

extension SQLDatabase {
    /// Runs `statement`, discarding rows.
    func run(_ statement: DirectStatement) async throws {
        try await execute(sql: statement) { _ in }
    }

    /// Runs `statement`; true when it returned a row (an UPDATE ... RETURNING that matched).
    func returnsRow(_ statement: DirectStatement) async throws -> Bool {
        let found = Mutex(false)
        try await execute(sql: statement) { _ in found.withLock { $0 = true } }
        return found.withLock { $0 }
    }
}
