import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore
import ServiceLifecycle
import Synchronization

/// The durable jobs of a voice note: its renditions (`voice.transcode`), while the scanner is away
/// its malware rescans (`voice.rescan`), and once it plays everywhere its transcript
/// (`voice.transcribe`, when the brand transcribes). Each is written in the transaction that makes it
/// necessary (the note's message, or the scan verdict that clears it), so a note is never left
/// waiting on work that only one process remembered; the job runner runs them on whichever node
/// claims them. Both are idempotent: a job run twice (a lease that ran out) writes the same result.
enum VoiceJobs {
    static let transcode = "voice.transcode"
    static let rescan = "voice.rescan"
    static let transcribe = "voice.transcribe"
    /// A store failure is retried this many times; a conversion that fails is recorded, not retried.
    static let maxAttempts = 5

    struct Note: Codable, Sendable, Hashable {
        var messageId: MessageID
        var brandId: BrandID
    }

    /// The job `voice` needs now, if any: renditions for a deliverable note still processing, a
    /// rescan (when the next one is due) for a note waiting for the scanner, a transcript for a
    /// ready note whose transcript is pending.
    static func job(for voice: VoiceRecord, at now: Date) throws -> JobRecord? {
        let note = String(decoding: try JSONEncoder().encode(Note(messageId: voice.messageId, brandId: voice.brandId)), as: UTF8.self)
        if voice.deliverable, voice.state == .processing {
            return JobRecord(
                brandId: voice.brandId, kind: transcode, lane: nil, payload: note, dedupeKey: "transcode:\(voice.messageId)",
                maxAttempts: maxAttempts, runAt: now, createdAt: now, requestId: RequestID.current)
        }
        if voice.state == .ready, voice.deliverable, voice.transcript?.state == .pending {
            return JobRecord(
                brandId: voice.brandId, kind: transcribe, lane: nil, payload: note, dedupeKey: "transcribe:\(voice.messageId)",
                maxAttempts: maxAttempts, runAt: now, createdAt: now, requestId: RequestID.current)
        }
        if voice.scan == .pending, voice.state != .blocked {
            return JobRecord(
                brandId: voice.brandId, kind: rescan, lane: nil, payload: note, dedupeKey: "rescan:\(voice.messageId)",
                maxAttempts: maxAttempts, runAt: max(now, voice.scanNextAt ?? now), createdAt: now, requestId: RequestID.current)
        }
        return nil
    }

    /// Notes that an earlier version left processing or waiting for the scanner (its work lived in
    /// memory) get their job. Run at start-up on every node: the dedupe keys keep it one job each.
    static func adopt(store: Store, clock: any WallClock) async throws -> Int {
        try await store.write { repo in
            let now = clock.now()
            var adopted = 0
            let waiting = try await repo.voicesProcessing(limit: 10_000)
                + repo.voicesAwaitingScan(dueBy: .distantFuture, limit: 10_000)
            for voice in waiting {
                if let job = try job(for: voice, at: now), try await repo.enqueueJob(job) { adopted += 1 }
            }
            return adopted
        }
    }
}

/// Makes the renditions of voice notes: the `voice.transcode` job's handler. At most `slots` run
/// at once on a node (ffmpeg takes a core each); the rest wait for a slot within their lease.
/// Each ends in `ready` or `failed` (with the reason the sender sees), stored as a sequenced
/// conversation event.
public struct VoiceProcessor: Sendable {
    /// Voice notes and the jobs that convert them.
    typealias Stores = any VoiceStore & JobStore

    let store: StoreAccess<Stores>
    let blobs: any BlobStore
    let transcoder: VoiceTranscoder?
    let notes: VoiceNotes
    let slots: WorkSlots
    let logger: Logger

    init(store: StoreAccess<Stores>, blobs: any BlobStore, transcoder: VoiceTranscoder?, notes: VoiceNotes, concurrency: Int, logger: Logger) {
        (self.store, self.blobs, self.transcoder, self.notes, self.logger) = (store, blobs, transcoder, notes, logger)
        slots = WorkSlots(limit: concurrency, queueLimit: 100_000)
    }

    var handler: any JobHandler {
        PayloadJobHandler<VoiceJobs.Note>(kind: VoiceJobs.transcode) { note in try await slots.run { try await process(note) } }
    }

    /// Converts one note. A conversion that fails is recorded (`failed`, with the reason the sender
    /// sees); a store that cannot be read or written is thrown, and the job tried again later.
    func process(_ job: VoiceJobs.Note) async throws {
        guard var voice = try await store.read({ repo in try await repo.voice(messageId: job.messageId, brandId: job.brandId) }),
            voice.state == .processing, voice.deliverable
        else { return }
        let outputs: [VoiceRendition: URL] = [.opus: blobs.scratchFile(".ogg"), .aac: blobs.scratchFile(".m4a")]
        defer { for url in outputs.values { try? FileManager.default.removeItem(at: url) } }
        var converted = false
        do {
            guard let transcoder else { throw VoiceTranscoder.Failure(description: "the server has no ffmpeg") }
            try await blobs.withLocalFile(key: voice.originalKey) { original in try await transcoder.transcode(original, into: outputs) }
            for (rendition, url) in outputs {
                let bytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
                guard bytes > 0 else { throw VoiceTranscoder.Failure(description: "the \(rendition.rawValue) rendition came out empty") }
            }
            converted = true
        } catch let failure as VoiceTranscoder.Failure {
            logger.warning("voice processing failed", metadata: ["message": "\(job.messageId)", "error": "\(failure)"])
        }
        if converted {
            for (rendition, url) in outputs.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let key = BlobKey.voiceRendition(
                    brandId: voice.brandId.rawValue, messageId: voice.messageId.rawValue, fileExtension: rendition.fileExtension).rawValue
                let bytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
                try await blobs.putFile(url, key: key)
                voice.setRendition(rendition, key: key, bytes: bytes)
            }
            voice.state = .ready
        } else {
            voice.state = .failed
            voice.failureReason = "The voice message could not be converted for playback on every device."
        }
        try await notes.settle(voice)
    }
}
