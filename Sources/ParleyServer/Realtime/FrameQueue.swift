import Synchronization

/// A connection's admitted client frames, waiting to be handled in order, at most `limit` of them.
///
/// The handler is a task only while there is work: `offer` says `startHandler` to the frame that
/// finds the queue idle (the caller starts one task), and that task takes frames with `next` until
/// none is left, when the queue turns idle again under the same lock, so a frame offered at that
/// moment starts the next handler and none is ever left waiting without one. Frames are numbered
/// as they are admitted (`<connection>/<n>`, the request id of their work).
///
/// When the connection ends (`close`), frames already admitted are still handled, and then the
/// connection's finishing work runs once: whoever finds the queue closed and idle first, the closer or
/// the last handler, wins `claimFinish`.
final class FrameQueue: Sendable {
    enum Offer: Equatable, Sendable {
        /// Queued behind frames being handled.
        case queued
        /// Queued, and no handler is running: the caller starts one.
        case startHandler
        /// Refused: `limit` frames are waiting already.
        case full
    }

    private struct State {
        var waiting: [(String, Int)] = []
        var head = 0
        var handling = false
        var admitted = 0
        var closed = false
        var finishClaimed = false
    }

    private let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    func offer(_ text: String) -> Offer {
        state.withLock { state in
            guard !state.closed, state.waiting.count - state.head < limit else { return .full }
            state.admitted += 1
            state.waiting.append((text, state.admitted))
            if state.handling { return .queued }
            state.handling = true
            return .startHandler
        }
    }

    /// The next frame and its number, or nil, and the queue is idle, when there is none.
    func next() -> (String, Int)? {
        state.withLock { state in
            guard state.head < state.waiting.count else {
                state.waiting.removeAll(keepingCapacity: false)
                state.head = 0
                state.handling = false
                return nil
            }
            let frame = state.waiting[state.head]
            state.head += 1
            // Taken frames are dropped in bulk, once they are half the array (amortized O(1)).
            if state.head >= 32, state.head * 2 >= state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
            return frame
        }
    }

    /// No frame is offered any more (the connection ended).
    func close() {
        state.withLock { $0.closed = true }
    }

    /// True once, to the first caller that finds the queue closed with no handler running.
    func claimFinish() -> Bool {
        state.withLock { state in
            guard state.closed, !state.handling, !state.finishClaimed else { return false }
            state.finishClaimed = true
            return true
        }
    }

    /// How many frames are waiting (tests).
    var count: Int { state.withLock { $0.waiting.count - $0.head } }
}
