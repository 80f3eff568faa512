import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// A local endpoint that follows the WhatsApp Cloud API's documented contract (WhatsAppAPI.swift
/// lists the calls): it checks what the documentation requires (the bearer token, paths, JSON and
/// multipart fields), records what it received, answers with the documented responses (fixtures),
/// and can be told to answer the next sends with documented errors or 429s. It also serves the
/// media files that `GET /{media-id}` points to, as Meta's lookaside host does.
final class FakeWhatsApp: Sendable {
    struct Upload: Sendable {
        var type: String
        var fileName: String?
        var contentType: String?
        var data: Data
    }

    struct State {
        var media: [String: (data: Data, mime: String)] = [:]
        var uploads: [Upload] = []
        /// Every message send received (JSON), with `_refused` added when it was answered with an error.
        var sent: [Data] = []
        /// Answers for the next message sends (status, body), before the normal answer.
        var scripted: [(Int, Data)] = []
        var refusedAuth = 0
        var messageCounter = 0
        var mediaFetches = 0
        /// Media ids whose download stalls (headers sent, then nothing).
        var stalled: Set<String> = []
    }

    let token: String
    let phoneNumberId: String
    let state = Mutex(State())
    private nonisolated(unsafe) var endpoint: LocalEndpoint?
    var port: Int { endpoint?.port ?? 0 }

    var baseURL: String { "http://127.0.0.1:\(port)/v24.0" }
    var origin: String { "http://127.0.0.1:\(port)" }

    init(token: String, phoneNumberId: String) {
        self.token = token
        self.phoneNumberId = phoneNumberId
    }

    static func fixture(_ name: String) throws -> Data { try WhatsAppTests.fixture(name) }

    /// Starts it on an ephemeral port of 127.0.0.1.
    static func start(token: String, phoneNumberId: String) async throws -> FakeWhatsApp {
        let fake = FakeWhatsApp(token: token, phoneNumberId: phoneNumberId)
        let router = Router()
        router.get("/v24.0/{id}") { request, context in try fake.get(request, context) }
        router.get("/media/{id}") { request, context in try await fake.download(request, context) }
        router.post("/v24.0/{id}/media") { request, context in try await fake.upload(request, context) }
        router.post("/v24.0/{id}/messages") { request, context in try await fake.send(request, context) }
        fake.endpoint = await LocalEndpoint.start(router, label: "fake-whatsapp")
        return fake
    }

    func stop() async {
        await endpoint?.stop()
    }

    /// A received media file Meta would hold (its id is in the webhook).
    func addMedia(id: String, data: Data, mime: String) {
        state.withLock { $0.media[id] = (data, mime) }
    }

    func script(_ answers: [(Int, Data)]) {
        state.withLock { $0.scripted += answers }
    }

    var sent: [[String: Any]] { state.withLock { $0.sent }.compactMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } }
    var uploads: [Upload] { state.withLock { $0.uploads } }

    // MARK: Handlers

    private func authorized(_ request: Request) -> Bool {
        let ok = request.headers[.authorization] == "Bearer \(token)"
        if !ok { state.withLock { $0.refusedAuth += 1 } }
        return ok
    }

    private func json(_ status: HTTPResponse.Status, _ data: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    private func graphError(_ status: HTTPResponse.Status, code: Int, _ message: String) -> Response {
        json(status, Data(#"{"error":{"message":"\#(message)","type":"OAuthException","code":\#(code),"fbtrace_id":"Atest"}}"#.utf8))
    }

    private func get(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        guard authorized(request) else { return graphError(.unauthorized, code: 190, "Invalid OAuth access token.") }
        let id = context.parameters.get("id") ?? ""
        if id == phoneNumberId {
            return json(.ok, Data(#"{"display_phone_number":"15550783881","verified_name":"Acme Support","id":"\#(phoneNumberId)"}"#.utf8))
        }
        guard let media = state.withLock({ $0.media[id] }) else { return graphError(.notFound, code: 100, "Unsupported get request.") }
        let answer = String(decoding: try Self.fixture("media-url.json"), as: UTF8.self)
            .replacingOccurrences(of: "MEDIA_URL", with: "\(origin)/media/\(id)")
            .replacingOccurrences(of: "\"file_size\": 0", with: "\"file_size\": \(media.data.count)")
            .replacingOccurrences(of: "\"audio/ogg\"", with: "\"\(media.mime)\"")
            .replacingOccurrences(of: "1003383421387256", with: id)
        return json(.ok, Data(answer.utf8))
    }

    private func download(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard authorized(request) else { return Response(status: .unauthorized) }
        if state.withLock({ $0.stalled.contains(context.parameters.get("id") ?? "") }) {
            state.withLock { $0.mediaFetches += 1 }
            // A trickle: the first bytes, then nothing for longer than any deadline.
            return Response(status: .ok, headers: [.contentType: "audio/ogg"], body: .init { writer in
                try await writer.write(ByteBuffer(string: "OggS"))
                try await Task.sleep(for: .seconds(6))
                try await writer.finish(nil)
            })
        }
        guard let media = state.withLock({ state -> (data: Data, mime: String)? in
            state.mediaFetches += 1
            return state.media[context.parameters.get("id") ?? ""]
        }) else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [.contentType: media.mime], body: .init(byteBuffer: ByteBuffer(data: media.data)))
    }

    private func upload(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard authorized(request) else { return graphError(.unauthorized, code: 190, "Invalid OAuth access token.") }
        guard context.parameters.get("id") == phoneNumberId else { return graphError(.badRequest, code: 100, "Unknown phone number id.") }
        guard let boundary = MultipartForm.boundary(of: request.headers[.contentType])
        else { return graphError(.badRequest, code: 100, "The upload must be multipart/form-data.") }
        let body = try await request.body.collect(upTo: 100 * 1024 * 1024)
        // The documented fields: messaging_product=whatsapp, type=<MIME type>, file=<the file>.
        let form = try MultipartForm(body, boundary: boundary)
        guard form["messaging_product"]?.text == "whatsapp", let mime = form["type"]?.text, let file = form["file"], !file.data.isEmpty
        else { return graphError(.badRequest, code: 100, "messaging_product, type and file are required.") }
        let fileName = file.fileName
        let fileType = file.contentType
        state.withLock { $0.uploads.append(Upload(type: mime, fileName: fileName, contentType: fileType, data: file.data)) }
        let answer = String(decoding: try Self.fixture("upload-response.json"), as: UTF8.self)
            .replacingOccurrences(of: "1037543291543636", with: "10375432915\(state.withLock { $0.uploads.count })")
        return json(.ok, Data(answer.utf8))
    }

    private func send(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard authorized(request) else { return graphError(.unauthorized, code: 190, "Invalid OAuth access token.") }
        guard context.parameters.get("id") == phoneNumberId else { return graphError(.badRequest, code: 100, "Unknown phone number id.") }
        guard request.headers[.contentType]?.hasPrefix("application/json") == true else {
            return graphError(.badRequest, code: 100, "The body must be JSON.")
        }
        let body = try await request.body.collect(upTo: 1024 * 1024)
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
            object["messaging_product"] as? String == "whatsapp", let to = object["to"] as? String, !to.isEmpty,
            let type = object["type"] as? String, ["text", "audio", "image", "document", "template"].contains(type),
            object[type] is [String: Any]
        else { return graphError(.badRequest, code: 100, "Invalid parameter.") }
        let raw = Data(buffer: body)
        if let scripted = state.withLock({ $0.scripted.isEmpty ? nil : $0.scripted.removeFirst() }) {
            let marked = (try? JSONSerialization.data(withJSONObject: object.merging(["_refused": scripted.0], uniquingKeysWith: { a, _ in a }))) ?? raw
            state.withLock { $0.sent.append(marked) }
            return json(HTTPResponse.Status(code: scripted.0), scripted.1)
        }
        let n = state.withLock { state in
            state.messageCounter += 1
            state.sent.append(raw)
            return state.messageCounter
        }
        let answer = String(decoding: try Self.fixture("send-response.json"), as: UTF8.self)
            .replacingOccurrences(of: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3RjQ5QUE4OEJGNjhGRDFBQjAA", with: "wamid.test\(n)")
        return json(.ok, Data(answer.utf8))
    }
}
