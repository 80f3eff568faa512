import CompressNIO
import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore
import Synchronization

/// A local gateway that follows Apple's Business Chat REST API and sample code: `POST /message`
/// (a gzipped JSON message, the JWT with `iss` the MSP id, `id`, `Source-Id`, `Destination-Id`),
/// `GET /preUpload` and the upload itself (answering the file's checksum), `GET /preDownload`
/// (`MMCS-Url`, `MMCS-Signature`, `MMCS-Owner`) and MMCS, where files are kept encrypted. It records
/// what it received, decrypting attachments with the key each message carries.
final class FakeApple: Sendable {
    struct Sent: @unchecked Sendable {
        var headers: [String: String]
        var message: [String: Any]
        var json: String
        /// The attachment, decrypted with the key in the message.
        var attachment: Data?
        var attachmentType: String?

        var body: String? { message["body"] as? String }
    }

    struct State: @unchecked Sendable {
        var sent: [Sent] = []
        var files: [String: Data] = [:]
        var scripted: [Int] = []
        var preDownloads = 0
        /// What time the gateway thinks it is when it signs (the server's manual clock in tests).
        var now: @Sendable () -> Date = { Date() }
    }

    let mspId: String
    let secret: Data
    let businessId: String
    let state = Mutex(State())
    private nonisolated(unsafe) var endpoint: LocalEndpoint?
    var baseURL: String { "http://127.0.0.1:\(endpoint?.port ?? 0)/v1" }
    var origin: String { "http://127.0.0.1:\(endpoint?.port ?? 0)" }

    init(mspId: String, secret: Data, businessId: String) {
        (self.mspId, self.secret, self.businessId) = (mspId, secret, businessId)
    }

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/apple/\(name)"))
    }

    static func start(mspId: String, secret: Data, businessId: String) async throws -> FakeApple {
        let fake = FakeApple(mspId: mspId, secret: secret, businessId: businessId)
        let router = Router()
        router.post("/v1/message") { request, _ in try await fake.message(request) }
        router.get("/v1/preUpload") { request, _ in try await fake.preUpload(request) }
        router.get("/v1/preDownload") { request, _ in try await fake.preDownload(request) }
        router.post("/mmcs/upload/{name}") { request, context in try await fake.upload(request, context) }
        router.get("/mmcs/files/{name}") { _, context in fake.download(context) }
        fake.endpoint = await LocalEndpoint.start(router, label: "fake-apple")
        return fake
    }

    func stop() async { await endpoint?.stop() }
    var sent: [Sent] { state.withLock { $0.sent } }
    func script(_ statuses: [Int]) { state.withLock { $0.scripted += statuses } }

    /// A JWT as Apple's gateway signs its requests to the MSP (`aud` the MSP id).
    /// `issuedAt` and `expires`: seconds from the gateway's now (`exp` left out when nil).
    func token(audience: String? = nil, secret other: Data? = nil, issuedAt: TimeInterval = 0, expires: TimeInterval? = nil) async throws -> String {
        struct Claims: JWTPayload {
            var aud: AudienceClaim
            var iat: IssuedAtClaim
            var exp: ExpirationClaim?
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(key: SymmetricKey(data: other ?? secret)), digestAlgorithm: .sha256)
        let now = state.withLock { $0.now }()
        return try await keys.sign(Claims(
            aud: AudienceClaim(value: audience ?? mspId), iat: IssuedAtClaim(value: now.addingTimeInterval(issuedAt)),
            exp: expires.map { ExpirationClaim(value: now.addingTimeInterval($0)) }))
    }

    /// Stores `data` encrypted as a customer's attachment; returns the fixture's placeholders.
    func addAttachment(_ data: Data, mimeType: String) throws -> [String: String] {
        let key = SymmetricKey(size: .bits256)
        let encrypted = try AES._CTR.encrypt(data, using: key, nonce: try AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
        let name = UUID().uuidString
        state.withLock { $0.files[name] = encrypted }
        let checksum = Data(Insecure.SHA1.hash(data: encrypted))
        return [
            "MIME_TYPE": mimeType, "FILE_SIZE": String(encrypted.count), "SIGNATURE_HEX": checksum.map { String(format: "%02X", $0) }.joined(),
            "MMCS_URL": "https://p42-content.icloud.com/\(name)", "MMCS_OWNER": "owner-\(name)",
            "DECRYPTION_KEY": "00" + key.withUnsafeBytes { Data($0) }.map { String(format: "%02x", $0) }.joined(),
        ]
    }

    private func authorized(_ request: Request) async -> Bool {
        struct Claims: JWTPayload {
            var iss: IssuerClaim
            var iat: IssuedAtClaim
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return false }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(key: SymmetricKey(data: secret)), digestAlgorithm: .sha256)
        guard let claims = try? await keys.verify(String(header.dropFirst(7)), as: Claims.self) else { return false }
        return claims.iss.value == mspId
    }

    private func header(_ request: Request, _ name: String) -> String? { request.headers[HTTPField.Name(name)!] }

    private func json(_ object: [String: Any]) throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(data: try JSONSerialization.data(withJSONObject: object))))
    }

    private func message(_ request: Request) async throws -> Response {
        guard await authorized(request) else { return Response(status: .unauthorized) }
        var body = try await request.body.collect(upTo: 10 * 1024 * 1024)
        let raw = request.headers[.contentEncoding] == "gzip" ? try body.decompress(with: .gzip()) : body
        guard let message = try JSONSerialization.jsonObject(with: Data(buffer: raw)) as? [String: Any],
            message["v"] as? Int == 1, message["type"] as? String == "text", let id = message["id"] as? String, id == header(request, "id"),
            message["sourceId"] as? String == businessId, header(request, "Source-Id") == businessId,
            let destination = message["destinationId"] as? String, destination == header(request, "Destination-Id")
        else { return Response(status: .badRequest) }
        var sent = Sent(
            headers: ["id": id, "auto-reply": header(request, "auto-reply") ?? ""], message: message, json: String(buffer: raw))
        if let attachment = (message["attachments"] as? [[String: Any]])?.first,
            let url = attachment["mmcs-url"] as? String, let keyText = attachment["decryption-key"] as? String, keyText.hasPrefix("00"),
            let name = url.split(separator: "/").last.map(String.init), let encrypted = state.withLock({ $0.files[name] })
        {
            let key = SymmetricKey(data: Data(hexString: String(keyText.dropFirst(2))))
            sent.attachment = try AES._CTR.decrypt(encrypted, using: key, nonce: try AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
            sent.attachmentType = attachment["mime-type"] as? String
        }
        let status = state.withLock { state -> Int? in
            state.sent.append(sent)
            return state.scripted.isEmpty ? nil : state.scripted.removeFirst()
        }
        return Response(status: HTTPResponse.Status(code: status ?? 200))
    }

    private func preUpload(_ request: Request) async throws -> Response {
        guard await authorized(request), header(request, "Source-Id") == businessId, let size = header(request, "MMCS-Size").flatMap(Int.init), size > 0
        else { return Response(status: .unauthorized) }
        let name = UUID().uuidString
        return try json([
            "upload-url": "\(origin)/mmcs/upload/\(name)", "mmcs-url": "https://p42-content.icloud.com/\(name)", "mmcs-owner": "owner-\(name)",
        ])
    }

    private func upload(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let data = Data(buffer: try await request.body.collect(upTo: 30 * 1024 * 1024))
        let name = context.parameters.get("name") ?? ""
        state.withLock { $0.files[name] = data }
        return try json(["singleFile": ["fileChecksum": Data(Insecure.SHA1.hash(data: data)).base64EncodedString(), "size": data.count]])
    }

    private func preDownload(_ request: Request) async throws -> Response {
        guard await authorized(request), header(request, "source-id") == businessId,
            let url = header(request, "MMCS-Url"), let owner = header(request, "MMCS-Owner"), let signature = header(request, "MMCS-Signature"),
            let name = url.split(separator: "/").last.map(String.init), owner == "owner-\(name)",
            let encrypted = state.withLock({ $0.files[name] }), Data(base64Encoded: signature) == Data(Insecure.SHA1.hash(data: encrypted))
        else { return Response(status: .badRequest) }
        state.withLock { $0.preDownloads += 1 }
        return try json(["download-url": "\(origin)/mmcs/files/\(name)"])
    }

    private func download(_ context: BasicRequestContext) -> Response {
        guard let data = state.withLock({ $0.files[context.parameters.get("name") ?? ""] }) else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }
}

extension Data {
    init(hexString: String) {
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex, let next = hexString.index(index, offsetBy: 2, limitedBy: hexString.endIndex) {
            bytes.append(UInt8(hexString[index..<next], radix: 16) ?? 0)
            index = next
        }
        self.init(bytes)
    }
}
