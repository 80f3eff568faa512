import Foundation
import ParleyAPI

/// Section 2: idle authenticated WebSocket connections, one consumer each, and the server's memory
/// for them. Each count runs on a fresh server so that memory freed by an earlier round does not
/// hide the cost of the next.
enum ConnectionsBench {
    struct Row: Sendable {
        var connections: Int
        var open: Int
        var rssBefore: Int
        var rssAfter: Int
        var openSeconds: Double
        var serverCPUSeconds: Double
        var compression = false
        var bytesPerConnection: Double { Double(rssAfter - rssBefore) / Double(max(open, 1)) }
    }

    /// Rounds of idle connections: `counts` plain, then `compressed` with permessage-deflate
    /// negotiated (as browsers do).
    static func run(makeServer: () async throws -> ParleyServer, counts: [Int], compressed: Int) async throws -> [Row] {
        var rows: [Row] = []
        for (count, compression) in counts.map({ ($0, false) }) + [(compressed, true)] {
            rows.append(try await makeServer().use { try await round(server: $0, count: count, compression: compression) })
        }
        return rows
    }

    static func round(server: ParleyServer, count: Int, compression: Bool) async throws -> Row {
        let api = server.api
        let appId = server.appId
        let tokens = try await concurrently(count, width: 16) { index in
            try await api.consumerSession(appId: appId, name: "Idle \(index)").token
        }
        try await Task.sleep(for: .seconds(1))
        let rssBefore = server.child.rssBytes
        let cpuBefore = server.child.cpuSeconds
        let started = ContinuousClock.now
        let port = server.port
        let sockets = try await concurrently(count, width: 64) { index in
            try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/v1/realtime?access_token=\(tokens[index])", compression: compression)
        }
        let openSeconds = ContinuousClock.now.milliseconds(since: started) / 1000
        // Idle: let the server settle (queues drained, buffers back in their pools), then measure.
        try await Task.sleep(for: .seconds(3))
        let rssAfter = server.child.rssBytes
        let cpu = server.child.cpuSeconds - cpuBefore
        let open = try await openConnections(api)
        _ = try await concurrently(sockets.count, width: 256) { index in await sockets[index].close() }
        return Row(
            connections: count, open: open, rssBefore: rssBefore, rssAfter: rssAfter, openSeconds: openSeconds, serverCPUSeconds: cpu,
            compression: compression)
    }

    /// The baselines: the same count of idle connections to a plain Hummingbird WebSocket server
    /// (`parley-bench echo-server`), which has no authentication, hub or per-connection state, and to
    /// SwiftNIO's own WebSocket handlers with no task per connection (`nio-echo-server`, the floor).
    enum Baseline: String, CaseIterable, Sendable {
        case hummingbird = "echo-server"
        case nio = "nio-echo-server"

        var label: String {
            switch self {
            case .hummingbird: "a plain Hummingbird WebSocket server"
            case .nio: "SwiftNIO's own WebSocket handlers (no task per connection)"
            }
        }
    }

    static func baseline(_ kind: Baseline = .hummingbird, echoBinary: URL, count: Int) async throws -> Row {
        let child = try await ChildProcess(executable: echoBinary, arguments: [kind.rawValue], readyMarker: "echo server on port ")
        do {
            guard let port = child.word(after: "echo server on port ").flatMap({ Int($0) }) else { throw BenchError("echo server port") }
            try await Task.sleep(for: .seconds(1))
            let rssBefore = child.rssBytes
            let cpuBefore = child.cpuSeconds
            let started = ContinuousClock.now
            let sockets = try await concurrently(count, width: 64) { _ in try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/echo") }
            let openSeconds = ContinuousClock.now.milliseconds(since: started) / 1000
            try await Task.sleep(for: .seconds(3))
            let row = Row(
                connections: count, open: sockets.count, rssBefore: rssBefore, rssAfter: child.rssBytes, openSeconds: openSeconds,
                serverCPUSeconds: child.cpuSeconds - cpuBefore)
            _ = try await concurrently(sockets.count, width: 256) { index in await sockets[index].close() }
            await child.stop()
            return row
        } catch {
            await child.stop()
            throw error
        }
    }

    /// The server's own count of open real-time connections, from `/metrics`.
    static func openConnections(_ api: API) async throws -> Int {
        let port = api.port
        let metrics = try await RawHTTP.onThread { try RawHTTP.request(port: port, "GET", "/metrics") }
        let line = metrics.text.split(separator: "\n").first { $0.hasPrefix("parley_realtime_connections ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? -1
    }
}
