import Foundation
import Hummingbird
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia

/// Turns every error into the one JSON error shape with a stable code, and logs server faults.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = ParleyRequestContext

    @concurrent func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ParleyError {
            return Self.response(for: error)
        } catch let error as HTTPError {
            return Self.response(for: Self.translate(error))
        } catch let error as BlobStoreUnavailable {
            context.logger.warning("the media store is unavailable", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            return Self.response(for: Self.mediaUnavailable)
        } catch let error as any HTTPResponseError {
            return Self.response(
                for: ParleyError(Self.kind(for: error.status), code: Self.code(for: error.status), message: error.status.reasonPhrase))
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))", "path": "\(request.uri.path)"])
            return Self.response(for: ParleyError(.internalError, code: .internalError, message: "Something went wrong on our side. Try again."))
        }
    }

    static let mediaUnavailable = ParleyError(
        .unavailable, code: .mediaUnavailable, message: "Media storage is not answering. Send it again in a moment.", retryAfter: 5)

    static func translate(_ error: HTTPError) -> ParleyError {
        switch error.status {
        case .notFound:
            return ParleyError(.notFound, code: .routeNotFound, message: "There is no such endpoint. See the OpenAPI document.")
        case .contentTooLarge:
            return ParleyError(.payloadTooLarge, code: .payloadTooLarge, message: "The request body is too large.")
        default:
            return ParleyError(kind(for: error.status), code: code(for: error.status), message: error.body ?? error.status.reasonPhrase)
        }
    }

    static func status(for kind: ParleyError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .badRequest: .badRequest
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .requestTimeout: .requestTimeout
        case .conflict: .conflict
        case .gone: .gone
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unprocessable: .unprocessableContent
        case .rateLimited: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    static func kind(for status: HTTPResponse.Status) -> ParleyError.Kind {
        switch status.code {
        case 401: .unauthorized
        case 403: .forbidden
        case 404: .notFound
        case 408: .requestTimeout
        case 409: .conflict
        case 410: .gone
        case 413: .payloadTooLarge
        case 415: .unsupportedMediaType
        case 422: .unprocessable
        case 429: .rateLimited
        case 503: .unavailable
        case 400..<500: .badRequest
        default: .internalError
        }
    }

    static func code(for status: HTTPResponse.Status) -> ErrorCode {
        switch status.code {
        case 400: .badRequest
        case 401: .unauthenticated
        case 403: .forbidden
        case 404: .notFound
        case 405: .methodNotAllowed
        case 409: .conflict
        case 413: .payloadTooLarge
        case 415: .unsupportedMediaType
        case 429: .rateLimited
        default: status.code >= 500 ? .internalError : .badRequest
        }
    }

    static func response(for error: ParleyError) -> Response {
        let body = ErrorBody(code: error.code, message: error.message, field: error.field, retryAfter: error.retryAfter)
        let data = (try? ParleyCoders.encoder.encode(body)) ?? Data("{\"error\":{\"code\":\"internal_error\",\"message\":\"\"}}".utf8)
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if error.kind == .unauthorized {
            headers[.wwwAuthenticate] = "Bearer"
        }
        if let retryAfter = error.retryAfter {
            headers[.retryAfter] = String(retryAfter)
        }
        return Response(status: status(for: error.kind), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
