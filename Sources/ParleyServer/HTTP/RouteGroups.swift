import Hummingbird
import ParleyDomain

/// The API's routes grouped by who may call them. A group's middleware resolves the session (if
/// any) and refuses the wrong principal before a handler runs or a body is read; handlers then only
/// take the principal from the context. Services still decide what only they can: which
/// conversation a principal may see, what an agent's role allows on a target.
struct RouteGroups {
    /// No session is looked up: liveness and metrics (which has its own token).
    let open: RouterGroup<ParleyRequestContext>
    /// A session is resolved when one is sent, and none is required: sign-in, a new consumer session,
    /// sign-out, media (agents and consumers alike), the plain-HTTP answer of the real-time endpoint.
    let anyone: RouterGroup<ParleyRequestContext>
    /// Agents of any role.
    let agents: RouterGroup<ParleyRequestContext>
    /// Agents with the admin role.
    let admins: RouterGroup<ParleyRequestContext>
    /// Consumers (the widget and the SDK).
    let consumers: RouterGroup<ParleyRequestContext>

    init(_ router: Router<ParleyRequestContext>, authentication: AuthMiddleware) {
        open = router.group()
        anyone = router.group().add(middleware: authentication)
        agents = router.group().add(middleware: authentication).add(middleware: PrincipalGate(.agent))
        admins = router.group().add(middleware: authentication).add(middleware: PrincipalGate(.admin))
        consumers = router.group().add(middleware: authentication).add(middleware: PrincipalGate(.consumer))
    }
}

/// Lets a request through only with the principal its route group is for.
struct PrincipalGate: RouterMiddleware {
    typealias Context = ParleyRequestContext
    enum Rule: Sendable { case agent, admin, consumer }
    let rule: Rule

    init(_ rule: Rule) { self.rule = rule }

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        switch rule {
        case .agent: _ = try context.requireAgent()
        case .admin: try context.requireAgent().require(.admin)
        case .consumer: _ = try context.requireConsumer()
        }
        return try await next(request, context)
    }
}
