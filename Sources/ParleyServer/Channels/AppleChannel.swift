import AsyncHTTPClient
import CompressNIO
import Crypto
import CryptoExtras
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Apple Messages for Business, with Parley as the messaging service provider: connecting a
/// business, the gateway's messages to Parley, attachments, and messages to the gateway.
///
/// The contract is Apple's Business Chat REST API and its sample code: each request carries a JWT
/// (HS256, keyed with the base64-decoded Messaging API secret; `iss` the MSP id on requests to
/// Apple, `aud` the MSP id on Apple's), the `id`, `source-id` and `destination-id` headers, and a
/// JSON message (`v: 1`, `type`, `id`, `sourceId`, `destinationId`, `body`, `attachments`) that
/// Apple gzips. Attachments are encrypted with AES-256-CTR (a zero IV, a one-time key written as
/// `00` + hex) and stored on Apple's MMCS: `GET /preDownload` (`MMCS-Url`, `MMCS-Signature`,
/// `MMCS-Owner`) gives a download URL; `GET /preUpload` (`MMCS-Size`) gives an upload URL whose
/// answer carries the file's checksum.
public struct AppleChannel: Sendable {
    let store: Store
    let connector: ChannelConnector
    let conversations: ConversationService
    let inbox: ChannelInbox
    let blobs: any BlobStore
    let jobs: JobQueue
    let http: ProviderHTTP
    /// `https://mspgw.push.apple.com/v1`, or a local endpoint.
    let baseURL: String
    let mediaHosts: MediaHostAllowList
    let metrics: ParleyMetrics
    let clock: any WallClock
    /// How old the gateway's JWT (`iat`) may be; a captured header is worthless after it.
    let tokenMaxAge: TimeInterval
    let logger: Logger

    /// Clocks differ a little: `iat` this far in the future and `exp` this far in the past still pass.
    static let tokenLeeway: TimeInterval = 60

    static let webhookJob = "apple.webhook"
    static let mediaJob = "apple.media"
    /// A message from the gateway, compressed and once decompressed (a decompression bomb stops here).
    static let maxWebhookBytes = 1024 * 1024

    struct Secrets: Codable {
        var mspId: String
        /// Base64, as Apple Business Register shows it.
        var secret: String
    }

    static func webhookPath(_ appId: AppID) -> String { "/v1/webhooks/apple/\(appId)" }

    // MARK: Connecting

    public func connect(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectAppleRequest) async throws -> ChannelConnectionDTO {
        guard (1...128).contains(request.mspId.count), request.mspId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
            throw ParleyError.invalidField("mspId", "'mspId' is the messaging service provider id from Apple Business Register.")
        }
        guard let key = Data(base64Encoded: request.secret), key.count >= 16 else {
            throw ParleyError.invalidField("secret", "'secret' is the Messaging API secret, base64 as Apple Business Register shows it.")
        }
        return Self.dto(try await connector.connect(
            admin, appId: appId, channel: .apple, externalId: ("businessId", request.businessId, "the business id from Apple Business Register"),
            digits: false, secrets: [("secret", request.secret)], sealing: Secrets(mspId: request.mspId, secret: request.secret),
            takenCode: .businessTaken))
    }

    public func connection(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelConnectionDTO {
        Self.dto(try await connector.record(admin, appId: appId, channel: .apple))
    }

    static func dto(_ record: ChannelConnectionRecord) -> ChannelConnectionDTO {
        ChannelConnectionDTO(
            appId: record.appId, channel: record.channel, externalId: record.externalId, webhookPath: webhookPath(record.appId),
            createdAt: record.createdAt, updatedAt: record.updatedAt)
    }

    func opened(_ appId: AppID) async throws -> (ChannelConnectionRecord, Secrets)? {
        try await connector.opened(appId, channel: .apple, as: Secrets.self)
    }

    /// The JWT claims of both directions: Parley signs `iss` + `iat`; Apple's carry `aud` (+ `iat`).
    struct Claims: JWTPayload {
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        var iat: IssuedAtClaim
        var exp: ExpirationClaim?

        /// The signature is checked by the key collection; the times by `isFresh`, on the injected clock.
        func verify(using algorithm: some JWTAlgorithm) async throws {}

        /// Issued at most `maxAge` ago and not in the future, and not expired (when it says when), each
        /// with `leeway` for clocks that differ.
        func isFresh(now: Date, maxAge: TimeInterval, leeway: TimeInterval = AppleChannel.tokenLeeway) -> Bool {
            if let exp, exp.value.addingTimeInterval(leeway) < now { return false }
            let age = now.timeIntervalSince(iat.value)
            return age >= -leeway && age <= maxAge
        }
    }

    static func keys(_ secrets: Secrets) async throws -> JWTKeyCollection {
        guard let key = Data(base64Encoded: secrets.secret) else { throw JobFailure.permanent("the stored Apple secret is not base64") }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(key: SymmetricKey(data: key)), digestAlgorithm: .sha256)
        return keys
    }

    /// `Authorization: Bearer <JWT>` for a request to Apple.
    func authorization(_ secrets: Secrets) async throws -> String {
        let token = try await Self.keys(secrets).sign(Claims(iss: IssuerClaim(value: secrets.mspId), aud: nil, iat: IssuedAtClaim(value: clock.now())))
        return "Bearer \(token)"
    }

    /// "Test connection": asks the gateway for an upload slot of one byte (authenticated, changes
    /// nothing), which only works with the right MSP id and secret.
    public func test(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelTestDTO {
        try admin.require(.admin)
        guard let (record, secrets) = try await opened(appId), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        var request = HTTPClientRequest(url: "\(baseURL)/preUpload")
        request.headers = HTTPHeaders([("Authorization", try await authorization(secrets)), ("Source-Id", record.externalId), ("MMCS-Size", "1")])
        do {
            let answer = try await http.send(request)
            if answer.status == 200 { return ChannelTestDTO(ok: true, message: "Apple's gateway accepted the credentials for business \(record.externalId).") }
            return ChannelTestDTO(ok: false, message: Self.sentence(status: answer.status), errorCode: ErrorCode.http(answer.status).rawValue)
        } catch {
            return ChannelTestDTO(ok: false, message: "Apple's gateway could not be reached.", errorCode: ErrorCode.unreachable.rawValue)
        }
    }

    // MARK: Messages from Apple

    /// Checked (the JWT, then the business), unzipped within the limit, stored as a job, answered.
    public func receive(appId: AppID, authorization: String?, destinationId: String?, gzip: Bool, body: Data) async throws {
        let connection = try await opened(appId)
        var verified = false
        if let (_, secrets) = connection, let authorization, authorization.hasPrefix("Bearer ") {
            let token = String(authorization.dropFirst(7))
            if let claims = try? await Self.keys(secrets).verify(token, as: Claims.self), claims.aud?.value.contains(secrets.mspId) == true {
                // Signed by Apple, but a captured header must not let its holder post for ever.
                guard claims.isFresh(now: clock.now(), maxAge: tokenMaxAge) else {
                    logger.notice("refused a webhook with an expired or stale JWT", metadata: ["app": "\(appId)", "provider": "apple"])
                    metrics.webhooksRefused.increment()
                    throw ParleyError(
                        .unauthorized, code: .tokenExpired,
                        message: "The Authorization header's JWT is expired, older than \(Int(tokenMaxAge)) s, or issued in the future.")
                }
                verified = true
            }
        }
        guard verified, let (record, _) = connection else {
            logger.notice("refused a webhook without a valid signature", metadata: ["app": "\(appId)", "provider": "apple"])
            metrics.webhooksRefused.increment()
            throw ParleyError(.unauthorized, code: .invalidSignature, message: "The Authorization header's JWT is missing or wrong.")
        }
        guard destinationId == record.externalId else {
            throw ParleyError(.forbidden, code: .wrongBusiness, message: "The destination-id is not this app's business.")
        }
        let json = try gzip ? Self.gunzip(body) : body
        guard let message = try? JSONDecoder().decode(AppleMessage.self, from: json), (1...128).contains(message.id.utf8.count) else {
            throw ParleyError(.badRequest, code: .invalidJson, message: "The body is not an Apple Messages for Business message.")
        }
        try await jobs.enqueue(
            Self.webhookJob, WebhookJob(appId: appId, body: String(decoding: json, as: UTF8.self)), brandId: record.brandId, lane: "in:\(appId)",
            dedupeKey: "apple:\(appId):\(message.id)")
    }

    /// gzip, at most `maxWebhookBytes` once decompressed.
    static func gunzip(_ data: Data) throws -> Data {
        var buffer = ByteBuffer(data: data)
        do {
            return Data(buffer: try buffer.decompress(with: .gzip(), maxSize: maxWebhookBytes))
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw ParleyError(.payloadTooLarge, code: .bodyTooLarge, message: "A message from Apple is at most \(maxWebhookBytes) bytes once decompressed.")
        } catch {
            throw ParleyError(.badRequest, code: .invalidGzip, message: "The body is not valid gzip.")
        }
    }

    static func gzip(_ data: Data) throws -> ByteBuffer {
        var buffer = ByteBuffer(data: data)
        return try buffer.compress(with: .gzip())
    }

    struct WebhookJob: Codable, Sendable {
        var appId: AppID
        var body: String
    }

    struct MediaJob: Codable, Sendable {
        var appId: AppID
        var consumerId: ConsumerID
        var mid: String
        var kind: ChannelInbox.MediaKind
        var attachment: AppleMessage.Attachment
    }

    func process(_ job: WebhookJob) async throws {
        guard let (connection, _) = try await opened(job.appId) else { return }
        let message = try JSONDecoder().decode(AppleMessage.self, from: Data(job.body.utf8))
        guard message.type == "text" else { return }  // typing indicators, close: nothing to store
        guard (1...512).contains(message.sourceId.utf8.count) else { return }
        let consumer = try await inbox.consumer(
            .apple, providerUserId: message.sourceId, name: nil, placeholder: "Apple Messages customer", connection: connection)
        let principal = ConsumerPrincipal(consumerId: consumer.id, brandId: connection.brandId, appId: connection.appId)
        // U+FFFC marks where an attachment sits in the text.
        let text = (message.body ?? "").replacingOccurrences(of: "\u{FFFC}", with: "").trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.isEmpty {
            try await inbox.appendText(text, channel: .apple, providerMessageId: message.id, principal)
        }
        let attachments = Array((message.attachments ?? []).prefix(10))
        for (index, attachment) in attachments.enumerated() {
            let mid = text.isEmpty && index == 0 ? message.id : "\(message.id):\(index)"
            let type = (attachment.mimeType ?? "").lowercased()
            let kind: ChannelInbox.MediaKind = type.hasPrefix("audio/") ? .audio : type.hasPrefix("image/") ? .image : .file
            if try await inbox.alreadyStored(consumer.id, providerMessageId: mid) { continue }
            try await jobs.enqueue(
                Self.mediaJob, MediaJob(appId: connection.appId, consumerId: consumer.id, mid: mid, kind: kind, attachment: attachment),
                brandId: connection.brandId, dedupeKey: "apple-media:\(mid)")
        }
        if text.isEmpty && attachments.isEmpty {
            try await inbox.appendText("[empty Apple Messages message]", channel: .apple, providerMessageId: message.id, principal)
        }
    }

    /// `GET /preDownload` for the file's URL, the encrypted file (on the allow-list, capped), then
    /// AES-256-CTR with the message's key, then the upload pipelines.
    func fetchMedia(_ job: MediaJob) async throws {
        guard let (connection, secrets) = try await opened(job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        let attachment = job.attachment
        let line = { (text: String) in
            try await self.inbox.appendText(
                "[Apple Messages \(job.kind.noun) \(text)]", channel: .apple, providerMessageId: job.mid, principal)
        }
        guard let key = Self.key(attachment.decryptionKey), let signature = attachment.signatureHex.flatMap({ Data(hex: $0) }),
            let url = attachment.mmcsURL, let owner = attachment.mmcsOwner
        else { return try await line("arrived without what is needed to read it") }
        let cap = try await inbox.cap(job.kind, brandId: connection.brandId)
        if let size = attachment.fileSize, size > cap { return try await line("not accepted: it is larger than \(ChannelInbox.size(cap))") }
        var request = HTTPClientRequest(url: "\(baseURL)/preDownload")
        request.headers = HTTPHeaders([
            ("Authorization", try await authorization(secrets)), ("source-id", connection.externalId), ("MMCS-Url", url),
            ("MMCS-Signature", signature.base64EncodedString()), ("MMCS-Owner", owner),
        ])
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request)
        } catch {
            throw JobFailure.retry("Apple's gateway: \(error)")
        }
        guard answer.status == 200 else {
            if answer.status == 429 || answer.status >= 500 { throw JobFailure.retry("preDownload answered \(answer.status)", after: answer.retryAfter) }
            return try await line("could not be fetched (HTTP \(answer.status))")
        }
        struct Download: Decodable {
            var url: String
            enum CodingKeys: String, CodingKey { case url = "download-url" }
        }
        guard let download = try? JSONDecoder().decode(Download.self, from: answer.body) else {
            return try await line("could not be fetched (no download URL)")
        }
        try await inbox.ingest(
            url: download.url, headers: [:], allowed: mediaHosts, kind: job.kind, fileName: attachment.name, cap: cap, channel: .apple,
            providerMessageId: job.mid, principal,
            decrypt: { file in
                let encrypted = try Data(contentsOf: file)
                let plain = try AES._CTR.decrypt(encrypted, using: key, nonce: try AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
                try plain.write(to: file)
                return plain.count
            })
    }

    func mediaLost(_ job: MediaJob, reason: String) async throws {
        guard let (connection, _) = try await opened(job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        logger.warning("an Apple Messages attachment could not be fetched", metadata: ["app": "\(job.appId)", "error": "\(reason)"])
        try await inbox.appendText(
            "[Apple Messages \(job.kind.noun) could not be fetched; ask the customer to send it again]", channel: .apple,
            providerMessageId: job.mid, principal)
    }

    /// `00` + 64 hex digits: the 256-bit key.
    static func key(_ text: String?) -> SymmetricKey? {
        guard let text, text.count == 66, text.hasPrefix("00"), let bytes = Data(hex: String(text.dropFirst(2))) else { return nil }
        return SymmetricKey(data: bytes)
    }

    static func sentence(status: Int) -> String {
        switch status {
        case 401, 403: "Apple refused the MSP id or secret: an admin must reconnect Apple Messages in Settings."
        case 404: "Apple does not know this customer or business any more."
        case 413: "The message is larger than Apple takes."
        case 429: "Apple's rate limit was reached."
        default: "Apple refused the message (HTTP \(status))."
        }
    }
}

/// A message as Apple's gateway sends and takes it.
struct AppleMessage: Codable, Sendable {
    struct Attachment: Codable, Sendable {
        var name: String?
        var mimeType: String?
        var fileSize: Int?
        var signatureHex: String?
        var mmcsURL: String?
        var mmcsOwner: String?
        var decryptionKey: String?

        enum CodingKeys: String, CodingKey {
            case name, mimeType = "mime-type", fileSize = "file-size", signatureHex = "mmcs-signature-hex", mmcsURL = "mmcs-url"
            case mmcsOwner = "mmcs-owner", decryptionKey = "decryption-key"
        }

        init(name: String?, mimeType: String?, fileSize: Int?, signatureHex: String?, mmcsURL: String?, mmcsOwner: String?, decryptionKey: String?) {
            (self.name, self.mimeType, self.fileSize, self.signatureHex) = (name, mimeType, fileSize, signatureHex)
            (self.mmcsURL, self.mmcsOwner, self.decryptionKey) = (mmcsURL, mmcsOwner, decryptionKey)
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            mimeType = try c.decodeIfPresent(String.self, forKey: .mimeType)
            // A string in Apple's samples ("has to be of type string"); a number is read as well.
            fileSize = (try? c.decodeIfPresent(Int.self, forKey: .fileSize)) ?? (try? c.decodeIfPresent(String.self, forKey: .fileSize)).flatMap { $0.flatMap(Int.init) }
            signatureHex = try c.decodeIfPresent(String.self, forKey: .signatureHex)
            mmcsURL = try c.decodeIfPresent(String.self, forKey: .mmcsURL)
            mmcsOwner = try c.decodeIfPresent(String.self, forKey: .mmcsOwner)
            decryptionKey = try c.decodeIfPresent(String.self, forKey: .decryptionKey)
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(name, forKey: .name)
            try c.encodeIfPresent(mimeType, forKey: .mimeType)
            try c.encodeIfPresent(fileSize.map(String.init), forKey: .fileSize)
            try c.encodeIfPresent(signatureHex, forKey: .signatureHex)
            try c.encodeIfPresent(mmcsURL, forKey: .mmcsURL)
            try c.encodeIfPresent(mmcsOwner, forKey: .mmcsOwner)
            try c.encodeIfPresent(decryptionKey, forKey: .decryptionKey)
        }
    }

    var v: Int = 1
    var id: String
    var type: String
    var sourceId: String
    var destinationId: String
    var body: String?
    var locale: String?
    var attachments: [Attachment]?
}

/// The agent's side: text as `body`; a voice note as its AAC rendition (which Messages plays) and
/// files as encrypted attachments uploaded to MMCS first. Each message's `id` is derived from
/// Parley's message id, so a retry carries the same id.
struct AppleOutbound: OutboundConnector {
    let channel = Channel.apple
    let apple: AppleChannel

    func send(_ message: MessageDTO, in conversation: ConversationDTO, template: ChannelSendJob.Template?) async throws -> String {
        guard let (connection, secrets) = try await apple.opened(conversation.appId) else {
            throw DeliveryRefused(
                code: ErrorCode.notConnected.rawValue, message: "This Apple Messages app is not connected: an admin must connect it in Settings.", retryable: true)
        }
        let store = apple.store
        let customer = try await OutboundMedia.recipient(conversation, channel: .apple, store: store)
        let id = Self.uuid(for: message.id)
        var payload = AppleMessage(id: id, type: "text", sourceId: connection.externalId, destinationId: customer)
        switch message.kind {
        case .text:
            payload.body = message.text
        case .voice:
            let data = try await OutboundMedia.voice(message, brandId: conversation.brandId, rendition: .aac, store: store, blobs: apple.blobs)
            payload.body = "\u{FFFC}"
            payload.attachments = [try await upload(data, name: "Voice message.m4a", mimeType: "audio/m4a", connection: connection, secrets: secrets)]
        case .attachment:
            let (record, data) = try await OutboundMedia.attachment(message, brandId: conversation.brandId, store: store, blobs: apple.blobs)
            payload.body = "\u{FFFC}"
            payload.attachments = [try await upload(data, name: record.fileName, mimeType: record.type.contentType, connection: connection, secrets: secrets)]
        }
        var request = HTTPClientRequest(url: "\(apple.baseURL)/message")
        request.method = .POST
        request.headers = HTTPHeaders([
            ("Authorization", try await apple.authorization(secrets)), ("Content-Type", "application/json"), ("Content-Encoding", "gzip"),
            ("id", id), ("Source-Id", connection.externalId), ("Destination-Id", customer), ("auto-reply", "false"),
        ])
        request.body = .bytes(try AppleChannel.gzip(try JSONEncoder().encode(payload)))
        _ = try await apple.http.deliver(request) { answer in
            ProviderRefusal(
                code: ErrorCode.http(answer.status).rawValue, throttled: false, final: answer.status == 404 || answer.status == 413,
                sentence: AppleChannel.sentence(status: answer.status))
        }
        return id
    }

    /// Encrypts the file with a new key, asks for an upload slot, uploads it, and returns the
    /// attachment as the message carries it.
    private func upload(_ data: Data, name: String, mimeType: String, connection: ChannelConnectionRecord, secrets: AppleChannel.Secrets) async throws
        -> AppleMessage.Attachment
    {
        let key = SymmetricKey(size: .bits256)
        let encrypted = try AES._CTR.encrypt(data, using: key, nonce: try AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
        var slot = HTTPClientRequest(url: "\(apple.baseURL)/preUpload")
        slot.headers = HTTPHeaders([
            ("Authorization", try await apple.authorization(secrets)), ("Source-Id", connection.externalId), ("MMCS-Size", String(encrypted.count)),
        ])
        let answer = try await apple.http.deliver(slot) { answer in
            ProviderRefusal(code: ErrorCode.http(answer.status).rawValue, throttled: false, final: false, sentence: AppleChannel.sentence(status: answer.status))
        }
        struct Slot: Decodable {
            var uploadURL: String
            var mmcsURL: String
            var mmcsOwner: String
            enum CodingKeys: String, CodingKey { case uploadURL = "upload-url", mmcsURL = "mmcs-url", mmcsOwner = "mmcs-owner" }
        }
        guard let slotInfo = try? JSONDecoder().decode(Slot.self, from: answer.body) else { throw JobFailure.retry("preUpload gave no upload URL") }
        guard apple.mediaHosts.allows(slotInfo.uploadURL) else {
            throw JobFailure.permanent("the upload URL is not on PARLEY_APPLE_MEDIA_HOSTS")
        }
        var put = HTTPClientRequest(url: slotInfo.uploadURL)
        put.method = .POST
        put.headers = HTTPHeaders([("Content-Length", String(encrypted.count))])
        put.body = .bytes(ByteBuffer(data: encrypted))
        let uploaded = try await apple.http.deliver(put) { answer in
            ProviderRefusal(code: ErrorCode.http(answer.status).rawValue, throttled: false, final: false, sentence: "Apple did not take the attachment (HTTP \(answer.status)).")
        }
        struct Uploaded: Decodable {
            struct File: Decodable { var fileChecksum: String }
            var singleFile: File
        }
        guard let file = try? JSONDecoder().decode(Uploaded.self, from: uploaded.body), let checksum = Data(base64Encoded: file.singleFile.fileChecksum) else {
            throw JobFailure.retry("the upload's answer has no checksum")
        }
        let hexKey = "00" + key.withUnsafeBytes { Data($0) }.map { String(format: "%02x", $0) }.joined()
        return AppleMessage.Attachment(
            name: name, mimeType: mimeType, fileSize: encrypted.count, signatureHex: checksum.map { String(format: "%02x", $0) }.joined(),
            mmcsURL: slotInfo.mmcsURL, mmcsOwner: slotInfo.mmcsOwner, decryptionKey: hexKey)
    }

    /// A UUID made from Parley's message id (the first 16 bytes of its SHA-256, version 4 bits set):
    /// the same message always goes with the same `id`.
    static func uuid(for id: MessageID) -> String {
        var bytes = Array(SHA256.hash(data: Data(id.rawValue.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11],
            bytes[12], bytes[13], bytes[14], bytes[15])).uuidString.lowercased()
    }
}
