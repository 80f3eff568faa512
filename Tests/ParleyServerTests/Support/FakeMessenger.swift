import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// A local endpoint that follows the Messenger Platform's documented contract: the Send API
/// (`POST /{page-id}/messages`, JSON for text, multipart `recipient` / `messaging_type` / `message` /
/// `filedata` for attachments), the Page and User Profile reads, and a CDN that serves customers'
/// attachments. It checks the bearer token and the required fields, records what it received, and
/// answers with the documented responses (fixtures) or scripted errors.
final class FakeMessenger: Sendable {
    struct Sent: Sendable {
        /// The JSON body, or the multipart form's `recipient`, `messaging_type` and `message` fields.
        var fields: [String: String]
        var file: Data?
        var fileType: String?
    }

    struct State {
        var sent: [Sent] = []
        var cdn: [String: (data: Data, mime: String)] = [:]
        var scripted: [(Int, Data)] = []
        var cdnFetches = 0
        var counter = 0
    }

    let token: String
    let pageId: String
    let state = Mutex(State())
    private nonisolated(unsafe) var endpoint: LocalEndpoint?
    var port: Int { endpoint?.port ?? 0 }

    var baseURL: String { "http://127.0.0.1:\(port)/v24.0" }
    var origin: String { "http://127.0.0.1:\(port)" }

    init(token: String, pageId: String) {
        self.token = token
        self.pageId = pageId
    }

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/messenger/\(name)"))
    }

    static func start(token: String, pageId: String) async throws -> FakeMessenger {
        let fake = FakeMessenger(token: token, pageId: pageId)
        let router = Router()
        router.get("/v24.0/{id}") { request, context in try fake.read(request, context) }
        router.get("/cdn/{name}") { _, context in fake.cdn(context) }
        router.post("/v24.0/{id}/messages") { request, context in try await fake.send(request, context) }
        fake.endpoint = await LocalEndpoint.start(router, label: "fake-messenger")
        return fake
    }

    func stop() async {
        await endpoint?.stop()
    }

    /// A customer's attachment on the CDN; returns its URL.
    func addAttachment(_ name: String, data: Data, mime: String) -> String {
        state.withLock { $0.cdn[name] = (data, mime) }
        return "\(origin)/cdn/\(name)"
    }

    func script(_ answers: [(Int, Data)]) { state.withLock { $0.scripted += answers } }
    var sent: [Sent] { state.withLock { $0.sent } }

    private func json(_ status: HTTPResponse.Status, _ data: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    private func refused(_ status: HTTPResponse.Status, code: Int, _ message: String) -> Response {
        json(status, Data(#"{"error":{"message":"\#(message)","type":"OAuthException","code":\#(code),"fbtrace_id":"Atest"}}"#.utf8))
    }

    private func read(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        guard request.headers[.authorization] == "Bearer \(token)" else { return refused(.unauthorized, code: 190, "Invalid OAuth access token.") }
        if context.parameters.get("id") == pageId {
            return json(.ok, Data(#"{"name":"Acme Store","id":"\#(pageId)"}"#.utf8))
        }
        return json(.ok, try Self.fixture("user-profile.json"))
    }

    private func cdn(_ context: BasicRequestContext) -> Response {
        guard let file = state.withLock({ state -> (data: Data, mime: String)? in
            state.cdnFetches += 1
            return state.cdn[context.parameters.get("name") ?? ""]
        }) else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [.contentType: file.mime], body: .init(byteBuffer: ByteBuffer(data: file.data)))
    }

    private func send(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard request.headers[.authorization] == "Bearer \(token)" else { return refused(.unauthorized, code: 190, "Invalid OAuth access token.") }
        guard context.parameters.get("id") == pageId else { return refused(.badRequest, code: 100, "Unknown Page.") }
        let body = try await request.body.collect(upTo: 30 * 1024 * 1024)
        var sent = Sent(fields: [:])
        let type = request.headers[.contentType] ?? ""
        if type.hasPrefix("application/json") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
                return refused(.badRequest, code: 100, "Invalid JSON.")
            }
            for (key, value) in object {
                sent.fields[key] = (value as? String) ?? String(decoding: (try? JSONSerialization.data(withJSONObject: value)) ?? Data(), as: UTF8.self)
            }
        } else if let boundary = MultipartForm.boundary(of: type) {
            var form = try MultipartForm(body, boundary: boundary)
            let file = form.parts.removeValue(forKey: "filedata")
            sent.file = file?.data
            sent.fileType = file?.contentType
            sent.fields = form.parts.mapValues(\.text)
        } else {
            return refused(.badRequest, code: 100, "Unsupported body.")
        }
        // The documented required fields: recipient (with an id), messaging_type, message.
        // RESPONSE within 24 hours; MESSAGE_TAG needs a tag (HUMAN_AGENT: the brand's permission).
        let messagingType = sent.fields["messaging_type"]
        guard let recipient = sent.fields["recipient"], recipient.contains("\"id\""),
            messagingType == "RESPONSE" || (messagingType == "MESSAGE_TAG" && sent.fields["tag"] == "HUMAN_AGENT"),
            let message = sent.fields["message"], message.contains("\"text\"") || (message.contains("\"attachment\"") && sent.file != nil)
        else { return refused(.badRequest, code: 100, "recipient, messaging_type and message are required.") }
        let scripted = state.withLock { state -> (Int, Data)? in
            state.sent.append(sent)
            return state.scripted.isEmpty ? nil : state.scripted.removeFirst()
        }
        if let scripted { return json(HTTPResponse.Status(code: scripted.0), scripted.1) }
        let n = state.withLock { state in
            state.counter += 1
            return state.counter
        }
        var answer = try JSONSerialization.jsonObject(with: try Self.fixture("send-response.json")) as! [String: Any]
        answer["message_id"] = "m_test\(n)"
        return json(.ok, try JSONSerialization.data(withJSONObject: answer))
    }
}
