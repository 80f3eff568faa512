import Foundation
import ParleyAPI

/// Everything Parley stores, as one transaction (or one read) sees it: one store per aggregate.
///
/// Every brand-owned lookup takes the brand id: a row of another brand is simply not found.
/// `SQLRepository` implements it once for SQLite and PostgreSQL; `Store` hands one out per
/// transaction.
public protocol Repository: IdentityStore, ConversationStore, VoiceStore, CallStore, CobrowseStore, WorkspaceStore, AttachmentStore, ChannelStore, JobStore, PushStore, ActivityStore, RoutingStore, LifecycleStore, RecordsStore, ReportsStore, SealedStore {}

/// The database plus the repository over it.
public final class Store: Sendable {
    public let database: any DatabaseClient

    public init(database: any DatabaseClient) {
        self.database = database
    }

    public var flavor: DatabaseFlavor { database.flavor }

    /// Runs `body` in one transaction.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any Repository) async throws -> T) async throws -> T {
        let flavor = database.flavor
        return try await database.write { db in try await body(SQLRepository(db: db, flavor: flavor)) }
    }

    /// Runs read-only `body` against committed data.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any Repository) async throws -> T) async throws -> T {
        let flavor = database.flavor
        return try await database.read { db in try await body(SQLRepository(db: db, flavor: flavor)) }
    }

    /// Runs `body`, which writes with one statement, as a transaction of its own (`DatabaseClient.alone`).
    public func alone<T: Sendable>(_ body: @escaping @Sendable (any Repository) async throws -> T) async throws -> T {
        let flavor = database.flavor
        return try await database.alone { db in try await body(SQLRepository(db: db, flavor: flavor)) }
    }

    public func close() async {
        await database.close()
    }

    /// A view of this store whose transactions see only the stores a service names:
    /// `store.access { $0 as any CallStore & ConversationStore }`. A service that holds one says in
    /// its type which of the aggregates it reads and writes, and cannot reach the others.
    public func access<Repo: Sendable>(_ narrow: @escaping @Sendable (any Repository) -> Repo) -> StoreAccess<Repo> {
        StoreAccess(store: self, narrow: narrow)
    }
}

/// A service's view of the `Store`: the same transactions, over the stores it names (`Store.access`).
public struct StoreAccess<Repo: Sendable>: Sendable {
    /// The whole store, for what is shared by design (the conversation log's transaction).
    public let store: Store
    let narrow: @Sendable (any Repository) -> Repo

    public var flavor: DatabaseFlavor { store.flavor }

    /// Runs `body` in one transaction.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Repo) async throws -> T) async throws -> T {
        let narrow = narrow
        return try await store.write { repo in try await body(narrow(repo)) }
    }

    /// Runs read-only `body` against committed data.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Repo) async throws -> T) async throws -> T {
        let narrow = narrow
        return try await store.read { repo in try await body(narrow(repo)) }
    }
}

/// The id of the request, real-time frame or job a task works for (ParleyServer's `RequestID`
/// reads and sets it). It lives here so that a transaction another task runs (SQLite's group
/// commit runs a batch in the task of whichever writer came first) still runs under its own
/// caller's id: the jobs it enqueues and the lines it logs name the right request.
public enum WorkRequestID {
    @TaskLocal public static var current: String?
}
