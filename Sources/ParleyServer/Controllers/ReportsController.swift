import Foundation
import HTTPTypes
import Hummingbird
import ParleyAPI
import ParleyDomain

/// Reports: the contact centre now, and a period's numbers as JSON or CSV.
struct ReportsController {
    let reports: ReportsService

    func addRoutes(to routes: RouteGroups) {
        routes.agents.get("/v1/reports/live", use: live)
        routes.agents.get("/v1/reports", use: history)
    }

    @Sendable func live(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<LiveReportDTO> {
        JSONResponse(.ok, try await reports.live(context.requireAgent()))
    }

    @Sendable func history(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let agent = try context.requireAgent()
        let query = request.uri.queryParameters
        guard let fromText = query.get("from") else { throw ParleyError.missingField("from") }
        guard let toText = query.get("to") else { throw ParleyError.missingField("to") }
        let from = try TranscriptController.instant(fromText, field: "from", endOfDay: false)
        let to = try TranscriptController.instant(toText, field: "to", endOfDay: true)
        guard let groupBy = ReportGrouping(rawValue: query.get("groupBy") ?? "day") else {
            throw ParleyError.invalidField("groupBy", "'groupBy' is day, agent, team or channel.")
        }
        var filter = ReportsService.Filter()
        if let channel = query.get("channel") {
            guard let value = Channel(rawValue: channel) else { throw ParleyError.invalidField("channel", "'\(channel)' is not a channel.") }
            filter.channel = value
        }
        if let agentId = query.get("agentId") {
            guard AgentID.isWellFormed(agentId) else { throw ParleyError.invalidField("agentId", "'agentId' is an agent id (agt_...).") }
            filter.agentId = AgentID(rawValue: agentId)
        }
        if let teamId = query.get("teamId") {
            guard TeamID.isWellFormed(teamId) else { throw ParleyError.invalidField("teamId", "'teamId' is a team id (team_...).") }
            filter.teamId = TeamID(rawValue: teamId)
        }
        let format = query.get("format") ?? "json"
        guard ["json", "csv"].contains(format) else { throw ParleyError.invalidField("format", "'format' is json or csv.") }
        var columns = ReportRules.allColumns
        if let chart = query.get("chart") {
            guard let chosen = ReportRules.charts[chart] else {
                throw ParleyError.invalidField("chart", "'chart' is \(ReportRules.charts.keys.sorted().joined(separator: ", ")).")
            }
            columns = chosen
        }
        let report = try await reports.history(agent, from: from, to: to, groupBy: groupBy, filter: filter)
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        if format == "csv" {
            headers[.contentType] = "text/csv; charset=utf-8"
            let name = "report-\(query.get("chart") ?? "all")-by-\(groupBy.rawValue)-\(TranscriptService.day(from))-to-\(TranscriptService.day(to.addingTimeInterval(-1))).csv"
            headers[.contentDisposition] = "attachment; filename=\"\(name)\""
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: ReportRules.csv(report, columns: columns))))
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(data: try ParleyJSON.makeEncoder().encode(report))))
    }
}
