import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore
import ServiceLifecycle
import Synchronization

/// Makes the renditions of voice notes in the background, a few at a time.
///
/// A `Service`: at start-up it picks up every note a crash left in `processing`; each job ends in
/// `ready` or `failed` (with the reason the sender sees), stored as a sequenced conversation event.
public final class VoiceProcessor: Service {
    struct Job: Sendable, Hashable {
        var messageId: MessageID
        var brandId: BrandID
    }

    private let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation
    private let pending = Mutex<Set<Job>>([])
    private let store: Store
    private let blobs: any BlobStore
    private let transcoder: VoiceTranscoder?
    private let concurrency: Int
    private let logger: Logger
    private let notes: VoiceNotes

    init(
        store: Store, blobs: any BlobStore, transcoder: VoiceTranscoder?, notes: VoiceNotes, concurrency: Int,
        logger: Logger
    ) {
        self.notes = notes
        (jobs, continuation) = AsyncStream<Job>.makeStream()
        self.store = store
        self.blobs = blobs
        self.transcoder = transcoder
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    func enqueue(messageId: MessageID, brandId: BrandID) {
        let job = Job(messageId: messageId, brandId: brandId)
        let isNew = pending.withLock { $0.insert(job).inserted }
        if isNew { continuation.yield(job) }
    }

    public func run() async throws {
        for voice in try await store.read({ repo in try await repo.voicesProcessing(limit: 10_000) }) {
            enqueue(messageId: voice.messageId, brandId: voice.brandId)
        }
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await job in jobs.cancelOnGracefulShutdown() {
                if running >= concurrency {
                    await group.next()
                    running -= 1
                }
                running += 1
                group.addTask { await self.process(job) }
            }
        }
    }

    func process(_ job: Job) async {
        defer { _ = pending.withLock { $0.remove(job) } }
        do {
            guard var voice = try await store.read({ repo in try await repo.voice(messageId: job.messageId, brandId: job.brandId) }),
                voice.state == .processing, voice.deliverable
            else { return }
            do {
                guard let transcoder else { throw VoiceTranscoder.Failure(description: "the server has no ffmpeg") }
                let outputs: [VoiceRendition: URL] = [.opus: blobs.scratchFile(".ogg"), .aac: blobs.scratchFile(".m4a")]
                defer { for url in outputs.values { try? FileManager.default.removeItem(at: url) } }
                try await blobs.withLocalFile(key: voice.originalKey) { original in try await transcoder.transcode(original, into: outputs) }
                let base = "voice/\(voice.brandId)/\(voice.messageId)"
                for (rendition, url) in outputs {
                    let key = "\(base)/voice.\(rendition.fileExtension)"
                    let bytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
                    guard bytes > 0 else { throw VoiceTranscoder.Failure(description: "the \(rendition.rawValue) rendition came out empty") }
                    try await blobs.putFile(url, key: key)
                    switch rendition {
                    case .opus: (voice.opusKey, voice.opusBytes) = (key, bytes)
                    case .aac: (voice.aacKey, voice.aacBytes) = (key, bytes)
                    }
                }
                voice.state = .ready
            } catch {
                logger.warning("voice processing failed", metadata: ["message": "\(job.messageId)", "error": "\(error)"])
                voice.state = .failed
                voice.failureReason = "The voice message could not be converted for playback on every device."
            }
            try await notes.settle(voice)
        } catch {
            logger.error("voice job could not be recorded", metadata: ["message": "\(job.messageId)", "error": "\(error)"])
        }
    }
}
