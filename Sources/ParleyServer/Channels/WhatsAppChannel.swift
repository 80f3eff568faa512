import Crypto
import Foundation
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
    let conversations: ConversationService
    let clock: any WallClock
    let logger: Logger

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
        try admin.require(.admin)
        guard !request.phoneNumberId.isEmpty, request.phoneNumberId.count <= 32, request.phoneNumberId.allSatisfy(\.isASCII),
            request.phoneNumberId.allSatisfy(\.isNumber)
        else { throw ParleyError.invalidField("phoneNumberId", "'phoneNumberId' is the digits of the phone number's id in WhatsApp Manager.") }
        for (field, value) in [("verifyToken", request.verifyToken), ("appSecret", request.appSecret), ("accessToken", request.accessToken)] {
            guard (8...1024).contains(value.utf8.count), !value.contains(where: { $0.isWhitespace }) else {
                throw ParleyError.invalidField(field, "'\(field)' is 8-1024 characters without spaces.")
            }
        }
        let sealed = try secrets.seal(String(decoding: try JSONEncoder().encode(
            Secrets(verifyToken: request.verifyToken, appSecret: request.appSecret, accessToken: request.accessToken)), as: UTF8.self))
        let now = clock.now()
        do {
            return try await store.write { repo in
                guard let app = try await repo.app(id: appId), app.brandId == admin.brandId else { throw ParleyError.notFound("App") }
                guard app.channel == .whatsapp else {
                    throw ParleyError(.conflict, code: "app_not_whatsapp", message: "This app is on the \(app.channel.rawValue) channel; connect an app created for whatsapp.")
                }
                let createdAt = try await repo.channelConnection(appId: appId)?.createdAt ?? now
                let record = ChannelConnectionRecord(
                    appId: appId, brandId: admin.brandId, channel: .whatsapp, externalId: request.phoneNumberId, sealedSecrets: sealed,
                    createdAt: createdAt, updatedAt: now)
                try await repo.saveChannelConnection(record)
                return Self.dto(record)
            }
        } catch where isUniqueViolation(error) {
            throw ParleyError(.conflict, code: "phone_number_taken", message: "Another app is connected to this phone number id.", field: "phoneNumberId")
        }
    }

    public func connection(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelConnectionDTO {
        try admin.require(.admin)
        guard let record = try await store.read({ repo in try await repo.channelConnection(appId: appId) }), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        return Self.dto(record)
    }

    static func dto(_ record: ChannelConnectionRecord) -> ChannelConnectionDTO {
        ChannelConnectionDTO(
            appId: record.appId, channel: record.channel, externalId: record.externalId, webhookPath: webhookPath(record.appId),
            createdAt: record.createdAt, updatedAt: record.updatedAt)
    }

    private func secrets(of appId: AppID) async throws -> (ChannelConnectionRecord, Secrets)? {
        guard let record = try await store.read({ repo in try await repo.channelConnection(appId: appId) }), record.channel == .whatsapp else {
            return nil
        }
        return (record, try JSONDecoder().decode(Secrets.self, from: Data(try secrets.open(record.sealedSecrets).utf8)))
    }

    // MARK: Webhook

    /// The subscription handshake: the challenge back when the mode is `subscribe` and the token is
    /// the app's; otherwise 403 (an unknown app gets the same answer, so ids cannot be probed).
    public func verify(appId: AppID, mode: String?, token: String?, challenge: String?) async throws -> String {
        let refused = ParleyError(.forbidden, code: "verification_failed", message: "The verify token does not match.")
        guard mode == "subscribe", let token, let challenge, challenge.count <= 256,
            let (_, secrets) = try await secrets(of: appId),
            Data(token.utf8).constantTimeEquals(Data(secrets.verifyToken.utf8))
        else { throw refused }
        return challenge
    }

    /// A signed notification. The signature is checked before the body is even parsed; a bad or
    /// missing one is refused with 401 and nothing is stored (the body is never logged). Each
    /// message is appended with its `wamid` as the client message id, so Meta's retries are answered
    /// with the stored message, never a second one.
    public func receive(appId: AppID, signature: String?, body: Data) async throws -> Int {
        let unauthorized = ParleyError(.unauthorized, code: "invalid_signature", message: "The X-Hub-Signature-256 header is missing or wrong.")
        guard let signature, signature.hasPrefix("sha256="), let expected = Data(hex: String(signature.dropFirst(7))),
            let (connection, secrets) = try await secrets(of: appId)
        else {
            logger.notice("refused a WhatsApp webhook without a valid signature", metadata: ["app": "\(appId)"])
            throw unauthorized
        }
        guard HMAC<SHA256>.isValidAuthenticationCode(expected, authenticating: body, using: SymmetricKey(data: Data(secrets.appSecret.utf8))) else {
            logger.notice("refused a WhatsApp webhook with a wrong signature", metadata: ["app": "\(appId)"])
            throw unauthorized
        }
        let notification: WhatsAppNotification
        do {
            notification = try JSONDecoder().decode(WhatsAppNotification.self, from: body)
        } catch {
            throw ParleyError(.badRequest, code: "invalid_json", message: "The notification is not the Cloud API's JSON.")
        }
        var appended = 0
        for change in notification.entry.flatMap(\.changes) where change.field == "messages" {
            let value = change.value
            guard value.metadata?.phoneNumberId == connection.externalId else {
                logger.notice("a WhatsApp notification for another phone number id was ignored", metadata: ["app": "\(appId)"])
                continue
            }
            let names = Dictionary((value.contacts ?? []).map { ($0.waId, $0.profile?.name) }, uniquingKeysWith: { first, _ in first })
            for message in value.messages ?? [] {
                try await append(message, name: names[message.from] ?? nil, connection: connection)
                appended += 1
            }
        }
        return appended
    }

    private func append(_ message: WhatsAppNotification.Message, name: String?, connection: ChannelConnectionRecord) async throws {
        guard !message.from.isEmpty, message.from.count <= 32, message.from.allSatisfy({ $0.isASCII && $0.isNumber }),
            (1...128).contains(message.id.utf8.count)
        else { throw ParleyError.invalidField("messages", "A message has no valid sender or id.") }
        let consumer = try await consumer(waId: message.from, name: name, connection: connection)
        let text: String
        switch message.type {
        case "text": text = message.text?.body ?? ""
        default:
            // Media (audio, image, document) is fetched by a later step of the channels work; until
            // then the agent sees what arrived rather than nothing, and never an error.
            text = "[WhatsApp \(message.type) message: not shown in Parley yet]"
        }
        let request = SendMessageRequest(clientMessageId: message.id, text: String(text.prefix(4096)), channel: .whatsapp)
        _ = try await conversations.send(
            .consumer(ConsumerPrincipal(consumerId: consumer.id, brandId: connection.brandId, appId: connection.appId)), request)
    }

    /// The customer, by their WhatsApp id within the brand (external id `whatsapp:<wa_id>`).
    private func consumer(waId: String, name: String?, connection: ChannelConnectionRecord) async throws -> ConsumerDTO {
        let externalId = "whatsapp:\(waId)"
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
                    displayName: cleanName ?? "+\(waId)", anonymous: false, createdAt: clock.now(), phone: "+\(waId)")
                try await repo.insertConsumer(created)
                return created
            }
        }
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
        var from: String
        var id: String
        var type: String
        var text: Text?
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
