import Foundation
import ParleyAPI
import Testing

@testable import ParleyServer

/// The object store goes away and comes back (a SeaweedFS of the test's own, stopped and started
/// again): uploads are refused with 503 `media_unavailable` within the deadline and leave nothing
/// behind, reads answer 503, `/ready` says why; once it is back everything works without a restart.
@Suite("Object store faults", .enabled(if: BlobStoreContractTests.s3Endpoint != nil, "the test script installs SeaweedFS"))
struct ObjectStoreFaultTests {
    static func seaweed(_ action: String, _ directory: URL) throws -> String {
        let process = Process()
        process.executableURL = TestServer.repositoryRoot.appendingPathComponent("scripts/seaweedfs.sh")
        process.arguments = [action, directory.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestFailure("seaweedfs.sh \(action) failed") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("SeaweedFS stopped during uploads: 503 media_unavailable, nothing stored, /ready not ready; started again: uploads and reads work")
    func storeGoesAway() async throws {
        let audio = try AudioFixtures.files()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-s3-fault-\(UUID().uuidString.prefix(8))")
        let endpoint = try Self.seaweed("start", directory)
        defer { _ = try? Self.seaweed("stop", directory) }
        try await TestServer.run(configure: {
            $0.s3Endpoint = endpoint
            $0.s3AccessKey = "parley"
            $0.s3SecretKey = "parley-secret"
            $0.s3TimeoutSeconds = 1
        }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let first = try await VoiceTests.upload(server, try audio.data("note.webm"), token: token).decode(SendMessageResponse.self).message
            _ = try await VoiceTests.processed(server, first, token: acme.adminToken)
            let before = try await HTTPErrorTests.rowCounts(server)

            _ = try Self.seaweed("pause", directory)
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

            _ = try Self.seaweed("resume", directory)
            let again = try await VoiceTests.upload(server, try audio.data("note.ogg"), token: token, conversationId: first.conversationId)
            #expect(again.status == .created)
            #expect(try await server.get("/v1/media/\(first.id)/opus", token: acme.adminToken).status == .ok)
            #expect(try await server.get("/ready").status == .ok)
        }
    }
}
