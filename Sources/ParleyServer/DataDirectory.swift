import Foundation

/// The data directory (the SQLite database, media, keys) must exist and take writes before anything
/// else starts: otherwise the first upload or the key file fails later, with a message about
/// something else.
enum DataDirectory {
    static func prepare(_ path: String) throws {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        // mkdir, one level at a time, for the operating system's own reason when it fails (Foundation
        // reports "error 512" whatever happened).
        var made = URL(fileURLWithPath: "/")
        for component in url.pathComponents.dropFirst() {
            made.appendPathComponent(component)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: made.path, isDirectory: &isDirectory) {
                if isDirectory.boolValue { continue }
                throw ConfigurationError(setting: "PARLEY_DATA_DIR", message: "\(path) cannot be created: \(made.path) is a file, not a directory")
            }
            if mkdir(made.path, 0o755) != 0, errno != EEXIST {
                throw ConfigurationError(setting: "PARLEY_DATA_DIR", message: "\(path) cannot be created: \(String(cString: strerror(errno)))")
            }
        }
        let probe = url.appendingPathComponent(".write-test-\(ProcessInfo.processInfo.processIdentifier)")
        do {
            try Data("parley".utf8).write(to: probe)
            try FileManager.default.removeItem(at: probe)
        } catch {
            throw ConfigurationError(setting: "PARLEY_DATA_DIR", message: "\(path) is not writable: \(reason(error))")
        }
    }

    /// The operating system's words for why (a Foundation error wraps them).
    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
        return nsError.localizedDescription
    }
}
