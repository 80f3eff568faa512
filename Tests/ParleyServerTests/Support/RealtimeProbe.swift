import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import NIOWebSocket
import ParleyAPI
import Synchronization

/// A WebSocket client for tests: connects to `/v1/realtime`, decodes every server frame into a queue
/// the test reads with a timeout, and records how the server closed the connection.
final class RealtimeProbe: Sendable {
    private struct Inbox {
        var frames: [ServerFrame] = []
        var closed = false
        var connectionId: ConnectionID?
    }

    private final class Shared: Sendable {
        let state = Mutex(Inbox())
    }

    private let shared = Shared()
    private let outgoing: AsyncStream<String>.Continuation
    private let task: Task<WebSocketCloseFrame?, any Error>

    static func connect(port: Int, token: String, compression: Bool = false) async throws -> RealtimeProbe {
        let probe = RealtimeProbe(url: "ws://127.0.0.1:\(port)/v1/realtime?access_token=\(token)", compression: compression)
        // Generous: every test starts at once on a 2-core machine.
        guard case .hello(let connectionId, _, _, _) = try await probe.next(within: 20) else { throw TestFailure("expected hello first") }
        probe.shared.state.withLock { $0.connectionId = connectionId }
        return probe
    }

    /// The server's id for this connection, from its hello frame.
    var connectionId: ConnectionID { shared.state.withLock { $0.connectionId ?? ConnectionID(rawValue: "") } }

    private init(url: String, compression: Bool) {
        let (outgoingStream, outgoing) = AsyncStream<String>.makeStream()
        self.outgoing = outgoing
        let shared = self.shared
        var logger = Logger(label: "realtime-probe")
        logger.logLevel = .warning
        task = Task {
            defer { shared.state.withLock { $0.closed = true } }
            return try await WebSocketClient.connect(
                url: url,
                configuration: .init(maxFrameSize: 1 << 20, extensions: compression ? [.perMessageDeflate()] : []),
                logger: logger
            ) { inbound, outbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await text in outgoingStream {
                            try await outbound.write(.text(text))
                        }
                        try await outbound.close(.normalClosure, reason: nil)
                    }
                    group.addTask {
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            if case .text(let text) = message {
                                let frame = try ParleyJSON.makeDecoder().decode(ServerFrame.self, from: Data(text.utf8))
                                shared.state.withLock { $0.frames.append(frame) }
                            }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        }
    }

    func send(_ frame: ClientFrame) throws {
        outgoing.yield(String(decoding: try ParleyJSON.makeEncoder().encode(frame), as: UTF8.self))
    }

    func sendRaw(_ text: String) {
        outgoing.yield(text)
    }

    /// The next frame, or a failure after `seconds`. Agents' presence and live report frames, and
    /// consumers' queue places, are skipped: only `next(where:)` sees them.
    // 15 s: a deadline for a frame on a loaded 2-core machine (the full suite runs in parallel), not a
    // measure of speed.
    func next(within seconds: Double = 15) async throws -> ServerFrame {
        try await next(within: seconds, includingPresence: false)
    }

    private func next(within seconds: Double, includingPresence: Bool) async throws -> ServerFrame {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while true {
            let (frame, closed) = shared.state.withLock { inbox -> (ServerFrame?, Bool) in
                inbox.frames.isEmpty ? (nil, inbox.closed) : (inbox.frames.removeFirst(), false)
            }
            // Presence (to agents) and queue places (to waiting consumers) come and go with timing;
            // a test that wants them asks with `next(where:)`.
            if let frame, !includingPresence, case .presence = frame { continue }
            if let frame, !includingPresence, case .queue = frame { continue }
            // The live report goes to agents whenever the contact centre changes, at its own pace.
            if let frame, !includingPresence, case .report = frame { continue }
            if let frame { return frame }
            if closed { throw TestFailure("the connection closed") }
            if ContinuousClock.now >= deadline { throw TestFailure("no real-time frame within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Skips frames until one matches; fails after `seconds`.
    func next(within seconds: Double = 15, where matches: (ServerFrame) -> Bool) async throws -> ServerFrame {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { throw TestFailure("no matching real-time frame within \(seconds) s") }
            let frame = try await next(within: remaining, includingPresence: true)
            if matches(frame) { return frame }
        }
    }

    /// Asserts that no frame arrives for `seconds`.
    func expectSilence(for seconds: Double = 0.3) async throws -> ServerFrame? {
        do {
            return try await next(within: seconds)
        } catch let error as TestFailure where error.description.hasPrefix("no real-time frame") {
            return nil
        }
    }

    /// Closes from the client side and returns how the connection ended.
    @discardableResult
    func close() async -> WebSocketCloseFrame? {
        outgoing.finish()
        return try? await task.value
    }

    /// Waits for the server to close the connection and returns its close frame.
    func closedByServer() async throws -> WebSocketCloseFrame? {
        try await task.value
    }
}
