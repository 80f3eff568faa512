import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore
import Synchronization

/// Voice notes from upload to a published message; renditions follow in `VoiceProcessor`.
public struct VoiceService: Sendable {
    /// Voice notes, the messages that carry them, and who may play them.
    typealias Stores = any VoiceStore & ConversationStore & IdentityStore

    let store: StoreAccess<Stores>
    let blobs: any BlobStore
    let conversations: ConversationService
    let scanning: MalwareScanning
    let notes: VoiceNotes
    let analyzer: AudioAnalyzer?
    let maxUploadBytes: Int
    /// How slowly and for how long an upload may arrive.
    let pace: UploadPace
    /// Analyses at once (and waiting), and uploads in progress per consumer and per address.
    let analyses: WorkSlots
    let uploads: UploadGate
    let limits: RateLimits
    let metrics: ParleyMetrics
    let drain: Drain
    let logger: Logger

    /// The limits on an upload's arrival: a stall (no bytes for `idle`), a trickle (fewer than
    /// `minBytesPerSecond` over any `window`), and the whole upload's `deadline`.
    struct UploadPace: Sendable {
        var idle: Duration
        var minBytesPerSecond: Int
        var window: Duration = .seconds(10)
        var deadline: Duration
    }

    /// The steps at the door (`MediaIntake`), with a voice note's rules: ffmpeg is there, the brand
    /// takes voice from this side, the server's size cap.
    var intake: MediaIntake {
        let store = store
        return MediaIntake(
            settings: { brandId in try await store.read { repo in try await repo.brandSettings(brandId: brandId) } },
            conversations: conversations, blobs: blobs, receiver: UploadReceiver(pace: pace, metrics: metrics, drain: drain), uploads: uploads,
            limits: limits)
    }

    var rules: MediaIntake.Rules {
        let (hasAnalyzer, maxUploadBytes) = (analyzer != nil, maxUploadBytes)
        return MediaIntake.Rules(
            kind: .voice,
            authorize: { principal, settings in
                guard hasAnalyzer else {
                    throw ParleyError(.unavailable, code: .voiceUnavailable, message: "Voice messages are unavailable: the server has no ffmpeg.")
                }
                try VoiceRules.authorize(principal, settings: settings)
            },
            cap: { _ in maxUploadBytes },
            tooLarge: { _ in Self.tooLarge(maxUploadBytes) },
            empty: "The upload has no bytes.", emptyCode: .emptyAudio)
    }

    /// Receives a voice note: the steps at the door (`MediaIntake`), then the scan, the real format
    /// from the bytes, decoding (duration and waveform) and the brand's length limits; then the
    /// original is stored, the message published with its duration and waveform, and renditions queued.
    public func upload(
        _ principal: Principal, clientMessageId: String, conversationId: ConversationID?, contentLength: Int?, body: RequestBody,
        clientAddress: String? = nil
    ) async throws -> SendMessageResponse {
        try await intake.upload(
            principal, clientMessageId: clientMessageId, conversationId: conversationId, contentLength: contentLength, body: body,
            clientAddress: clientAddress, rules: rules, ingest: ingest)
    }

    /// A voice note a messaging channel delivered (fetched from the provider into `file`): the same
    /// scan, format check, analysis and renditions as an upload.
    func receiveFromChannel(_ consumer: ConsumerPrincipal, clientMessageId: String, file: URL, size: Int) async throws -> SendMessageResponse {
        try await intake.fromChannel(consumer, clientMessageId: clientMessageId, file: file, size: size, rules: rules, ingest: ingest)
    }

    /// Scan, sniff, measure and store a received file as a voice note.
    @Sendable private func ingest(_ received: MediaIntake.Received) async throws -> SendMessageResponse {
        let (partial, size, principal, request, settings) = (received.file, received.size, received.principal, received.request, received.settings)
        guard let analyzer else { throw ParleyError(.unavailable, code: .voiceUnavailable, message: "Voice messages are unavailable: the server has no ffmpeg.") }
        // The malware scan comes first, before any decoder touches the bytes. A file with malware is
        // kept (in quarantine) as a blocked message whatever it claims to be, so the sender and the
        // agents see that something was stopped.
        let outcome = await scanning.scanUpload(partial, policy: settings.scanFailurePolicy)
        let header = try FileHandle(forReadingFrom: partial).readToEndLimited(AudioContainer.headerLength)
        if outcome.scan == .infected {
            return try await store(
                partial, principal: principal, request: request, container: AudioContainer.sniff(header)?.rawValue ?? "unknown",
                fileExtension: AudioContainer.sniff(header)?.fileExtension ?? "bin", size: size,
                analysis: AudioAnalysis(durationMs: 0, waveform: []), outcome: outcome)
        }
        guard let container = AudioContainer.sniff(header) else {
            throw ParleyError(
                .unsupportedMediaType, code: .unsupportedAudio,
                message: "This is not audio Parley accepts. Send \(AudioContainer.acceptedNames).")
        }
        let analysis: AudioAnalysis
        do {
            // At most the brand's limit and a second is decoded: a ten-hour file costs what a note does.
            analysis = try await analyses.run { try await analyzer.analyze(partial, maxSeconds: settings.voiceMaxSeconds) }
        } catch let error as ParleyError {
            metrics.voiceBusy.increment()
            throw error
        } catch AudioAnalysisError.timedOut {
            throw ParleyError(.unprocessable, code: .corruptAudio, message: "The audio could not be decoded in time.")
        } catch {
            throw ParleyError(.unprocessable, code: .corruptAudio, message: "The audio is damaged or empty and cannot be played.")
        }
        try VoiceRules.validateDuration(milliseconds: analysis.durationMs, maxSeconds: settings.voiceMaxSeconds, atLeast: analysis.truncated)
        try VoiceRules.validateMinimum(milliseconds: analysis.durationMs, minSeconds: settings.voiceMinSeconds)

        return try await store(
            partial, principal: principal, request: request, container: container.rawValue, fileExtension: container.fileExtension,
            size: size, analysis: analysis, outcome: outcome)
    }

    /// Stores a received, scanned (and, unless blocked, measured) upload and publishes its message.
    /// Nobody but the sender ever gets a file the scanner has not passed, unless it is marked unscanned.
    private func store(
        _ partial: URL, principal: Principal, request: SendMessageRequest, container: String, fileExtension: String, size: Int,
        analysis: AudioAnalysis, outcome: MalwareScanning.Outcome
    ) async throws -> SendMessageResponse {
        let messageId = MessageID.make()
        let key = BlobKey.voiceOriginal(brandId: principal.brandId.rawValue, messageId: messageId.rawValue, fileExtension: fileExtension).rawValue
        try await blobs.putFile(partial, key: key)
        let voice = try await notes.make(
            messageId: messageId, brandId: principal.brandId, container: container, originalKey: key, bytes: size,
            analysis: analysis, scan: outcome)
        let response: SendMessageResponse
        do {
            response = try await conversations.send(principal, request, content: .voice(voice))
        } catch {
            try? await blobs.delete(key: voice.originalKey)
            throw error
        }
        if !response.created {
            try? await blobs.delete(key: voice.originalKey)  // lost a race with its own retry: keep the first
        }
        return response
    }

    static func tooLarge(_ maxUploadBytes: Int) -> ParleyError {
        ParleyError(
            .payloadTooLarge, code: .voiceTooLarge,
            message: "The voice message is larger than \(maxUploadBytes / (1024 * 1024)) MB.")
    }

    /// A stored voice note's file, for playback, if the principal may hear it.
    public func media(_ principal: Principal, messageId: MessageID, format: VoiceFormat) async throws -> (key: String, contentType: String, bytes: Int, fileExtension: String) {
        let (message, voice) = try await store.read { repo -> (MessageDTO?, VoiceRecord?) in
            guard let message = try await repo.message(brandId: principal.brandId, id: messageId) else { return (nil, nil) }
            return (message, try await repo.voice(messageId: messageId, brandId: principal.brandId))
        }
        guard let message, let voice else { throw ParleyError.notFound("Voice message") }
        _ = try await conversations.conversation(principal, id: message.conversationId)  // a consumer's own only
        if voice.state == .blocked {
            throw ParleyError(
                .forbidden, code: .voiceBlocked,
                message: voice.failureReason ?? "This voice message was blocked by the malware scan and is not served.")
        }
        if !voice.deliverable, message.senderId != principal.participant.id {
            throw ParleyError(
                .conflict, code: .scanPending,
                message: "This voice message is waiting for its malware scan; it can be played once the scan passes.")
        }
        switch format {
        case .original:
            let fileExtension = AudioContainer(rawValue: voice.container)?.fileExtension ?? "bin"
            return (voice.originalKey, VoiceRecord.contentType(ofContainer: voice.container), voice.originalBytes, fileExtension)
        case .opus, .aac:
            let rendition: VoiceRendition = format == .opus ? .opus : .aac
            guard let (key, bytes) = voice.rendition(rendition) else { throw renditionNotReady(voice) }
            return (key, rendition.contentType, bytes, rendition.fileExtension)
        }
    }

    private func renditionNotReady(_ voice: VoiceRecord) -> ParleyError {
        voice.state == .failed
            ? ParleyError(.notFound, code: .renditionFailed, message: "This rendition could not be made: \(voice.failureReason ?? "unknown reason"). The original is available.")
            : ParleyError(.conflict, code: .renditionNotReady, message: "This rendition is still being made; try again shortly or play the original.")
    }
}

extension FileHandle {
    /// Up to `count` bytes from the start, closing the handle.
    func readToEndLimited(_ count: Int) throws -> Data {
        defer { try? close() }
        return try read(upToCount: count) ?? Data()
    }
}
