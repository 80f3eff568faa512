import Foundation
import Logging
import ParleyDomain
import ParleyStore
import SQLKit
import ServiceLifecycle

/// Token buckets in PostgreSQL (`rate_buckets`), shared by every node: a client that spreads its
/// requests over the nodes still has one bucket. One statement per action (an upsert that refills
/// by the time passed, takes a token if there is one, and says whether it did), under the row's
/// lock, so concurrent nodes never both take the last token. Idle full buckets are pruned.
public final class SharedTokenBuckets: TokenBuckets, Service {
    private let store: Store
    private let clock: any WallClock
    private let logger: Logger

    public init(store: Store, clock: any WallClock, logger: Logger) {
        (self.store, self.clock, self.logger) = (store, clock, logger)
    }

    private struct Row: Decodable {
        var tokens: Double
        var allowed: Int
    }

    public func take(_ key: String, limit: Int, per period: Duration) async throws -> Int? {
        guard limit > 0 else { return nil }
        let perMillisecond = Double(limit) / max(period.seconds * 1000, 1)
        let now = StoredTime.millis(clock.now())
        let capacity = Double(limit)
        do {
            let row = try await store.database.write { db in
                try await db.raw(
                    """
                    INSERT INTO rate_buckets (key, tokens, allowed, updated_at) VALUES (\(bind: key), \(bind: capacity - 1), 1, \(bind: now))
                    ON CONFLICT (key) DO UPDATE SET
                        tokens = CASE WHEN LEAST(\(bind: capacity), rate_buckets.tokens + GREATEST(0, \(bind: now) - rate_buckets.updated_at) * \(bind: perMillisecond)) >= 1
                            THEN LEAST(\(bind: capacity), rate_buckets.tokens + GREATEST(0, \(bind: now) - rate_buckets.updated_at) * \(bind: perMillisecond)) - 1
                            ELSE LEAST(\(bind: capacity), rate_buckets.tokens + GREATEST(0, \(bind: now) - rate_buckets.updated_at) * \(bind: perMillisecond)) END,
                        allowed = CASE WHEN LEAST(\(bind: capacity), rate_buckets.tokens + GREATEST(0, \(bind: now) - rate_buckets.updated_at) * \(bind: perMillisecond)) >= 1
                            THEN 1 ELSE 0 END,
                        updated_at = GREATEST(rate_buckets.updated_at, \(bind: now))
                    RETURNING tokens, allowed
                    """
                ).first(decoding: Row.self)
            }
            guard let row, row.allowed == 0 else { return nil }
            return max(1, Int(((1 - row.tokens) / (perMillisecond * 1000)).rounded(.up)))
        } catch {
            logger.warning("the shared rate limits could not be read; letting the action through", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Prunes every ten minutes.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(600))
                do { try await self.prune() } catch { self.logger.warning("could not prune the shared rate limits", metadata: ["error": "\(error)"]) }
            }
        }
    }

    /// Removes buckets that have been full for a while (refilled since their last use).
    public func prune(olderThan age: TimeInterval = 3600) async throws {
        let cutoff = StoredTime.millis(clock.now().addingTimeInterval(-age))
        try await store.database.write { db in try await db.raw("DELETE FROM rate_buckets WHERE updated_at < \(bind: cutoff)").run() }
    }
}
