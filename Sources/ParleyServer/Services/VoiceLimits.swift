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
///
/// An upload over HTTP that finds its sender at the limit is refused (429: the client sends it again
/// after the one in progress). A file a channel's job took in (a WhatsApp customer's album, three
/// photos sent together) waits for its sender's slot instead: refused, the job would spend an
/// attempt and wait out a backoff of 5 s and more for a slot that frees in a moment. A waiter holds
/// one of the job runner's slots, so the jobs bound how many wait, and the holder it waits for is
/// bounded by its own limits (its conversions' timeouts).
final class UploadGate: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        var waiting: [(id: UInt64, keys: [String], continuation: CheckedContinuation<Void, any Error>)] = []
        var nextId: UInt64 = 0

        func fits(_ keys: [String], perConsumer: Int, perAddress: Int) -> Bool {
            guard counts[keys[0], default: 0] < perConsumer else { return false }
            return keys.count < 2 || counts[keys[1], default: 0] < perAddress
        }

        mutating func take(_ keys: [String]) {
            for key in keys { counts[key, default: 0] += 1 }
        }

        /// Takes the slots if they are free and nobody waits for this sender's (nobody overtakes a waiter).
        mutating func admit(_ keys: [String], perConsumer: Int, perAddress: Int) -> Bool {
            guard fits(keys, perConsumer: perConsumer, perAddress: perAddress), !waiting.contains(where: { $0.keys[0] == keys[0] }) else {
                return false
            }
            take(keys)
            return true
        }
    }

    let perConsumer: Int
    let perAddress: Int
    private let state = Mutex(State())

    init(perConsumer: Int, perAddress: Int) {
        self.perConsumer = perConsumer
        self.perAddress = perAddress
    }

    /// Uploads in progress from `address`.
    func inProgress(address: String) -> Int { state.withLock { $0.counts["a:" + address, default: 0] } }

    /// Uploads in progress from `consumer`.
    func inProgress(consumer: String) -> Int { state.withLock { $0.counts["c:" + consumer, default: 0] } }

    /// Runs `work` counted against `consumer` and `address`. When either is at its limit: refuses
    /// with 429, or with `waiting`, waits (first come, first served) until a slot frees.
    func run<T: Sendable>(consumer: String, address: String?, waiting: Bool = false, _ work: () async throws -> T) async throws -> T {
        let keys = ["c:" + consumer] + (address.map { ["a:" + $0] } ?? [])
        try await acquire(keys, waiting: waiting)
        defer { release(keys) }
        return try await work()
    }

    private func acquire(_ keys: [String], waiting: Bool) async throws {
        let id: UInt64? = state.withLock { state in
            if state.admit(keys, perConsumer: perConsumer, perAddress: perAddress) { return nil }
            state.nextId += 1
            return state.nextId
        }
        guard let id else { return }
        guard waiting else {
            throw ParleyError(
                .rateLimited, code: .tooManyUploads,
                message: "Too many files are being uploaded at once; wait for one to finish.", retryAfter: 2)
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case admitted, cancelled, queued }
                let outcome = state.withLock { state -> Outcome in
                    if Task.isCancelled { return .cancelled }
                    // A slot may have freed since the first look.
                    if state.admit(keys, perConsumer: perConsumer, perAddress: perAddress) { return .admitted }
                    state.waiting.append((id, keys, continuation))
                    return .queued
                }
                switch outcome {
                case .admitted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .queued: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiting.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private func release(_ keys: [String]) {
        // The freed slots go to the oldest waiters that now fit (they are counted before they run).
        let admitted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            for key in keys {
                let remaining = state.counts[key, default: 1] - 1
                state.counts[key] = remaining > 0 ? remaining : nil
            }
            var admitted: [CheckedContinuation<Void, any Error>] = []
            var index = 0
            var passedOver: Set<String> = []
            while index < state.waiting.count {
                let waiter = state.waiting[index]
                if !passedOver.contains(waiter.keys[0]), state.fits(waiter.keys, perConsumer: perConsumer, perAddress: perAddress) {
                    state.take(waiter.keys)
                    admitted.append(state.waiting.remove(at: index).continuation)
                } else {
                    // A later waiter of the same sender does not overtake this one.
                    passedOver.insert(waiter.keys[0])
                    index += 1
                }
            }
            return admitted
        }
        for continuation in admitted { continuation.resume() }
    }
}
