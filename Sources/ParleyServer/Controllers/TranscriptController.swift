import Foundation
import HTTPTypes
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Transcript downloads: one conversation (any agent of its brand), or a date range (managers and
/// admins), streamed as they are read.
struct TranscriptController {
    let transcripts: TranscriptService

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/conversations/{conversationId}/transcript", use: conversation)
        routes.agents.get("/v1/transcripts", use: range)
    }

    @Sendable func conversation(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let agent = try context.requireAgent()
        let id = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        let format = try TranscriptService.format(request.uri.queryParameters.get("format"))
        return Self.response(try await transcripts.conversation(agent, id: id, format: format))
    }

    @Sendable func range(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let agent = try context.requireAgent()
        let query = request.uri.queryParameters
        let format = try TranscriptService.format(query.get("format"))
        guard let fromText = query.get("from") else { throw ParleyError.missingField("from") }
        guard let toText = query.get("to") else { throw ParleyError.missingField("to") }
        let from = try Self.instant(fromText, field: "from", endOfDay: false)
        let to = try Self.instant(toText, field: "to", endOfDay: true)
        return Self.response(try await transcripts.range(agent, from: from, to: to, format: format))
    }

    /// "2026-11-01" (UTC: the start of the day, or for `to` its end) or an RFC 3339 time, strictly
    /// (`RFC3339`); anything else is `400 invalid_date`.
    static func instant(_ text: String, field: String, endOfDay: Bool) throws -> Date {
        guard let instant = RFC3339.instant(text, endOfDay: endOfDay) else { throw ParleyError.invalidDate(field) }
        return instant
    }

    static func response(_ export: TranscriptService.Export) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = export.format.contentType
        headers[.contentDisposition] = "attachment; filename=\"\(export.fileName)\""
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await export.stream { chunk in try await writer.write(ByteBuffer(string: chunk)) }
            try await writer.finish(nil)
        })
    }
}
