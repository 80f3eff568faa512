import Foundation
import HTTPTypes
import NIOWebSocket
import ParleyAPI
import ParleyServer
import Testing

/// Hostile input against a live server: each case gets its specific 4xx and changes nothing (row
/// counts of every table and the media directory are compared before and after). JSON shapes are
/// covered in HTTPErrorTests, audio refusals in VoiceTests, floods in RateLimitTests.
@Suite("Hostile input")
struct HostileInputTests {
    /// Every file under media/, the partial-write directory included.
    static func allMediaFiles(_ server: TestServer) -> [String] {
        let root = server.dataDirectory.appendingPathComponent("media")
        return (FileManager.default.enumerator(atPath: root.path)?.allObjects as? [String] ?? [])
            .filter { !$0.hasSuffix(".partial") && $0.contains(".") || $0.hasPrefix(".partial/") }
    }

    /// Uploads the server has given up on, from its own metric: it counts once the partial file is gone.
    static func abandonedUploads(_ server: TestServer) -> Int {
        let line = server.services.metrics.render().split(separator: "\n").first { $0.hasPrefix("parley_uploads_abandoned_total ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? 0
    }

    /// Waits (up to a generous deadline) until the server has abandoned `count` uploads.
    static func waitForAbandonedUploads(_ server: TestServer, count: Int) async throws {
        let deadline = Date().addingTimeInterval(60)
        while abandonedUploads(server) < count, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(abandonedUploads(server) == count)
    }

    static func uploadHead(_ port: Int, token: String, length: Int) -> String {
        "POST /v1/consumer/voice-messages?clientMessageId=\(UUID().uuidString) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            + "Authorization: Bearer \(token)\r\nContent-Type: audio/webm\r\nContent-Length: \(length)\r\n\r\n"
    }

    @Test("a truncated upload (the client goes away half-way) stores nothing")
    func truncatedUpload() async throws {
        let note = try AudioFixtures.files().data("note.webm")
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let before = try await HTTPErrorTests.rowCounts(server)
            // Off Swift's cooperative pool (2 threads here): a blocked one starves every other test.
            let (port, head) = (server.port, Self.uploadHead(server.port, token: token, length: note.count))
            _ = try await RawSocket.offPool { try RawHTTP.send(port: port, head: head, body: note.prefix(note.count / 2), ending: .close) }
            // The server notices the closed connection (at the latest when the upload's idle timeout
            // fires), removes its partial file and counts the upload as abandoned: wait for that count.
            try await Self.waitForAbandonedUploads(server, count: 1)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            #expect(Self.allMediaFiles(server) == [])
            // The server is fine: the same note, whole, goes through.
            #expect(try await VoiceTests.upload(server, note, token: token).status == .created)
        }
    }

    @Test("a stalled upload is abandoned after the idle timeout with 408 and stores nothing")
    func stalledUpload() async throws {
        let note = try AudioFixtures.files().data("note.webm")
        try await TestServer.run(configure: { $0.uploadIdleTimeoutSeconds = 2 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let before = try await HTTPErrorTests.rowCounts(server)
            let started = Date()
            // Up to 60 s of waiting (the answer ends it, 2 s in when the machine is free; CI, busy
            // starting every other test, once took over 15), on a thread of its own: on the
            // cooperative pool (2 threads here) it starved every other test's tasks, this server's
            // idle timer too (CI saw no 408 and other tests' connections time out while it waited).
            let (port, head) = (server.port, Self.uploadHead(server.port, token: token, length: note.count))
            let response = try await RawSocket.offPool { try RawHTTP.send(port: port, head: head, body: note.prefix(1000), ending: .wait(seconds: 60)) }
            let waited = Date().timeIntervalSince(started)
            #expect(response.hasPrefix("HTTP/1.1 408"), "\(response)")
            #expect(response.contains("\"upload_stalled\""))
            #expect(waited >= 1.5, "answered after \(waited) s, before the idle timeout")
            try await Self.waitForAbandonedUploads(server, count: 1)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            #expect(Self.allMediaFiles(server) == [])
        }
    }

    @Test("invalid UTF-8, path tricks and bad ids: specific 4xx codes, nothing changes")
    func pathsAndBytes() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let sent = try await acme.send("hello", as: token)
            let before = try await HTTPErrorTests.rowCounts(server)
            let mediaBefore = Self.allMediaFiles(server)

            // Raw bytes that are not UTF-8, inside a JSON string.
            let invalid = Data(#"{"clientMessageId": "x1", "text": ""#.utf8) + Data([0xC3, 0x28, 0xFF, 0xFE]) + Data(#""}"#.utf8)
            let refused = try await server.request(.post, "/v1/consumer/messages", token: token, data: invalid, headers: [.contentType: "application/json"])
            #expect(refused.status == .badRequest)
            #expect(try refused.error.code == "invalid_json")

            // Paths that try to climb out of the media directory or smuggle a name.
            for path in [
                "/v1/media/..%2F..%2Fparley.sqlite/original", "/v1/media/%2e%2e/original", "/v1/media/msg_..%2f..%2fetc/original",
                "/v1/media/\(sent.message.id)/..%2F..%2F..%2Fparley.sqlite", "/v1/media/\(sent.message.id)/original%00.webm",
                "/v1/media/msg_aaaaaaaaaaaaaaaaaaaaaaaa/original", "/v1/conversations/..%2F..%2Fadmin/messages",
                "/v1/consumer/conversations/cnv_%00/messages",
            ] {
                let reply = try await server.get(path, token: path.hasPrefix("/v1/consumer/") ? token : acme.adminToken)
                #expect(reply.status == .notFound, "\(path): \(reply.status)")
                #expect(try reply.error.code.rawValue.contains("not_found"), "\(path)")
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            #expect(Self.allMediaFiles(server) == mediaBefore)

            // Names never come from clients: a client message id full of path tricks is only an
            // opaque key, and the file lands where the server decides.
            let note = try AudioFixtures.files().data("note.webm")
            let sneaky = try await VoiceTests.upload(server, note, token: token, clientMessageId: "..%2F..%2F..%2Fetc%2Fpasswd")
            #expect(sneaky.status == .created)
            let stored = try sneaky.decode(SendMessageResponse.self).message
            #expect(stored.clientMessageId == "../../../etc/passwd")
            #expect(VoiceTests.mediaFiles(server).contains("voice/\(acme.brand.id)/\(stored.id)/original.webm"))
            #expect(!FileManager.default.fileExists(atPath: server.dataDirectory.appendingPathComponent("etc").path))
        }
    }

    @Test("an oversized WebSocket frame closes the connection with 1009 and stores nothing")
    func oversizedFrame() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let before = try await HTTPErrorTests.rowCounts(server)
            let socket = try await RealtimeProbe.connect(port: server.port, token: token)
            socket.sendRaw(#"{"type":"send","id":"big","clientMessageId":"big","text":""# + String(repeating: "a", count: 80_000) + #""}"#)
            let close = try await socket.closedByServer()
            #expect(close?.closeCode == .messageTooLarge)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
        }
    }
}
