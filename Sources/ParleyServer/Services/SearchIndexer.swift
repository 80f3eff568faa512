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
        var rounds = Rounds()
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await rounds.next(store)
            } catch {
                logger.warning("could not index messages for search", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// The loop's rounds. A round after one that indexed goes straight to the writer: while messages
    /// come in there is nearly always more, and a look first would be a read a round for nothing (a
    /// look each round cost some 10,000 instructions a message in `bench/instructions.sh`). A round
    /// after one that found nothing, or failed, looks first, so an idle server takes no write transaction.
    struct Rounds {
        private(set) var look = true

        /// One round; returns how many rows it indexed.
        @discardableResult
        mutating func next(_ store: StoreAccess<Stores>) async throws -> Int {
            let lookNow = look
            look = true  // if this round fails
            let indexed = try await SearchIndexer.catchUp(store, look: lookNow)
            look = indexed == 0
            return indexed
        }
    }

    /// Indexes everything written so far, `batch` rows per transaction, and returns how many rows it
    /// went through. With `look` it first reads whether anything waits, which on SQLite does not wait
    /// for the writer: an idle server, and a search when nothing new was written, take no write
    /// transaction (each one would queue behind, and hold up, messages).
    @discardableResult
    static func catchUp(_ store: StoreAccess<Stores>, look: Bool = true) async throws -> Int {
        guard store.flavor == .sqlite else { return 0 }
        if look, try await !store.read({ repo in try await repo.searchIndexIsBehind() }) { return 0 }
        var indexed = 0
        while true {
            let rows = try await store.write { repo in try await repo.indexForSearch(limit: batch) }
            indexed += rows
            if rows < batch { return indexed }
        }
    }
}
