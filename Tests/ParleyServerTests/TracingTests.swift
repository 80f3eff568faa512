import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyMedia
import Synchronization
import Testing

@testable import ParleyServer

#if canImport(Glibc)
import Glibc
#endif

/// Traces over OTLP/HTTP (issue 27): `parley serve` with PARLEY_OTLP_ENDPOINT sends a span per
/// request, job and real-time frame to a collector, here a local OTLP/HTTP receiver that keeps what
/// it is sent (JSON encoding, so the test reads it as a collector would). The binary runs as its own
/// process: the tracer is process-wide.
@Suite("Traces over OTLP")
struct TracingTests {
    @Test("a request, the voice job it starts and a real-time frame each send a span, with the request id, to the collector")
    func spansReachTheCollector() async throws {
        let received = Mutex<[Data]>([])
        let router = Router()
        router.post("/v1/traces") { request, _ -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 16 * 1024 * 1024)
            received.withLock { $0.append(Data(buffer: body)) }
            return .ok
        }
        let collector = await LocalEndpoint.start(router, label: "otlp-collector")
        defer { Task { await collector.stop() } }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-traces-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try StartupTests.freePort()
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PARLEY_") && !$0.key.hasPrefix("OTEL_") }
        environment["OTEL_BSP_SCHEDULE_DELAY"] = "200"  // batches every 200 ms, not 5 s
        // posix_spawn (ChildProcess), not Foundation's Process, whose run() crashed in CI.
        let process = try ChildProcess(
            StartupTests.binary,
            ["serve", "--host", "127.0.0.1", "--port", "\(port)", "--data-dir", directory.path, "--bcrypt-cost", "4",
             "--otlp-endpoint", "http://127.0.0.1:\(collector.port)", "--otlp-protocol", "json"],
            environment: environment)
        defer { process.signal(SIGKILL) }
        let log = Mutex("")
        let reader = process.output
        Thread {
            while let data = PipeReading.read(reader, upTo: 64 * 1024) { log.withLock { $0 += String(decoding: data, as: UTF8.self) } }
            _ = process
        }.start()
        let ready = Date().addingTimeInterval(30)
        while !log.withLock({ $0.contains("Parley is listening") }), Date() < ready { try await Task.sleep(for: .milliseconds(50)) }
        let text = log.withLock { $0 }
        let app = try #require(text.firstMatch(of: /web app .*\((app_[a-z0-9]+)\)/)?.1, "\(text)")
        let email = try #require(text.firstMatch(of: /admin\s+(\S+@\S+)/)?.1)
        let password = try #require(text.firstMatch(of: /password\s+(\S+)/)?.1)

        // A customer sends a voice note (a request, then the voice.transcode job it enqueued).
        let json = [("Content-Type", "application/json")]
        let session = try await Self.call(port, .POST, "/v1/consumer/session", json, Data(#"{"appId":"\#(app)"}"#.utf8))
        let token = try #require(session.text.firstMatch(of: /"token":"([^"]+)"/)?.1)
        let note = try Data(contentsOf: try AudioFixtures.files().url("note.ogg"))
        let upload = try await Self.call(
            port, .POST, "/v1/consumer/voice-messages?clientMessageId=trace-1",
            [("Authorization", "Bearer \(token)"), ("Content-Type", "audio/ogg"), ("X-Request-Id", "trace-voice-1")], note)
        #expect(upload.status == 201, "\(upload.text)")
        // The agent's socket sends a frame.
        let login = try await Self.call(port, .POST, "/v1/auth/login", json, Data(#"{"email":"\#(email)","password":"\#(password)"}"#.utf8))
        let agentToken = try #require(login.text.firstMatch(of: /"token":"([^"]+)"/)?.1)
        let agent = try await RealtimeProbe.connect(port: port, token: String(agentToken))
        try agent.send(.view(conversationId: nil))

        // The collector hears all three within a few batches.
        var spans: [(name: String, requestId: String?)] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            spans = received.withLock { $0 }.flatMap(Self.spans)
            let names = spans.map(\.name)
            if names.contains(where: { $0.contains("/v1/consumer/voice-messages") }), names.contains("job voice.transcode"), names.contains("frame view") { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        await agent.close()
        let names = spans.map(\.name)
        #expect(names.contains { $0.contains("/v1/consumer/voice-messages") }, "\(names)")
        #expect(spans.contains { $0.name == "job voice.transcode" && $0.requestId == "trace-voice-1" }, "\(spans)")
        #expect(spans.contains { $0.name == "frame view" && $0.requestId?.contains("/") == true }, "\(spans)")
        process.signal(SIGTERM)
        let child = process
        _ = try await RawSocket.offPool { child.waitForExit() }  // the drain can take seconds: not on the cooperative pool
    }

    static func call(_ port: Int, _ method: HTTPMethod, _ path: String, _ headers: [(String, String)], _ body: Data?) async throws -> (status: Int, text: String) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let data = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: data))
    }

    /// The spans in one OTLP/JSON export: name and `parley.request_id`.
    static func spans(in body: Data) -> [(name: String, requestId: String?)] {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return [] }
        var found: [(String, String?)] = []
        for resource in object["resourceSpans"] as? [[String: Any]] ?? [] {
            for scope in resource["scopeSpans"] as? [[String: Any]] ?? [] {
                for span in scope["spans"] as? [[String: Any]] ?? [] {
                    let attributes = span["attributes"] as? [[String: Any]] ?? []
                    let requestId = attributes.first { $0["key"] as? String == "parley.request_id" }
                        .flatMap { ($0["value"] as? [String: Any])?["stringValue"] as? String }
                    found.append((span["name"] as? String ?? "", requestId))
                }
            }
        }
        return found
    }
}
