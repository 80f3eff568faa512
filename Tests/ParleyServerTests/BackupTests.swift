import Foundation
import ParleyAPI
import ParleyDomain
import ParleyMedia
import Synchronization
import Testing

@testable import ParleyServer

/// `parley backup`, `restore` and `check` as an operator runs them (the real binary, beside a running
/// server): a backup taken while a customer keeps writing restores on another server with every
/// message acknowledged before it began, and a voice note that plays byte for byte; a damaged or
/// incomplete backup, or a data directory that is not empty, is refused and nothing changes.
@Suite("Backup, restore and check")
struct BackupTests {
    static func parley(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let outcome = try await ProcessRunner(executable: StartupTests.binary).run(arguments, timeout: .seconds(300))
        return (outcome.status, String(decoding: outcome.stdout, as: UTF8.self) + outcome.stderrTail)
    }

    static func database(_ url: String?) -> [String] { url.map { ["--database-url", $0] } ?? [] }

    @Test("backed up under load, restored into an empty directory and served again: every message acknowledged before the backup, once; the voice note plays; check passes")
    func underLoad() async throws {
        let audio = try AudioFixtures.files()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("parley-backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let (folder, restored) = (work.appendingPathComponent("backup"), work.appendingPathComponent("restored"))
        let restoredDatabase = try await TestDatabase.make()

        struct Found: Sendable {
            var acknowledgedBefore: [MessageID]
            var note: MessageDTO
            var opus: Data
            var email: String
            var password: String
        }
        let found = Mutex<Found?>(nil)
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let note = try await VoiceTests.upload(server, try audio.data("note.webm"), token: token).decode(SendMessageResponse.self).message
            let ready = try await VoiceTests.processed(server, note, token: acme.adminToken)
            let opus = try await server.get("/v1/media/\(ready.id)/opus", token: acme.adminToken)
            #expect(opus.status == .ok)

            // A customer writes one message after another while the backup runs.
            let acknowledged = Mutex<[MessageID]>([])
            let stop = Atomic<Bool>(false)
            let writer = Task {
                var n = 0
                while !stop.load(ordering: .relaxed) {
                    n += 1
                    let sent = try await acme.send("message \(n)", as: token, conversationId: note.conversationId)
                    acknowledged.withLock { $0.append(sent.message.id) }
                }
            }
            // Some are acknowledged before the backup begins (however busy the machine).
            let deadline = Date().addingTimeInterval(60)
            while acknowledged.withLock({ $0.count }) < 5, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            let acknowledgedBefore = acknowledged.withLock { $0 }
            found.withLock { $0 = Found(acknowledgedBefore: acknowledgedBefore, note: ready, opus: opus.body, email: acme.admin.email, password: acme.adminPassword) }
            let backup = try await Self.parley(
                ["backup", "--to", folder.path, "--data-dir", server.dataDirectory.path] + Self.database(server.services.configuration.databaseURL))
            stop.store(true, ordering: .relaxed)
            try await writer.value
            #expect(backup.status == 0, "\(backup.output)")
            #expect(acknowledgedBefore.count > 3)
        }

        // Restored elsewhere, by the binary, then served by a new server on it.
        let restore = try await Self.parley(["restore", "--from", folder.path, "--data-dir", restored.path] + Self.database(restoredDatabase.url))
        #expect(restore.status == 0, "\(restore.output)")
        let check = try await Self.parley(["check", "--data-dir", restored.path] + Self.database(restoredDatabase.url))
        #expect(check.status == 0 && check.output.contains("database: ok") && check.output.contains("media: 3 of 3"), "\(check.output)")
        let saved = try #require(found.withLock { $0 })
        try await TestServer.run(database: restoredDatabase, configure: { $0.dataDirectory = restored.path }) { server in
            let login = try await server.post("/v1/auth/login", json: LoginRequest(email: saved.email, password: saved.password))
            let token = try login.decode(AgentSessionResponse.self).token
            let listed = try await server.get("/v1/conversations/\(saved.note.conversationId)/messages?limit=200", token: token)
                .decode(ListResponse<MessageDTO>.self).items
            let ids = listed.map(\.id)
            #expect(Set(ids).count == ids.count)
            #expect(Set(saved.acknowledgedBefore).isSubset(of: Set(ids)))
            let played = try await server.get("/v1/media/\(saved.note.id)/opus", token: token)
            #expect(played.status == .ok && played.body == saved.opus)
        }
        await restoredDatabase.drop()
    }

    @Test("refused, changing nothing: a folder that is not a backup, a file altered or missing, a data directory that is not empty, a backup folder that is not empty, a database that cannot be reached")
    func refusals() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("parley-backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let folder = work.appendingPathComponent("backup")
        try await TestServer.run { server in
            _ = try await BrandScenario.make(server)
            let arguments = ["--data-dir", server.dataDirectory.path] + Self.database(server.services.configuration.databaseURL)
            #expect(try await Self.parley(["backup", "--to", folder.path] + arguments).status == 0)
            // Into a folder that is not empty: refused.
            let again = try await Self.parley(["backup", "--to", folder.path] + arguments)
            #expect(again.status != 0 && again.output.contains("is not empty"), "\(again.output)")
        }
        // A database that cannot be reached (or is not a database URL): said, and no backup folder is made.
        for url in ["postgres://nobody@127.0.0.1:1/parley", "mysql://127.0.0.1/parley"] {
            let elsewhere = work.appendingPathComponent("unreachable-\(UUID().uuidString)")
            let refused = try await Self.parley(["backup", "--to", elsewhere.path, "--data-dir", work.appendingPathComponent("none").path, "--database-url", url])
            #expect(refused.status != 0 && (refused.output.contains("cannot connect to PostgreSQL") || refused.output.contains("neither a sqlite")), "\(refused.output)")
            #expect(!FileManager.default.fileExists(atPath: elsewhere.path))
            let check = try await Self.parley(["check", "--data-dir", work.appendingPathComponent("none").path, "--database-url", url])
            #expect(check.status != 0, "\(check.output)")
        }
        let target = work.appendingPathComponent("target")
        func restore() async throws -> (status: Int32, output: String) {
            try await Self.parley(["restore", "--from", folder.path, "--data-dir", target.path])
        }
        // Not a backup.
        let notBackup = try await Self.parley(["restore", "--from", work.path, "--data-dir", target.path])
        #expect(notBackup.status != 0 && notBackup.output.contains("has no manifest.json"))
        // An altered file, then a missing one: refused, and the target stays as it was (absent).
        let key = folder.appendingPathComponent("secret.key")
        let original = try Data(contentsOf: key)
        try (original + Data("x".utf8)).write(to: key)
        let altered = try await restore()
        #expect(altered.status != 0 && altered.output.contains("secret.key is not the file that was backed up"), "\(altered.output)")
        try FileManager.default.removeItem(at: key)
        let missing = try await restore()
        #expect(missing.status != 0 && missing.output.contains("secret.key is missing"), "\(missing.output)")
        #expect(!FileManager.default.fileExists(atPath: target.path))
        // A data directory that is not empty.
        try original.write(to: key)
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: target.appendingPathComponent("keep.txt"))
        let occupied = try await restore()
        #expect(occupied.status != 0 && occupied.output.contains("is not empty"), "\(occupied.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: target.path) == ["keep.txt"])
    }
}
