import Foundation
import ParleyDomain
import Synchronization

/// A bounded number of voice analyses at once, with a bounded queue in front: decoding costs a core
/// and memory, so a burst of uploads waits its turn instead of starting a dozen ffmpegs, and once the
/// queue is full too, an upload is refused at once with 503 and `Retry-After`.
final class WorkSlots: Sendable {
    private struct State {
        var running = 0
        var waiting: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextId: UInt64 = 0
    }

    let limit: Int
    let queueLimit: Int
    private let state = Mutex(State())

    init(limit: Int, queueLimit: Int) {
        self.limit = max(1, limit)
        self.queueLimit = max(0, queueLimit)
    }

    /// Runs `work` in a slot, waiting in the queue for one; throws `voice_busy` when the queue is full.
    func run<T: Sendable>(_ work: () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await work()
    }

    private func acquire() async throws {
        enum Admission { case now, wait(UInt64), full }
        let admission: Admission = state.withLock { state in
            if state.running < limit {
                state.running += 1
                return .now
            }
            guard state.waiting.count < queueLimit else { return .full }
            state.nextId += 1
            return .wait(state.nextId)
        }
        switch admission {
        case .now:
            return
        case .full:
            throw ParleyError(
                .unavailable, code: .voiceBusy, message: "The server is processing many voice messages; send this one again in a few seconds.",
                retryAfter: 5)
        case .wait(let id):
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let cancelled = state.withLock { state -> Bool in
                        if Task.isCancelled { return true }
                        state.waiting.append((id, continuation))
                        return false
                    }
                    if cancelled { continuation.resume(throwing: CancellationError()) }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                    guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiting.remove(at: index).continuation
                }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }

    private func release() {
        // The slot passes straight to the oldest waiter, if any (`running` stays the same).
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            return state.waiting.removeFirst().continuation
        }
        next?.resume()
    }

    var inUse: Int { state.withLock { $0.running } }
}

/// Uploads in progress per consumer and per client address. Anonymous sessions are free to make, so
/// the address limit is the one a single client cannot multiply.
final class UploadGate: Sendable {
    let perConsumer: Int
    let perAddress: Int
    private let counts = Mutex<[String: Int]>([:])

    init(perConsumer: Int, perAddress: Int) {
        self.perConsumer = perConsumer
        self.perAddress = perAddress
    }

    /// Uploads in progress from `address`.
    func inProgress(address: String) -> Int { counts.withLock { $0["a:" + address, default: 0] } }

    /// Runs `work` counted against `consumer` and `address`; refuses with 429 when either is at its limit.
    func run<T: Sendable>(consumer: String, address: String?, _ work: () async throws -> T) async throws -> T {
        let keys = ["c:" + consumer] + (address.map { ["a:" + $0] } ?? [])
        let admitted = counts.withLock { counts -> Bool in
            guard counts[keys[0], default: 0] < perConsumer else { return false }
            if keys.count > 1, counts[keys[1], default: 0] >= perAddress { return false }
            for key in keys { counts[key, default: 0] += 1 }
            return true
        }
        guard admitted else {
            throw ParleyError(
                .rateLimited, code: .tooManyUploads,
                message: "Too many files are being uploaded at once; wait for one to finish.", retryAfter: 2)
        }
        defer {
            counts.withLock { counts in
                for key in keys {
                    let remaining = counts[key, default: 1] - 1
                    counts[key] = remaining > 0 ? remaining : nil
                }
            }
        }
        return try await work()
    }
}
