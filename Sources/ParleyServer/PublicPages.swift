import Foundation

/// Where the web pages (the workspace and the widget) are: the directory `--public-dir` names, or
/// the first of the places an installation puts them. A server without its pages would answer every
/// page with 404 (a systemd unit has no working directory, and `./Public` was looked up there), so
/// start-up refuses instead, naming where it looked.
public enum PublicPages {
    /// A file every copy of the pages has.
    static let marker = "widget.html"

    /// The places looked at when no directory is named, in order: next to the binary, the package's
    /// install location (`/usr/share/parley/Public` for `/usr/bin/parley`), the source tree's for a
    /// binary built in it (`.build/<triple>/<configuration>/parley`), then the working directory.
    public static func candidates(executable: URL, workingDirectory: String) -> [String] {
        let directory = executable.resolvingSymlinksInPath().deletingLastPathComponent()
        var places = [
            directory.appendingPathComponent("Public").path,
            directory.deletingLastPathComponent().appendingPathComponent("share/parley/Public").path,
            "/usr/share/parley/Public",
        ]
        var ancestor = directory
        for _ in 0..<3 {
            ancestor = ancestor.deletingLastPathComponent()
            places.append(ancestor.appendingPathComponent("Public").path)
        }
        places.append(URL(fileURLWithPath: workingDirectory).appendingPathComponent("Public").path)
        var seen = Set<String>()
        return places.filter { seen.insert($0).inserted }
    }

    /// This process's binary, as the kernel knows it (not argv[0], which may be a bare name from PATH).
    public static var executable: URL {
        let proc = URL(fileURLWithPath: "/proc/self/exe")
        if FileManager.default.fileExists(atPath: proc.path) { return proc.resolvingSymlinksInPath() }
        return URL(fileURLWithPath: CommandLine.arguments.first ?? "parley").resolvingSymlinksInPath()
    }

    /// The pages' directory, or a configuration error that says where it looked.
    public static func locate(
        named: String?, executable: URL = PublicPages.executable,
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) throws -> String {
        if let named {
            guard hasPages(named) else {
                throw ConfigurationError(setting: "PARLEY_PUBLIC_DIR", message: "\(named) has no web pages (no \(marker) in it)")
            }
            return URL(fileURLWithPath: named).standardizedFileURL.path
        }
        let places = candidates(executable: executable, workingDirectory: workingDirectory)
        guard let found = places.first(where: hasPages) else {
            throw ConfigurationError(
                setting: "PARLEY_PUBLIC_DIR",
                message: "the web pages were not found; looked in \(places.joined(separator: ", ")). Name their directory with --public-dir")
        }
        return URL(fileURLWithPath: found).standardizedFileURL.path
    }

    static func hasPages(_ directory: String) -> Bool {
        FileManager.default.fileExists(atPath: URL(fileURLWithPath: directory).appendingPathComponent(marker).path)
    }
}
