import Crypto
import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

/// Start-up and shutdown: records a crash left open are closed (on several nodes, those of nodes
/// that went away, every `orphanSweep`); live calls end when the server stops.
extension CallService {
    /// How often a node of several looks for calls whose node has gone.
    static let orphanSweep = Duration.seconds(30)

    public func run() async throws {
        await endOrphanedCalls()
        if relay != nil {
            try? await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try await self.clock.sleep(for: Self.orphanSweep)
                    await self.endOrphanedCalls()
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        let live = sessions.withLock { sessions -> [Session] in
            let all = Array(sessions.values)
            sessions.removeAll()
            return all
        }
        for var session in live {
            session.timer?.cancel()
            guard session.machine.abort(.serverShutdown, at: clock.now()) else { continue }
            session.refresh()
            await changed(session)
        }
    }
}
