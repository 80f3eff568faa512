import Foundation
import ParleyDomain
import Synchronization

/// A clock that only moves when a test moves it: timers (call ring and connect timeouts, malware
/// rescans) run without the test sleeping on the wall clock.
final class ManualClock: WallClock {
    private struct Sleeper {
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var sleepers: [Int: Sleeper] = [:]
        var nextId = 0
    }

    private let state: Mutex<State>

    init(start: Date = StoredTime.truncated(Date())) {
        state = Mutex(State(now: start))
    }

    func now() -> Date { state.withLock { $0.now } }

    func sleep(for duration: Duration) async throws {
        let id = state.withLock { state -> Int in
            state.nextId += 1
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool in
                    let deadline = state.now.addingTimeInterval(duration.seconds)
                    if deadline <= state.now || Task.isCancelled { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// How many tasks are sleeping on this clock.
    var sleeping: Int { state.withLock { $0.sleepers.count } }

    /// Moves time forward and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.addingTimeInterval(duration.seconds)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for key in due.keys { state.sleepers.removeValue(forKey: key) }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Waits (on the wall clock, up to `within` seconds) until something sleeps on this clock, then
    /// moves time forward by `duration`: for a timer the server arms asynchronously.
    func advanceOnceSleeping(by duration: Duration, within: TimeInterval = 10) async throws {
        let deadline = Date().addingTimeInterval(within)
        while sleeping == 0 {
            guard Date() < deadline else { throw TestFailure("nothing started sleeping on the manual clock") }
            try await Task.sleep(for: .milliseconds(5))
        }
        advance(by: duration)
    }
}
