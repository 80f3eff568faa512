import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ParleyStore

/// The id of the request, real-time frame or job a piece of work is done for, carried with the task
/// (a task local) into everything it starts: the jobs it enqueues store it and run under it, and
/// every log line written meanwhile has it as `request_id` (`metadataProvider`). An operator follows
/// one customer's send from nginx's log (which passes its `$request_id`) through Parley's request,
/// the frames and the jobs it caused.
public enum RequestID {
    /// The id the current task works for (kept in ParleyStore's `WorkRequestID`, so that
    /// transactions run by another task keep it).
    public static var current: String? { WorkRequestID.current }

    /// Runs `work` under `id`.
    public static func with<T>(_ id: String?, _ work: () async throws -> T) async rethrows -> T {
        try await WorkRequestID.$current.withValue(id, operation: work)
    }

    /// What logs read: `request_id`, when there is one.
    public static let metadataProvider = Logger.MetadataProvider {
        guard let current else { return [:] }
        return ["request_id": .string(current)]
    }

    static let header = HTTPField.Name("X-Request-Id")!

    /// A caller's id (a proxy's `$request_id`) is kept when it is short and plain; else a new one.
    static func accept(_ given: String?) -> String {
        if let given, (1...64).contains(given.utf8.count),
            given.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") })
        {
            return given
        }
        return make()
    }

    /// `req_` and 16 random characters of base 32.
    static func make() -> String {
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var random = SystemRandomNumberGenerator()
        return "req_" + String(decoding: (0..<16).map { _ in alphabet[Int(random.next() % 32)] }, as: UTF8.self)
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

/// Gives each request its id (`RequestID`) for the work it does, and answers with it in
/// `X-Request-Id` for the client's bug report.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let id = RequestID.accept(request.headers[RequestID.header])
        // Outermost: the answers the drain and the error middleware make have the header too.
        var response = try await RequestID.with(id) { try await next(request, context) }
        response.headers[RequestID.header] = id
        return response
    }
}
