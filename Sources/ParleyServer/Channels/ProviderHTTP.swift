import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ParleyAPI
import ParleyDomain

/// Parley's calls to messaging providers (their APIs and their media hosts), over one shared
/// AsyncHTTPClient: no redirects are followed (a redirect could point anywhere), every call has a
/// deadline, and every answer a size cap.
public struct ProviderHTTP: Sendable {
    let client: HTTPClient
    /// The whole exchange's deadline.
    let timeout: Duration

    /// `caFile`: extra certificate authorities (PEM) trusted beside the system's.
    public static func makeClient(connectTimeoutSeconds: Int = 5, readTimeoutSeconds: Int, caFile: String? = nil) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(Int64(connectTimeoutSeconds)), read: .seconds(Int64(readTimeoutSeconds))))
        if let caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(caFile)]
            configuration.tlsConfiguration = tls
        }
        configuration.connectionPool = .init(idleTimeout: .seconds(60))
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// What a provider answered.
    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data

        /// `Retry-After` in seconds, when the provider gave one.
        var retryAfter: Duration? {
            headers.first(name: "Retry-After").flatMap(Int.init).map { .seconds(min(max($0, 1), 3600)) }
        }
    }

    /// Why a call did not get an answer.
    enum Failure: Error, CustomStringConvertible {
        /// The request may not have reached the provider (connection refused, DNS): safe to retry.
        case unreachable(String)
        /// The request was sent and no answer came in time: the provider may have acted on it.
        case noAnswer(String)
        /// The answer was larger than allowed.
        case tooLarge(Int)
        /// The URL is not on the allow-list (a media URL pointing elsewhere).
        case hostNotAllowed(String)

        var description: String {
            switch self {
            case .unreachable(let detail): "the provider could not be reached (\(detail))"
            case .noAnswer(let detail): "the provider did not answer in time (\(detail))"
            case .tooLarge(let limit): "the answer is larger than \(limit) bytes"
            case .hostNotAllowed(let host): "\(host) is not an allowed media host"
            }
        }
    }

    /// One request; the answer's body is read up to `maxBytes`.
    func send(_ request: HTTPClientRequest, maxBytes: Int = 1024 * 1024) async throws -> Answer {
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: TimeAmount.nanoseconds(Int64(timeout.seconds * 1e9)))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw Failure.noAnswer("\(error)")
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            throw Failure.noAnswer("\(error)")
        } catch {
            throw Failure.unreachable("\(error)")
        }
        var body = Data()
        do {
            for try await chunk in response.body {
                body.append(contentsOf: chunk.readableBytesView)
                if body.count > maxBytes { throw Failure.tooLarge(maxBytes) }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.noAnswer("\(error)")
        }
        return Answer(status: Int(response.status.code), headers: response.headers, body: body)
    }

    /// Streams a media file from `url` into `file`, refusing a URL whose origin is not allowed and
    /// stopping as soon as the file passes `maxBytes`. Returns the status and the bytes written
    /// (non-2xx answers write nothing).
    ///
    /// Up to `redirects` redirects are followed (Twilio answers a media URL with one to its CDN),
    /// each checked against `allowed` before it is requested; `headers` (the provider's credentials)
    /// only go to the first URL's origin.
    func download(
        _ url: String, headers: HTTPHeaders, allowed: MediaHostAllowList, maxBytes: Int, into file: URL, redirects: Int = 0
    ) async throws -> (status: Int, bytes: Int, contentType: String?) {
        var current = url
        var sendHeaders = headers
        var response: HTTPClientResponse
        var left = redirects
        while true {
            guard allowed.allows(current) else { throw Failure.hostNotAllowed(URLComponents(string: current)?.host ?? current) }
            var request = HTTPClientRequest(url: current)
            request.headers = sendHeaders
            do {
                response = try await client.execute(request, timeout: TimeAmount.nanoseconds(Int64(timeout.seconds * 1e9)))
            } catch {
                throw Failure.unreachable("\(error)")
            }
            let code = Int(response.status.code)
            guard [301, 302, 303, 307, 308].contains(code), left > 0, let location = response.headers.first(name: "Location"),
                let next = URL(string: location, relativeTo: URL(string: current))?.absoluteString
            else { break }
            left -= 1
            if Self.origin(next) != Self.origin(url) { sendHeaders = [:] }
            current = next
        }
        guard (200..<300).contains(Int(response.status.code)) else {
            return (Int(response.status.code), 0, nil)
        }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > maxBytes {
            throw Failure.tooLarge(maxBytes)
        }
        guard FileManager.default.createFile(atPath: file.path, contents: nil), let handle = try? FileHandle(forWritingTo: file) else {
            throw Failure.unreachable("the media file could not be created")
        }
        defer { try? handle.close() }
        var written = 0
        do {
            for try await chunk in response.body {
                written += chunk.readableBytes
                if written > maxBytes { throw Failure.tooLarge(maxBytes) }
                try handle.write(contentsOf: chunk.readableBytesView)
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.noAnswer("\(error)")
        }
        return (Int(response.status.code), written, response.headers.first(name: "Content-Type"))
    }
}

extension ProviderHTTP {
    /// `scheme://host:port` of a URL, for comparing where two URLs lead.
    static func origin(_ url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host?.lowercased() else {
            return nil
        }
        return "\(scheme)://\(host):\(components.port ?? (scheme == "http" ? 80 : 443))"
    }
}

/// The origins media may be fetched from: `lookaside.fbsbx.com` (HTTPS, port 443), `*.fbcdn.net`
/// (HTTPS, any subdomain, not the domain itself) or a full origin like `http://127.0.0.1:8123` (a
/// local test endpoint). A media URL elsewhere is refused
/// before any connection is made, so a forged webhook cannot make Parley fetch internal addresses.
public struct MediaHostAllowList: Sendable, Hashable {
    struct Origin: Hashable {
        var scheme: String
        var host: String
        var port: Int
    }
    let origins: Set<Origin>
    /// `*.fbcdn.net` as `.fbcdn.net`: HTTPS subdomains of it.
    let suffixes: [String]

    public init(_ entries: [String]) {
        var origins: Set<Origin> = []
        var suffixes: [String] = []
        for entry in entries.map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            if entry.hasPrefix("*."), entry.count > 3, !entry.dropFirst(2).contains("*") {
                suffixes.append(String(entry.dropFirst(1)).lowercased())
            } else if entry.contains("://"), let url = URLComponents(string: entry), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() {
                origins.insert(Origin(scheme: scheme, host: host, port: url.port ?? (scheme == "http" ? 80 : 443)))
            } else {
                origins.insert(Origin(scheme: "https", host: entry.lowercased(), port: 443))
            }
        }
        self.origins = origins
        self.suffixes = suffixes
    }

    public func allows(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), components.user == nil, components.password == nil
        else { return false }
        let port = components.port ?? (scheme == "http" ? 80 : 443)
        if scheme == "https", port == 443, suffixes.contains(where: { host.hasSuffix($0) && host.count > $0.count }) { return true }
        return origins.contains(Origin(scheme: scheme, host: host, port: port))
    }
}

/// A Graph API error (WhatsApp, Messenger): `{"error": {"message", "type", "code", "error_subcode",
/// "error_data": {"details"}, "fbtrace_id"}}`.
struct GraphError: Decodable {
    struct Body: Decodable {
        struct ErrorData: Decodable { var details: String? }
        var message: String?
        var code: Int?
        var errorSubcode: Int?
        var errorData: ErrorData?
        enum CodingKeys: String, CodingKey { case message, code, errorSubcode = "error_subcode", errorData = "error_data" }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            message = try? c.decodeIfPresent(String.self, forKey: .message)
            errorData = try? c.decodeIfPresent(ErrorData.self, forKey: .errorData)
            errorSubcode = try? c.decodeIfPresent(Int.self, forKey: .errorSubcode)
            // An integer in Meta's reference; some proxies pass it on as a string.
            code = (try? c.decodeIfPresent(Int.self, forKey: .code)) ?? (try? c.decodeIfPresent(String.self, forKey: .code)).flatMap { $0.flatMap(Int.init) }
        }
    }
    var error: Body
}

/// How a provider's error answer reads: its code, whether it means "slow down", whether sending
/// again can never work, and the sentence the agent reads.
struct ProviderRefusal {
    var code: String?
    var throttled: Bool
    var final: Bool
    var sentence: String
}

extension ProviderHTTP {
    /// One call that sends something (a message, a file) to a provider: 2xx is the answer; 429, 5xx
    /// and throttling codes are retried (after `Retry-After` when given); an unreachable provider is
    /// retried; no answer in time is not (the provider may have acted on it, and a second send would
    /// reach the customer twice); any other error is the provider's refusal as `read` describes it,
    /// retryable unless it is final.
    func deliver(_ request: HTTPClientRequest, read: (Answer) -> ProviderRefusal) async throws -> Answer {
        let answer: Answer
        do {
            answer = try await send(request)
        } catch let failure as Failure {
            switch failure {
            case .unreachable: throw JobFailure.retry(failure.description)
            case .noAnswer:
                throw DeliveryRefused(
                    code: ErrorCode.noAnswer.rawValue, message: "The provider did not answer in time; the message may or may not have been sent.", retryable: true)
            case .tooLarge, .hostNotAllowed: throw JobFailure.permanent(failure.description)
            }
        }
        if (200..<300).contains(answer.status) { return answer }
        let refusal = read(answer)
        if answer.status == 429 || answer.status >= 500 || refusal.throttled {
            throw JobFailure.retry("the provider answered \(answer.status) (\(refusal.code ?? "no code"))", after: answer.retryAfter)
        }
        throw DeliveryRefused(code: refusal.code ?? ErrorCode.http(answer.status).rawValue, message: refusal.sentence, retryable: !refusal.final)
    }

    /// One Graph API call (Meta's WhatsApp and Messenger APIs): `deliver` with Graph's error body,
    /// the `throttled` codes retried, the `final` ones not offered again.
    func graph(
        _ request: HTTPClientRequest, throttled: Set<Int>, final: Set<Int>, sentence: (Int?, Int?, String?) -> String
    ) async throws -> Answer {
        try await deliver(request) { answer in
            let graph = try? JSONDecoder().decode(GraphError.self, from: answer.body)
            let code = graph?.error.code
            return ProviderRefusal(
                code: code.map(String.init), throttled: code.map(throttled.contains) == true, final: code.map(final.contains) == true,
                sentence: sentence(code, graph?.error.errorSubcode, graph?.error.errorData?.details ?? graph?.error.message))
        }
    }
}
