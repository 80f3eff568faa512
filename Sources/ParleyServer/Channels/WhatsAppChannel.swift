import Crypto
import Foundation
import NIOHTTP1
import ParleyMedia
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// WhatsApp Business Platform (Cloud API), inbound: connecting an app, the webhook's verification
/// handshake, and signed message notifications appended to the customer's conversation.
///
/// The contract is Meta's "messages webhook reference"
/// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages)
/// and "Create a webhook endpoint" (`hub.mode`, `hub.verify_token`, `hub.challenge`;
/// `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body with the app secret>`).
public struct WhatsAppChannel: Sendable {
    let store: Store
    let secrets: SecretBox
    let connector: ChannelConnector
    let conversations: ConversationService
    let inbox: ChannelInbox
    let blobs: any BlobStore
    let jobs: JobQueue
    let api: WhatsAppAPI
    let mediaHosts: MediaHostAllowList
    let metrics: ParleyMetrics
    let clock: any WallClock
    let logger: Logger

    /// Jobs: a verified webhook body, processed after Meta has its 200; one received media fetch.
    static let webhookJob = "whatsapp.webhook"
    static let mediaJob = "whatsapp.media"
    /// Most templates per connection.
    static let maxTemplates = 100

    /// Largest webhook body read; Meta batches notifications, each a few kilobytes.
    static let maxWebhookBytes = 1024 * 1024

    struct Secrets: Codable {
        var verifyToken: String
        var appSecret: String
        var accessToken: String
    }

    static func webhookPath(_ appId: AppID) -> String { "/v1/webhooks/whatsapp/\(appId)" }

    // MARK: Connecting

    public func connect(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectWhatsAppRequest) async throws -> ChannelConnectionDTO {
        Self.dto(try await connector.connect(
            admin, appId: appId, channel: .whatsapp,
            externalId: ("phoneNumberId", request.phoneNumberId, "the phone number's id in WhatsApp Manager"),
            secrets: [("verifyToken", request.verifyToken), ("appSecret", request.appSecret), ("accessToken", request.accessToken)],
            sealing: Secrets(verifyToken: request.verifyToken, appSecret: request.appSecret, accessToken: request.accessToken),
            takenCode: .phoneNumberTaken))
    }

    public func connection(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelConnectionDTO {
        try admin.require(.admin)
        guard let record = try await store.read({ repo in try await repo.channelConnection(appId: appId) }), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        return Self.dto(record)
    }

    /// The brand's connected apps (admins): what the Settings page lists.
    public func connections(_ admin: AgentPrincipal) async throws -> [ChannelConnectionDTO] {
        try admin.require(.admin)
        return try await store.read { repo in try await repo.channelConnections(brandId: admin.brandId) }.map { record in
            switch record.channel {
            case .messenger: MessengerChannel.dto(record)
            case .sms: SMSChannel.dto(record)
            case .apple: AppleChannel.dto(record)
            default: Self.dto(record)
            }
        }
    }

    static func dto(_ record: ChannelConnectionRecord) -> ChannelConnectionDTO {
        ChannelConnectionDTO(
            appId: record.appId, channel: record.channel, externalId: record.externalId, webhookPath: webhookPath(record.appId),
            createdAt: record.createdAt, updatedAt: record.updatedAt, templates: templates(of: record))
    }

    static func templates(of record: ChannelConnectionRecord) -> [WhatsAppTemplateDTO] {
        guard let settings = record.settings, let stored = try? JSONDecoder().decode(WhatsAppTemplatesRequest.self, from: Data(settings.utf8)) else {
            return []
        }
        return stored.templates
    }

    /// Replaces the connection's templates (as approved in WhatsApp Manager).
    public func setTemplates(_ admin: AgentPrincipal, appId: AppID, _ request: WhatsAppTemplatesRequest) async throws -> ChannelConnectionDTO {
        try admin.require(.admin)
        guard request.templates.count <= Self.maxTemplates else {
            throw ParleyError.invalidField("templates", "At most \(Self.maxTemplates) templates.")
        }
        var seen: Set<String> = []
        for template in request.templates {
            guard (1...512).contains(template.name.count), template.name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else {
                throw ParleyError.invalidField("templates", "A template's name is its name at Meta: lowercase letters, digits and _.")
            }
            guard (2...15).contains(template.language.count), template.language.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "_") }) else {
                throw ParleyError.invalidField("templates", "A template's language is Meta's code, like en_US.")
            }
            guard (1...1024).contains(template.body.count) else {
                throw ParleyError.invalidField("templates", "A template's body is 1-1024 characters.")
            }
            guard seen.insert("\(template.name)/\(template.language)").inserted else {
                throw ParleyError.invalidField("templates", "'\(template.name)' in \(template.language) is listed twice.")
            }
        }
        let settings = String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
        return try await store.write { repo in
            guard var record = try await repo.channelConnection(appId: appId), record.brandId == admin.brandId else {
                throw ParleyError.notFound("Channel connection")
            }
            record.settings = settings
            record.updatedAt = clock.now()
            try await repo.saveChannelConnection(record)
            return Self.dto(record)
        }
    }

    /// The templates an agent may send in a conversation (its app's, on WhatsApp; none elsewhere).
    public func templates(_ agent: AgentPrincipal, conversationId: ConversationID) async throws -> [WhatsAppTemplateDTO] {
        let conversation = try await conversations.conversation(.agent(agent), id: conversationId)
        guard conversation.channel == .whatsapp,
            let record = try await store.read({ repo in try await repo.channelConnection(appId: conversation.appId) }), record.brandId == agent.brandId
        else { return [] }
        return Self.templates(of: record)
    }

    /// An agent sends one of the connection's templates (the only message WhatsApp takes once the
    /// customer's 24-hour window has closed). The parameters fill `{{1}}`, `{{2}}`...; the filled
    /// body is the message's text.
    public func sendTemplate(
        _ agent: AgentPrincipal, conversationId: ConversationID, _ request: SendTemplateRequest
    ) async throws -> SendMessageResponse {
        let conversation = try await conversations.conversation(.agent(agent), id: conversationId)
        guard conversation.channel == .whatsapp else {
            throw ParleyError(.unprocessable, code: .templatesNotSupported, message: "Templates are sent on WhatsApp only.")
        }
        let record = try await store.read { repo in try await repo.channelConnection(appId: conversation.appId) }
        guard let record, record.brandId == agent.brandId,
            let template = Self.templates(of: record).first(where: { $0.name == request.name && $0.language == request.language })
        else {
            throw ParleyError(.notFound, code: .templateNotFound, message: "No template '\(request.name)' in \(request.language) is set up for this app.")
        }
        guard request.parameters.count == template.parameterCount else {
            throw ParleyError.invalidField("parameters", "This template takes \(template.parameterCount) parameters.")
        }
        for parameter in request.parameters {
            // WhatsApp refuses parameters with new lines, tabs or more than four spaces in a row.
            guard (1...1024).contains(parameter.count), !parameter.contains(where: { $0 == "\n" || $0 == "\t" || $0 == "\r" }),
                !parameter.contains("     ")
            else {
                throw ParleyError.invalidField("parameters", "A parameter is 1-1024 characters without new lines, tabs or runs of spaces.")
            }
        }
        let message = SendMessageRequest(clientMessageId: request.clientMessageId, text: template.filled(request.parameters), conversationId: conversationId)
        return try await conversations.send(.agent(agent), message, content: .template(template, parameters: request.parameters))
    }

    /// "Test connection": asks the Cloud API for the phone number with the stored token.
    public func test(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelTestDTO {
        try admin.require(.admin)
        guard let (record, secrets) = try await secrets(of: appId), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        do {
            let number = try await api.phoneNumber(phoneNumberId: record.externalId, token: secrets.accessToken)
            let name = [number.verifiedName, number.displayPhoneNumber].compactMap { $0 }.joined(separator: ", ")
            return ChannelTestDTO(ok: true, message: name.isEmpty ? "WhatsApp answered: the connection works." : "Connected to \(name).")
        } catch let refused as DeliveryRefused {
            return ChannelTestDTO(ok: false, message: refused.message, errorCode: refused.code)
        } catch let failure as JobFailure {
            if case .retry(let reason, _) = failure {
                return ChannelTestDTO(ok: false, message: "WhatsApp could not be reached (\(reason)).", errorCode: ErrorCode.unreachable.rawValue)
            }
            return ChannelTestDTO(ok: false, message: "WhatsApp answered with something Parley does not understand.", errorCode: ErrorCode.unexpectedAnswer.rawValue)
        }
    }

    /// Seals every connection's secrets with the current key (after a key rotation; the previous
    /// keys open them). Returns how many were re-sealed.
    func secrets(of appId: AppID) async throws -> (ChannelConnectionRecord, Secrets)? {
        try await connector.opened(appId, channel: .whatsapp, as: Secrets.self)
    }

    // MARK: Webhook

    /// The subscription handshake: the challenge back when the mode is `subscribe` and the token is
    /// the app's; otherwise 403 (an unknown app gets the same answer, so ids cannot be probed).
    public func verify(appId: AppID, mode: String?, token: String?, challenge: String?) async throws -> String {
        try MetaWebhook.verify(mode: mode, token: token, challenge: challenge, expected: try await secrets(of: appId)?.1.verifyToken)
    }

    /// A signed notification. The signature is checked before the body is even parsed; a bad or
    /// missing one is refused with 401 and nothing is stored (the body is never logged). A good one
    /// is stored as a job and answered at once (Meta wants its 200 quickly and retries otherwise);
    /// the job appends its messages, each with its `wamid` as the client message id, so Meta's
    /// retries are answered with the stored message, never a second one.
    public func receive(appId: AppID, signature: String?, body: Data) async throws {
        let connection = try await secrets(of: appId)
        try MetaWebhook.checkSignature(signature, body: body, appSecret: connection?.1.appSecret, app: appId, metrics: metrics, logger: logger)
        guard let (record, _) = connection, (try? JSONDecoder().decode(WhatsAppNotification.self, from: body)) != nil else {
            throw ParleyError(.badRequest, code: .invalidJson, message: "The notification is not the Cloud API's JSON.")
        }
        // One lane per app: notifications are processed in the order they arrived.
        try await jobs.enqueue(
            Self.webhookJob, WebhookJob(appId: appId, body: String(decoding: body, as: UTF8.self)), brandId: record.brandId,
            lane: "in:\(appId)", dedupeKey: "whatsapp:\(appId):\(MetaWebhook.digest(body))")
    }

    struct WebhookJob: Codable, Sendable {
        var appId: AppID
        var body: String
    }

    /// Processes a stored notification: messages are appended (media is fetched by its own job),
    /// statuses move agents' messages to delivered, read or failed.
    func process(_ job: WebhookJob) async throws {
        guard let (connection, _) = try await secrets(of: job.appId) else { return }  // disconnected since
        let notification = try JSONDecoder().decode(WhatsAppNotification.self, from: Data(job.body.utf8))
        for change in notification.entry.flatMap(\.changes) where change.field == "messages" {
            let value = change.value
            guard value.metadata?.phoneNumberId == connection.externalId else {
                logger.notice("a WhatsApp notification for another phone number id was ignored", metadata: ["app": "\(job.appId)"])
                continue
            }
            let names = Dictionary((value.contacts ?? []).map { ($0.waId, $0.profile?.name) }, uniquingKeysWith: { first, _ in first })
            for message in value.messages ?? [] {
                try await append(message, name: names[message.from] ?? nil, connection: connection)
            }
            for status in value.statuses ?? [] {
                try await conversations.providerStatus(channel: .whatsapp, providerMessageId: status.id, status: status.providerStatus)
            }
        }
    }

    private func append(_ message: WhatsAppNotification.Message, name: String?, connection: ChannelConnectionRecord) async throws {
        guard !message.from.isEmpty, message.from.count <= 32, message.from.allSatisfy({ $0.isASCII && $0.isNumber }),
            (1...128).contains(message.id.utf8.count)
        else {
            logger.notice("a WhatsApp message without a valid sender or id was ignored", metadata: ["app": "\(connection.appId)"])
            return
        }
        let consumer = try await inbox.consumer(
            .whatsapp, providerUserId: message.from, name: name, placeholder: "+\(message.from)", phone: "+\(message.from)", connection: connection)
        let principal = ConsumerPrincipal(consumerId: consumer.id, brandId: connection.brandId, appId: connection.appId)
        if let media = message.media {
            // A redelivered notification: the media was fetched and stored already.
            if try await inbox.alreadyStored(consumer.id, providerMessageId: message.id) { return }
            // Fetched by its own job (with retries), then through the same pipeline as an upload.
            try await jobs.enqueue(
                Self.mediaJob,
                MediaJob(
                    appId: connection.appId, consumerId: consumer.id, wamid: message.id, type: message.type, mediaId: media.id,
                    fileName: media.filename, caption: media.caption),
                brandId: connection.brandId, dedupeKey: "whatsapp-media:\(message.id)")
            return
        }
        let text: String
        switch message.type {
        case "text": text = message.text?.body ?? ""
        default:
            // Location, contacts, stickers, reactions, interactive replies...: the agent sees what
            // arrived rather than nothing, and never an error.
            text = "[unsupported WhatsApp message: \(message.type.prefix(32))]"
        }
        try await appendText(text.isEmpty ? "[empty WhatsApp message]" : text, wamid: message.id, principal)
    }

    private func appendText(_ text: String, wamid: String, _ principal: ConsumerPrincipal) async throws {
        try await inbox.appendText(text, channel: .whatsapp, providerMessageId: wamid, principal)
    }

    struct MediaJob: Codable, Sendable {
        var appId: AppID
        var consumerId: ConsumerID
        var wamid: String
        /// `audio`, `image`, `document`, `video`, `sticker`.
        var type: String
        var mediaId: String
        var fileName: String?
        var caption: String?
    }

    /// Fetches a received media from Meta (its URL from `GET /{media-id}`, then the file, both with
    /// the access token; only from allowed hosts; at most the brand's limit; within the provider
    /// timeout) and hands it to the voice or attachment pipeline. What cannot be accepted becomes a
    /// line saying so, so the agent knows something arrived.
    func fetchMedia(_ job: MediaJob) async throws {
        guard let (connection, secrets) = try await secrets(of: job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        let kind: ChannelInbox.MediaKind
        switch job.type {
        case "audio": kind = .audio
        case "image": kind = .image
        case "document": kind = .file
        default:
            try await appendText("[unsupported WhatsApp \(job.type.prefix(16)) message]", wamid: job.wamid, principal)
            return
        }
        let cap = try await inbox.cap(kind, brandId: connection.brandId)
        let info: WhatsAppAPI.MediaInfo
        do {
            info = try await api.mediaInfo(mediaId: job.mediaId, token: secrets.accessToken)
        } catch let refused as DeliveryRefused where refused.code == ErrorCode.noAnswer.rawValue {
            throw JobFailure.retry(refused.message)  // a read: asking again is harmless
        } catch let refused as DeliveryRefused {
            try await appendText("[WhatsApp \(kind.noun) could not be fetched: \(refused.message)]", wamid: job.wamid, principal)
            return
        }
        if let size = info.fileSize, size > cap {
            try await appendText("[WhatsApp \(kind.noun) not accepted: it is larger than \(ChannelInbox.size(cap))]", wamid: job.wamid, principal)
            return
        }
        try await inbox.ingest(
            url: info.url, headers: HTTPHeaders([("Authorization", "Bearer \(secrets.accessToken)")]), allowed: mediaHosts, kind: kind,
            fileName: job.fileName, cap: cap, channel: .whatsapp, providerMessageId: job.wamid, principal)
        if let caption = job.caption?.trimmingCharacters(in: .whitespacesAndNewlines), !caption.isEmpty {
            try await appendText(caption, wamid: "\(job.wamid):caption", principal)
        }
    }

    /// A line in place of media that could not be fetched after every attempt.
    func mediaLost(_ job: MediaJob, reason: String) async throws {
        guard let (connection, _) = try await secrets(of: job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        let what = job.type == "audio" ? "voice message" : job.type == "image" ? "image" : "file"
        logger.warning("a WhatsApp media could not be fetched", metadata: ["app": "\(job.appId)", "error": "\(reason)"])
        try await appendText("[WhatsApp \(what) could not be fetched from WhatsApp; ask the customer to send it again]", wamid: job.wamid, principal)
    }
}

/// The parts of a Cloud API notification Parley reads.
struct WhatsAppNotification: Decodable {
    struct Entry: Decodable { var changes: [Change] }
    struct Change: Decodable {
        var field: String
        var value: Value
    }
    struct Value: Decodable {
        var metadata: Metadata?
        var contacts: [Contact]?
        var messages: [Message]?
        var statuses: [Status]?
    }
    /// A status of a message the business sent (Meta's "status messages webhook reference").
    struct Status: Decodable {
        struct ErrorInfo: Decodable {
            struct ErrorData: Decodable { var details: String? }
            var code: Int?
            var title: String?
            var message: String?
            var errorData: ErrorData?
            enum CodingKeys: String, CodingKey { case code, title, message, errorData = "error_data" }
        }
        var id: String
        var status: String
        var errors: [ErrorInfo]?

        var providerStatus: ProviderStatus {
            switch status {
            case "delivered": return .delivered
            case "read", "played": return .read
            case "failed":
                let error = errors?.first
                let code = error?.code
                return .failed(
                    code: code.map(String.init) ?? "failed",
                    message: WhatsAppAPI.sentence(code: code, fallback: error?.errorData?.details ?? error?.message ?? error?.title),
                    retryable: code.map(WhatsAppAPI.final.contains) != true)
            default: return .sent
            }
        }
    }
    struct Metadata: Decodable {
        var phoneNumberId: String
        enum CodingKeys: String, CodingKey { case phoneNumberId = "phone_number_id" }
    }
    struct Contact: Decodable {
        struct Profile: Decodable { var name: String? }
        var profile: Profile?
        var waId: String
        enum CodingKeys: String, CodingKey { case profile, waId = "wa_id" }
    }
    struct Message: Decodable {
        struct Text: Decodable { var body: String }
        /// `audio`, `image`, `document`, `video`, `sticker`: the media's id and what came with it.
        struct Media: Decodable {
            var id: String
            var filename: String?
            var caption: String?
        }
        var from: String
        var id: String
        var type: String
        var text: Text?
        var audio: Media?
        var image: Media?
        var document: Media?
        var video: Media?
        var sticker: Media?

        var media: Media? {
            switch type {
            case "audio": audio
            case "image": image
            case "document": document
            case "video": video
            case "sticker": sticker
            default: nil
            }
        }
    }

    var object: String
    var entry: [Entry]
}

extension Data {
    /// Bytes from hexadecimal text; nil for anything else.
    init?(hex: String) {
        guard hex.utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }

    func constantTimeEquals(_ other: Data) -> Bool {
        guard count == other.count else { return false }
        return zip(self, other).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
