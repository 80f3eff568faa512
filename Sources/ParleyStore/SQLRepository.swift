import Foundation
import SQLKit

/// The one SQL implementation of `Repository`, for SQLite and PostgreSQL. Each aggregate's queries
/// and rows are in their own file under `Stores/`: `IdentityStore`, `ConversationStore`,
/// `VoiceStore`, `CallStore`.
public struct SQLRepository: Sendable {
    let db: any SQLDatabase
    let flavor: DatabaseFlavor

    public init(db: any SQLDatabase, flavor: DatabaseFlavor) {
        self.db = db
        self.flavor = flavor
    }

    /// `FOR UPDATE` where the engine has row locks.
    func lockClause(_ lock: Bool) -> SQLQueryString {
        lock && flavor == .postgres ? " FOR UPDATE" : ""
    }
}

extension SQLRepository: Repository {}
