import Foundation
import Hummingbird
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Images and files from consumers and agents: the same streaming upload, size cap, pace limits,
/// idempotency and malware scan as voice notes; the type from the bytes against the brand's
/// allow-list; a thumbnail for images; then one message in the conversation's log.
public struct AttachmentService: Sendable {
    /// Attachments, the messages that carry them, and who may see them.
    typealias Stores = any AttachmentStore & ConversationStore & IdentityStore

    let store: StoreAccess<Stores>
    let blobs: any BlobStore
    let conversations: ConversationService
    let scanning: MalwareScanning
    let thumbnailer: ImageThumbnailer?
    /// The logo is a brand setting: written through its owner.
    let brandSettings: BrandSettingsService
    /// The server's cap, whatever a brand allows.
    let maxUploadBytes: Int
    let receiver: UploadReceiver
    let thumbnails: WorkSlots
    let uploads: UploadGate
    let limits: RateLimits
    let clock: any WallClock
    let logger: Logger

    /// The steps at the door (`MediaIntake`), with an attachment's rules: the brand takes
    /// attachments, its size cap within the server's.
    var intake: MediaIntake {
        let store = store
        return MediaIntake(
            settings: { brandId in try await store.read { repo in try await repo.brandSettings(brandId: brandId) } },
            conversations: conversations, blobs: blobs, receiver: receiver, uploads: uploads, limits: limits)
    }

    var rules: MediaIntake.Rules {
        let maxUploadBytes = maxUploadBytes
        let cap: @Sendable (BrandSettingsDTO) -> Int = { settings in min(maxUploadBytes, settings.attachmentMaxMegabytes * 1024 * 1024) }
        return MediaIntake.Rules(
            kind: .attachment,
            authorize: { _, settings in
                if settings.attachmentGroups.isEmpty {
                    throw ParleyError(.forbidden, code: .attachmentsDisabled, message: "This brand does not accept attachments.")
                }
            },
            cap: cap,
            tooLarge: { settings in AttachmentRules.tooLarge(megabytes: cap(settings) / (1024 * 1024)) },
            empty: "The attachment has no bytes.", emptyCode: .emptyAttachment)
    }

    public func upload(
        _ principal: Principal, clientMessageId: String, conversationId: ConversationID?, fileName: String?, contentLength: Int?,
        body: RequestBody, clientAddress: String? = nil
    ) async throws -> SendMessageResponse {
        try await intake.upload(
            principal, clientMessageId: clientMessageId, conversationId: conversationId, contentLength: contentLength, body: body,
            clientAddress: clientAddress, rules: rules
        ) { received in try await ingest(received, fileName: fileName) }
    }

    /// The largest attachment the brand accepts (within the server's cap).
    func cap(_ settings: BrandSettingsDTO) -> Int { rules.cap(settings) }

    /// An image or file a messaging channel delivered (fetched from the provider into `file`): the
    /// same type check, brand rules, scan and thumbnail as an upload.
    func receiveFromChannel(
        _ consumer: ConsumerPrincipal, clientMessageId: String, file: URL, size: Int, fileName: String?
    ) async throws -> SendMessageResponse {
        try await intake.fromChannel(consumer, clientMessageId: clientMessageId, file: file, size: size, rules: rules) { received in
            try await ingest(received, fileName: fileName)
        }
    }

    /// Type, brand rules, scan, thumbnail, then the message.
    private func ingest(_ received: MediaIntake.Received, fileName: String?) async throws -> SendMessageResponse {
        let (partial, size, principal, request, settings) = (received.file, received.size, received.principal, received.request, received.settings)
        let header = try FileHandle(forReadingFrom: partial).readToEndLimited(AttachmentRules.headerLength)
        guard let type = AttachmentRules.sniff([UInt8](header)) else {
            throw ParleyError(
                .unsupportedMediaType, code: .unsupportedAttachment,
                message: "This kind of file is not accepted. Send an image (JPEG, PNG, GIF, WebP, HEIC), a PDF, plain text or an Office document.")
        }
        try AttachmentRules.authorize(type, bytes: size, settings: settings)

        // The scan comes before any decoder touches the bytes. Unlike a voice note, an attachment
        // is not kept while the scanner is away: the sender is told to try again (nothing was
        // acknowledged, so nothing is lost).
        let outcome = await scanning.scanUpload(partial, policy: settings.scanFailurePolicy)
        switch outcome.scan {
        case .infected:
            throw ParleyError(
                .unprocessable, code: .attachmentBlocked, message: "The malware scan found \(outcome.detail ?? "malware") in this file; it was not sent.")
        case .pending, .failed:
            throw ParleyError(
                .unavailable, code: .scanUnavailable, message: "The malware scanner is unavailable; send the file again in a moment.")
        case .clean, .unscanned:
            break
        }

        let messageId = MessageID.make()
        var (width, height, thumbnailKey, thumbnailBytes): (Int?, Int?, String?, Int?) = (nil, nil, nil, nil)
        if type.isImage {
            guard let thumbnailer else {
                throw ParleyError(.unavailable, code: .imagesUnavailable, message: "Images are unavailable: the server has no ffmpeg.")
            }
            let thumbnailFile = blobs.scratchFile()
            defer { try? FileManager.default.removeItem(at: thumbnailFile) }
            let made: ImageThumbnailer.Result
            do {
                made = try await thumbnails.run { try await thumbnailer.thumbnail(of: partial, type: type, into: thumbnailFile) }
            } catch ImageThumbnailer.Failure.tooManyPixels(let w, let h) {
                throw ParleyError(
                    .unprocessable, code: .imageTooLarge,
                    message: "The image is \(w) x \(h) pixels; at most \(AttachmentRules.maxImagePixels / 1_000_000) megapixels are accepted.")
            } catch ImageThumbnailer.Failure.undecodable {
                throw ParleyError(.unprocessable, code: .corruptImage, message: "The image is damaged and cannot be shown.")
            }
            (width, height) = (made.width, made.height)
            if let thumbnail = made.thumbnail {
                let key = BlobKey.thumbnail(brandId: principal.brandId.rawValue, messageId: messageId.rawValue).rawValue
                thumbnailBytes = (try FileManager.default.attributesOfItem(atPath: thumbnail.path)[.size] as? Int) ?? 0
                try await blobs.putFile(thumbnail, key: key)
                thumbnailKey = key
            }
        }
        let originalKey = BlobKey.attachment(
            brandId: principal.brandId.rawValue, messageId: messageId.rawValue, fileExtension: AttachmentRules.defaultExtension(type)).rawValue
        try await blobs.putFile(partial, key: originalKey)
        let record = AttachmentRecord(
            messageId: messageId, brandId: principal.brandId, type: type, fileName: AttachmentRules.cleanFileName(fileName, type: type),
            bytes: size, width: width, height: height, originalKey: originalKey, thumbnailKey: thumbnailKey, thumbnailBytes: thumbnailBytes,
            scan: outcome.scan, createdAt: clock.now())
        let response: SendMessageResponse
        do {
            response = try await conversations.send(principal, request, content: .attachment(record))
        } catch {
            await removeFiles(record)
            throw error
        }
        if !response.created { await removeFiles(record) }  // lost a race with its own retry: keep the first
        return response
    }

    private func removeFiles(_ record: AttachmentRecord) async {
        try? await blobs.delete(key: record.originalKey)
        if let key = record.thumbnailKey { try? await blobs.delete(key: key) }
    }

    /// A stored attachment's file (or thumbnail), if the principal may see its conversation.
    public func file(_ principal: Principal, messageId: MessageID, thumbnail: Bool) async throws -> (key: String, contentType: String, bytes: Int, record: AttachmentRecord) {
        let (message, record) = try await store.read { repo -> (MessageDTO?, AttachmentRecord?) in
            guard let message = try await repo.message(brandId: principal.brandId, id: messageId) else { return (nil, nil) }
            return (message, try await repo.attachment(messageId: messageId, brandId: principal.brandId))
        }
        guard let message, let record else { throw ParleyError.notFound("Attachment") }
        _ = try await conversations.conversation(principal, id: message.conversationId)  // a consumer's own only
        if thumbnail {
            guard let key = record.thumbnailKey, let bytes = record.thumbnailBytes else { throw ParleyError.notFound("Thumbnail") }
            return (key, "image/jpeg", bytes, record)
        }
        return (record.originalKey, record.type.contentType, record.bytes, record)
    }
}

// MARK: - The brand's logo

extension AttachmentService {
    static let maxLogoBytes = 2 * 1024 * 1024

    /// A new logo from an admin: any accepted image up to 2 MB, stored as a PNG at most 256 px wide.
    public func setLogo(_ admin: AgentPrincipal, contentLength: Int?, body: RequestBody) async throws -> BrandSettingsDTO {
        try admin.require(.admin)
        let tooLarge = ParleyError(.payloadTooLarge, code: .logoTooLarge, message: "A logo is at most 2 MB.")
        if let contentLength, contentLength > Self.maxLogoBytes { throw tooLarge }
        guard let thumbnailer else {
            throw ParleyError(.unavailable, code: .imagesUnavailable, message: "Images are unavailable: the server has no ffmpeg.")
        }
        let partial = blobs.scratchFile()
        defer { try? FileManager.default.removeItem(at: partial) }
        _ = try await receiver.receiveWhole(
            body, into: partial, maxBytes: Self.maxLogoBytes, tooLarge: tooLarge, empty: "The logo has no bytes.", emptyCode: .emptyAttachment)
        let header = try FileHandle(forReadingFrom: partial).readToEndLimited(AttachmentRules.headerLength)
        guard let type = AttachmentRules.sniff([UInt8](header)), type.isImage, type != .heic else {
            throw ParleyError(.unsupportedMediaType, code: .unsupportedImage, message: "A logo is a PNG, JPEG, GIF or WebP image.")
        }
        let png = blobs.scratchFile()
        defer { try? FileManager.default.removeItem(at: png) }
        do {
            try await thumbnails.run { try await thumbnailer.logo(of: partial, type: type, into: png) }
        } catch ImageThumbnailer.Failure.tooManyPixels {
            throw ParleyError(.unprocessable, code: .imageTooLarge, message: "The image has more than 40 megapixels.")
        } catch ImageThumbnailer.Failure.undecodable {
            throw ParleyError(.unprocessable, code: .corruptImage, message: "The image is damaged and cannot be shown.")
        }
        let (blobs, brandId) = (blobs, admin.brandId)
        let (settings, previous) = try await brandSettings.change(brandId: brandId) { settings -> String? in
            let previous = settings.logoUrl
            let version = MediaPaths.logoVersion(of: previous) + 1
            try await blobs.putFile(png, key: Self.logoKey(brandId, version))
            settings.logoUrl = MediaPaths.logo(brandId: brandId, version: version)
            return previous
        }
        if let previous { try? await blobs.delete(key: Self.logoKey(admin.brandId, MediaPaths.logoVersion(of: previous))) }
        return settings
    }

    public func removeLogo(_ admin: AgentPrincipal) async throws -> BrandSettingsDTO {
        try admin.require(.admin)
        let (settings, previous) = try await brandSettings.change(brandId: admin.brandId) { settings -> String? in
            let previous = settings.logoUrl
            settings.logoUrl = nil
            return previous
        }
        if let previous { try? await blobs.delete(key: Self.logoKey(admin.brandId, MediaPaths.logoVersion(of: previous))) }
        return settings
    }

    /// The brand's current logo, public (it is shown on the brand's pages).
    public func logo(brandId: BrandID) async throws -> (key: String, bytes: Int, version: Int) {
        let settings = try await store.read { repo in try await repo.brandSettings(brandId: brandId) }
        guard let url = settings.logoUrl else { throw ParleyError.notFound("Logo") }
        let version = MediaPaths.logoVersion(of: url)
        let key = Self.logoKey(brandId, version)
        guard let bytes = try await blobs.size(key: key) else { throw ParleyError.notFound("Logo") }
        return (key, bytes, version)
    }

    static func logoKey(_ brandId: BrandID, _ version: Int) -> String { BlobKey.logo(brandId: brandId.rawValue, version: version).rawValue }
}
