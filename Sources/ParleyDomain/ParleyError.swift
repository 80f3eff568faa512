import ParleyAPI

/// The error every Parley layer throws for a refusal a client can understand.
///
/// `code` is stable and machine-readable; `kind` says which class of failure it is, and the
/// transports map it to an HTTP status or a real-time `error` frame. Codable: a node answering for
/// another (a call frame forwarded to the node that holds the call) sends it back as it is.
public struct ParleyError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, Codable {
        case badRequest          // 400
        case unauthorized        // 401
        case forbidden           // 403
        case notFound            // 404
        case requestTimeout      // 408
        case conflict            // 409
        case gone                // 410
        case payloadTooLarge     // 413
        case unsupportedMediaType // 415
        case unprocessable       // 422
        case rateLimited         // 429
        case unavailable         // 503
        case internalError       // 500
    }

    public var kind: Kind
    public var code: ErrorCode
    public var message: String
    public var field: String?
    /// For `rateLimited`: whole seconds after which a retry can succeed.
    public var retryAfter: Int?

    public init(_ kind: Kind, code: ErrorCode, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code): \(message)" }
}

extension ParleyError {
    public static func notFound(_ what: String) -> ParleyError {
        .init(.notFound, code: .notFound, message: "\(what) was not found.")
    }

    public static func invalidField(_ field: String, _ message: String) -> ParleyError {
        .init(.badRequest, code: .invalidField, message: message, field: field)
    }

    /// A date or time that is not one: RFC 3339 (`2026-11-24T09:30:00Z`) or a plain date (`2026-11-24`).
    public static func invalidDate(_ field: String) -> ParleyError {
        .init(
            .badRequest, code: .invalidDate,
            message: "'\(field)' is a date (2026-11-24) or an RFC 3339 time (2026-11-24T09:30:00Z), and a real one.", field: field)
    }

    public static func missingField(_ field: String) -> ParleyError {
        .init(.badRequest, code: .missingField, message: "The field '\(field)' is required.", field: field)
    }

    public static let unauthenticated = ParleyError(
        .unauthorized, code: .unauthenticated, message: "Sign in first: no valid session or token was given.")

    public static func rateLimited(_ what: String, retryAfter: Int) -> ParleyError {
        .init(.rateLimited, code: .rateLimited, message: "Too many \(what). Try again in \(retryAfter) s.", retryAfter: retryAfter)
    }

    public static func forbidden(_ message: String) -> ParleyError {
        .init(.forbidden, code: .forbidden, message: message)
    }
}
