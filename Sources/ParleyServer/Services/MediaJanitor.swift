import Foundation
import Logging
import ParleyAPI
import ParleyMedia
import ParleyStore
import ServiceLifecycle

/// Removes media files that no row refers to. An upload moves its file into place and then commits
/// its row; a crash between the two (or a commit that failed) leaves a file nobody can reach. Such a
/// file is removed once it is older than `minimumAge` (so an upload still on its way to its commit
/// is never touched): at start-up and then every `interval`.
public struct MediaJanitor: Service {
    let store: Store
    let blobs: LocalBlobStore
    let minimumAge: TimeInterval
    let interval: Duration
    let metrics: ParleyMetrics
    let logger: Logger

    /// Where voice notes live: `voice/BRAND/MESSAGE/…`, and the same under `quarantine/`; and
    /// attachments: `files/BRAND/MESSAGE/…`.
    static let prefixes = ["voice", "quarantine/voice", "files"]

    /// One sweep; returns how many message directories were removed.
    @discardableResult
    public func sweep(now: Date = Date()) async throws -> Int {
        let files = FileManager.default
        var removed = 0
        for prefix in Self.prefixes {
            let base = blobs.root.appendingPathComponent(prefix)
            for brandId in (try? files.contentsOfDirectory(atPath: base.path)) ?? [] {
                let brandDirectory = base.appendingPathComponent(brandId)
                for messageId in (try? files.contentsOfDirectory(atPath: brandDirectory.path)) ?? [] {
                    let directory = brandDirectory.appendingPathComponent(messageId)
                    guard Self.newestModification(in: directory).map({ now.timeIntervalSince($0) >= minimumAge }) ?? false else { continue }
                    let (message, brand) = (MessageID(rawValue: messageId), BrandID(rawValue: brandId))
                    let referenced = try await store.read { repo in
                        prefix == "files"
                            ? try await repo.attachment(messageId: message, brandId: brand) != nil
                            : try await repo.voice(messageId: message, brandId: brand) != nil
                    }
                    guard !referenced else { continue }
                    try files.removeItem(at: directory)
                    removed += 1
                    metrics.orphanMediaRemoved.increment()
                    logger.notice("removed media that no message refers to", metadata: ["path": "\(prefix)/\(brandId)/\(messageId)"])
                }
            }
        }
        return removed
    }

    static func newestModification(in directory: URL) -> Date? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        let dates = ([directory.path] + names.map { directory.appendingPathComponent($0).path }).compactMap {
            (try? FileManager.default.attributesOfItem(atPath: $0))?[.modificationDate] as? Date
        }
        return dates.max()
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await sweep()
                } catch {
                    logger.warning("the media sweep failed; it runs again later", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
