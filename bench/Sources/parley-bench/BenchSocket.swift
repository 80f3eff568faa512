import Foundation
import HTTPTypes
import HummingbirdWSClient
import HummingbirdWSCompression
import Logging
import NIOCore
import Synchronization

/// One WebSocket connection for the load generator. Incoming text frames go to `onText` on the
/// connection's reader task as they arrive (no decoding unless the caller decodes); `send` queues a
/// text frame for the writer task.
final class BenchSocket: Sendable {
    private let outgoing: AsyncStream<String>.Continuation
    private let task: Task<Void, Never>

    /// With `compression`, permessage-deflate is offered and every frame sent is compressed, as
    /// browsers do. Connects and returns once the server's first frame (`hello`, or `ready` for the echo server)
    /// has arrived.
    static func open(
        url: String, compression: Bool = false, headers: HTTPFields = [:], onText: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> BenchSocket {
        let signal = FirstFrame()
        let socket = BenchSocket(url: url, compression: compression, headers: headers, signal: signal, onText: onText)
        try await signal.wait()
        return socket
    }

    private init(url: String, compression: Bool, headers: HTTPFields, signal: FirstFrame, onText: @escaping @Sendable (String) -> Void) {
        let (stream, outgoing) = AsyncStream<String>.makeStream()
        self.outgoing = outgoing
        var logger = Logger(label: "parley-bench")
        logger.logLevel = .critical
        task = Task {
            do {
                try await WebSocketClient.connect(
                    url: url,
                    configuration: .init(
                        maxFrameSize: 1 << 22, additionalHeaders: headers, extensions: compression ? [.perMessageDeflate(minFrameSizeToCompress: 1)] : []),
                    logger: logger
                ) { inbound, outbound, _ in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await text in stream {
                                try await outbound.write(.text(text))
                            }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                        group.addTask {
                            for try await message in inbound.messages(maxSize: 1 << 22) {
                                if case .text(let text) = message {
                                    signal.arrived(nil)
                                    onText(text)
                                }
                            }
                        }
                        try await group.next()
                        group.cancelAll()
                    }
                }
                signal.arrived(BenchError("\(url): closed before the first frame"))
            } catch {
                signal.arrived(error)
            }
        }
    }

    func send(_ text: String) {
        outgoing.yield(text)
    }

    /// Closes from the client side and waits until the connection is gone.
    func close() async {
        outgoing.finish()
        await task.value
    }

    /// Resumes one waiter on the first frame, or with the error that ended the connection first.
    private final class FirstFrame: Sendable {
        private enum State {
            case waiting(CheckedContinuation<Void, any Error>?)
            case done((any Error)?)
        }
        private let state = Mutex(State.waiting(nil))

        func arrived(_ error: (any Error)?) {
            let waiter: CheckedContinuation<Void, any Error>? = state.withLock { state in
                guard case .waiting(let waiter) = state else { return nil }
                state = .done(error)
                return waiter
            }
            if let error { waiter?.resume(throwing: error) } else { waiter?.resume() }
        }

        func wait() async throws {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let finished: (any Error)?? = state.withLock { state in
                    switch state {
                    case .waiting:
                        state = .waiting(continuation)
                        return .none
                    case .done(let error):
                        return .some(error)
                    }
                }
                switch finished {
                case .none: break
                case .some(.none): continuation.resume()
                case .some(.some(let error)): continuation.resume(throwing: error)
                }
            }
        }
    }
}

/// Pulls small fields out of Parley's JSON frames without decoding them: the load generator must
/// spend its CPU sending, not parsing. Key order in a JSON object is not fixed, so the scan tracks
/// nesting and string state.
enum FrameScan {
    /// The string value of `key` in the frame's top-level object, if present.
    static func topLevel(_ key: String, in text: String) -> Substring? {
        let utf8 = text.utf8
        let keyBytes = Array(key.utf8)
        var depth = 0
        var index = utf8.startIndex
        var expectingKey = false
        while index < utf8.endIndex {
            let byte = utf8[index]
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectingKey = byte == UInt8(ascii: "{") && depth == 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ","):
                expectingKey = depth == 1
            case UInt8(ascii: "\""):
                // A string: skip to its end, honouring escapes.
                let start = utf8.index(after: index)
                var end = start
                while end < utf8.endIndex, utf8[end] != UInt8(ascii: "\"") {
                    if utf8[end] == UInt8(ascii: "\\") { end = utf8.index(after: end) }
                    end = utf8.index(after: end)
                }
                if expectingKey, depth == 1 {
                    expectingKey = false
                    if utf8[start..<end].elementsEqual(keyBytes) {
                        // "key": "value"
                        var value = utf8.index(after: end)
                        while value < utf8.endIndex, utf8[value] == UInt8(ascii: ":") || utf8[value] == UInt8(ascii: " ") {
                            value = utf8.index(after: value)
                        }
                        guard value < utf8.endIndex, utf8[value] == UInt8(ascii: "\"") else { return nil }
                        let valueStart = utf8.index(after: value)
                        var valueEnd = valueStart
                        while valueEnd < utf8.endIndex, utf8[valueEnd] != UInt8(ascii: "\"") { valueEnd = utf8.index(after: valueEnd) }
                        return Substring(text[valueStart..<valueEnd])
                    }
                }
                index = end
            default:
                break
            }
            index = utf8.index(after: index)
        }
        return nil
    }

    static func type(of text: String) -> Substring? { topLevel("type", in: text) }

    /// The first string value of `key` anywhere in the frame (for keys that occur once).
    static func string(_ key: String, in text: String) -> Substring? {
        guard let range = text.range(of: "\"\(key)\":\"") else { return nil }
        let rest = text[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return rest[..<end]
    }
}
