import Crypto
import Foundation

/// AWS Signature Version 4 for the `Authorization` header (S3 and every S3-compatible store).
///
/// Written here because no package in our mirror signs AWS requests (there is no Swift S3 SDK in
/// it); the hashing and HMAC are swift-crypto's. Checked against AWS's published SigV4 test suite
/// and the S3 examples of its documentation (`SigV4Tests`).
public struct SigV4: Sendable {
    public var accessKey: String
    public var secretKey: String
    public var region: String
    public var service: String

    public init(accessKey: String, secretKey: String, region: String, service: String = "s3") {
        (self.accessKey, self.secretKey, self.region, self.service) = (accessKey, secretKey, region, service)
    }

    /// The SHA-256 of an empty body, and the value S3 takes for a body that is not hashed.
    public static let emptyPayloadHash = hex(SHA256.hash(data: Data()))
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// One request to sign: `path` as it will be sent (already percent-encoded, e.g. "/bucket/a%20b"),
    /// `query` as name/value pairs (not encoded), headers by name.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(String, String)]
        public var headers: [(String, String)]
        public var payloadHash: String

        public init(method: String, path: String, query: [(String, String)] = [], headers: [(String, String)], payloadHash: String) {
            (self.method, self.path, self.query, self.headers, self.payloadHash) = (method, path, query, headers, payloadHash)
        }
    }

    /// `x-amz-date`'s format: 20150830T123600Z.
    public static func amzDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: date)
    }

    /// The canonical request (task 1 of the signing process).
    public static func canonicalRequest(_ request: Request) -> (text: String, signedHeaders: String) {
        // Header names lower-cased and sorted; values trimmed, inner runs of spaces made one, and a
        // name given twice joined with commas in the order given.
        var headers: [String: [String]] = [:]
        for (name, value) in request.headers {
            let trimmed = value.trimmingCharacters(in: .whitespaces).split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            headers[name.lowercased(), default: []].append(trimmed)
        }
        let names = headers.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(headers[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let encoded: [(name: String, value: String)] = request.query.map { pair in (encode(pair.0), encode(pair.1)) }
        let sorted = encoded.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        let query = sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
        let text = [request.method, request.path, query, canonicalHeaders, signedHeaders, request.payloadHash].joined(separator: "\n")
        return (text, signedHeaders)
    }

    /// The string to sign (task 2).
    public func stringToSign(canonicalRequest: String, amzDate: String) -> String {
        ["AWS4-HMAC-SHA256", amzDate, scope(amzDate), Self.hex(SHA256.hash(data: Data(canonicalRequest.utf8)))].joined(separator: "\n")
    }

    /// The `Authorization` header's value (tasks 3 and 4). `x-amz-date` must be among the headers.
    public func authorization(_ request: Request) -> String {
        let amzDate = request.headers.first { $0.0.lowercased() == "x-amz-date" }?.1 ?? ""
        let (canonical, signedHeaders) = Self.canonicalRequest(request)
        let toSign = stringToSign(canonicalRequest: canonical, amzDate: amzDate)
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(toSign.utf8), using: signingKey(day: String(amzDate.prefix(8)))))
        return "AWS4-HMAC-SHA256 Credential=\(accessKey)/\(scope(amzDate)), SignedHeaders=\(signedHeaders), Signature=\(signature)"
    }

    private func scope(_ amzDate: String) -> String {
        "\(amzDate.prefix(8))/\(region)/\(service)/aws4_request"
    }

    private func signingKey(day: String) -> SymmetricKey {
        var key = SymmetricKey(data: Data("AWS4\(secretKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        return key
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters, as SigV4 requires
    /// (and, with `slash: false`, for a path: "/" kept).
    public static func encode(_ text: String, slash: Bool = true) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(Character(UnicodeScalar(byte)))
            case UInt8(ascii: "/") where !slash:
                out.append("/")
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    public static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        digest.map { String(format: "%02x", $0) }.joined()
    }
}
