import HTTPTypes
import Hummingbird

/// Times every request until the answer's last byte is written, labelled by the matched route's
/// pattern (`/v1/conversations/{conversationId}`: never the path itself, whose ids would make a
/// series per request), the method and the status class.
///
/// Hummingbird's `MetricsMiddleware` does the same through swift-metrics' process-wide
/// `MetricsSystem`; Parley keeps a registry per server (`/metrics` reads its own, and a test process
/// runs many servers), so it records into `ParleyMetrics` here instead.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext
    let metrics: ParleyMetrics

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let method = Self.methods.contains(request.method) ? request.method.rawValue : "other"
        do {
            var response = try await next(request, context)
            let status = response.status.code
            // Recorded once the body's last byte is written (Hummingbird's own post-write hook is not public).
            let body = response.body
            response.body = ResponseBody(contentLength: body.contentLength) { [metrics] writer in
                defer {
                    metrics.requestAnswered(
                        route: Self.route(context.endpointPath, status: status), method: method, status: status, in: .now - started)
                }
                try await body.write(writer)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.requestAnswered(route: Self.route(context.endpointPath, status: status), method: method, status: status, in: .now - started)
            throw error
        }
    }

    static let methods: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .patch, .delete, .options]

    /// The route's pattern; the pages and scripts (the file middleware answered) are `static`, and
    /// anything no route matched is `unmatched` (Hummingbird names these two `FileMiddleware` and
    /// `NotFound`).
    static func route(_ endpoint: String?, status: Int) -> String {
        switch endpoint {
        case "FileMiddleware": "static"
        case "NotFound": "unmatched"
        case let endpoint?: endpoint
        case nil: status < 400 ? "static" : "unmatched"
        }
    }
}
