import Foundation
import NIOCore
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

    public let connectionId: ConnectionID
    public let principal: Principal
    /// The hash of the session token the connection was opened with; logout of that session closes it.
    public let sessionTokenHash: String?
    /// When the connection's session ends; the hub closes the connection then.
    public let expiresAt: Date?
    let stream: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let closeReason = Mutex<CloseReason?>(nil)
    /// The socket, for closing it without a close frame when a write never completes.
    let channel: (any NIOCore.Channel)?
    /// When the write in progress started (nanoseconds of uptime), 0 when none is.
    private let writeStarted = Atomic<UInt64>(0)

    init(
        connectionId: ConnectionID, principal: Principal, sessionTokenHash: String?, expiresAt: Date? = nil, limit: Int,
        channel: (any NIOCore.Channel)? = nil
    ) {
        self.expiresAt = expiresAt
        self.connectionId = connectionId
        self.principal = principal
        self.sessionTokenHash = sessionTokenHash
        self.channel = channel
        (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(limit))
    }

    public enum SendResult: Sendable, Equatable {
        case queued
        /// This frame overflowed the queue: the connection is now closing with `resume`.
        case overflowed
        /// The connection was already closing; the frame was dropped.
        case closed
    }

    /// Queues a frame.
    @discardableResult
    public func send(_ frame: String) -> SendResult {
        switch continuation.yield(frame) {
        case .enqueued:
            return .queued
        case .dropped:
            return close(code: RealtimeCloseCode.resume, text: "too slow: reconnect and resume") ? .overflowed : .closed
        case .terminated:
            return .closed
        @unknown default:
            return .closed
        }
    }

    /// Ends the connection: frames still queued are dropped and the socket is closed with `code`.
    /// Returns true for the call that closed it (later calls change nothing).
    @discardableResult
    public func close(code: UInt16, text: String) -> Bool {
        let first = closeReason.withLock { reason in
            guard reason == nil else { return false }
            reason = CloseReason(code: code, text: text)
            return true
        }
        continuation.finish()
        return first
    }

    /// The writer marks each socket write, so that a write the client never lets finish is noticed.
    func writeBegins(at now: UInt64 = DispatchTime.now().uptimeNanoseconds) { writeStarted.store(max(now, 1), ordering: .relaxed) }
    func writeEnds() { writeStarted.store(0, ordering: .relaxed) }

    /// How long the write in progress has been waiting, if one is.
    func writeWaiting(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Duration? {
        let started = writeStarted.load(ordering: .relaxed)
        guard started != 0, now > started else { return nil }
        return .nanoseconds(Int64(now - started))
    }

    /// Closes the socket at once, without a close frame (its peer is not reading anything).
    func abort() {
        close(code: RealtimeCloseCode.resume, text: "write timed out")
        channel?.close(mode: .all, promise: nil)
    }

    /// Ends the queue without a close code (the client went away).
    func finish() {
        continuation.finish()
    }

    public var pendingClose: CloseReason? { closeReason.withLock { $0 } }
}

