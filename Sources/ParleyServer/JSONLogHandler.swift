import Foundation
import Logging
import Synchronization

/// Logs as one JSON object a line (`PARLEY_LOG_FORMAT=json`), for a log shipper: `time` (RFC 3339
/// with milliseconds, UTC), `level`, `logger` (the label), `message`, the metadata's keys at the top
/// level (nested values as JSON), and `source`. Written by hand: swift-log has no JSON handler and
/// none of the listed packages provides one; the format is a few lines.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    /// Metadata of the moment (`RequestID.metadataProvider`: the request or job being worked for).
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (Data) -> Void

    /// Writes to standard error, one line at a time (lines of concurrent writers never interleave).
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = { data in Self.stderr.withLock { _ in FileHandle.standardError.write(data) } }
    }

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (Data) -> Void) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    private static let stderr = Mutex<Void>(())

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: [String: Any] = [
            "time": Self.timestamp(Date()), "level": event.level.rawValue, "logger": label, "message": "\(event.message)",
            "source": event.source,
        ]
        if let error = event.error { object["error"] = String(describing: error) }
        let provided = metadataProvider?.get() ?? [:]
        let merged = provided.merging(metadata, uniquingKeysWith: { _, new in new }).merging(event.metadata ?? [:], uniquingKeysWith: { _, new in new })
        for (key, value) in merged where object[key] == nil {
            object[key] = Self.json(value)
        }
        guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        line.append(0x0A)
        write(line)
    }

    static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array(let values): values.map(json)
        case .dictionary(let values): values.mapValues(json)
        }
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
