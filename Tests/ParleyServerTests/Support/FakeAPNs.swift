import Foundation
import ParleyMedia
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import JWTKit
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization

/// A local endpoint that follows APNs' documented contract ("Sending notification requests to
/// APNs"): HTTP/2 over TLS, `POST /3/device/{token}`, a provider token (ES256 JWT whose `kid` is the
/// key id and `iss` the team id), `apns-topic`, `apns-push-type`, `apns-priority`,
/// `apns-collapse-id`, a JSON payload with `aps`; answers 200, or the documented errors
/// (`410 Unregistered`, `400 BadDeviceToken`, `403 ExpiredProviderToken`, 429, 5xx) as JSON with a
/// `reason`. Its certificate is self-signed (openssl) and given to the server as a trusted CA.
final class FakeAPNs: Sendable {
    struct Received: @unchecked Sendable {
        var token: String
        var headers: [String: String]
        var payload: [String: Any]
        var jwtIssuer: String?
        var jwtKeyId: String?

        var alertBody: String? { ((payload["aps"] as? [String: Any])?["alert"] as? [String: Any])?["body"] as? String }
        var badge: Int? { (payload["aps"] as? [String: Any])?["badge"] as? Int }
    }

    struct State: @unchecked Sendable {
        var received: [Received] = []
        /// Tokens answered with 410 Unregistered.
        var unregistered: Set<String> = []
    }

    let state = Mutex(State())
    let publicKey: ES256PublicKey
    let certificateFile: String
    private let directory: URL
    private nonisolated(unsafe) var group: ServiceGroup?
    private nonisolated(unsafe) var task: Task<Void, any Error>?
    private(set) nonisolated(unsafe) var port = 0
    var baseURL: String { "https://127.0.0.1:\(port)" }

    private init(publicKey: ES256PublicKey, directory: URL) {
        self.publicKey = publicKey
        self.directory = directory
        certificateFile = directory.appendingPathComponent("cert.pem").path
    }

    static func start(publicKey: ES256PublicKey) async throws -> FakeAPNs {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // ProcessRunner (posix_spawn), not Foundation's Process (see PushTests.fcmAccount).
        _ = try ProcessRunner(executable: "/usr/bin/openssl").runBlocking([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE",
            "-keyout", directory.appendingPathComponent("key.pem").path, "-out", directory.appendingPathComponent("cert.pem").path,
        ], timeout: .seconds(60))
        let fake = FakeAPNs(publicKey: publicKey, directory: directory)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(fake.certificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: directory.appendingPathComponent("key.pem").path, format: .pem)))
        let router = Router()
        router.post("/3/device/{token}") { request, context in try await fake.receive(request, context) }
        var logger = Logger(label: "fake-apns")
        logger.logLevel = .warning
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, server: try .http2Upgrade(tlsConfiguration: tls), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        fake.group = group
        fake.task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        fake.port = await iterator.next() ?? 0
        return fake
    }

    func stop() async {
        await group?.triggerGracefulShutdown()
        _ = try? await task?.value
        try? FileManager.default.removeItem(at: directory)
    }

    var received: [Received] { state.withLock { $0.received } }

    private func answer(_ status: HTTPResponse.Status, reason: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"\#(reason)"}"#)))
    }

    private func receive(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        struct Claims: JWTPayload {
            var iss: IssuerClaim
            var iat: IssuedAtClaim
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let token = context.parameters.get("token") ?? ""
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        guard let authorization = headers["authorization"], authorization.hasPrefix("bearer ") else {
            return answer(.forbidden, reason: "MissingProviderToken")
        }
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: publicKey)
        guard let claims = try? await keys.verify(String(authorization.dropFirst(7)), as: Claims.self) else {
            return answer(.forbidden, reason: "InvalidProviderToken")
        }
        let jwtHeader = authorization.dropFirst(7).split(separator: ".").first.flatMap { part -> [String: Any]? in
            var text = String(part).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            return Data(base64Encoded: text).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
        }
        guard headers["apns-topic"] != nil, headers["apns-push-type"] == "alert" else { return answer(.badRequest, reason: "MissingTopic") }
        let body = try await request.body.collect(upTo: 4096)  // APNs' payload limit
        guard let payload = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any], payload["aps"] != nil else {
            return answer(.badRequest, reason: "PayloadEmpty")
        }
        let unregistered = state.withLock { state -> Bool in
            state.received.append(Received(
                token: token, headers: headers, payload: payload, jwtIssuer: claims.iss.value, jwtKeyId: jwtHeader?["kid"] as? String))
            return state.unregistered.contains(token)
        }
        if unregistered { return answer(.gone, reason: "Unregistered") }
        return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: UUID().uuidString])
    }
}
