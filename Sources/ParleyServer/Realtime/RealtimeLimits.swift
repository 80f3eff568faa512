import ParleyAPI
import Foundation
import ParleyDomain
import NIOCore
import NIOWebSocket
import Synchronization

/// The per-connection budget of client frames: a token bucket of `perSecond` frames, `2 × perSecond`
/// at once. A frame over budget is refused; a client that goes on sending `closeAfter` refused
/// frames in a row (a burst's worth, at least 10) is closed with 4008. Owned by one connection's socket, on its event loop.
struct FrameLimiter {
    enum Decision: Equatable { case allow, refuse, close }

    let perSecond: Double
    let burst: Double
    let closeAfter: Int
    private var tokens: Double
    private var updated: ContinuousClock.Instant
    private var refusedSinceAllowed = 0
    /// `refusedSinceAllowed` before the last `take` allowed a frame (for `overflowed`).
    private var refusedBeforeAllowed = 0

    init(perSecond: Int, now: ContinuousClock.Instant = .now) {
        self.perSecond = Double(max(1, perSecond))
        self.burst = 2 * Double(max(1, perSecond))
        self.tokens = burst
        self.closeAfter = max(10, 2 * max(1, perSecond))
        self.updated = now
    }

    mutating func take(now: ContinuousClock.Instant = .now) -> Decision {
        let elapsed = now - updated
        tokens = min(burst, tokens + elapsed.seconds * perSecond)
        updated = now
        if tokens >= 1 {
            tokens -= 1
            refusedBeforeAllowed = refusedSinceAllowed
            refusedSinceAllowed = 0
            return .allow
        }
        refusedSinceAllowed += 1
        return refusedSinceAllowed >= closeAfter ? .close : .refuse
    }

    /// A frame `take` allowed could not be queued for handling (a burst's worth is waiting): it is
    /// refused after all, and counts towards the close like any refused frame.
    mutating func overflowed() -> Decision {
        refusedSinceAllowed = refusedBeforeAllowed + 1
        return refusedSinceAllowed >= closeAfter ? .close : .refuse
    }
}

/// Which sessions were closed with 4008 for flooding, and until when they may not open the real-time
/// WebSocket again. Without it a flooder reconnects at once and every reconnect costs a session
/// lookup, a `hello` and a burst's worth of frames; with it the connection guard refuses the upgrade
/// with `429 too_many_frames` from the token alone, before any other work. Shared by every
/// connection; keyed by the session token's SHA-256 (new anonymous sessions are rate-limited per
/// address, so minting tokens does not get around it).
final class FloodCooldown: Sendable {
    let duration: Duration
    /// Entries kept at most; past this, expired ones are forgotten (and, if none are, the oldest).
    static let capacity = 10_000
    private let until = Mutex<[String: ContinuousClock.Instant]>([:])

    init(duration: Duration) {
        self.duration = duration
    }

    /// Starts (or restarts) the cool-down of a participant closed for flooding.
    func penalize(_ key: String, now: ContinuousClock.Instant = .now) {
        guard duration > .zero else { return }
        until.withLock { until in
            if until.count >= Self.capacity {
                until = until.filter { $0.value > now }
                if until.count >= Self.capacity, let oldest = until.min(by: { $0.value < $1.value })?.key {
                    until[oldest] = nil
                }
            }
            until[key] = now + duration
        }
    }

    /// The refusal of an upgrade during a cool-down.
    static func refusal(_ wait: Duration) -> ParleyError {
        ParleyError(
            .rateLimited, code: .tooManyFrames,
            message: "This session sent too many real-time frames; wait \(seconds(wait)) s before connecting again.")
    }

    /// Whole seconds, rounded up (for Retry-After).
    static func seconds(_ wait: Duration) -> Int {
        max(1, Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0))
    }

    /// What is left of a participant's cool-down, or nil when they may connect.
    func remaining(_ key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        until.withLock { until in
            guard let end = until[key] else { return nil }
            guard end > now else {
                until[key] = nil
                return nil
            }
            return end - now
        }
    }
}

/// Coalesces one connection's typing indicators: at most one change per second per conversation is
/// forwarded. A change that arrives sooner is held and forwarded when its second is over (if it is
/// still a change then), so a "stopped typing" is never lost and an indicator never sticks.
final class TypingGate: Sendable {
    static let interval: Duration = .seconds(1)
    /// Conversations remembered per connection; the oldest is forgotten past this.
    static let maxConversations = 32

    private struct Entry {
        var lastForwardAt: ContinuousClock.Instant
        var lastForwarded: Bool
        var pending: Bool?
        var flushScheduled: Bool
    }

    private let entries = Mutex<[ConversationID: Entry]>([:])

    enum Decision: Equatable { case forwardNow, hold(after: Duration), drop }

    /// What to do with a typing change (pure bookkeeping; the caller forwards).
    func decide(conversationId: ConversationID, isTyping: Bool, now: ContinuousClock.Instant = .now) -> Decision {
        entries.withLock { entries in
            guard var entry = entries[conversationId] else {
                if entries.count >= Self.maxConversations,
                    let oldest = entries.min(by: { $0.value.lastForwardAt < $1.value.lastForwardAt })?.key
                {
                    entries[oldest] = nil
                }
                entries[conversationId] = Entry(lastForwardAt: now, lastForwarded: isTyping, pending: nil, flushScheduled: false)
                return .forwardNow
            }
            let since = now - entry.lastForwardAt
            if since >= Self.interval, !entry.flushScheduled {
                entry.lastForwardAt = now
                entry.lastForwarded = isTyping
                entry.pending = nil
                entries[conversationId] = entry
                return .forwardNow
            }
            entry.pending = isTyping == entry.lastForwarded ? nil : isTyping
            let decision: Decision
            if entry.pending != nil, !entry.flushScheduled {
                entry.flushScheduled = true
                decision = .hold(after: Self.interval - since)
            } else {
                decision = .drop
            }
            entries[conversationId] = entry
            return decision
        }
    }

    /// The held change to forward now, if it is still a change.
    func flush(conversationId: ConversationID, now: ContinuousClock.Instant = .now) -> Bool? {
        entries.withLock { entries in
            guard var entry = entries[conversationId] else { return nil }
            entry.flushScheduled = false
            defer { entries[conversationId] = entry }
            guard let pending = entry.pending, pending != entry.lastForwarded else { return nil }
            entry.pending = nil
            entry.lastForwarded = pending
            entry.lastForwardAt = now
            return pending
        }
    }

    /// Forwards now, later or never, as `decide` says; `forward` runs at most once per second per conversation.
    func offer(conversationId: ConversationID, isTyping: Bool, forward: @escaping @Sendable (Bool) async throws -> Void) async throws {
        switch decide(conversationId: conversationId, isTyping: isTyping) {
        case .forwardNow:
            try await forward(isTyping)
        case .hold(let delay):
            Task {
                try? await Task.sleep(for: delay)
                if let change = self.flush(conversationId: conversationId) {
                    try? await forward(change)
                }
            }
        case .drop:
            break
        }
    }
}
