import Foundation
import ParleyAPI
import ParleyStore
import Testing

@testable import ParleyServer

/// What an operator's Prometheus and Grafana read (issue 27): latency histograms per route, per job
/// kind and per real-time frame type, and a dashboard that reads only metrics Parley serves.
@Suite("Observability: metrics histograms and the Grafana dashboard")
struct ObservabilityTests {
    @Test("/metrics has request latency by route pattern (never by path), job run time by kind and outcome, frames by type; the dashboard reads only served metrics")
    func histograms() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Kim")
            let sent = try await server.post(
                "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "obs-1", text: "Where is my parcel?"))
            #expect(sent.status == .created)
            let message = try sent.decode(SendMessageResponse.self).message
            #expect(try await server.get("/v1/conversations/\(message.conversationId)", token: acme.adminToken).status == .ok)
            #expect(try await server.get("/v1/conversations/cnv_doesnotexist0000000000", token: acme.adminToken).status == .notFound)
            #expect(try await server.get("/v1/no/such/route/\(UUID().uuidString)").status == .notFound)
            #expect(try await server.get("/widget.html").status == .ok)

            // Frames: a typing change and a receipt from the agent's socket.
            let agent = try await RealtimeProbe.connect(port: server.port, token: acme.adminToken)
            try agent.send(.typing(conversationId: message.conversationId, isTyping: true))
            try agent.send(.receipt(id: "r1", conversationId: message.conversationId, ReceiptRequest(upToSeq: message.seq, state: .read)))
            _ = try await agent.next { frame in
                switch frame {
                case .ack(id: "r1", _, _, _), .error(id: "r1", _): true
                default: false
                }
            }

            // A job that cannot run (its payload is not the handler's): one retried run.
            let now = server.services.clock.now()
            _ = try await server.services.store.write { repo in
                try await repo.enqueueJob(JobRecord(
                    brandId: acme.brand.id, kind: "conversation.say", payload: #"{"not":"a say job"}"#, maxAttempts: 3, runAt: now, createdAt: now))
            }
            try await server.jobsSettled()

            let text = try await server.get("/metrics").text
            let lines = text.split(separator: "\n").map(String.init)
            func has(_ prefix: String, _ labels: [String]) -> Bool {
                lines.contains { line in line.hasPrefix(prefix) && labels.allSatisfy { line.contains($0) } }
            }
            #expect(has("parley_http_request_duration_seconds_count", [#"route="/v1/consumer/messages""#, #"method="POST""#, #"status="2xx""#]))
            // The route's pattern, with the 404 of an unknown id under it; a path no route knows is "unmatched".
            #expect(has("parley_http_request_duration_seconds_count", [#"method="GET""#, #"status="4xx""#, "/v1/conversations/"]))
            #expect(!text.contains("cnv_doesnotexist"), "a path's id became a label")
            #expect(!text.contains("/v1/no/such/route"), "an unknown path became a label")
            #expect(has("parley_http_request_duration_seconds_count", [#"route="unmatched""#, #"status="4xx""#]))
            #expect(has("parley_http_request_duration_seconds_count", [#"route="static""#, #"status="2xx""#]))
            #expect(has("parley_http_request_duration_seconds_bucket", [#"route="/v1/consumer/messages""#, #"le="0.005""#]))
            #expect(has("parley_realtime_frame_duration_seconds_count", [#"type="typing""#]))
            #expect(has("parley_realtime_frame_duration_seconds_count", [#"type="receipt""#]))
            #expect(has("parley_realtime_frames_sent_total", []))
            #expect(has("parley_job_duration_seconds_count", [#"kind="conversation.say""#, #"outcome="retried""#]))
            await agent.close()

            // Every metric the dashboard reads is one this server serves (with its _bucket/_count/_total name).
            let dashboard = try String(contentsOf: TestServer.repositoryRoot.appendingPathComponent("docs/grafana-dashboard.json"), encoding: .utf8)
            let served = Set(lines.compactMap { line -> String? in
                guard !line.hasPrefix("#"), let end = line.firstIndex(where: { $0 == "{" || $0 == " " }) else { return nil }
                return String(line[..<end])
            })
            let declared = Set(lines.filter { $0.hasPrefix("# TYPE ") }.compactMap { $0.split(separator: " ").dropFirst(2).first.map(String.init) })
            let read = Set(dashboard.matches(of: /parley_[a-z_]+/).map { String($0.output) })
            #expect(!read.isEmpty)
            for metric in read {
                #expect(served.contains(metric) || declared.contains(metric), "the dashboard reads \(metric), which /metrics does not serve")
            }
        }
    }
}
