import Foundation
import ParleyAPI
#if canImport(Glibc)
import Glibc
#endif

/// `/health` latency while the server is attacked the ways issue 11 found: 2,000 silent sockets
/// held open (no request ever sent) and one client flooding typing frames (reconnecting each time
/// the server closes it with 4008), next to the same figure on the quiet server, in the same run.
enum AttackBench {
    struct Report: Sendable {
        var quiet: Distribution
        var attacked: Distribution
        /// Another consumer's `send` → `ack`, quiet and during the attack.
        var sendQuiet: Distribution
        var sendAttacked: Distribution
        var silentSockets: Int
        var floodFrames: Int
        var floodConnections: Int
        /// Reconnects the server refused (its flood cool-down).
        var floodRefused: Int
        var bomb: Bomb?
    }

    /// Ten-hour silent Opus files (13 MB) arriving at once.
    struct Bomb: Sendable {
        var files: Int
        var oneMs: Double
        var codes: [String]
        var idleRSS: Int
        var peakRSS: Int
    }

    static func run(server: ParleyServer, silentSockets: Int, requests: Int, sends: Int, bombs: Int, ffmpeg: String) async throws -> Report {
        let port = server.port
        let writer = try await Writer.open(server: server)
        let quiet = try await healthLatencies(port: port, count: requests)
        let sendQuiet = try await writer.sends(count: sends)

        // Silent sockets: connected, never a byte sent.
        let sockets = try await RawHTTP.onThread { try (0..<silentSockets).map { _ in try RawHTTP.connect(port: port) } }
        defer { for fd in sockets { Glibc.close(fd) } }

        // One typing flood, for as long as /health is measured.
        let session = try await server.api.consumerSession(appId: server.appId, name: "Flooder")
        let sent: SendMessageResponse = try await server.api.call(
            "POST", "/v1/consumer/messages", token: session.token, body: SendMessageRequest(clientMessageId: "flood-1", text: "hello"),
            as: SendMessageResponse.self)
        let typing = #"{"type":"typing","conversationId":"\#(sent.conversation.id)","isTyping":true}"#
        let stop = Locked(false)
        let counts = Locked((frames: 0, connections: 0, refused: 0))
        let flood = Task {
            while !stop.withLock({ $0 }) {
                guard let socket = try? await BenchSocket.open(url: "ws://127.0.0.1:\(port)/v1/realtime?access_token=\(session.token)") else {
                    counts.withLock { $0.refused += 1 }
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
                for _ in 0..<5_000 { socket.send(typing) }
                counts.withLock {
                    $0.frames += 5_000
                    $0.connections += 1
                }
                await socket.close()
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let attacked = try await healthLatencies(port: port, count: requests)
        let sendAttacked = try await writer.sends(count: sends)
        stop.withLock { $0 = true }
        await flood.value
        await writer.socket.close()
        let (frames, connections, refused) = counts.withLock { ($0.frames, $0.connections, $0.refused) }
        let bomb = bombs > 0 ? try await decoderBombs(server: server, count: bombs, ffmpeg: ffmpeg) : nil
        return Report(
            quiet: quiet, attacked: attacked, sendQuiet: sendQuiet, sendAttacked: sendAttacked, silentSockets: sockets.count,
            floodFrames: frames, floodConnections: connections, floodRefused: refused, bomb: bomb)
    }

    /// A consumer who writes normally, one message at a time, ten a second (half its frame budget).
    struct Writer {
        let socket: BenchSocket
        let conversationId: ConversationID
        let acks: Locked<[String: UInt64]>

        static func open(server: ParleyServer) async throws -> Writer {
            let session = try await server.api.consumerSession(appId: server.appId, name: "Writer")
            let sent: SendMessageResponse = try await server.api.call(
                "POST", "/v1/consumer/messages", token: session.token, body: SendMessageRequest(clientMessageId: "writer-0", text: "hi"),
                as: SendMessageResponse.self)
            let acks = Locked([String: UInt64]())
            let socket = try await BenchSocket.open(url: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(session.token)") { text in
                guard FrameScan.type(of: text) == "ack", let id = FrameScan.string("id", in: text) else { return }
                let now = monotonicNanos()
                acks.withLock { $0[String(id)] = now }
            }
            return Writer(socket: socket, conversationId: sent.conversation.id, acks: acks)
        }

        func sends(count: Int) async throws -> Distribution {
            var latencies: [Double] = []
            for _ in 0..<count {
                let id = UUID().uuidString
                let started = monotonicNanos()
                socket.send(#"{"type":"send","id":"\#(id)","clientMessageId":"\#(id)","conversationId":"\#(conversationId)","text":"still here"}"#)
                let deadline = started + 10_000_000_000
                while acks.withLock({ $0[id] }) == nil, monotonicNanos() < deadline { try await Task.sleep(for: .milliseconds(1)) }
                guard let acked = acks.withLock({ $0[id] }) else { throw BenchError("a send was not acknowledged within 10 s") }
                latencies.append(Double(acked - started) / 1e6)
                try await Task.sleep(for: .milliseconds(100))
            }
            return Distribution(latencies)
        }
    }

    /// Uploads one ten-hour file, then `count` at once from as many consumers, sampling the server's RSS.
    static func decoderBombs(server: ParleyServer, count: Int, ffmpeg: String) async throws -> Bomb {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-bomb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let minute = directory.appendingPathComponent("minute.ogg").path
        try run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=48000:cl=mono", "-t", "60", "-c:a", "libopus", "-b:a", "6k", minute])
        let list = directory.appendingPathComponent("list.txt")
        try String(repeating: "file '\(minute)'\n", count: 600).write(to: list, atomically: true, encoding: .utf8)
        let bombPath = directory.appendingPathComponent("bomb.ogg").path
        try run(ffmpeg, ["-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", list.path, "-c", "copy", bombPath])
        let bomb = Array(try Data(contentsOf: URL(fileURLWithPath: bombPath)))
        let port = server.port
        var tokens: [String] = []
        for index in 0...count { tokens.append(try await server.api.consumerSession(appId: server.appId, name: "Bomber \(index)").token) }
        @Sendable func upload(_ token: String) throws -> (code: String, ms: Double) {
            let response = try RawHTTP.request(
                port: port, "POST", "/v1/consumer/voice-messages?clientMessageId=\(UUID().uuidString)",
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "audio/ogg")], body: bomb)
            let code = FrameScan.string("code", in: response.text).map(String.init) ?? "\(response.status)"
            return (code, Double(response.finished - response.started) / 1e6)
        }
        let firstToken = tokens[0]
        let first = try await RawHTTP.onThread { try upload(firstToken) }
        try await Task.sleep(for: .milliseconds(500))
        let pid = server.pid
        let idle = ProcStats.rssBytes(pid: pid)
        let peak = Locked(idle)
        let sampling = Locked(true)
        let sampler = Task {
            while sampling.withLock({ $0 }) {
                let rss = ProcStats.rssBytes(pid: pid)
                peak.withLock { $0 = max($0, rss) }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        let codes = try await withThrowingTaskGroup(of: String.self) { group in
            for token in Array(tokens.dropFirst()) {
                group.addTask { try await RawHTTP.onThread { try upload(token).code } }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        sampling.withLock { $0 = false }
        await sampler.value
        return Bomb(files: count, oneMs: first.ms, codes: [first.code] + codes, idleRSS: idle, peakRSS: peak.withLock { $0 })
    }

    private static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/\(executable)")
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("\(executable) \(arguments) failed") }
    }

    /// Milliseconds from connecting to the last byte of `GET /health`, one request at a time.
    static func healthLatencies(port: Int, count: Int) async throws -> Distribution {
        let values = try await RawHTTP.onThread {
            try (0..<count).map { _ -> Double in
                let response = try RawHTTP.request(port: port, "GET", "/health")
                guard response.status == 200 else { throw BenchError("/health answered \(response.status)") }
                return Double(response.finished - response.started) / 1e6
            }
        }
        return Distribution(values)
    }
}
