import HTTPTypes
import Hummingbird

/// Headers every response carries: no sniffing, no framing by other sites, no referrer leaks.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let frameOptions = HTTPField.Name("X-Frame-Options")!

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[Self.referrerPolicy] = "no-referrer"
        if request.uri.path == "/cobrowse-view.html" {
            // The frame the workspace builds a customer's page into (co-browse): nothing runs in it,
            // no form goes anywhere, and the page's styles, images and fonts load from its site.
            response.headers[Self.frameOptions] = "SAMEORIGIN"
            response.headers[.contentSecurityPolicy] =
                "default-src 'none'; script-src 'none'; object-src 'none'; form-action 'none'; base-uri 'none'; img-src http: https: data:; style-src http: https: 'unsafe-inline'; font-src http: https: data:; media-src 'none'; frame-src 'none'; connect-src 'none'; frame-ancestors 'self'"
        } else if response.headers[.contentType]?.hasPrefix("text/html") == true {
            // The widget is made to be framed by the brand's own sites (embed.js); nothing else is.
            let framable = request.uri.path == "/widget.html"
            if !framable { response.headers[Self.frameOptions] = "DENY" }
            response.headers[.contentSecurityPolicy] =
                "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data: blob:; media-src 'self' blob:; style-src 'self'; script-src 'self'; frame-ancestors \(framable ? "*" : "'none'")"
        }
        return response
    }
}
