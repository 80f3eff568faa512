import Foundation
import Hummingbird

/// Which pages may use the session cookie: the server's own (an `Origin` naming the request's host)
/// and the origins in `PARLEY_ALLOWED_ORIGINS`. Used by `AuthMiddleware` for every routed request and
/// by the connection guard for WebSocket upgrades, which Hummingbird can only refuse with a bare 400.
struct OriginPolicy: Sendable {
    let allowedOrigins: Set<String>

    init(allowedOrigins: [String] = []) {
        self.allowedOrigins = Set(allowedOrigins.map { $0.lowercased() })
    }

    /// A request authenticated by the cookie that changes something (any method but GET/HEAD/OPTIONS)
    /// or opens the real-time WebSocket must pass `allows`.
    static func needsCheck(_ request: Request) -> Bool {
        switch request.method {
        case .get, .head, .options: request.uri.path == RealtimeController.path
        default: true
        }
    }

    /// True when the request's cookie may be used: no cookie token, or a check it passes.
    func admitsCookie(of request: Request) -> Bool {
        guard let (_, viaCookie) = AuthMiddleware.token(in: request), viaCookie, Self.needsCheck(request) else { return true }
        return allows(request)
    }

    /// No `Origin` (not a browser, or a same-origin GET) is allowed; `null` and foreign origins are not.
    func allows(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin]?.lowercased() else { return true }
        if allowedOrigins.contains(origin) { return true }
        guard let url = URL(string: origin), let host = url.host, let scheme = url.scheme else { return false }
        let authority = url.port.map { "\(host):\($0)" } ?? host
        guard let requestHost = request.head.authority?.lowercased() else { return false }
        let defaultPort = scheme == "https" ? 443 : 80
        return requestHost == authority || requestHost == "\(authority):\(defaultPort)" || "\(requestHost):\(defaultPort)" == authority
    }

    /// What a refused request is told (code `origin_not_allowed`, 403).
    static let refusalMessage = "This request came from a page of another site; sign-in cookies only work on Parley's own pages."
}
