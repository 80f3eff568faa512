import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// A local endpoint that follows Twilio's documented contract: the Messages resource
/// (`POST /2010-04-01/Accounts/{sid}/Messages.json`, HTTP Basic with the account SID and auth
/// token, form fields `To`, `From`, `Body` or `MediaUrl`, `StatusCallback`), the
/// IncomingPhoneNumbers list, and MMS media that needs Basic authentication and redirects to a CDN
/// on another origin (a second endpoint), as Twilio's media URLs do. It records what it received,
/// fetches every `MediaUrl` it is given (as Twilio does before sending an MMS) and answers with the
/// documented responses (fixtures) or scripted errors.
final class FakeTwilio: Sendable {
    struct Sent: Sendable {
        var fields: [(String, String)]
        /// What `MediaUrl` served when this endpoint fetched it.
        var media: Data?
        var mediaType: String?

        func field(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
    }

    struct State {
        var sent: [Sent] = []
        var media: [String: (data: Data, mime: String)] = [:]
        var scripted: [(Int, Data)] = []
        var mediaRequests = 0
        var cdnRequests = 0
        /// Requests that reached the CDN with the account's credentials (they must not).
        var cdnCredentialLeaks = 0
        var counter = 0
        var mms = true
    }

    let accountSid: String
    let authToken: String
    let state = Mutex(State())
    private nonisolated(unsafe) var api: LocalEndpoint?
    private nonisolated(unsafe) var cdn: LocalEndpoint?

    var baseURL: String { "http://127.0.0.1:\(api?.port ?? 0)" }
    var origin: String { baseURL }
    var cdnOrigin: String { "http://127.0.0.1:\(cdn?.port ?? 0)" }

    init(accountSid: String, authToken: String) {
        self.accountSid = accountSid
        self.authToken = authToken
    }

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/twilio/\(name)"))
    }

    static func start(accountSid: String, authToken: String) async throws -> FakeTwilio {
        let fake = FakeTwilio(accountSid: accountSid, authToken: authToken)
        let router = Router()
        router.post("/2010-04-01/Accounts/{sid}/Messages.json") { request, context in try await fake.create(request, context) }
        router.get("/2010-04-01/Accounts/{sid}/IncomingPhoneNumbers.json") { request, context in try fake.numbers(request, context) }
        router.get("/2010-04-01/Accounts/{sid}/Messages/{message}/Media/{media}") { request, context in fake.mediaRedirect(request, context) }
        fake.api = await LocalEndpoint.start(router, label: "fake-twilio")
        let cdnRouter = Router()
        cdnRouter.get("/media/{media}") { request, context in fake.cdnFile(request, context) }
        fake.cdn = await LocalEndpoint.start(cdnRouter, label: "fake-twilio-cdn")
        return fake
    }

    func stop() async {
        await api?.stop()
        await cdn?.stop()
    }

    /// A customer's MMS media item; returns its media URL (on the API origin, like Twilio's).
    func addMedia(_ id: String, data: Data, mime: String) -> String {
        state.withLock { $0.media[id] = (data, mime) }
        return "\(baseURL)/2010-04-01/Accounts/\(accountSid)/Messages/MMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2/Media/\(id)"
    }

    func script(_ answers: [(Int, Data)]) { state.withLock { $0.scripted += answers } }
    var sent: [Sent] { state.withLock { $0.sent } }

    private var basic: String { "Basic " + Data("\(accountSid):\(authToken)".utf8).base64EncodedString() }

    private func json(_ status: HTTPResponse.Status, _ data: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    private func error(_ status: HTTPResponse.Status, code: Int, _ message: String) -> Response {
        json(status, Data(#"{"code": \#(code), "message": "\#(message)", "more_info": "https://www.twilio.com/docs/errors/\#(code)", "status": \#(status.code)}"#.utf8))
    }

    private func authorized(_ request: Request, _ context: BasicRequestContext) -> Bool {
        request.headers[.authorization] == basic && context.parameters.get("sid") == accountSid
    }

    private func numbers(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        guard authorized(request, context) else { return error(.unauthorized, code: 20003, "Authenticate") }
        var text = String(decoding: try Self.fixture("incoming-phone-numbers.json"), as: UTF8.self)
        if !state.withLock({ $0.mms }) { text = text.replacingOccurrences(of: "\"mms\": true", with: "\"mms\": false") }
        if request.uri.queryParameters["PhoneNumber"].map(String.init) != "+15557122661" {
            text = #"{"incoming_phone_numbers": [], "page": 0, "page_size": 50, "next_page_uri": null}"#
        }
        return json(.ok, Data(text.utf8))
    }

    /// Twilio's media URL: Basic authentication, then a redirect to a short-lived CDN address.
    private func mediaRedirect(_ request: Request, _ context: BasicRequestContext) -> Response {
        state.withLock { $0.mediaRequests += 1 }
        guard authorized(request, context) else { return error(.unauthorized, code: 20003, "Authenticate") }
        let id = context.parameters.get("media") ?? ""
        return Response(status: .temporaryRedirect, headers: [.location: "\(cdnOrigin)/media/\(id)?Expires=1700000000&Signature=test"])
    }

    private func cdnFile(_ request: Request, _ context: BasicRequestContext) -> Response {
        let file = state.withLock { state -> (data: Data, mime: String)? in
            state.cdnRequests += 1
            if request.headers[.authorization] != nil { state.cdnCredentialLeaks += 1 }
            return state.media[context.parameters.get("media") ?? ""]
        }
        guard let file else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [.contentType: file.mime], body: .init(byteBuffer: ByteBuffer(data: file.data)))
    }

    private func create(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard authorized(request, context) else { return error(.unauthorized, code: 20003, "Authenticate") }
        guard request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return error(.badRequest, code: 21601, "Content-Type must be application/x-www-form-urlencoded")
        }
        let body = try await request.body.collect(upTo: 64 * 1024)
        let fields: [(String, String)] = String(buffer: body).split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = parts.first?.removingPercentEncoding else { return nil }
            return (key, parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" : "")
        }
        var sent = Sent(fields: fields)
        // The documented requirements: To, a sender (From or MessagingServiceSid), and content.
        guard sent.field("To")?.hasPrefix("+") == true else { return error(.badRequest, code: 21604, "A 'To' phone number is required.") }
        guard sent.field("From") != nil || sent.field("MessagingServiceSid") != nil else {
            return error(.badRequest, code: 21603, "A 'From' or 'MessagingServiceSid' parameter is required")
        }
        guard sent.field("Body").map({ !$0.isEmpty }) == true || sent.field("MediaUrl") != nil else {
            return error(.badRequest, code: 21602, "Message body is required.")
        }
        if let body = sent.field("Body"), body.count > 1600 {
            return error(.badRequest, code: 21617, "The concatenated message body exceeds the 1600 character limit.")
        }
        // Twilio fetches each MediaUrl itself, from the public internet (here: the test server).
        if let url = sent.field("MediaUrl"), let address = URL(string: url) {
            // AsyncHTTPClient, not URLSession: Linux's URLSession crashes and hangs now and then (ParleyClient.exchange).
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: address.absoluteString), timeout: .seconds(30))
            let data = Data(try await response.body.collect(upTo: 32 * 1024 * 1024).readableBytesView)
            guard response.status.code == 200 else {
                return error(.badRequest, code: 21620, "Invalid media URL(s)")
            }
            sent.media = data
            sent.mediaType = response.headers.first(name: "Content-Type")
        }
        let scripted = state.withLock { state -> (Int, Data)? in
            state.sent.append(sent)
            return state.scripted.isEmpty ? nil : state.scripted.removeFirst()
        }
        if let scripted { return json(HTTPResponse.Status(code: scripted.0), scripted.1) }
        let n = state.withLock { state in
            state.counter += 1
            return state.counter
        }
        let sid = "SM" + String(repeating: "0", count: 32 - String(n).count) + String(n)
        let text = String(decoding: try Self.fixture("message-create.json"), as: UTF8.self)
            .replacingOccurrences(of: "SMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", with: sid)
        return json(.created, Data(text.utf8))
    }
}
