import ParleyAPI

/// Rules for voice messages: who may send them, how long, and how they read in text.
public enum VoiceRules {
    /// The range a brand may set its maximum voice-note length in.
    public static let maxSecondsRange = 15...120
    public static let defaultMaxSeconds = 120
    /// The default upload cap: far above what 2 minutes of any accepted codec needs.
    public static let defaultMaxUploadBytes = 16 * 1024 * 1024

    /// `0:42`, `2:00`.
    public static func clock(milliseconds: Int) -> String {
        let seconds = (milliseconds + 500) / 1000
        let remainder = seconds % 60
        return "\(seconds / 60):\(remainder < 10 ? "0" : "")\(remainder)"
    }

    /// What a voice message's `text` is, in histories and transcript exports: `[audio message 0:42]`.
    public static func transcriptLine(durationMs: Int) -> String {
        "[audio message \(clock(milliseconds: durationMs))]"
    }

    /// The conversation list's preview of a voice message.
    public static func preview(durationMs: Int) -> String {
        "Audio message \(clock(milliseconds: durationMs))"
    }

    /// A transcribed note's line: its length, then what was said, cut like a text's
    /// ("Audio message 0:11 · he might even have been made…"); the plain line without words.
    public static func preview(durationMs: Int, transcript: VoiceTranscriptDTO?) -> String {
        guard let transcript, transcript.state == .ready, !transcript.text.isEmpty else { return preview(durationMs: durationMs) }
        return MessageRules.preview(of: preview(durationMs: durationMs) + " · " + transcript.text)
    }

    /// A voice message the malware scan blocked: its transcript line and its preview.
    public static let blockedTranscriptLine = "[audio message blocked by the malware scan]"
    public static let blockedPreview = "Audio message blocked"

    public static func validate(_ settings: UpdateBrandSettingsRequest) throws(ParleyError) {
        if let seconds = settings.voiceMaxSeconds, !maxSecondsRange.contains(seconds) {
            throw .invalidField(
                "voiceMaxSeconds", "'voiceMaxSeconds' must be from \(maxSecondsRange.lowerBound) to \(maxSecondsRange.upperBound).")
        }
        if let seconds = settings.voiceMinSeconds, !minSecondsRange.contains(seconds) {
            throw .invalidField(
                "voiceMinSeconds", "'voiceMinSeconds' must be from \(minSecondsRange.lowerBound) to \(minSecondsRange.upperBound).")
        }
        let open = ConversationRules.openConversationsRange
        if let count = settings.openConversationsPerConsumer, !open.contains(count) {
            throw .invalidField(
                "openConversationsPerConsumer", "'openConversationsPerConsumer' must be from \(open.lowerBound) to \(open.upperBound).")
        }
        if let language = settings.transcriptionLanguage, !isLanguage(language) {
            throw .invalidField("transcriptionLanguage", "'transcriptionLanguage' must be an ISO 639-1 code such as 'en' or 'de'.")
        }
    }

    /// The ISO 639-1 code of a language tag ("fr-CA" → "fr"), or nil when it has none.
    public static func transcriptionLanguage(of tag: String) -> String? {
        let primary = tag.split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map { $0.lowercased() } ?? ""
        return isLanguage(primary) ? primary : nil
    }

    /// Two lowercase letters (ISO 639-1), what transcription engines take.
    public static func isLanguage(_ code: String) -> Bool {
        code.utf8.count == 2 && code.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }
    }

    /// Whether `sender` may send a voice note under `settings`; agents also need `send_audio`.
    public static func authorize(_ principal: Principal, settings: BrandSettingsDTO) throws(ParleyError) {
        switch principal {
        case .consumer:
            guard settings.voiceFromConsumers else {
                throw ParleyError(.forbidden, code: .voiceDisabled, message: "This brand does not accept voice messages.")
            }
        case .agent(let agent):
            guard settings.voiceFromAgents else {
                throw ParleyError(.forbidden, code: .voiceDisabled, message: "Voice messages to consumers are switched off for this brand.")
            }
            guard agent.permissions.contains(.sendAudio) else {
                throw ParleyError(.forbidden, code: .permissionRequired, message: "Your profile does not allow sending voice messages (send_audio).")
            }
        }
    }

    /// The brand's shortest voice note, in seconds (0: any length).
    public static let minSecondsRange = 0...10

    /// Refuses a note shorter than the brand's minimum: an accidental tap, not a message.
    public static func validateMinimum(milliseconds: Int, minSeconds: Int) throws(ParleyError) {
        guard milliseconds < minSeconds * 1000 else { return }
        let seconds = minSeconds == 1 ? "1 second" : "\(minSeconds) seconds"
        throw ParleyError(
            .unprocessable, code: .voiceTooShort,
            message: "The voice message is too short (\(String(format: "%.1f", Double(milliseconds) / 1000)) s); record at least \(seconds).")
    }

    /// Refuses a note longer than the brand allows, naming the limit.
    /// `atLeast`: decoding stopped at a limit, so the note is at least `milliseconds` long.
    public static func validateDuration(milliseconds: Int, maxSeconds: Int, atLeast: Bool = false) throws(ParleyError) {
        // Half a second of grace: recorders stop a little after the timer.
        if milliseconds > maxSeconds * 1000 + 500 {
            let length = atLeast ? "longer than \(clock(milliseconds: maxSeconds * 1000))" : "\(clock(milliseconds: milliseconds)) long"
            throw ParleyError(
                .unprocessable, code: .voiceTooLong,
                message: "The voice message is \(length); this brand accepts at most \(clock(milliseconds: maxSeconds * 1000)).")
        }
    }
}
