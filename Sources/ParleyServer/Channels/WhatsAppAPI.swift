import AsyncHTTPClient
import Foundation
import MultipartKit
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain

/// The WhatsApp Cloud API's calls Parley makes, as Meta documents them:
/// - `POST /{phone-number-id}/messages` (JSON, `messaging_product: whatsapp`) sends text, audio
///   (`voice: true` for a voice message), image, document and template messages;
/// - `POST /{phone-number-id}/media` (multipart: `file`, `type`, `messaging_product`) uploads media;
/// - `GET /{media-id}` gives a received media's short-lived `url`, downloaded with the same token;
/// - `GET /{phone-number-id}` (the "test connection": display number and verified name).
/// Every call carries `Authorization: Bearer <access token>`; errors are Graph API errors
/// (`{"error": {"message", "type", "code", "error_subcode", "error_data": {"details"}}}`).
struct WhatsAppAPI: Sendable {
    let http: ProviderHTTP
    /// `https://graph.facebook.com/v24.0`, or a local endpoint.
    let baseURL: String

    struct SendResponse: Decodable {
        struct Sent: Decodable { var id: String }
        var messages: [Sent]
    }

    struct MediaInfo: Decodable {
        var url: String
        var mimeType: String?
        var fileSize: Int?
        enum CodingKeys: String, CodingKey { case url, mimeType = "mime_type", fileSize = "file_size" }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            url = try c.decode(String.self, forKey: .url)
            mimeType = try c.decodeIfPresent(String.self, forKey: .mimeType)
            // Documented as a number; some answers carry it as a string.
            if let number = try? c.decodeIfPresent(Int.self, forKey: .fileSize) {
                fileSize = number
            } else {
                fileSize = (try? c.decodeIfPresent(String.self, forKey: .fileSize)).flatMap { $0.flatMap(Int.init) }
            }
        }
    }

    struct PhoneNumber: Decodable {
        var displayPhoneNumber: String?
        var verifiedName: String?
        enum CodingKeys: String, CodingKey { case displayPhoneNumber = "display_phone_number", verifiedName = "verified_name" }
    }

    private func headers(_ token: String, json: Bool = true) -> HTTPHeaders {
        var headers = HTTPHeaders([("Authorization", "Bearer \(token)")])
        if json { headers.add(name: "Content-Type", value: "application/json") }
        return headers
    }

    /// Sends a message body; returns the `wamid`.
    func sendMessage(phoneNumberId: String, token: String, body: Data) async throws -> String {
        var request = HTTPClientRequest(url: "\(baseURL)/\(phoneNumberId)/messages")
        request.method = .POST
        request.headers = headers(token)
        request.body = .bytes(ByteBuffer(data: body))
        let answer = try await call(request)
        guard let sent = try? JSONDecoder().decode(SendResponse.self, from: answer.body), let id = sent.messages.first?.id else {
            throw JobFailure.permanent("WhatsApp accepted the message without an id")
        }
        return id
    }

    /// Uploads a file to the phone number's media; returns the media id.
    func uploadMedia(phoneNumberId: String, token: String, file: Data, mimeType: String, fileName: String) async throws -> String {
        let boundary = "parley-\(UUID().uuidString)"
        var parts: [MultipartPart] = []
        parts.append(MultipartPart(headers: ["Content-Disposition": "form-data; name=\"messaging_product\""], body: ByteBuffer(string: "whatsapp")))
        parts.append(MultipartPart(headers: ["Content-Disposition": "form-data; name=\"type\""], body: ByteBuffer(string: mimeType)))
        let safeName = fileName.replacingOccurrences(of: "\"", with: "").replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: "\n", with: "")
        parts.append(
            MultipartPart(
                headers: ["Content-Disposition": "form-data; name=\"file\"; filename=\"\(safeName)\"", "Content-Type": mimeType],
                body: ByteBuffer(data: file)))
        var buffer = ByteBuffer()
        try MultipartSerializer().serialize(parts: parts, boundary: boundary, into: &buffer)
        var request = HTTPClientRequest(url: "\(baseURL)/\(phoneNumberId)/media")
        request.method = .POST
        request.headers = headers(token, json: false)
        request.headers.add(name: "Content-Type", value: "multipart/form-data; boundary=\(boundary)")
        request.body = .bytes(buffer)
        let answer = try await call(request)
        struct Uploaded: Decodable { var id: String }
        guard let uploaded = try? JSONDecoder().decode(Uploaded.self, from: answer.body) else {
            throw JobFailure.permanent("WhatsApp accepted the media without an id")
        }
        return uploaded.id
    }

    /// A received media's download URL, type and size.
    func mediaInfo(mediaId: String, token: String) async throws -> MediaInfo {
        var request = HTTPClientRequest(url: "\(baseURL)/\(mediaId)")
        request.headers = headers(token, json: false)
        let answer = try await call(request)
        guard let info = try? JSONDecoder().decode(MediaInfo.self, from: answer.body) else {
            throw JobFailure.permanent("WhatsApp's media answer has no URL")
        }
        return info
    }

    func phoneNumber(phoneNumberId: String, token: String) async throws -> PhoneNumber {
        var request = HTTPClientRequest(url: "\(baseURL)/\(phoneNumberId)?fields=display_phone_number,verified_name")
        request.headers = headers(token, json: false)
        let answer = try await call(request)
        guard let number = try? JSONDecoder().decode(PhoneNumber.self, from: answer.body) else {
            throw DeliveryRefused(code: ErrorCode.unexpectedAnswer.rawValue, message: "WhatsApp answered with something Parley does not understand.", retryable: false)
        }
        return number
    }

    private func call(_ request: HTTPClientRequest) async throws -> ProviderHTTP.Answer {
        try await http.graph(request, throttled: Self.throttled, final: Self.final) { code, _, details in Self.sentence(code: code, fallback: details) }
    }

    /// Graph and Cloud API codes that mean "slow down" or "try later".
    static let throttled: Set<Int> = [1, 2, 4, 17, 80007, 130429, 131000, 131016, 131048, 131056, 133004]
    /// Codes that a plain retry will not fix (the agent must do something else).
    static let final: Set<Int> = [100, 131047, 131051, 132000, 132001, 132005, 132007, 132012, 132015, 132016, 131009]

    /// A sentence for the agent for Meta's documented error codes.
    static func sentence(code: Int?, fallback: String?) -> String {
        switch code {
        case 131047: "More than 24 hours have passed since the customer last wrote: send an approved template instead."
        case 131026: "WhatsApp could not deliver the message: the number may not use WhatsApp, or the customer's app is out of date."
        case 131053: "WhatsApp could not process the media file."
        case 131051: "WhatsApp does not support this kind of message."
        case 131030: "This number is not on the test allow-list of the WhatsApp account."
        case 131021: "The customer's number is the business's own number."
        case 190: "The WhatsApp access token is invalid or has expired: an admin must reconnect WhatsApp in Settings."
        case 10, 200: "The WhatsApp access token lacks the permission to send: an admin must check it in Meta's Business Manager."
        case 132000: "The template's parameters do not match the approved template."
        case 132001: "This template does not exist in this language or is not approved."
        case 130429, 131056, 80007: "WhatsApp's rate limit was reached."
        default:
            "WhatsApp refused the message" + (fallback.map { ": \($0.prefix(300))" } ?? ".")
        }
    }
}
