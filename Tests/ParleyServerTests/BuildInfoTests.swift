import Foundation
import Testing

@testable import ParleyServer

/// `parley version`, `--version`, `/health` and the account dialog say which Parley runs.
@Suite("Build information")
struct BuildInfoTests {
    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("parley-build-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("a package's build-info.json wins; else the checkout's commit, read from .git (a ref, a packed ref or a detached head); else none")
    func sources() throws {
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(at: root) }
        let bin = root.appendingPathComponent(".build/release")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let binary = bin.appendingPathComponent("parley")
        try Data("binary".utf8).write(to: binary)

        // No checkout, no file: the release and the binary's date only.
        let bare = BuildInfo.load(executable: binary)
        #expect(bare.version == BuildInfo.release && bare.commit == nil && bare.built != nil)

        // A checkout on a branch: loose ref, then packed ref; a detached head.
        let git = root.appendingPathComponent(".git")
        try FileManager.default.createDirectory(at: git.appendingPathComponent("refs/heads"), withIntermediateDirectories: true)
        try Data("ref: refs/heads/main\n".utf8).write(to: git.appendingPathComponent("HEAD"))
        try Data("0123456789abcdef0123456789abcdef01234567\n".utf8).write(to: git.appendingPathComponent("refs/heads/main"))
        #expect(BuildInfo.load(executable: binary).commit == "0123456789ab")
        try FileManager.default.removeItem(at: git.appendingPathComponent("refs/heads/main"))
        try Data("# pack-refs with: peeled\nfedcba9876543210fedcba9876543210fedcba98 refs/heads/main\n".utf8).write(to: git.appendingPathComponent("packed-refs"))
        #expect(BuildInfo.load(executable: binary).commit == "fedcba987654")
        try Data("aaaabbbbccccddddeeeeffff0000111122223333\n".utf8).write(to: git.appendingPathComponent("HEAD"))
        #expect(BuildInfo.load(executable: binary).commit == "aaaabbbbcccc")

        // A package's file beside the binary wins.
        try Data(#"{"version":"9.8.7","commit":"123456789abc","built":"2026-11-25T10:00:00Z"}"#.utf8).write(to: bin.appendingPathComponent("build-info.json"))
        let packaged = BuildInfo.load(executable: binary)
        #expect(packaged == BuildInfo(version: "9.8.7", commit: "123456789abc", built: Date(timeIntervalSince1970: 1_795_600_800)))
        #expect(packaged.description == "Parley 9.8.7 (commit 123456789abc, built 2026-11-25T10:00:00Z)")
    }

    @Test("/health says the version and the commit")
    func health() async throws {
        try await TestServer.run { server in
            let reply = try await server.get("/health")
            #expect(reply.status == .ok)
            #expect(reply.text.contains(#""version":"\#(BuildInfo.release)""#), "\(reply.text)")
            if let commit = BuildInfo.current.commit { #expect(reply.text.contains(#""commit":"\#(commit)""#)) }
        }
    }
}
