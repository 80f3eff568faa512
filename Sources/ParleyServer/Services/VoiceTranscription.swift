import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Transcribes voice notes: the `voice.transcribe` job's handler, the last of a note's steps. Its
/// job is written by the commit that makes the note ready (`VoiceNotes.settle`) when the brand
/// transcribes, so a transcript is never waiting on memory; the note itself is delivered and
/// playable before, and whatever happens here never holds it back.
///
/// At most `slots` run at once on a node (an engine takes a core); a failure that may pass (a
/// timeout, an endpoint down) is retried with the runner's back-off, and after the last attempt the
/// transcript is `unavailable`, which people see as such. Card numbers in the words are masked by
/// the brand's card-masking setting, spoken digits as well (`SpokenDigits`), before anything is stored.
struct VoiceTranscription: Sendable {
    typealias Stores = any VoiceStore & IdentityStore

    let store: StoreAccess<Stores>
    let blobs: any BlobStore
    let audio: TranscriptionAudio
    let transcriber: any Transcriber
    let notes: VoiceNotes
    let slots: WorkSlots
    let metrics: ParleyMetrics
    let logger: Logger

    var handler: any JobHandler {
        PayloadJobHandler<VoiceJobs.Note>(
            kind: VoiceJobs.transcribe, run: { note in try await slots.run { try await transcribe(note) } },
            lost: { note, reason in try await giveUp(note, reason: reason) })
    }

    /// Transcribes one note, if it still waits for its transcript.
    func transcribe(_ job: VoiceJobs.Note) async throws {
        guard let (voice, masking) = try await pending(job) else { return }
        let language = voice.transcript?.language ?? "en"
        // The Opus rendition is small and already mono; the original when there is none.
        let key = voice.rendition(.opus)?.key ?? voice.originalKey
        let wav = blobs.scratchFile(".wav")
        defer { try? FileManager.default.removeItem(at: wav) }
        let started = ContinuousClock.now
        let heard: Transcription
        do {
            try await blobs.withLocalFile(key: key) { file in try await audio.prepare(file, into: wav) }
            heard = try await transcriber.transcribe(wav: wav, language: language, durationMs: voice.durationMs)
        } catch let failure as TranscriptionFailure {
            logger.notice(
                "a voice note could not be transcribed", metadata: ["message": "\(job.messageId)", "error": "\(failure)", "retry": "\(failure.retryable)"])
            guard failure.retryable else { return try await settle(voice, as: VoiceTranscriptDTO(state: .unavailable, language: language)) }
            throw JobFailure.retry(failure.description)
        }
        metrics.transcribed(engine: transcriber.name, audioMs: voice.durationMs, in: .now - started)
        let text = masking == .off ? heard.text : SpokenDigits.mask(heard.text).text
        try await settle(voice, as: VoiceTranscriptDTO(state: .ready, text: text, language: heard.language, lowConfidence: heard.lowConfidence))
    }

    /// After the last attempt: the transcript is unavailable (the note itself is untouched).
    func giveUp(_ job: VoiceJobs.Note, reason: String) async throws {
        guard let (voice, _) = try await pending(job) else { return }
        try await settle(voice, as: VoiceTranscriptDTO(state: .unavailable, language: voice.transcript?.language))
    }

    private func pending(_ job: VoiceJobs.Note) async throws -> (VoiceRecord, CardMasking)? {
        try await store.read { repo -> (VoiceRecord, CardMasking)? in
            guard let voice = try await repo.voice(messageId: job.messageId, brandId: job.brandId), voice.state == .ready,
                voice.transcript?.state == .pending
            else { return nil }
            return (voice, try await repo.brandSettings(brandId: job.brandId).cardMasking)
        }
    }

    private func settle(_ voice: VoiceRecord, as transcript: VoiceTranscriptDTO) async throws {
        var voice = voice
        voice.transcript = transcript
        try await notes.settle(voice)
    }
}

/// The engine of a server without one: no brand can turn transcription on there
/// (`transcriber_unavailable`), so its jobs only meet notes left pending by an earlier start with
/// one; they end `unavailable`.
struct NoTranscriber: Transcriber {
    var name: String { "none" }
    func supports(language: String) -> Bool { false }
    func transcribe(wav: URL, language: String, durationMs: Int) async throws(TranscriptionFailure) -> Transcription {
        throw TranscriptionFailure("this server has no transcriber", retryable: false)
    }
}
