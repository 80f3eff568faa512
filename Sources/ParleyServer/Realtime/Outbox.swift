import Foundation
import NIOCore
import ParleyAPI
import ParleyDomain
import Synchronization

/// Where an outbox's frames go: the connection's socket (`RealtimeSocket`), or a test's collector.
/// Every call comes on the outbox's event loop.
protocol RealtimeWriter: Sendable {
    /// Writes text frames in order; `written` is called on the event loop once they have all left
    /// (or the connection failed).
    func write(_ frames: [String], written: @escaping @Sendable () -> Void)
    /// Sends a close frame with `reason`, then closes the connection.
    func close(_ reason: Outbox.CloseReason)
    /// Closes the connection at once, without a close frame.
    func abort()
    /// Sends a ping; closes the connection when the previous ping got no pong.
    func heartbeat()
}

/// The bounded queue of frames waiting to be written to one WebSocket.
///
/// `send` may be called from any thread: frames are queued under a lock, in the order they are sent,
/// and written by the connection's event loop, as many as are waiting in one go with one flush. No
/// task waits for frames: an idle connection costs its socket, not a suspended writer.
///
/// A frame counts against `limit` from when it is queued until the kernel has taken it. When the
/// queue is full the connection is closed with `RealtimeCloseCode.resume`: the client reconnects
/// and resumes from its last sequence numbers, so nothing stored is lost, and one slow reader never
/// holds up the others or grows the server's memory without bound.
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
    private let limit: Int
    private let eventLoop: any EventLoop
    private let writer: any RealtimeWriter

    private struct State {
        /// Queued, not yet handed to the socket.
        var queued: [String] = []
        /// Handed to the socket, not yet taken by the kernel.
        var inFlight = 0
        /// A write of the queue is scheduled on the event loop.
        var scheduled = false
        var closeReason: CloseReason?
        /// The close was handed to the writer.
        var closeWritten = false
        /// The client went away: nothing more is written.
        var finished = false
        /// Since when frames have waited without the socket taking any (nanoseconds of uptime).
        var waitingSince: UInt64 = 0
    }

    private let state = Mutex(State())

    init(
        connectionId: ConnectionID, principal: Principal, sessionTokenHash: String?, expiresAt: Date? = nil, limit: Int,
        eventLoop: any EventLoop, writer: any RealtimeWriter
    ) {
        self.expiresAt = expiresAt
        self.connectionId = connectionId
        self.principal = principal
        self.sessionTokenHash = sessionTokenHash
        self.limit = max(1, limit)
        self.eventLoop = eventLoop
        self.writer = writer
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
    public func send(_ frame: String, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> SendResult {
        let (result, schedule) = state.withLock { state -> (SendResult, Bool) in
            guard state.closeReason == nil, !state.finished else { return (.closed, false) }
            let waiting = state.queued.count + state.inFlight
            guard waiting < limit else {
                return (.overflowed, Self.closing(&state, CloseReason(code: RealtimeCloseCode.resume, text: "too slow: reconnect and resume")))
            }
            if waiting == 0 { state.waitingSince = max(now, 1) }
            state.queued.append(frame)
            return (.queued, Self.claimSchedule(&state))
        }
        if schedule { eventLoop.execute { self.flush() } }
        return result
    }

    /// Marks the connection closing with `reason` and drops what is queued; true when the caller
    /// schedules the flush that writes the close.
    private static func closing(_ state: inout State, _ reason: CloseReason) -> Bool {
        state.closeReason = reason
        state.queued = []
        return claimSchedule(&state)
    }

    private static func claimSchedule(_ state: inout State) -> Bool {
        guard !state.scheduled else { return false }
        state.scheduled = true
        return true
    }

    /// On the event loop: hands what is queued to the writer, or the close once one is asked for.
    private func flush() {
        enum Step { case write([String]), close(CloseReason), nothing }
        let step = state.withLock { state -> Step in
            state.scheduled = false
            if state.finished { return .nothing }
            if let reason = state.closeReason {
                guard !state.closeWritten else { return .nothing }
                state.closeWritten = true
                state.queued = []
                return .close(reason)
            }
            guard !state.queued.isEmpty else { return .nothing }
            let frames = state.queued
            state.queued = []
            state.inFlight += frames.count
            return .write(frames)
        }
        switch step {
        case .write(let frames):
            writer.write(frames) { [self] in
                let now = DispatchTime.now().uptimeNanoseconds
                state.withLock { state in
                    state.inFlight -= frames.count
                    state.waitingSince = state.inFlight + state.queued.count > 0 ? now : 0
                }
            }
        case .close(let reason):
            writer.close(reason)
        case .nothing:
            break
        }
    }

    /// Ends the connection: frames still queued are dropped and the socket is closed with `code`.
    /// Returns true for the call that closed it (later calls change nothing).
    @discardableResult
    public func close(code: UInt16, text: String) -> Bool {
        let (first, schedule) = state.withLock { state -> (Bool, Bool) in
            guard state.closeReason == nil, !state.finished else { return (false, false) }
            return (true, Self.closing(&state, CloseReason(code: code, text: text)))
        }
        if schedule { eventLoop.execute { self.flush() } }
        return first
    }

    /// How long frames have waited without the socket taking any (a client that stopped reading).
    func writeWaiting(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Duration? {
        let since = state.withLock { $0.inFlight > 0 ? $0.waitingSince : 0 }
        guard since != 0, now > since else { return nil }
        return .nanoseconds(Int64(now - since))
    }

    /// Closes the socket at once, without a close frame (its peer is not reading anything).
    func abort() {
        state.withLock { state in
            if state.closeReason == nil { state.closeReason = CloseReason(code: RealtimeCloseCode.resume, text: "write timed out") }
            state.queued = []
            state.finished = true
        }
        eventLoop.execute { self.writer.abort() }
    }

    /// Pings the client; a client that did not answer the previous ping is gone, and its socket is closed.
    func heartbeat() {
        guard state.withLock({ !$0.finished && $0.closeReason == nil }) else { return }
        eventLoop.execute { self.writer.heartbeat() }
    }

    /// The client went away: nothing more is queued or written.
    func finish() {
        state.withLock { state in
            state.finished = true
            state.queued = []
        }
    }

    public var pendingClose: CloseReason? { state.withLock { $0.closeReason } }
}
