import AsyncHTTPClient
import Foundation
import Logging
import MultipartKit
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Facebook Messenger (Messenger Platform): connecting a Page, its webhook, and the Send API.
///
/// The contract is Meta's "Webhook events" references (`messages`, `message_deliveries`,
/// `message_reads`: the `page` object's `entry[].messaging[]`), the same verification handshake and
/// `X-Hub-Signature-256` as WhatsApp, and the "Send API" reference (`POST /{page-id}/messages` with
/// `recipient`, `messaging_type` and `message`; attachments as multipart `filedata`; the answer's
/// `message_id`).
public struct MessengerChannel: Sendable {
    let store: Store
    let connector: ChannelConnector
    let conversations: ConversationService
    let inbox: ChannelInbox
    let blobs: any BlobStore
    let jobs: JobQueue
    let http: ProviderHTTP
    /// `https://graph.facebook.com/v24.0`, or a local endpoint.
    let baseURL: String
    let mediaHosts: MediaHostAllowList
    let metrics: ParleyMetrics
    let clock: any WallClock
    let logger: Logger

    static let webhookJob = "messenger.webhook"
    static let mediaJob = "messenger.media"
    static let maxWebhookBytes = 1024 * 1024

    struct Secrets: Codable {
        var verifyToken: String
        var appSecret: String
        var pageAccessToken: String
    }

    static func webhookPath(_ appId: AppID) -> String { "/v1/webhooks/messenger/\(appId)" }

    /// What the brand set for the Page: whether Meta granted it the Human Agent permission.
    struct Settings: Codable {
        var humanAgent: Bool = false
    }

    static func settings(_ record: ChannelConnectionRecord) -> Settings {
        guard record.channel == .messenger, let text = record.settings,
            let settings = try? JSONDecoder().decode(Settings.self, from: Data(text.utf8))
        else { return Settings() }
        return settings
    }

    /// `PUT /v1/apps/{appId}/messenger/settings`: turns the Human Agent window (7 days, the
    /// `HUMAN_AGENT` tag) on or off; the app's open conversations get their new window at once.
    public func configure(_ admin: AgentPrincipal, appId: AppID, _ request: MessengerSettingsRequest) async throws -> ChannelConnectionDTO {
        try admin.require(.admin)
        let settings = String(decoding: try JSONEncoder().encode(Settings(humanAgent: request.humanAgent)), as: UTF8.self)
        let rules = ChannelRules.of(.messenger)
        return Self.dto(try await store.write { repo in
            guard var record = try await repo.channelConnection(appId: appId), record.brandId == admin.brandId, record.channel == .messenger else {
                throw ParleyError.notFound("Channel connection")
            }
            record.settings = settings
            record.updatedAt = clock.now()
            try await repo.saveChannelConnection(record)
            try await repo.setReplyWindows(
                appId: appId, hours: (request.humanAgent ? rules.extendedReplyWindowHours : rules.replyWindowHours) ?? 24)
            return record
        })
    }

    // MARK: Connecting

    public func connect(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectMessengerRequest) async throws -> ChannelConnectionDTO {
        Self.dto(try await connector.connect(
            admin, appId: appId, channel: .messenger, externalId: ("pageId", request.pageId, "the Facebook Page's id"),
            secrets: [("verifyToken", request.verifyToken), ("appSecret", request.appSecret), ("pageAccessToken", request.pageAccessToken)],
            sealing: Secrets(verifyToken: request.verifyToken, appSecret: request.appSecret, pageAccessToken: request.pageAccessToken),
            takenCode: .pageTaken))
    }

    public func connection(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelConnectionDTO {
        Self.dto(try await connector.record(admin, appId: appId, channel: .messenger))
    }

    static func dto(_ record: ChannelConnectionRecord) -> ChannelConnectionDTO {
        var dto = ChannelConnectionDTO(
            appId: record.appId, channel: record.channel, externalId: record.externalId, webhookPath: webhookPath(record.appId),
            createdAt: record.createdAt, updatedAt: record.updatedAt)
        dto.humanAgent = settings(record).humanAgent
        return dto
    }

    func secrets(of appId: AppID) async throws -> (ChannelConnectionRecord, Secrets)? {
        try await connector.opened(appId, channel: .messenger, as: Secrets.self)
    }

    /// "Test connection": asks the Graph API for the Page with the stored token.
    public func test(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelTestDTO {
        try admin.require(.admin)
        guard let (record, secrets) = try await secrets(of: appId), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        var request = HTTPClientRequest(url: "\(baseURL)/\(record.externalId)?fields=name")
        request.headers = HTTPHeaders([("Authorization", "Bearer \(secrets.pageAccessToken)")])
        do {
            let answer = try await call(request)
            struct Page: Decodable { var name: String? }
            let name = (try? JSONDecoder().decode(Page.self, from: answer.body))?.name
            return ChannelTestDTO(ok: true, message: name.map { "Connected to \($0)." } ?? "Messenger answered: the connection works.")
        } catch let refused as DeliveryRefused {
            return ChannelTestDTO(ok: false, message: refused.message, errorCode: refused.code)
        } catch {
            return ChannelTestDTO(ok: false, message: "Messenger could not be reached.", errorCode: ErrorCode.unreachable.rawValue)
        }
    }

    // MARK: Webhook

    public func verify(appId: AppID, mode: String?, token: String?, challenge: String?) async throws -> String {
        try MetaWebhook.verify(mode: mode, token: token, challenge: challenge, expected: try await secrets(of: appId)?.1.verifyToken)
    }

    /// Checked, stored as a job, answered at once; the job appends in order (one lane per app).
    public func receive(appId: AppID, signature: String?, body: Data) async throws {
        let connection = try await secrets(of: appId)
        try MetaWebhook.checkSignature(signature, body: body, appSecret: connection?.1.appSecret, app: appId, metrics: metrics, logger: logger)
        guard let (record, _) = connection, (try? JSONDecoder().decode(MessengerNotification.self, from: body)) != nil else {
            throw ParleyError(.badRequest, code: .invalidJson, message: "The notification is not the Messenger Platform's JSON.")
        }
        try await jobs.enqueue(
            Self.webhookJob, WebhookJob(appId: appId, body: String(decoding: body, as: UTF8.self)), brandId: record.brandId,
            lane: "in:\(appId)", dedupeKey: "messenger:\(appId):\(MetaWebhook.digest(body))")
    }

    struct WebhookJob: Codable, Sendable {
        var appId: AppID
        var body: String
    }

    struct MediaJob: Codable, Sendable {
        var appId: AppID
        var consumerId: ConsumerID
        /// The message's `mid`, with `:<index>` for its second and later attachments.
        var mid: String
        var kind: ChannelInbox.MediaKind
        var url: String
    }

    /// Messages from the Page's customers, deliveries and reads of the Page's messages.
    func process(_ job: WebhookJob) async throws {
        guard let (connection, secrets) = try await secrets(of: job.appId) else { return }
        let notification = try JSONDecoder().decode(MessengerNotification.self, from: Data(job.body.utf8))
        guard notification.object == "page" else { return }
        for entry in notification.entry where entry.id == connection.externalId {
            for event in entry.messaging ?? [] {
                let psid = event.sender.id
                guard !psid.isEmpty, psid.count <= 64, psid.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
                if let message = event.message, message.isEcho != true {
                    try await append(message, psid: psid, connection: connection, token: secrets.pageAccessToken)
                }
                if let delivery = event.delivery {
                    for mid in delivery.mids ?? [] {
                        try await conversations.providerStatus(channel: .messenger, providerMessageId: mid, status: .delivered)
                    }
                }
                if let read = event.read {
                    try await conversations.providerRead(
                        channel: .messenger, externalId: "messenger:\(psid)", appId: connection.appId, brandId: connection.brandId,
                        upTo: Date(timeIntervalSince1970: Double(read.watermark) / 1000))
                }
            }
        }
    }

    private func append(_ message: MessengerNotification.Message, psid: String, connection: ChannelConnectionRecord, token: String) async throws {
        guard (1...256).contains(message.mid.utf8.count) else { return }
        let known = try await store.read { repo in try await repo.consumer(brandId: connection.brandId, externalId: "messenger:\(psid)") }
        // The name from the User Profile API, once, for a new customer (best effort).
        let name = known == nil ? await profileName(psid: psid, token: token) : nil
        let consumer = try await inbox.consumer(
            .messenger, providerUserId: psid, name: name, placeholder: "Messenger customer", connection: connection)
        let principal = ConsumerPrincipal(consumerId: consumer.id, brandId: connection.brandId, appId: connection.appId)
        if let text = message.text, !text.isEmpty {
            try await inbox.appendText(text, channel: .messenger, providerMessageId: message.mid, principal)
        }
        for (index, attachment) in (message.attachments ?? []).enumerated() {
            let mid = message.text == nil && index == 0 ? message.mid : "\(message.mid):\(index)"
            let kind: ChannelInbox.MediaKind? = switch attachment.type {
            case "audio": .audio
            case "image": .image
            case "file": .file
            default: nil
            }
            guard let kind, let url = attachment.payload?.url else {
                try await inbox.appendText(
                    "[unsupported Messenger \(attachment.type.prefix(32))]", channel: .messenger, providerMessageId: mid, principal)
                continue
            }
            if try await inbox.alreadyStored(consumer.id, providerMessageId: mid) { continue }
            try await jobs.enqueue(
                Self.mediaJob, MediaJob(appId: connection.appId, consumerId: consumer.id, mid: mid, kind: kind, url: url),
                brandId: connection.brandId, dedupeKey: "messenger-media:\(mid)")
        }
        if message.text == nil && (message.attachments ?? []).isEmpty {
            try await inbox.appendText("[empty Messenger message]", channel: .messenger, providerMessageId: message.mid, principal)
        }
    }

    private func profileName(psid: String, token: String) async -> String? {
        var request = HTTPClientRequest(url: "\(baseURL)/\(psid)?fields=first_name,last_name")
        request.headers = HTTPHeaders([("Authorization", "Bearer \(token)")])
        struct Profile: Decodable {
            var firstName: String?
            var lastName: String?
            enum CodingKeys: String, CodingKey { case firstName = "first_name", lastName = "last_name" }
        }
        guard let answer = try? await http.send(request), answer.status == 200,
            let profile = try? JSONDecoder().decode(Profile.self, from: answer.body)
        else { return nil }
        let name = [profile.firstName, profile.lastName].compactMap { $0 }.joined(separator: " ")
        return name.isEmpty ? nil : name
    }

    /// Messenger's attachment URLs are short-lived CDN addresses, fetched without the token.
    func fetchMedia(_ job: MediaJob) async throws {
        guard let (connection, _) = try await secrets(of: job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        try await inbox.ingest(
            url: job.url, headers: [:], allowed: mediaHosts, kind: job.kind, fileName: nil, cap: try await inbox.cap(job.kind, brandId: connection.brandId),
            channel: .messenger, providerMessageId: job.mid, principal)
    }

    func mediaLost(_ job: MediaJob, reason: String) async throws {
        guard let (connection, _) = try await secrets(of: job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        logger.warning("a Messenger attachment could not be fetched", metadata: ["app": "\(job.appId)", "error": "\(reason)"])
        try await inbox.appendText(
            "[Messenger \(job.kind.noun) could not be fetched; ask the customer to send it again]", channel: .messenger, providerMessageId: job.mid,
            principal)
    }

    // MARK: Sending

    /// Graph codes that mean "slow down" or "try later" for the Send API, and refusals a retry will not fix.
    static let throttled: Set<Int> = [1, 2, 4, 17, 32, 613, 1200]
    static let final: Set<Int> = [100, 551]

    static func sentence(code: Int?, subcode: Int?, details: String?) -> String {
        switch (code, subcode) {
        case (10, 2018278), (_, 2018278): "More than 24 hours have passed since the customer last wrote: Messenger takes no reply until they write again."
        case (551, _): "This person is not available on Messenger right now."
        case (190, _): "The Page access token is invalid or has expired: an admin must reconnect Messenger in Settings."
        case (200, _), (10, _): "The Page access token lacks the permission to send: an admin must check pages_messaging."
        case (613, _), (4, _), (32, _): "Messenger's rate limit was reached."
        default: "Messenger refused the message" + (details.map { ": \($0.prefix(300))" } ?? ".")
        }
    }

    func call(_ request: HTTPClientRequest) async throws -> ProviderHTTP.Answer {
        try await http.graph(request, throttled: Self.throttled, final: Self.final) { code, subcode, details in
            Self.sentence(code: code, subcode: subcode, details: details)
        }
    }
}

/// The agent's side: text as JSON, voice notes (the AAC rendition, which Messenger plays) and
/// files as multipart `filedata`; `messaging_type: RESPONSE` within the standard 24-hour window,
/// `MESSAGE_TAG` with `tag: HUMAN_AGENT` after it (only where the brand turned the Human Agent
/// window on: Parley refuses a reply outside the conversation's window before it is stored).
struct MessengerOutbound: OutboundConnector {
    let channel = Channel.messenger
    let messenger: MessengerChannel

    func send(_ message: MessageDTO, in conversation: ConversationDTO, template: ChannelSendJob.Template?) async throws -> String {
        guard let (connection, secrets) = try await messenger.secrets(of: conversation.appId) else {
            throw DeliveryRefused(
                code: ErrorCode.notConnected.rawValue, message: "This Messenger app is not connected: an admin must connect it in Settings.", retryable: true)
        }
        let store = messenger.store
        let psid = try await OutboundMedia.recipient(conversation, channel: .messenger, store: store)
        let recipient = "{\"id\":\"\(psid)\"}"
        let standard = ChannelRules.of(.messenger).replyWindowEnd(lastConsumerMessageAt: conversation.lastConsumerMessageAt)
        let tagged = standard.map { messenger.clock.now() >= $0 } ?? false
        var request = HTTPClientRequest(url: "\(messenger.baseURL)/\(connection.externalId)/messages")
        request.method = .POST
        request.headers = HTTPHeaders([("Authorization", "Bearer \(secrets.pageAccessToken)")])
        switch message.kind {
        case .text:
            request.headers.add(name: "Content-Type", value: "application/json")
            var fields: [String: JSONValue] = [
                "recipient": ["id": .string(psid)], "messaging_type": tagged ? "MESSAGE_TAG" : "RESPONSE", "message": ["text": .string(message.text)],
            ]
            if tagged { fields["tag"] = "HUMAN_AGENT" }
            let body = JSONValue.object(fields)
            request.body = .bytes(ByteBuffer(data: try JSONEncoder().encode(body)))
        case .voice:
            let data = try await OutboundMedia.voice(message, brandId: conversation.brandId, rendition: .aac, store: store, blobs: messenger.blobs)
            try multipart(&request, recipient: recipient, tagged: tagged, type: "audio", file: data, fileName: "voice.m4a", contentType: "audio/mp4")
        case .attachment:
            let (record, data) = try await OutboundMedia.attachment(message, brandId: conversation.brandId, store: store, blobs: messenger.blobs)
            let type = [.jpeg, .png, .gif].contains(record.type) ? "image" : "file"
            try multipart(&request, recipient: recipient, tagged: tagged, type: type, file: data, fileName: record.fileName, contentType: record.type.contentType)
        }
        let answer = try await messenger.call(request)
        struct Sent: Decodable {
            var messageId: String
            enum CodingKeys: String, CodingKey { case messageId = "message_id" }
        }
        guard let sent = try? JSONDecoder().decode(Sent.self, from: answer.body) else {
            throw JobFailure.permanent("Messenger accepted the message without an id")
        }
        return sent.messageId
    }

    /// The Send API's form: `recipient`, `messaging_type`, `message` (the attachment's type) and `filedata`.
    private func multipart(
        _ request: inout HTTPClientRequest, recipient: String, tagged: Bool, type: String, file: Data, fileName: String, contentType: String
    ) throws {
        let boundary = "parley-\(UUID().uuidString)"
        let safeName = fileName.filter { $0 != "\"" && $0 != "\r" && $0 != "\n" }
        var parts = [
            MultipartPart(headers: ["Content-Disposition": "form-data; name=\"recipient\""], body: ByteBuffer(string: recipient)),
            MultipartPart(
                headers: ["Content-Disposition": "form-data; name=\"messaging_type\""], body: ByteBuffer(string: tagged ? "MESSAGE_TAG" : "RESPONSE")),
            MultipartPart(
                headers: ["Content-Disposition": "form-data; name=\"message\""],
                body: ByteBuffer(string: "{\"attachment\":{\"type\":\"\(type)\",\"payload\":{\"is_reusable\":false}}}")),
            MultipartPart(
                headers: ["Content-Disposition": "form-data; name=\"filedata\"; filename=\"\(safeName)\"", "Content-Type": contentType],
                body: ByteBuffer(data: file)),
        ]
        if tagged {
            parts.insert(MultipartPart(headers: ["Content-Disposition": "form-data; name=\"tag\""], body: ByteBuffer(string: "HUMAN_AGENT")), at: 2)
        }
        var buffer = ByteBuffer()
        try MultipartSerializer().serialize(parts: parts, boundary: boundary, into: &buffer)
        request.headers.add(name: "Content-Type", value: "multipart/form-data; boundary=\(boundary)")
        request.body = .bytes(buffer)
    }
}



/// The parts of a Messenger Platform notification Parley reads.
struct MessengerNotification: Decodable {
    struct Entry: Decodable {
        var id: String
        var messaging: [Event]?
    }
    struct Party: Decodable { var id: String }
    struct Event: Decodable {
        var sender: Party
        var recipient: Party
        var message: Message?
        var delivery: Delivery?
        var read: Read?
    }
    struct Message: Decodable {
        struct Attachment: Decodable {
            struct Payload: Decodable { var url: String? }
            var type: String
            var payload: Payload?
        }
        var mid: String
        var text: String?
        var attachments: [Attachment]?
        var isEcho: Bool?
        enum CodingKeys: String, CodingKey { case mid, text, attachments, isEcho = "is_echo" }
    }
    struct Delivery: Decodable {
        var mids: [String]?
        var watermark: Int64
    }
    struct Read: Decodable { var watermark: Int64 }

    var object: String
    var entry: [Entry]
}
