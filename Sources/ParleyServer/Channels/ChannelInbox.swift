import Crypto
import Foundation
import Logging
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// What every provider's inbound side shares: the customer by their id at the provider, text lines
/// appended to their conversation (idempotent on the provider's message id), and media fetched
/// from the provider into the same pipelines as a browser upload.
struct ChannelInbox: Sendable {
    let store: Store
    let conversations: ConversationService
    let voice: VoiceService
    let attachments: AttachmentService
    let blobs: any BlobStore
    let http: ProviderHTTP
    let clock: any WallClock
    let logger: Logger

    /// The customer, by their id at the provider within the brand (`externalId` `<channel>:<id>`),
    /// created on their first message; a name the provider gives later replaces the placeholder.
    func consumer(
        _ channel: Channel, providerUserId: String, name: String?, placeholder: String, phone: String? = nil,
        connection: ChannelConnectionRecord
    ) async throws -> ConsumerDTO {
        let externalId = "\(channel.rawValue):\(providerUserId)"
        let cleanName = name.flatMap { try? IdentityRules.validateName($0, field: "name") }
        return try await withUniqueRetry {
            try await store.write { repo in
                if var existing = try await repo.consumer(brandId: connection.brandId, externalId: externalId) {
                    if let cleanName, cleanName != existing.displayName {
                        existing.displayName = cleanName
                        try await repo.updateConsumer(existing)
                    }
                    return existing
                }
                let created = ConsumerDTO(
                    id: .make(), brandId: connection.brandId, appId: connection.appId, externalId: externalId,
                    displayName: cleanName ?? placeholder, anonymous: false, createdAt: clock.now(), phone: phone)
                try await repo.insertConsumer(created)
                return created
            }
        }
    }

    /// Whether the customer's message with this provider id is stored already (a redelivery).
    func alreadyStored(_ consumerId: ConsumerID, providerMessageId: String) async throws -> Bool {
        try await store.read { repo in try await repo.message(senderId: consumerId.rawValue, clientMessageId: providerMessageId) } != nil
    }

    /// A text from the customer (or a line saying what arrived), cut to the channel's length.
    func appendText(_ text: String, channel: Channel, providerMessageId: String, _ principal: ConsumerPrincipal) async throws {
        let limit = ChannelRules.of(channel).maxTextFromConsumer
        let request = SendMessageRequest(clientMessageId: providerMessageId, text: String(text.prefix(limit)), channel: channel)
        _ = try await conversations.send(.consumer(principal), request, content: .text(request.text))
    }

    enum MediaKind: String, Codable, Sendable {
        case audio, image, file

        var noun: String {
            switch self {
            case .audio: "voice message"
            case .image: "image"
            case .file: "file"
            }
        }
    }

    /// The most a customer's media of this kind may weigh for the brand.
    func cap(_ kind: MediaKind, brandId: BrandID) async throws -> Int {
        if kind == .audio { return voice.maxUploadBytes }
        let settings = try await store.read { repo in try await repo.brandSettings(brandId: brandId) }
        return attachments.cap(settings)
    }

    /// Fetches `url` (only from `allowed`, at most `cap` bytes, within the provider timeout) and hands
    /// the file to the voice or attachment pipeline. What cannot be accepted becomes a line for the
    /// agent; what may work later throws `JobFailure.retry`.
    func ingest(
        url: String, headers: HTTPHeaders, allowed: MediaHostAllowList, kind: MediaKind, fileName: String?, cap: Int,
        channel: Channel, providerMessageId: String, _ principal: ConsumerPrincipal, redirects: Int = 0,
        decrypt: (@Sendable (URL) throws -> Int)? = nil
    ) async throws {
        let provider = Self.providerName(channel)
        let line = { (text: String) in
            try await self.appendText("[\(provider) \(kind.noun) \(text)]", channel: channel, providerMessageId: providerMessageId, principal)
        }
        let partial = blobs.scratchFile()
        defer { try? FileManager.default.removeItem(at: partial) }
        let fetched: (status: Int, bytes: Int, contentType: String?)
        do {
            fetched = try await http.download(url, headers: headers, allowed: allowed, maxBytes: cap, into: partial, redirects: redirects)
        } catch let failure as ProviderHTTP.Failure {
            switch failure {
            case .hostNotAllowed(let host):
                logger.warning("a media URL on a host that is not allowed was refused", metadata: ["host": "\(host)", "channel": "\(channel)"])
                return try await line("not fetched: its address is not on \(channel == .sms ? "Twilio" : provider)'s media host")
            case .tooLarge:
                return try await line("not accepted: it is larger than \(Self.size(cap))")
            case .unreachable, .noAnswer:
                throw JobFailure.retry(failure.description)
            }
        }
        guard (200..<300).contains(fetched.status) else {
            if fetched.status == 429 || fetched.status >= 500 || fetched.status == 404 {
                // 404: a short-lived URL expired; the next attempt may get a new one.
                throw JobFailure.retry("the media host answered \(fetched.status)")
            }
            return try await line("could not be fetched (HTTP \(fetched.status))")
        }
        guard fetched.bytes > 0 else { return try await line("arrived empty") }
        var size = fetched.bytes
        if let decrypt {
            do {
                size = try decrypt(partial)
            } catch {
                return try await line("could not be decrypted")
            }
        }
        do {
            if kind == .audio {
                _ = try await voice.receiveFromChannel(principal, clientMessageId: providerMessageId, file: partial, size: size)
            } else {
                _ = try await attachments.receiveFromChannel(
                    principal, clientMessageId: providerMessageId, file: partial, size: size, fileName: fileName)
            }
        } catch let error as ParleyError where error.kind == .unavailable || error.kind == .rateLimited {
            throw JobFailure.retry(error.message)  // busy, or the scanner is away: later
        } catch let error as ParleyError {
            try await line("not accepted: \(error.message)")
        }
    }

    /// "12 MB", or "512 KB" under a megabyte.
    static func size(_ bytes: Int) -> String {
        bytes >= 1024 * 1024 ? "\(bytes / (1024 * 1024)) MB" : "\(max(1, bytes / 1024)) KB"
    }

    static func providerName(_ channel: Channel) -> String {
        switch channel {
        case .whatsapp: "WhatsApp"
        case .messenger: "Messenger"
        case .apple: "Apple Messages"
        case .sms: "SMS"
        case .web: "web"
        case .inApp: "in-app"
        }
    }
}

/// Meta's webhooks (WhatsApp and Messenger): the subscription handshake and `X-Hub-Signature-256`.
enum MetaWebhook {
    /// The challenge back when the mode is `subscribe` and the token is the app's; otherwise 403
    /// (an unknown app gets the same answer, so ids cannot be probed).
    static func verify(mode: String?, token: String?, challenge: String?, expected: String?) throws -> String {
        guard mode == "subscribe", let token, let challenge, challenge.count <= 256, let expected,
            Data(token.utf8).constantTimeEquals(Data(expected.utf8))
        else { throw ParleyError(.forbidden, code: .verificationFailed, message: "The verify token does not match.") }
        return challenge
    }

    /// `sha256=<hex HMAC-SHA256 of the raw body with the app secret>`, checked before the body is
    /// parsed; a missing or wrong one is `401 invalid_signature` (the body is never logged).
    static func checkSignature(_ header: String?, body: Data, appSecret: String?, app: AppID, metrics: ParleyMetrics, logger: Logger) throws {
        guard let header, header.hasPrefix("sha256="), let expected = Data(hex: String(header.dropFirst(7))), let appSecret,
            HMAC<SHA256>.isValidAuthenticationCode(expected, authenticating: body, using: SymmetricKey(data: Data(appSecret.utf8)))
        else {
            logger.notice("refused a webhook without a valid signature", metadata: ["app": "\(app)"])
            metrics.webhooksRefused.increment()
            throw ParleyError(.unauthorized, code: .invalidSignature, message: "The X-Hub-Signature-256 header is missing or wrong.")
        }
    }

    /// The body's hash, the dedupe key of its processing job (a retry of a notification not yet
    /// processed is not queued twice).
    static func digest(_ body: Data) -> String {
        SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
    }
}

/// Connecting an app to a provider, the same for every provider: the admin, the provider's id for
/// the brand's account (digits), the secrets (8-1024 characters without spaces, sealed), an app on
/// the provider's channel, one app per provider account.
struct ChannelConnector: Sendable {
    let store: Store
    let secrets: SecretBox
    let clock: any WallClock

    /// Stores the connection (keeping the settings of an earlier one) and returns the stored record.
    func connect<Secrets: Encodable>(
        _ admin: AgentPrincipal, appId: AppID, channel: Channel, externalId: (field: String, value: String, what: String),
        digits: Bool = true, secrets values: [(field: String, value: String)], sealing: Secrets, takenCode: ErrorCode
    ) async throws -> ChannelConnectionRecord {
        try admin.require(.admin)
        if digits {
            guard !externalId.value.isEmpty, externalId.value.count <= 32, externalId.value.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw ParleyError.invalidField(externalId.field, "'\(externalId.field)' is the digits of \(externalId.what).")
            }
        } else {
            // An identifier such as Apple's business id (a UUID): letters, digits, '-', ':', '.', '_'.
            guard (1...128).contains(externalId.value.count),
                externalId.value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-:._".contains($0)) })
            else {
                throw ParleyError.invalidField(externalId.field, "'\(externalId.field)' is \(externalId.what) (letters, digits, - : . _).")
            }
        }
        for (field, value) in values {
            guard (8...1024).contains(value.utf8.count), !value.contains(where: { $0.isWhitespace }) else {
                throw ParleyError.invalidField(field, "'\(field)' is 8-1024 characters without spaces.")
            }
        }
        let sealed = try secrets.seal(String(decoding: try JSONEncoder().encode(sealing), as: UTF8.self))
        let now = clock.now()
        do {
            return try await store.write { repo in
                guard let app = try await repo.app(id: appId), app.brandId == admin.brandId else { throw ParleyError.notFound("App") }
                guard app.channel == channel else {
                    throw ParleyError(
                        .conflict, code: .appNot(channel),
                        message: "This app is on the \(app.channel.rawValue) channel; connect an app created for \(channel.rawValue).")
                }
                let existing = try await repo.channelConnection(appId: appId)
                let record = ChannelConnectionRecord(
                    appId: appId, brandId: admin.brandId, channel: channel, externalId: externalId.value, sealedSecrets: sealed,
                    createdAt: existing?.createdAt ?? now, updatedAt: now, settings: existing?.settings)
                try await repo.saveChannelConnection(record)
                return record
            }
        } catch where isUniqueViolation(error) {
            throw ParleyError(
                .conflict, code: takenCode, message: "Another app is connected to this \(externalId.what).", field: externalId.field)
        }
    }

    /// The app's connection on `channel`, for an admin of its brand (`404` otherwise).
    func record(_ admin: AgentPrincipal, appId: AppID, channel: Channel) async throws -> ChannelConnectionRecord {
        try admin.require(.admin)
        guard let record = try await store.read({ repo in try await repo.channelConnection(appId: appId) }), record.brandId == admin.brandId,
            record.channel == channel
        else { throw ParleyError.notFound("Channel connection") }
        return record
    }

    /// The app's connection on `channel` and its opened secrets, or nil.
    func opened<Secrets: Decodable>(_ appId: AppID, channel: Channel, as type: Secrets.Type) async throws -> (ChannelConnectionRecord, Secrets)? {
        guard let record = try await store.read({ repo in try await repo.channelConnection(appId: appId) }), record.channel == channel else {
            return nil
        }
        return (record, try JSONDecoder().decode(Secrets.self, from: Data(try secrets.open(record.sealedSecrets).utf8)))
    }
}

/// What an outbound connector sends for a voice note or an attachment: the stored file, once the
/// voice note's renditions are ready.
enum OutboundMedia {
    static func voice(_ message: MessageDTO, brandId: BrandID, rendition: VoiceRendition, store: Store, blobs: any BlobStore) async throws -> Data {
        guard let record = try await store.read({ repo in try await repo.voice(messageId: message.id, brandId: brandId) }) else {
            throw JobFailure.permanent("the voice note is gone")
        }
        switch record.state {
        case .processing: throw JobFailure.notYet(after: .seconds(1))
        case .failed, .blocked:
            throw DeliveryRefused(code: ErrorCode.voiceUnavailable.rawValue, message: "The voice note could not be converted, so it was not sent.", retryable: false)
        case .ready: break
        }
        guard let (key, _) = record.rendition(rendition), let data = try await blobs.get(key: key) else {
            throw JobFailure.permanent("the voice note's \(rendition == .opus ? "Ogg/Opus" : "AAC") rendition is missing")
        }
        return data
    }

    static func attachment(_ message: MessageDTO, brandId: BrandID, store: Store, blobs: any BlobStore) async throws -> (AttachmentRecord, Data) {
        guard let record = try await store.read({ repo in try await repo.attachment(messageId: message.id, brandId: brandId) }),
            let data = try await blobs.get(key: record.originalKey)
        else { throw JobFailure.permanent("the attachment is gone") }
        return (record, data)
    }

    /// The customer's id at the provider (`<channel>:<id>` external id), or a refusal.
    static func recipient(_ conversation: ConversationDTO, channel: Channel, store: Store) async throws -> String {
        let consumer = try await store.read { repo in try await repo.consumer(brandId: conversation.brandId, id: conversation.consumerId) }
        let prefix = "\(channel.rawValue):"
        guard let externalId = consumer?.externalId, externalId.hasPrefix(prefix) else {
            throw DeliveryRefused(
                code: ErrorCode.noRecipient.rawValue, message: "This customer has no \(ChannelInbox.providerName(channel)) id.", retryable: false)
        }
        return String(externalId.dropFirst(prefix.count))
    }
}
