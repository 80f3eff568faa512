import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle

/// Ends this process's open real-time connections whose session another process revoked:
/// `parley admin disable` or `reset-password` write to the database only, and on several nodes an
/// admin's "disable" or an agent's "sign out everywhere" runs on one node while the sockets are on
/// others. (What this process revokes itself it closes at once; this is for everyone else's.)
///
/// Every `interval` on the injected clock it reads the sessions revoked since its last look, with a
/// minute's overlap for processes whose clocks differ, and closes their connections here with 4001.
public struct SessionRevocations: Service {
    public typealias Stores = any IdentityStore

    let store: StoreAccess<Stores>
    let hub: RealtimeHub
    let clock: any WallClock
    let interval: Duration
    let logger: Logger

    /// How often a process looks.
    public static let defaultInterval = Duration.seconds(2)
    static let overlap: TimeInterval = 60

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var since = clock.now().addingTimeInterval(-Self.overlap)
            while !Task.isCancelled {
                try await clock.sleep(for: interval)
                let now = clock.now()
                do {
                    try await closeRevoked(since: since)
                    since = now.addingTimeInterval(-Self.overlap)
                } catch {
                    logger.warning("could not read revoked sessions", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Closes the connections of sessions revoked at or after `since`; returns how many sessions it read.
    @discardableResult
    func closeRevoked(since: Date) async throws -> Int {
        let revoked = try await store.read { repo in try await repo.sessionsRevoked(since: since, limit: 10_000) }
        for hash in revoked {
            hub.disconnect(sessionTokenHash: hash, code: RealtimeCloseCode.unauthorized, reason: "signed out")
        }
        return revoked.count
    }
}
