import Hummingbird
import HTTPTypes
import NIOCore
import ParleyDomain
import ParleyMedia

/// A stored file as an HTTP response, for voice notes and attachments alike: an ETag (`304` to a
/// matching If-None-Match), one byte range (`206`, or `416` outside the file), private caching (the
/// bytes under a URL never change; only those allowed to fetch them may keep them), and a
/// Content-Disposition when one is given.
enum MediaResponse {
    static func make(
        _ request: Request, blobs: any BlobStore, key: String, contentType: String, bytes: Int, etag: String, disposition: String?
    ) async throws -> Response {
        var headers: HTTPFields = [
            .contentType: contentType,
            .acceptRanges: "bytes",
            .eTag: etag,
            .cacheControl: "private, max-age=31536000, immutable",
        ]
        if let disposition { headers[.contentDisposition] = disposition }
        if let match = request.headers[.ifNoneMatch], match == etag || match == "*" {
            return Response(status: .notModified, headers: headers)
        }
        var range = 0..<bytes
        var status = HTTPResponse.Status.ok
        if let rangeHeader = request.headers[.range] {
            switch ByteRange.parse(rangeHeader, size: bytes) {
            case .whole:
                break
            case .partial(let requested):
                range = requested
                status = .partialContent
                headers[.contentRange] = "bytes \(requested.lowerBound)-\(requested.upperBound - 1)/\(bytes)"
            case .unsatisfiable:
                var refusal = ErrorMiddleware.response(
                    for: ParleyError(.badRequest, code: .rangeNotSatisfiable, message: "The range is outside the \(bytes) bytes of this file."))
                refusal.status = .rangeNotSatisfiable
                refusal.headers[.contentRange] = "bytes */\(bytes)"
                return refusal
            }
        }
        let data = try await blobs.read(key: key, range: range)
        headers[.contentLength] = "\(data.count)"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
