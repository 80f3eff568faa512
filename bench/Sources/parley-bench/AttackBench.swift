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
        var silentSockets: Int
        var floodFrames: Int
        var floodConnections: Int
    }

    static func run(server: ParleyServer, silentSockets: Int, requests: Int) async throws -> Report {
        let port = server.port
        let quiet = try await healthLatencies(port: port, count: requests)

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
        let counts = Locked((frames: 0, connections: 0))
        let flood = Task {
            while !stop.withLock({ $0 }) {
                guard let socket = try? await BenchSocket.open(url: "ws://127.0.0.1:\(port)/v1/realtime?access_token=\(session.token)") else {
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
        stop.withLock { $0 = true }
        await flood.value
        let (frames, connections) = counts.withLock { ($0.frames, $0.connections) }
        return Report(quiet: quiet, attacked: attacked, silentSockets: sockets.count, floodFrames: frames, floodConnections: connections)
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
