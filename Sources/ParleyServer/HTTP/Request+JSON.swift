import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain

extension Request {
    /// Reads a JSON body of at most `limit` bytes and decodes it, with a specific error for each way
    /// it can be wrong: too large (413), not JSON (415), malformed (400 `invalid_json`), a missing
    /// field (400 `missing_field`) or one of the wrong type (400 `invalid_field`).
    func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        // A body without `application/json` is refused: an HTML form or a `no-cors` fetch from another
        // site can send a body, but not with this type, so this also stops cross-site form posts.
        guard let contentType = headers[.contentType], contentType.lowercased().hasPrefix("application/json") else {
            throw ParleyError(.unsupportedMediaType, code: .unsupportedMediaType, message: "Send the body as application/json.")
        }
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: limit)
        } catch {
            throw ParleyError(.payloadTooLarge, code: .payloadTooLarge, message: "The request body is larger than \(limit) bytes.")
        }
        if buffer.readableBytes == 0 {
            throw ParleyError(.badRequest, code: .invalidJson, message: "The request needs a JSON body.")
        }
        do {
            return try ParleyCoders.decoder.decode(T.self, from: Data(buffer: buffer))
        } catch let error as DecodingError {
            throw ParleyError.from(error)
        }
    }
}

extension ParleyError {
    /// A specific client error for each way JSON decoding fails.
    static func from(_ error: DecodingError) -> ParleyError {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.reduce(into: "") { result, key in
                if let index = key.intValue {
                    result += "[\(index)]"
                } else {
                    result += result.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
        }
        switch error {
        case .keyNotFound(let key, let context):
            let field = path(context.codingPath + [key])
            return .missingField(field)
        case .valueNotFound(_, let context):
            return .missingField(path(context.codingPath))
        case .typeMismatch(_, let context) where context.codingPath.isEmpty:
            return ParleyError(.badRequest, code: .invalidJson, message: "The body must be a JSON object.")
        case .typeMismatch(let type, let context):
            let field = path(context.codingPath)
            return .invalidField(field, "'\(field)' has the wrong type; expected \(describe(type)).")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return ParleyError(.badRequest, code: .invalidJson, message: "The body is not valid JSON.")
            }
            let field = path(context.codingPath)
            if context.debugDescription.hasPrefix(ParleyJSON.dateErrorPrefix) {
                return .invalidDate(field)
            }
            return .invalidField(field, "'\(field)' has an invalid value: \(context.debugDescription)")
        @unknown default:
            return ParleyError(.badRequest, code: .invalidJson, message: "The body is not valid JSON.")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Bool.Type: "true or false"
        case is Double.Type: "a number"
        default: "\(type)".lowercased().contains("array") ? "an array" : "an object"
        }
    }
}

/// Encodes a value as a JSON response with a chosen status.
struct JSONResponse<Value: Encodable & Sendable>: ResponseGenerator {
    var status: HTTPResponse.Status
    var value: Value
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status = .ok, _ value: Value, headers: HTTPFields = [:]) {
        self.status = status
        self.value = value
        self.headers = headers
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = try ParleyCoders.encoder.encode(value)
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Request {
    /// A query parameter as an integer in a range, or a 400 naming it.
    func queryInt(_ name: String, default defaultValue: Int, range: ClosedRange<Int>) throws(ParleyError) -> Int {
        guard let raw = uri.queryParameters[Substring(name)] else { return defaultValue }
        guard let value = Int(String(raw)), range.contains(value) else {
            throw .invalidField(name, "'\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    func queryString(_ name: String) -> String? {
        uri.queryParameters[Substring(name)].map(String.init)
    }
}

extension ParleyRequestContext {
    /// A path parameter that must be an id of this kind (checked by `ID.init?(_:)`, where ids enter);
    /// anything else cannot exist: 404 naming `what`.
    func id<Tag>(_ name: String, as _: ID<Tag>.Type, what: String) throws(ParleyError) -> ID<Tag> {
        guard let id = parameters.get(name, as: ID<Tag>.self) else { throw .notFound(what) }
        return id
    }
}
