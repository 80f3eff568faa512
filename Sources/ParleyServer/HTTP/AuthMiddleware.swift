import Foundation
import Hummingbird
import ParleyDomain

/// Finds the session token of a request and, when it is valid, who it belongs to.
///
/// The token is read from `Authorization: Bearer`, then the `parley_session` cookie (browsers), then,
/// for the WebSocket endpoint only, the `access_token` query parameter (browsers cannot set headers on
/// a WebSocket). An invalid token is remembered, not thrown: routes that need a principal report it,
/// public routes (sign-in) ignore it.
///
/// A cookie is sent by the browser on its own, whichever page makes the request, so a request
/// authenticated by the cookie that changes something (any method but GET/HEAD/OPTIONS) or opens the
/// real-time WebSocket must come from a page of this server (its `Origin` names the request's host)
/// or of an origin in `PARLEY_ALLOWED_ORIGINS`; otherwise it is refused with 403 `origin_not_allowed`.
/// Bearer tokens are not sent by browsers on their own, so they need no such check (the widget on a
/// brand's site uses one).
struct AuthMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext
    let identity: IdentityService
    let origins: OriginPolicy

    init(identity: IdentityService, allowedOrigins: [String] = []) {
        self.identity = identity
        self.origins = OriginPolicy(allowedOrigins: allowedOrigins)
    }

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let (token, viaCookie) = Self.token(in: request) {
            if viaCookie, OriginPolicy.needsCheck(request), !origins.allows(request) {
                throw ParleyError(.forbidden, code: .originNotAllowed, message: OriginPolicy.refusalMessage)
            }
            context.authenticatedByCookie = viaCookie
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

    /// The session token and whether it came from the cookie.
    static func token(in request: Request) -> (String, Bool)? {
        if let authorization = request.headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                return (String(parts[1]).trimmingCharacters(in: .whitespaces), false)
            }
        }
        if request.uri.path == RealtimeController.path, let token = request.uri.queryParameters["access_token"] {
            return (String(token), false)
        }
        if let cookie = request.cookies[SessionTokens.cookieName]?.value, !cookie.isEmpty {
            return (cookie, true)
        }
        return nil
    }
}
