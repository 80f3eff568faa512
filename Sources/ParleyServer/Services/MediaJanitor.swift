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
    /// The media rows whose files it may remove.
    typealias Stores = any VoiceStore & AttachmentStore

    let store: StoreAccess<Stores>
    let blobs: any BlobStore
    let minimumAge: TimeInterval
    let interval: Duration
    let metrics: ParleyMetrics
    let logger: Logger

    /// One sweep; returns how many messages' media were removed.
    @discardableResult
    public func sweep(now: Date = Date()) async throws -> Int {
        var removed = 0
        for kind in BlobKey.Kind.allCases {
            let prefix = kind.rawValue
            // PREFIX/BRAND/MESSAGE/NAME: grouped by message, judged by the newest write.
            var newest: [String: Date] = [:]
            for blob in try await blobs.list(prefix: prefix) {
                let segments = blob.key.split(separator: "/")
                let depth = prefix.split(separator: "/").count
                guard segments.count >= depth + 3 else { continue }
                let folder = segments.prefix(depth + 2).joined(separator: "/")
                newest[folder] = max(newest[folder] ?? .distantPast, blob.modified)
            }
            for (folder, modified) in newest.sorted(by: { $0.key < $1.key }) where now.timeIntervalSince(modified) >= minimumAge {
                guard let parsed = BlobKey.messageFolder(folder) else { continue }
                let (brand, message) = (BrandID(rawValue: parsed.brandId), MessageID(rawValue: parsed.messageId))
                let referenced = try await store.read { repo in
                    kind == .files
                        ? try await repo.attachment(messageId: message, brandId: brand) != nil
                        : try await repo.voice(messageId: message, brandId: brand) != nil
                }
                guard !referenced else { continue }
                _ = try await blobs.deletePrefix(folder)
                removed += 1
                metrics.orphanMediaRemoved.increment()
                logger.notice("removed media that no message refers to", metadata: ["path": "\(folder)"])
            }
        }
        return removed
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
