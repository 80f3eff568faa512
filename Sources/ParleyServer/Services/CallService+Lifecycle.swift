import Crypto
import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

/// Start-up and shutdown: records a crash left open are closed; live calls end when the server stops.
extension CallService {
    public func run() async throws {
        await closeInterruptedRecords()
        try? await gracefulShutdown()
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

    /// Records a crash left without an end are ended as failed (or cancelled if never answered).
    public func closeInterruptedRecords() async {
        do {
            let open = try await store.read { repo in try await repo.unfinishedCalls(limit: 1000) }
            let live = sessions.withLock { Set($0.keys) }
            for (brandId, record) in open where !live.contains(record.id) {
                var call = record
                call.state = .ended
                call.endedAt = clock.now()
                call.outcome = call.answeredAt == nil ? .cancelled : .failed
                call.endReason = .serverShutdown
                call.durationSeconds = call.answeredAt.map { max(0, Int(call.endedAt!.timeIntervalSince($0).rounded())) } ?? 0
                _ = try await storeEnd(&call, brandId: brandId, actor: ParticipantRef(kind: .system, id: "calls"), store: store)
            }
            if !open.isEmpty {
                logger.notice("closed call records left open by a crash", metadata: ["count": "\(open.count)"])
            }
        } catch {
            logger.error("could not close interrupted call records", metadata: ["error": "\(error)"])
        }
    }
}
