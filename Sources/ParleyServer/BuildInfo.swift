import Foundation

/// Which Parley this is: the release version (set here, raised with each release), the commit it
/// was built from and when the binary was built. `parley version`, `parley --version`, `/health`
/// and the workspace's account dialog show it.
///
/// Where the commit and the date come from, first found wins: `build-info.json` beside the binary
/// or in `../share/parley/` (written by scripts/package.sh into a package); a source checkout the
/// binary sits in (`.build/...` under a directory with `.git`, read directly: no git needed); else
/// unknown. The build date without a build-info file is the binary's modification time.
/// SwiftPM has no build-time stamping without a plugin, and a plugin would run git in every build.
public struct BuildInfo: Codable, Sendable, Equatable {
    /// This release.
    public static let release = "0.4.0"

    public var version: String
    /// The commit, abbreviated to 12 characters; nil when not known.
    public var commit: String?
    public var built: Date?

    public init(version: String = BuildInfo.release, commit: String? = nil, built: Date? = nil) {
        self.version = version
        self.commit = commit
        self.built = built
    }

    /// This process's.
    public static let current: BuildInfo = load(executable: URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath())

    /// "Parley 0.4.0 (commit 8ac7c13d1e2f, built 2026-11-25T09:40:00Z)".
    public var description: String {
        var details: [String] = []
        if let commit { details.append("commit \(commit)") }
        if let built { details.append("built \(ISO8601DateFormatter().string(from: built))") }
        return "Parley \(version)" + (details.isEmpty ? "" : " (\(details.joined(separator: ", ")))")
    }

    static func load(executable: URL) -> BuildInfo {
        let directory = executable.deletingLastPathComponent()
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        for candidate in [directory.appendingPathComponent("build-info.json"), directory.appendingPathComponent("../share/parley/build-info.json")] {
            if let data = try? Data(contentsOf: candidate.standardizedFileURL), let info = try? decoder.decode(BuildInfo.self, from: data) {
                return info
            }
        }
        let built = (try? FileManager.default.attributesOfItem(atPath: executable.path))?[.modificationDate] as? Date
        return BuildInfo(commit: sourceCommit(near: directory), built: built)
    }

    /// The commit checked out in the git work tree that holds `directory`, read from `.git`.
    static func sourceCommit(near directory: URL) -> String? {
        var folder = directory.standardizedFileURL
        for _ in 0..<8 {
            let git = folder.appendingPathComponent(".git")
            if let head = try? String(contentsOf: git.appendingPathComponent("HEAD"), encoding: .utf8) {
                return resolve(head.trimmingCharacters(in: .whitespacesAndNewlines), in: git)
            }
            let parent = folder.deletingLastPathComponent()
            if parent.path == folder.path { break }
            folder = parent
        }
        return nil
    }

    private static func resolve(_ head: String, in git: URL) -> String? {
        guard head.hasPrefix("ref: ") else { return head.isEmpty ? nil : String(head.prefix(12)) }
        let ref = String(head.dropFirst(5))
        if let hash = try? String(contentsOf: git.appendingPathComponent(ref), encoding: .utf8) {
            return String(hash.trimmingCharacters(in: .whitespacesAndNewlines).prefix(12))
        }
        // A packed ref: "<hash> <ref>" lines.
        let packed = (try? String(contentsOf: git.appendingPathComponent("packed-refs"), encoding: .utf8)) ?? ""
        for line in packed.split(separator: "\n") where line.hasSuffix(" \(ref)") {
            return String(line.prefix(12))
        }
        return nil
    }
}
