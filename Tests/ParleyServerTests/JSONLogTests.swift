import Foundation
import HTTPTypes
import Logging
import ParleyAPI
import ParleyStore
import Synchronization
import Testing

@testable import ParleyServer

/// `PARLEY_LOG_FORMAT=json`: one JSON object a line, with the metadata's keys at the top level.
@Suite("JSON logs")
struct JSONLogTests {
    @Test("a line is one object: time, level, logger, message, source, the metadata (the logger's and the message's), an error")
    func oneObjectALine() throws {
        let lines = Mutex<[Data]>([])
        var logger = Logger(label: "parley-test") { label in JSONLogHandler(label: label) { data in lines.withLock { $0.append(data) } } }
        logger[metadataKey: "node"] = "node_a"
        logger.warning("the media store is unavailable", metadata: ["path": "/v1/media/x", "attempts": "3", "nested": ["a": "1"]])
        logger.debug("not written: below the level")
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let data = try #require(written.first)
        #expect(data.last == 0x0A && data.dropLast().firstIndex(of: 0x0A) == nil)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["level"] as? String == "warning")
        #expect(object["logger"] as? String == "parley-test")
        #expect(object["message"] as? String == "the media store is unavailable")
        #expect(object["path"] as? String == "/v1/media/x" && object["attempts"] as? String == "3" && object["node"] as? String == "node_a")
        #expect((object["nested"] as? [String: Any])?["a"] as? String == "1")
        #expect(object["source"] as? String == "ParleyServerTests")
        let time = try #require(object["time"] as? String)
        #expect(time.hasSuffix("Z") && time.contains("."), "\(time)")
        #expect(try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)).timeIntervalSinceNow.magnitude < 60)
    }

    @Test("the setting: text or json; anything else is refused, naming the setting")
    func setting() throws {
        var configuration = ParleyConfiguration()
        try configuration.apply(arguments: ["--log-format", "json"])
        #expect(configuration.logFormat == .json)
        #expect(throws: ConfigurationError.self) { try configuration.apply(arguments: ["--log-format", "yaml"]) }
    }
}

/// Request ids (issue 27): each request, real-time frame and job has one, the response says it, the
/// jobs a request enqueues keep it and run under it, and every log line written meanwhile has it.
@Suite("Request ids")
struct RequestIDTests {
    @Test("a response names its request id: a proxy's plain id is kept, a missing or odd one replaced")
    func responses() async throws {
        try await TestServer.run { server in
            let made = try await server.get("/health")
            #expect(made.headers[RequestID.header]?.wholeMatch(of: /req_[0-9a-z]{16}/) != nil, "\(made.headers)")
            let kept = try await server.request(.get, "/health", headers: [RequestID.header: "7f3c2a9e-nginx-1"])
            #expect(kept.headers[RequestID.header] == "7f3c2a9e-nginx-1")
            for odd in ["has space", String(repeating: "x", count: 65), "quote\"d", "é"] {
                let replaced = try await server.request(.get, "/health", headers: [RequestID.header: odd])
                #expect(replaced.headers[RequestID.header]?.hasPrefix("req_") == true, "\(odd)")
            }
            // Errors too: the client quotes it in a bug report.
            let missing = try await server.get("/v1/conversations/cnv_0000000000000000000000000")
            #expect(missing.status == .unauthorized && missing.headers[RequestID.header]?.hasPrefix("req_") == true)
        }
    }

    @Test("a job enqueued by a request stores the request's id, runs under it, and its log lines say it")
    func jobsCarryIt() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await LifecycleTests.patch(server, acme, UpdateLifecycleRequest(autoCloseMinutes: ["web": 60], warningMinutes: 10))
            let (token, _) = try await acme.consumer(name: "Quinn")
            var headers = HTTPFields()
            headers[RequestID.header] = "trace-send-42"
            let sent = try await server.request(
                .post, "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "rid-1", text: "Is it shipped?"), headers: headers)
            #expect(sent.status == .created)
            let stored = try await server.services.store.database.read { db in
                try await db.raw("SELECT kind, request_id FROM jobs WHERE request_id = 'trace-send-42'").all()
            }
            #expect(!stored.isEmpty, "the close timer the message set has no request id")

            // The job runs under that id: a line logged by its work has it.
            let seen = Mutex<String?>(nil)
            let record = JobRecord(
                brandId: nil, kind: "probe", payload: "{}", maxAttempts: 1, runAt: clock.now(), createdAt: clock.now(), requestId: "trace-send-42")
            await JobRunner.underItsRequest(record) { seen.withLock { $0 = RequestID.current } }
            #expect(seen.withLock { $0 } == "trace-send-42")
        }
    }

    @Test("concurrent writes committed together (SQLite's group commit) each enqueue their job under their own request's id")
    func groupCommitKeepsEachId() async throws {
        try await TestServer.run { server in
            let store = server.services.store
            let now = server.services.clock.now()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 {
                    group.addTask {
                        try await RequestID.with("req-group-\(n)") {
                            _ = try await store.write { repo in
                                try await repo.enqueueJob(JobRecord(
                                    brandId: nil, kind: "probe.\(n)", payload: "{}", maxAttempts: 1, runAt: now.addingTimeInterval(3600), createdAt: now,
                                    requestId: RequestID.current))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            struct Row: Decodable { var kind: String; var request_id: String? }
            let rows = try await store.database.read { db in
                try await db.raw("SELECT kind, request_id FROM jobs WHERE kind LIKE 'probe.%'").all(decoding: Row.self)
            }
            #expect(rows.count == 40)
            for row in rows { #expect(row.request_id == "req-group-" + row.kind.dropFirst("probe.".count), "\(row)") }
        }
    }

    @Test("log lines carry the id of the work they were written for, in JSON and in text")
    func logLines() throws {
        let lines = Mutex<[Data]>([])
        let logger = Logger(label: "parley-test") { label in
            JSONLogHandler(label: label, metadataProvider: RequestID.metadataProvider) { data in lines.withLock { $0.append(data) } }
        }
        WorkRequestID.$current.withValue("req_0123456789abcdef") { logger.info("sent") }
        logger.info("outside any request")
        let objects = try lines.withLock { $0 }.map { try #require(try JSONSerialization.jsonObject(with: $0) as? [String: Any]) }
        #expect(objects.count == 2)
        #expect(objects.first?["request_id"] as? String == "req_0123456789abcdef")
        #expect(objects.last?["request_id"] == nil)
    }
}
