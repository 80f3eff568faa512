import Logging
import ParleyStore
import ServiceLifecycle

/// Keeps SQLite's full-text index up with new messages, in small batches a few times a second,
/// each its own short transaction: indexing (and FTS5's segment merges) never runs inside a
/// message's commit. A search catches up first, so it never misses a message. PostgreSQL indexes
/// as it writes; there this does nothing.
public struct SearchIndexer: Service {
    /// The search index.
    typealias Stores = any WorkspaceStore

    let store: StoreAccess<Stores>
    let interval: Duration
    let logger: Logger
    static let batch = 500

    public func run() async throws {
        guard store.flavor == .sqlite else {
            // A service that returns early stops the whole group: wait for the shutdown instead.
            try? await gracefulShutdown()
            return
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await Self.catchUp(store)
            } catch {
                logger.warning("could not index messages for search", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// Indexes everything written so far, `batch` rows per transaction. It looks first with a read,
    /// which on SQLite does not wait for the writer: an idle server, and a search when nothing new
    /// was written, take no write transaction (each one would queue behind, and hold up, messages).
    static func catchUp(_ store: StoreAccess<Stores>) async throws {
        guard store.flavor == .sqlite, try await store.read({ repo in try await repo.searchIndexIsBehind() }) else { return }
        while try await store.write({ repo in try await repo.indexForSearch(limit: batch) }) == batch {}
    }
}
