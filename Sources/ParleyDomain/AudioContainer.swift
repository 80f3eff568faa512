import ParleyAPI
/// The audio containers Parley accepts, recognised from their first bytes (the client's
/// Content-Type and file name are never trusted). Every one's length is measured by decoding it
/// (`AudioAnalyzer`), never read from its header: browser WebM has none, streamed FLAC says 0, MP3
/// headers estimate.
public enum AudioContainer: String, Sendable, CaseIterable, Codable {
    case webm
    case ogg
    case mp4
    case mp3
    case wav
    case amr
    case caf
    case aac
    /// AIFF and AIFF-C: linear PCM (or compressed) as macOS and iOS apps record it.
    case aiff
    case flac

    /// The extension the stored original gets.
    public var fileExtension: String {
        switch self {
        case .webm: "webm"
        case .ogg: "ogg"
        case .mp4: "m4a"
        case .mp3: "mp3"
        case .wav: "wav"
        case .amr: "amr"
        case .caf: "caf"
        case .aac: "aac"
        case .aiff: "aiff"
        case .flac: "flac"
        }
    }

    public var contentType: String {
        switch self {
        case .webm: "audio/webm"
        case .ogg: "audio/ogg"
        case .mp4: "audio/mp4"
        case .mp3: "audio/mpeg"
        case .wav: "audio/wav"
        case .amr: "audio/amr"
        case .caf: "audio/x-caf"
        case .aac: "audio/aac"
        case .aiff: "audio/aiff"
        case .flac: "audio/flac"
        }
    }

    /// How many leading bytes `sniff` needs.
    public static let headerLength = 16

    /// The container the bytes start with, or nil when they are not audio Parley accepts.
    public static func sniff(_ header: some Collection<UInt8>) -> AudioContainer? {
        let bytes = Array(header.prefix(headerLength))
        func starts(with prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
        }
        if starts(with: [0x1A, 0x45, 0xDF, 0xA3]) { return .webm }  // EBML (WebM/Matroska)
        if starts(with: Array("OggS".utf8)) { return .ogg }
        if starts(with: Array("ftyp".utf8), at: 4) { return .mp4 }  // ISO BMFF: M4A, MP4 audio
        if starts(with: Array("RIFF".utf8)), starts(with: Array("WAVE".utf8), at: 8) { return .wav }
        if starts(with: Array("#!AMR".utf8)) { return .amr }
        if starts(with: Array("caff".utf8)) { return .caf }
        // IFF: "FORM", a size, then "AIFF" or "AIFC" (whatever the file is called: Apple's AudioFile
        // API writes AIFF under a .caf name too).
        if starts(with: Array("FORM".utf8)), starts(with: Array("AIFF".utf8), at: 8) || starts(with: Array("AIFC".utf8), at: 8) { return .aiff }
        if starts(with: Array("fLaC".utf8)) { return .flac }
        if starts(with: Array("ID3".utf8)) { return .mp3 }
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] & 0xE0 == 0xE0 {
            // An MPEG audio frame sync: layer bits 00 mean ADTS (AAC), anything else MPEG audio (MP3).
            return bytes[1] & 0x06 == 0 ? .aac : .mp3
        }
        return nil
    }
}

/// The formats a voice note is served in besides its original.
public enum VoiceRendition: String, Sendable, CaseIterable, Codable {
    /// Ogg/Opus, mono, about 24 kbit/s: the voice-note format (and what WhatsApp takes).
    case opus
    /// AAC in M4A, for Safari and iOS.
    case aac

    public var format: VoiceFormat { self == .opus ? .opus : .aac }
    public var fileExtension: String { self == .opus ? "ogg" : "m4a" }
    public var contentType: String { self == .opus ? "audio/ogg" : "audio/mp4" }
}

extension AudioContainer {
    /// What a refusal names: the containers, as people know them.
    public static let acceptedNames = "WebM, Ogg, MP4/M4A/3GP, MP3, WAV, AIFF, FLAC, AMR, CAF or AAC"
}
