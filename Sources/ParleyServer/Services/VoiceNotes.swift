import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// The one owner of voice-note records (`voice_media`) and of where their files live.
///
/// A note's life: `make` builds the record of a stored upload with its scan verdict applied (a
/// blocked file moves into quarantine); the conversation log inserts it with its message, in the
/// same transaction (`ConversationAppend.log(_:preview:voice:)`); `save` keeps a record still waiting
/// for the malware scanner; `settle` stores a new state that people must see (renditions ready,
/// processing failed, a late scan verdict, a transcript) as a sequenced `voice_processed` event and
/// publishes it, and writes the job of the note's next step in the same transaction.
/// The upload path (VoiceService), the transcoder (VoiceProcessor), the rescanner
/// (MalwareScanning) and the transcriber (VoiceTranscription) change records only through this type.
///
/// A note's steps, each with its own state: the scan (`scan`), the renditions (`state`), the
/// transcript (`transcript`), in that order; each step's job is written by the commit that ends the
/// step before it (`VoiceJobs.job(for:at:)`).
struct VoiceNotes: Sendable {
    let store: Store
    let blobs: any BlobStore
    let log: ConversationLog
    let clock: any WallClock
    let logger: Logger
    /// The languages this server's transcriber knows (nil: it has none). A note that becomes ready
    /// in a brand that transcribes gets its transcript step then.
    var transcribes: (@Sendable (String) -> Bool)? = nil

    /// The record of a new note whose original is stored under `key`, with the scan verdict applied.
    /// On failure the stored original is removed.
    func make(
        messageId: MessageID, brandId: BrandID, container: String, originalKey key: String, bytes: Int, analysis: AudioAnalysis,
        scan outcome: MalwareScanning.Outcome
    ) async throws -> VoiceRecord {
        let now = clock.now()
        var voice = VoiceRecord(
            messageId: messageId, brandId: brandId, container: container, originalKey: key, originalBytes: bytes,
            durationMs: analysis.durationMs, waveform: analysis.waveform, state: .processing, createdAt: now, updatedAt: now)
        do {
            try await apply(outcome, to: &voice)
        } catch {
            try? await blobs.delete(key: key)
            throw error
        }
        return voice
    }

    /// Applies a scan verdict: a blocked note loses nothing but can no longer be served, and its file
    /// moves into quarantine.
    func apply(_ outcome: MalwareScanning.Outcome, to voice: inout VoiceRecord) async throws {
        voice.scan = outcome.scan
        voice.scanDetail = outcome.detail
        voice.scanAttempts = outcome.attempts
        voice.scanNextAt = outcome.nextAt
        switch outcome.scan {
        case .infected:
            voice.state = .blocked
            voice.failureReason = "Blocked: the malware scan found something in this file. It was not delivered."
            try await quarantine(&voice)
        case .failed:
            voice.state = .blocked
            voice.failureReason = "Blocked: the file could not be scanned for malware. It was not delivered."
            try await quarantine(&voice)
        case .clean, .unscanned, .pending:
            break
        }
    }

    private func quarantine(_ voice: inout VoiceRecord) async throws {
        let original = BlobKey(rawValue: voice.originalKey)
        guard !original.isQuarantined else { return }
        try await blobs.move(key: original.rawValue, to: original.quarantined.rawValue)
        voice.originalKey = original.quarantined.rawValue
    }

    /// Stores a record whose change nobody sees yet (a note still waiting for the scanner).
    func save(_ voice: VoiceRecord) async throws {
        var record = voice
        record.updatedAt = clock.now()
        let saved = record
        try await store.write { repo in try await repo.updateVoice(saved) }
    }

    /// Stores a note's new state and, in the same transaction, a sequenced `voice_processed` event
    /// carrying its message as it now is; then publishes the event, so that every client (and every
    /// later `resume`) learns of it.
    func settle(_ voice: VoiceRecord) async throws {
        var record = voice
        record.updatedAt = clock.now()
        let (given, transcribes) = (record, transcribes)
        try await log.write { repo, appends in
            var settled = given
            guard var message = try await repo.message(brandId: settled.brandId, id: settled.messageId),
                let conversation = try await repo.conversation(brandId: settled.brandId, id: message.conversationId, lock: true)
            else { return try await repo.updateVoice(settled) }
            if settled.state == .ready, settled.transcript == nil, let transcribes {
                let settings = try await repo.brandSettings(brandId: settled.brandId)
                if settings.transcription {
                    // A customer's note in the customer's language when the widget or app told it; else the brand's.
                    var language = settings.transcriptionLanguage
                    if message.senderKind == .consumer, let spoken = try await repo.consumer(brandId: settled.brandId, id: conversation.consumerId)?.language {
                        language = VoiceRules.transcriptionLanguage(of: spoken) ?? language
                    }
                    settled.transcript = VoiceTranscriptDTO(state: transcribes(language) ? .pending : .unavailable, language: language)
                }
            }
            try await repo.updateVoice(settled)
            if let transcript = settled.transcript, transcript.state == .ready {
                try await repo.indexTranscript(messageId: settled.messageId, text: transcript.text)
            }
            message.voice = settled.dto
            var log = ConversationAppend(conversation, now: clock.now())
            _ = log.logVoiceProcessed(message)
            // The list line of a conversation whose last message is this note gains its first words.
            if settled.transcript?.state == .ready, conversation.lastMessageKind == .voice,
                try await repo.messages(conversationId: conversation.id, beforeSeq: .max, limit: 1).last?.id == message.id
            {
                log.showPreview(VoiceRules.preview(durationMs: settled.durationMs, transcript: settled.transcript))
            }
            try await appends.write(&log, in: repo)
            // Cleared by a rescan: its renditions are due now, with the verdict; ready: its transcript.
            if let job = try VoiceJobs.job(for: settled, at: log.now), try await repo.enqueueJob(job) { appends.queuedJobs() }
        }
    }
}
