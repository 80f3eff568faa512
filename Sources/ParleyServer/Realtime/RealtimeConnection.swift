import Foundation
import Logging
import NIOCore
import ParleyDomain
import Synchronization

/// Who a real-time upgrade is for, as its route decided (`RealtimeController.addRoutes`).
struct RealtimeUpgrade: Sendable {
    var principal: Principal
    var sessionTokenHash: String?
    var expiresAt: Date?
    /// The client's address for per-address limits (nil behind a trusted proxy).
    var ip: String?
}

/// Where the upgrade route leaves its decision for the channel that asked (`RealtimeChannel`): a
/// request context is a value the route gets a copy of, so the decision goes into this box.
final class RealtimeUpgradeSlot: Sendable {
    private let slot = Mutex<RealtimeUpgrade?>(nil)

    func decide(_ upgrade: RealtimeUpgrade) { slot.withLock { $0 = upgrade } }
    var decided: RealtimeUpgrade? { slot.withLock { $0 } }
}

/// One open real-time connection: what its frames are handled with, and the handler that runs only
/// while frames wait (`FrameQueue`). Its socket (`RealtimeSocket`) reads and budgets; this handles.
final class RealtimeConnection: RealtimeSocket.Owner {
    let controller: RealtimeController
    let principal: Principal
    let sessionTokenHash: String?
    let ip: String?
    let outbox: Outbox
    let typingGate = TypingGate()
    private let queue: FrameQueue
    /// Where the handler runs: the socket's own event loop (`EventLoopTaskExecutor`).
    private let executor: (any TaskExecutor)?
    private let logger: Logger

    init(controller: RealtimeController, upgrade: RealtimeUpgrade, outbox: Outbox, eventLoop: any EventLoop, queueLimit: Int, logger: Logger) {
        self.controller = controller
        self.principal = upgrade.principal
        self.sessionTokenHash = upgrade.sessionTokenHash
        self.ip = upgrade.ip
        self.outbox = outbox
        self.queue = FrameQueue(limit: queueLimit)
        if #available(macOS 15, iOS 18, *) {
            executor = EventLoopTaskExecutor.on(eventLoop)
        } else {
            executor = nil
        }
        self.logger = logger
    }

    /// A message read from the socket (on its event loop); false when it is refused.
    func take(_ message: RealtimeSocket.Message, limiter: inout FrameLimiter) -> Bool {
        controller.take(message, connection: self, limiter: &limiter)
    }

    /// Queues an admitted frame for handling, starting the handler when none runs; false when a
    /// burst's worth is waiting already.
    func admit(_ text: String) -> Bool {
        switch queue.offer(text) {
        case .full:
            return false
        case .queued:
            return true
        case .startHandler:
            if #available(macOS 15, iOS 18, *), let executor {
                Task(executorPreference: executor) { await self.handleQueued() }
            } else {
                Task { await self.handleQueued() }
            }
            return true
        }
    }

    private func handleQueued() async {
        // Each frame's work (and the jobs and logs it causes) under `<connection>/<n>`.
        while let (text, number) = queue.next() {
            await RequestID.with("\(outbox.connectionId)/\(number)") {
                await controller.handle(text, principal: principal, ip: ip, outbox: outbox, typingGate: typingGate)
            }
        }
        if queue.claimFinish() { await controller.finished(outbox) }
    }

    /// The socket closed: nothing more is written; frames admitted before are still handled (as they
    /// would have been had their handler started before the close), then the connection finishes.
    func ended() {
        outbox.finish()
        queue.close()
        if queue.claimFinish() {
            Task { await controller.finished(outbox) }
        }
    }
}
