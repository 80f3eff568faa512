import Foundation
import Hummingbird
import Logging
import ParleyDomain
import ServiceLifecycle
import Synchronization

/// A bound on the drain at shutdown. On SIGTERM the server stops taking connections and lets open
/// requests finish, but one slow upload held shutdown for 34 s, and with a 300 s upload deadline it
/// would outlast systemd's 90 s stop timeout (and be killed with everything else). `Drain` keeps the
/// requests in progress; `DrainDeadline`, the first service told to shut down, waits `deadline` and
/// then cuts: the log lists what was still waiting, uploads end with `503 shutting_down` (their
/// clients send them again to another node or after the restart), and whatever is left is cancelled
/// by the service group shortly after (`makeServiceGroup`).
public final class Drain: Sendable {
    struct InFlight: Sendable {
        var method: String
        var path: String
        var started: ContinuousClock.Instant
    }

    private let requests = Mutex<(next: Int, open: [Int: InFlight])>((0, [:]))
    private let cut = Atomic<Bool>(false)
    /// The deadline's timer, once shutdown began; ended by `stop()` (ParleyServices.close).
    private let timer = Mutex<Task<Void, Never>?>(nil)

    public init() {}

    /// Past the deadline: what is still running is to stop.
    public var isCut: Bool { cut.load(ordering: .relaxed) }

    /// Shutdown has begun (SIGTERM): `/ready` says so, and a load balancer sends no new clients.
    public var isDraining: Bool { timer.withLock { $0 != nil } }

    func begin(_ method: String, _ path: String) -> Int {
        requests.withLock { state in
            state.next += 1
            state.open[state.next] = InFlight(method: method, path: path, started: .now)
            return state.next
        }
    }

    func end(_ id: Int) { requests.withLock { _ = $0.open.removeValue(forKey: id) } }

    /// The requests still in progress, oldest first, as "POST /v1/... (34 s)".
    func waiting(now: ContinuousClock.Instant = .now) -> [String] {
        requests.withLock { $0.open.values }.sorted { $0.started < $1.started }.map { request in
            "\(request.method) \(request.path) (\((now - request.started).components.seconds) s)"
        }
    }

    /// Cuts what is left; returns what was waiting.
    func expire() -> [String] {
        cut.store(true, ordering: .relaxed)
        return waiting()
    }

    /// Starts the deadline: after it, `expire()`, and the log says what was waiting.
    func startDeadline(_ deadline: Duration, logger: Logger) {
        timer.withLock { running in
            guard running == nil else { return }
            // The operator's record of why the server stopped taking requests (and the test that its
            // log survives rotation: scripts/package-test.sh rotates, then stops it).
            logger.info(
                "shutting down: no new connections; requests in progress may finish",
                metadata: ["deadline": "\(deadline.components.seconds) s", "in_progress": "\(requests.withLock { $0.open.count })"])
            running = Task {
                guard (try? await Task.sleep(for: deadline)) != nil else { return }
                let waiting = self.expire()
                if !waiting.isEmpty {
                    logger.warning(
                        "the drain deadline passed: cutting the requests still in progress",
                        metadata: ["deadline": "\(deadline.components.seconds) s", "waiting": "\(waiting.joined(separator: ", "))"])
                }
            }
        }
    }

    func stop() { timer.withLock { $0?.cancel() } }

    static let shuttingDown = ParleyError(
        .unavailable, code: .shuttingDown, message: "The server is restarting. Send it again in a moment.", retryAfter: 5)
}

/// Records every request in the drain (only the path: queries can carry tokens).
struct DrainMiddleware<Context: RequestContext>: RouterMiddleware {
    let drain: Drain

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let id = drain.begin(request.method.rawValue, request.uri.path)
        defer { drain.end(id) }
        return try await next(request, context)
    }
}

/// Waits for the shutdown to begin, then starts the drain's deadline. It is the last service of the
/// group, so the first one told that shutdown began; it returns at once so that the others are told
/// (the group shuts services down one after another), and the drain keeps the timer.
struct DrainDeadline: Service {
    let drain: Drain
    let deadline: Duration
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        drain.startDeadline(deadline, logger: logger)
    }
}
