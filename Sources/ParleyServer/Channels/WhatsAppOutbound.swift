import Foundation
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// WhatsApp's outbound side: agents' texts, voice notes (the Ogg/Opus rendition, mono, as a voice
/// message: WhatsApp keeps the play button up to 512 KB, larger goes as basic audio), images and
/// files (uploaded through the media endpoint first) and templates.
struct WhatsAppOutbound: OutboundConnector {
    let channel = Channel.whatsapp
    let whatsapp: WhatsAppChannel

    func send(_ message: MessageDTO, in conversation: ConversationDTO, template: ChannelSendJob.Template?) async throws -> String {
        guard let (connection, secrets) = try await whatsapp.secrets(of: conversation.appId) else {
            throw DeliveryRefused(
                code: ErrorCode.notConnected.rawValue, message: "This WhatsApp app is not connected: an admin must connect it in Settings.", retryable: true)
        }
        let to = try await OutboundMedia.recipient(conversation, channel: .whatsapp, store: whatsapp.store)
        let token = secrets.accessToken
        let phone = connection.externalId
        let api = whatsapp.api

        var body: [String: JSONValue] = ["messaging_product": "whatsapp", "recipient_type": "individual", "to": .string(to)]
        if let template {
            var components: [JSONValue] = []
            if !template.parameters.isEmpty {
                components.append([
                    "type": "body",
                    "parameters": .array(template.parameters.map { ["type": "text", "text": .string($0)] }),
                ])
            }
            body["type"] = "template"
            body["template"] = ["name": .string(template.name), "language": ["code": .string(template.language)], "components": .array(components)]
        } else {
            switch message.kind {
            case .text:
                body["type"] = "text"
                body["text"] = ["preview_url": false, "body": .string(message.text)]
            case .voice:
                let data = try await OutboundMedia.voice(
                    message, brandId: conversation.brandId, rendition: .opus, store: whatsapp.store, blobs: whatsapp.blobs)
                let mediaId = try await api.uploadMedia(phoneNumberId: phone, token: token, file: data, mimeType: "audio/ogg", fileName: "voice.ogg")
                let rules = ChannelRules.of(.whatsapp)
                // Over 512 KB WhatsApp shows a download arrow instead of a play button: send it as
                // plain audio then (still Ogg/Opus, still playable).
                let isVoice = data.count <= (rules.maxVoiceBytes ?? Int.max)
                body["type"] = "audio"
                body["audio"] = isVoice ? ["id": .string(mediaId), "voice": true] : ["id": .string(mediaId)]
            case .attachment:
                let (record, data) = try await OutboundMedia.attachment(
                    message, brandId: conversation.brandId, store: whatsapp.store, blobs: whatsapp.blobs)
                // WhatsApp shows JPEG and PNG as images; everything else goes as a document.
                let asImage = record.type == .jpeg || record.type == .png
                let mediaId = try await api.uploadMedia(
                    phoneNumberId: phone, token: token, file: data, mimeType: record.type.contentType, fileName: record.fileName)
                if asImage {
                    body["type"] = "image"
                    body["image"] = ["id": .string(mediaId)]
                } else {
                    body["type"] = "document"
                    body["document"] = ["id": .string(mediaId), "filename": .string(record.fileName)]
                }
            }
        }
        return try await api.sendMessage(phoneNumberId: phone, token: token, body: try JSONEncoder().encode(JSONValue.object(body)))
    }
}

/// A JSON value, for request bodies whose shape depends on the message (written by hand: a few
/// cases, no library needed).
enum JSONValue: Encodable, Sendable, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByDictionaryLiteral {
    case string(String)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])

    init(stringLiteral value: String) { self = .string(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// Runs `whatsapp.webhook` jobs.

/// Runs `whatsapp.media` jobs.
