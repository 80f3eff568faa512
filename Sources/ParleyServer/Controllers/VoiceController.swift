import Foundation
import HTTPTypes
import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyMedia

/// Voice uploads (raw audio bodies) and playback with Range requests.
struct VoiceController {
    let voice: VoiceService
    let identity: IdentityService
    let blobs: any BlobStore
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.consumers.post("/v1/consumer/voice-messages", use: upload)
        routes.agents.post("/v1/conversations/{conversationId}/voice-messages", use: upload)
        routes.anyone.get("/v1/media/{messageId}/{format}", use: media)
    }

    // MARK: Uploads

    /// Both routes: a consumer (conversation in the query) or an agent (in the path).
    @Sendable func upload(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SendMessageResponse> {
        let upload = try UploadRequest(request, context: context, trustProxy: configuration.trustProxy)
        let response = try await voice.upload(
            upload.principal, clientMessageId: upload.clientMessageId, conversationId: upload.conversationId,
            contentLength: upload.contentLength, body: request.body, clientAddress: upload.clientAddress)
        return JSONResponse(response.created ? .created : .ok, response)
    }

    // MARK: Playback

    @Sendable func media(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let messageId = try context.id("messageId", as: MessageID.self, what: "Voice message")
        guard let format = context.parameters.get("format").flatMap(VoiceFormat.init(rawValue:)) else {
            throw ParleyError.notFound("Rendition")
        }
        let file = try await voice.media(principal, messageId: messageId, format: format)
        let download = request.uri.queryParameters["download"] != nil
        return try await MediaResponse.make(
            request, blobs: blobs, key: file.key, contentType: file.contentType, bytes: file.bytes,
            etag: "\"\(messageId)-\(format.rawValue)-\(file.bytes)\"",
            disposition: download ? "attachment; filename=\"voice-\(messageId).\(file.fileExtension)\"" : nil)
    }
}

/// A single HTTP byte range (RFC 9110 §14.1.2). Several ranges in one request are answered with the
/// whole file, which the RFC allows.
enum ByteRange: Equatable {
    case whole
    case partial(Range<Int>)
    case unsatisfiable

    static func parse(_ header: String, size: Int) -> ByteRange {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return .whole }
        let spec = value.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { return .unsatisfiable }
        if parts[0].isEmpty {
            // bytes=-N: the last N bytes
            guard let suffix = Int(parts[1]), suffix > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - suffix)..<size)
        }
        guard let start = Int(parts[0]), start >= 0, start < size else { return .unsatisfiable }
        if parts[1].isEmpty { return .partial(start..<size) }
        guard let end = Int(parts[1]), end >= start else { return .unsatisfiable }
        return .partial(start..<(min(end, size - 1) + 1))
    }
}
