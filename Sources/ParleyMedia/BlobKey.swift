import Foundation

/// Where a stored file lives: the one place the blob store's keys are spelled. A key is
/// `[a-z0-9_-]` segments separated by `/` (`LocalBlobStore.isValidKey`); a message's media sits
/// in a folder of its own under its kind and brand (`voice/BRAND/MESSAGE/...`), so that erasing a
/// message (or sweeping media no row refers to) removes a folder.
public struct BlobKey: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// The folders a message's media is kept under, by kind.
    public enum Kind: String, Sendable, CaseIterable {
        /// A voice note's original and its renditions.
        case voice
        /// A voice note's original the malware scan blocked, kept out of reach.
        case quarantinedVoice = "quarantine/voice"
        /// An image or a file, and an image's thumbnail.
        case files
    }

    private static func message(_ kind: Kind, brandId: String, messageId: String, _ name: String) -> BlobKey {
        BlobKey(rawValue: "\(kind.rawValue)/\(brandId)/\(messageId)/\(name)")
    }

    /// A voice note as it was uploaded or fetched (`original.webm`, `original.ogg`...).
    public static func voiceOriginal(brandId: String, messageId: String, fileExtension: String) -> BlobKey {
        message(.voice, brandId: brandId, messageId: messageId, "original.\(fileExtension)")
    }

    /// One of a voice note's renditions (`voice.ogg`, `voice.m4a`).
    public static func voiceRendition(brandId: String, messageId: String, fileExtension: String) -> BlobKey {
        message(.voice, brandId: brandId, messageId: messageId, "voice.\(fileExtension)")
    }

    /// An image or a file as it was sent.
    public static func attachment(brandId: String, messageId: String, fileExtension: String) -> BlobKey {
        message(.files, brandId: brandId, messageId: messageId, "original.\(fileExtension)")
    }

    /// An image's thumbnail.
    public static func thumbnail(brandId: String, messageId: String) -> BlobKey {
        message(.files, brandId: brandId, messageId: messageId, "thumbnail.jpg")
    }

    /// A version of the brand's logo (a new logo is a new version: its URL changes with it).
    public static func logo(brandId: String, version: Int) -> BlobKey {
        BlobKey(rawValue: "logos/\(brandId)/\(version).png")
    }

    /// The folders that hold one message's media, of every kind.
    public static func messageFolders(brandId: String, messageId: String) -> [String] {
        Kind.allCases.map { "\($0.rawValue)/\(brandId)/\(messageId)" }
    }

    private static let quarantine = "quarantine/"

    /// Where a blocked voice note's original goes.
    public var quarantined: BlobKey { isQuarantined ? self : BlobKey(rawValue: Self.quarantine + rawValue) }
    public var isQuarantined: Bool { rawValue.hasPrefix(Self.quarantine) }

    /// A message folder's kind, brand and message, from the folder (`voice/BRAND/MESSAGE`).
    public static func messageFolder(_ folder: String) -> (kind: Kind, brandId: String, messageId: String)? {
        let segments = folder.split(separator: "/").map(String.init)
        guard segments.count >= 3, let kind = Kind(rawValue: segments.dropLast(2).joined(separator: "/")) else { return nil }
        return (kind, segments[segments.count - 2], segments[segments.count - 1])
    }
}
