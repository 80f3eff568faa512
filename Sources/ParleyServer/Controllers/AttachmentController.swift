import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyMedia

/// Images and files: uploads from consumers and agents, and the files themselves.
struct AttachmentController {
    let attachments: AttachmentService
    let blobs: any BlobStore
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        routes.consumers.post("/v1/consumer/attachments", use: upload)
        routes.agents.post("/v1/conversations/{conversationId}/attachments", use: upload)
        routes.anyone.get("/v1/files/{messageId}/{variant}", use: file)
        routes.open.get("/v1/logos/{brandId}", use: logo)
    }

    /// Public: a logo is shown on the brand's own pages, to anyone.
    @Sendable func logo(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let brandId = try context.id("brandId", as: BrandID.self, what: "Logo")
        let logo = try await attachments.logo(brandId: brandId)
        var response = try await MediaResponse.make(
            request, blobs: blobs, key: logo.key, contentType: "image/png", bytes: logo.bytes, etag: "\"\(brandId)-logo-\(logo.version)\"",
            disposition: "inline")
        response.headers[.cacheControl] = "public, max-age=86400"
        return response
    }

    /// Both routes: a consumer (conversation in the query) or an agent (in the path).
    @Sendable func upload(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SendMessageResponse> {
        let upload = try UploadRequest(request, context: context, trustProxy: configuration.trustProxy)
        let response = try await attachments.upload(
            upload.principal, clientMessageId: upload.clientMessageId, conversationId: upload.conversationId,
            fileName: request.queryString("name"), contentLength: upload.contentLength, body: request.body,
            clientAddress: upload.clientAddress)
        return JSONResponse(response.created ? .created : .ok, response)
    }

    /// The file, or an image's thumbnail. Images are shown inline; anything else is a download, so
    /// that no document is ever rendered as a page of this origin.
    @Sendable func file(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let messageId = try context.id("messageId", as: MessageID.self, what: "Attachment")
        let variant = context.parameters.get("variant")
        guard variant == "original" || variant == "thumbnail" else { throw ParleyError.notFound("Attachment") }
        let thumbnail = variant == "thumbnail"
        let file = try await attachments.file(principal, messageId: messageId, thumbnail: thumbnail)
        let inline = file.record.type.isImage && request.uri.queryParameters["download"] == nil
        // Cleaned again: names stored before format characters were removed still had them.
        let clean = AttachmentRules.cleanFileName(file.record.fileName, type: file.record.type)
        let name = clean.unicodeScalars.map { $0.isASCII && $0 != "\\" ? String($0) : "_" }.joined()
        let encoded = clean.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
        return try await MediaResponse.make(
            request, blobs: blobs, key: file.key, contentType: file.contentType, bytes: file.bytes,
            etag: "\"\(messageId)-\(variant ?? "")-\(file.bytes)\"",
            disposition: inline ? "inline" : "attachment; filename=\"\(name)\"; filename*=UTF-8''\(encoded)")
    }
}
