import Foundation
import ParleyAPI
import ParleyDomain
import Synchronization

/// The bounded queue of frames waiting to be written to one WebSocket.
///
/// When the queue is full the connection is closed with `RealtimeCloseCode.resume`: the client
/// reconnects and resumes from its last sequence numbers, so nothing stored is lost, and one slow
/// reader never holds up the others or grows the server's memory without bound.
public final class Outbox: Sendable {
    public struct CloseReason: Sendable, Hashable {
        public var code: UInt16
        public var text: String
    }

    public let connectionId: String
    public let principal: Principal
    /// The hash of the session token the connection was opened with; logout of that session closes it.
    public let sessionTokenHash: String?
    /// When the connection's session ends; the hub closes the connection then.
    public let expiresAt: Date?
    let stream: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let closeReason = Mutex<CloseReason?>(nil)

    init(connectionId: String, principal: Principal, sessionTokenHash: String?, expiresAt: Date? = nil, limit: Int) {
        self.expiresAt = expiresAt
        self.connectionId = connectionId
        self.principal = principal
        self.sessionTokenHash = sessionTokenHash
        (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(limit))
    }

    /// Queues a frame. Returns false when the connection is closing or just overflowed.
    @discardableResult
    public func send(_ frame: String) -> Bool {
        switch continuation.yield(frame) {
        case .enqueued:
            return true
        case .dropped:
            close(code: RealtimeCloseCode.resume, text: "too slow: reconnect and resume")
            return false
        case .terminated:
            return false
        @unknown default:
            return false
        }
    }

    /// Ends the connection: frames still queued are dropped and the socket is closed with `code`.
    public func close(code: UInt16, text: String) {
        closeReason.withLock { reason in
            if reason == nil { reason = CloseReason(code: code, text: text) }
        }
        continuation.finish()
    }

    /// Ends the queue without a close code (the client went away).
    func finish() {
        continuation.finish()
    }

    public var pendingClose: CloseReason? { closeReason.withLock { $0 } }
}

