import Foundation
import ParleyAPI
import Hummingbird
import ParleyDomain
import Synchronization

/// Receives an upload's body into a file: the size cap while it streams in, and the pace limits
/// (a stall, a trickle, the whole upload's deadline). Voice notes and attachments both use it.
struct UploadReceiver: Sendable {
    let pace: VoiceService.UploadPace
    let metrics: ParleyMetrics
    /// At shutdown, past the drain deadline, an upload still arriving ends with 503.
    let drain: Drain

    /// The whole body into `partial`, or a clear error: too large (refused), abandoned or stalled
    /// (nothing kept), or empty.
    func receiveWhole(
        _ body: RequestBody, into partial: URL, maxBytes: Int, tooLarge: ParleyError, empty: String, emptyCode: ErrorCode
    ) async throws -> Int {
        let size: Int
        do {
            size = try await receive(body, into: partial, maxBytes: maxBytes, tooLarge: tooLarge)
        } catch let error as ParleyError where ![.uploadStalled, .uploadTooSlow, Drain.shuttingDown.code].contains(error.code) {
            throw error  // too large: refused, not abandoned
        } catch {
            // The client went away before the last byte: nothing is kept, and it is not a server fault.
            try? FileManager.default.removeItem(at: partial)
            metrics.uploadsAbandoned.increment()
            if error is ParleyError { throw error }
            throw ParleyError(.badRequest, code: .uploadIncomplete, message: "The upload ended before its last byte. Send it again.")
        }
        if size == 0 {
            throw ParleyError(.unprocessable, code: emptyCode, message: empty)
        }
        return size
    }

    /// Streams the body to a file, stopping as soon as it passes the cap, and giving up on a client
    /// that stalls, trickles or takes too long (a slow upload must not hold a connection and a file).
    private func receive(_ body: RequestBody, into file: URL, maxBytes maxUploadBytes: Int, tooLarge: ParleyError) async throws -> Int {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw ParleyError(.internalError, code: .internalError, message: "The upload could not be stored.")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        let progress = Progress()
        let pace = self.pace
        let drain = self.drain
        return try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                var size = 0
                for try await chunk in body {
                    size += chunk.readableBytes
                    progress.received(chunk.readableBytes)
                    if size > maxUploadBytes { throw tooLarge }
                    try handle.write(contentsOf: chunk.readableBytesView)
                }
                return size
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: .milliseconds(250))
                    if let failure = progress.check(pace) { throw failure }
                    if drain.isCut { throw Drain.shuttingDown }
                }
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let size = first else {
                throw ParleyError(.internalError, code: .internalError, message: "The upload could not be stored.")
            }
            return size
        }
    }

    /// How an upload is arriving.
    private final class Progress: Sendable {
        private struct State {
            let started = ContinuousClock.now
            var lastBytesAt = ContinuousClock.now
            var windowStart = ContinuousClock.now
            var windowBytes = 0
        }
        private let state = Mutex(State())

        func received(_ bytes: Int) {
            state.withLock { state in
                state.lastBytesAt = .now
                state.windowBytes += bytes
            }
        }

        /// Why the upload must be abandoned now, if it must.
        func check(_ pace: VoiceService.UploadPace, now: ContinuousClock.Instant = .now) -> ParleyError? {
            state.withLock { state -> ParleyError? in
                if now - state.lastBytesAt > pace.idle {
                    return ParleyError(
                        .requestTimeout, code: .uploadStalled,
                        message: "The upload stopped sending data for \(pace.idle.components.seconds) s and was abandoned. Send it again.")
                }
                if now - state.started > pace.deadline {
                    return ParleyError(
                        .requestTimeout, code: .uploadTooSlow,
                        message: "The upload took longer than \(pace.deadline.components.seconds) s and was abandoned. Send it again on a better connection.")
                }
                if now - state.windowStart >= pace.window {
                    let needed = pace.minBytesPerSecond * Int(pace.window.components.seconds)
                    if state.windowBytes < needed {
                        return ParleyError(
                            .requestTimeout, code: .uploadTooSlow,
                            message: "The upload arrived slower than \(pace.minBytesPerSecond) bytes a second and was abandoned. Send it again on a better connection.")
                    }
                    state.windowStart = now
                    state.windowBytes = 0
                }
                return nil
            }
        }
    }

}
