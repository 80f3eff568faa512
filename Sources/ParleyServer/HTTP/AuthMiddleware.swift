import Hummingbird
import ParleyDomain

/// Finds the session token of a request and, when it is valid, who it belongs to.
///
/// The token is read from `Authorization: Bearer`, then the `parley_session` cookie (browsers), then,
/// for the WebSocket endpoint only, the `access_token` query parameter (browsers cannot set headers on
/// a WebSocket). An invalid token is remembered, not thrown: routes that need a principal report it,
/// public routes (sign-in) ignore it.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext
    let identity: IdentityService

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let token = Self.token(in: request) {
            do {
                let session = try await identity.authenticate(token: token)
                context.principal = session.principal
                context.sessionTokenHash = session.tokenHash
                context.sessionExpiresAt = session.expiresAt
            } catch let error as ParleyError {
                context.authFailure = error
            }
        }
        return try await next(request, context)
    }

    static func token(in request: Request) -> String? {
        if let authorization = request.headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                return String(parts[1]).trimmingCharacters(in: .whitespaces)
            }
        }
        if let cookie = request.cookies[SessionTokens.cookieName]?.value, !cookie.isEmpty {
            return cookie
        }
        if request.uri.path == RealtimeController.path, let token = request.uri.queryParameters["access_token"] {
            return String(token)
        }
        return nil
    }
}
