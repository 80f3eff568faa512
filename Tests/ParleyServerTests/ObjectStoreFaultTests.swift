import Foundation
import ParleyAPI
import Testing

@testable import ParleyServer

/// The object store goes away and comes back (a SeaweedFS of the test's own, stopped and started
/// again): uploads are refused with 503 `media_unavailable` within the deadline and leave nothing
/// behind, reads answer 503, `/ready` says why; once it is back everything works without a restart.
///
/// Run in a process of its own (scripts/test.sh: `TEST_OBJECT_STORE_FAULTS=1`, under `timeout`): in two
/// of three fresh-clone runs of the whole suite it never finished and stalled the suite, though it
/// passes alone and passed in five local runs of the whole suite; the cause is not found yet.
@Suite(
    "Object store faults",
    .enabled(if: BlobStoreContractTests.s3Endpoint != nil, "the test script installs SeaweedFS"),
    .enabled(if: ProcessInfo.processInfo.environment["TEST_OBJECT_STORE_FAULTS"] != nil, "scripts/test.sh runs it in a process of its own"))
struct ObjectStoreFaultTests {
    /// Runs scripts/seaweedfs.sh and returns what it printed. Never blocks a thread: the script's
    /// end is seen by the exit status the shell writes to a file (a blocking wait for a child on the
    /// test pool's two threads once stalled the whole suite).
    static func seaweed(_ action: String, _ directory: URL) async throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("seaweed-\(UUID().uuidString)")
        let (output, status) = (base.appendingPathExtension("out"), base.appendingPathExtension("status"))
        defer { for file in [output, status] { try? FileManager.default.removeItem(at: file) } }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [
            "-c", "'\(TestServer.repositoryRoot.path)/scripts/seaweedfs.sh' \(action) '\(directory.path)' >'\(output.path)' 2>&1 </dev/null; echo $? >'\(status.path)'",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(90)
        while true {
            if let code = try? String(contentsOf: status, encoding: .utf8), code.hasSuffix("\n") {
                let text = ((try? String(contentsOf: output, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
                guard code.trimmingCharacters(in: .whitespacesAndNewlines) == "0" else { throw TestFailure("seaweedfs.sh \(action) failed: \(text)") }
                return text
            }
            guard Date() < deadline else { throw TestFailure("seaweedfs.sh \(action) did not finish") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("SeaweedFS stopped during uploads: 503 media_unavailable, nothing stored, /ready not ready; started again: uploads and reads work")
    func storeGoesAway() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-s3-fault-\(UUID().uuidString.prefix(8))")
        let endpoint = try await Self.seaweed("start", directory)
        do {
            try await Self.withServer(endpoint, directory)
        } catch {
            _ = try? await Self.seaweed("stop", directory)
            throw error
        }
        _ = try await Self.seaweed("stop", directory)
    }

    /// What a client does after 503 (Retry-After): the same upload again, once a second, until the
    /// store takes it (at most a minute). SeaweedFS answers before its volumes take writes, both when
    /// it starts and when it comes back; and the bucket's first write grows its volumes, which on a
    /// busy machine outlasted the server's 1 s store timeout here once (a fresh-clone CI run).
    static func uploadUntilStored(
        _ server: TestServer, _ data: Data, token: String, conversationId: ConversationID? = nil
    ) async throws -> TestServer.Reply {
        let clientMessageId = UUID().uuidString
        var reply = try await VoiceTests.upload(server, data, token: token, clientMessageId: clientMessageId, conversationId: conversationId)
        let deadline = Date().addingTimeInterval(60)
        while reply.status == .serviceUnavailable, Date() < deadline {
            try await Task.sleep(for: .seconds(1))
            reply = try await VoiceTests.upload(server, data, token: token, clientMessageId: clientMessageId, conversationId: conversationId)
        }
        return reply
    }

    /// The upload, the outage and the recovery, on a server whose media is in that SeaweedFS.
    static func withServer(_ endpoint: String, _ directory: URL) async throws {
        let audio = try AudioFixtures.files()
        try await TestServer.run(configure: {
            $0.s3Endpoint = endpoint
            $0.s3AccessKey = "parley"
            $0.s3SecretKey = "parley-secret"
            $0.s3TimeoutSeconds = 1
        }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await Self.uploadUntilStored(server, try audio.data("note.webm"), token: token).decode(SendMessageResponse.self).message
            _ = try await VoiceTests.processed(server, first, token: acme.adminToken)
            let before = try await HTTPErrorTests.rowCounts(server)

            _ = try await Self.seaweed("pause", directory)
            let started = ContinuousClock.now
            let refused = try await VoiceTests.upload(server, try audio.data("note.ogg"), token: token, conversationId: first.conversationId)
            #expect(refused.status == .serviceUnavailable)
            #expect(try refused.error.code == "media_unavailable")
            #expect(ContinuousClock.now - started < .seconds(20))
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            let read = try await server.get("/v1/media/\(first.id)/opus", token: acme.adminToken)
            #expect(read.status == .serviceUnavailable)
            let ready = try await server.get("/ready")
            #expect(ready.status == .serviceUnavailable && !ready.text.contains(#""media":"ok""#), "\(ready.text)")

            _ = try await Self.seaweed("resume", directory)
            let again = try await Self.uploadUntilStored(server, try audio.data("note.ogg"), token: token, conversationId: first.conversationId)
            #expect(again.status == .created)
            #expect(try await server.get("/v1/media/\(first.id)/opus", token: acme.adminToken).status == .ok)
            #expect(try await server.get("/ready").status == .ok)
        }
    }
}
