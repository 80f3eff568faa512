import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore
import Synchronization

/// A local endpoint that follows FCM's HTTP v1 contract and Google's OAuth 2.0 token endpoint: the
/// JWT bearer grant (the assertion checked with the service account's public key, its scope and
/// audience), then `POST /v1/projects/{project}/messages:send` with the access token, answered with
/// the documented message name, or `UNREGISTERED` for tokens the test marks dead.
final class FakeFCM: Sendable {
    struct Sent: @unchecked Sendable {
        var message: [String: Any]
        var token: String? { message["token"] as? String }
        var body: String? { (message["notification"] as? [String: Any])?["body"] as? String }
        var collapseKey: String? { (message["android"] as? [String: Any])?["collapse_key"] as? String }
    }

    struct State: @unchecked Sendable {
        var sent: [Sent] = []
        var tokenRequests = 0
        var unregistered: Set<String> = []
        /// How long each send takes to answer (a slow provider).
        var delay: Duration = .zero
    }

    let state = Mutex(State())
    let publicKey: Insecure.RSA.PublicKey
    let clientEmail: String
    private nonisolated(unsafe) var endpoint: LocalEndpoint?
    var baseURL: String { "http://127.0.0.1:\(endpoint?.port ?? 0)" }
    var tokenURL: String { "\(baseURL)/token" }
    static let accessToken = "ya29.c.b0AXv0zTOyZ-test-access-token"

    init(publicKey: Insecure.RSA.PublicKey, clientEmail: String) {
        self.publicKey = publicKey
        self.clientEmail = clientEmail
    }

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/fcm/\(name)"))
    }

    static func start(publicKey: Insecure.RSA.PublicKey, clientEmail: String) async -> FakeFCM {
        let fake = FakeFCM(publicKey: publicKey, clientEmail: clientEmail)
        let router = Router()
        router.post("/token") { request, _ in try await fake.token(request) }
        router.post("/v1/projects/{project}/messages:send") { request, context in try await fake.send(request, context) }
        fake.endpoint = await LocalEndpoint.start(router, label: "fake-fcm")
        return fake
    }

    func stop() async { await endpoint?.stop() }
    var sent: [Sent] { state.withLock { $0.sent } }

    private func json(_ status: HTTPResponse.Status, _ data: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    private func token(_ request: Request) async throws -> Response {
        struct Assertion: JWTPayload {
            var iss: IssuerClaim
            var scope: String
            var aud: AudienceClaim
            var iat: IssuedAtClaim
            var exp: ExpirationClaim
            func verify(using algorithm: some JWTAlgorithm) async throws { try exp.verifyNotExpired() }
        }
        state.withLock { $0.tokenRequests += 1 }
        let form = String(buffer: try await request.body.collect(upTo: 16 * 1024))
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        let keys = JWTKeyCollection()
        await keys.add(rsa: publicKey, digestAlgorithm: .sha256)
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = fields["assertion"],
            let claims = try? await keys.verify(assertion, as: Assertion.self), claims.iss.value == clientEmail,
            claims.scope == "https://www.googleapis.com/auth/firebase.messaging", claims.aud.value.contains(tokenURL)
        else { return json(.badRequest, Data(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8)) }
        return json(.ok, try Self.fixture("token-response.json"))
    }

    private func send(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard request.headers[.authorization] == "Bearer \(Self.accessToken)" else {
            return json(.unauthorized, Data(#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#.utf8))
        }
        let body = try await request.body.collect(upTo: 64 * 1024)
        guard let object = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
            let message = object["message"] as? [String: Any], message["token"] is String
        else { return json(.badRequest, Data(#"{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}"#.utf8)) }
        let (dead, delay) = state.withLock { state -> (Bool, Duration) in
            state.sent.append(Sent(message: message))
            return (state.unregistered.contains(message["token"] as? String ?? ""), state.delay)
        }
        if delay > .zero { try await Task.sleep(for: delay) }
        if dead { return json(.notFound, try Self.fixture("error-unregistered.json")) }
        return json(.ok, try Self.fixture("send-response.json"))
    }
}
