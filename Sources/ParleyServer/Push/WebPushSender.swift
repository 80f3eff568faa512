import AsyncHTTPClient
import Crypto
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain

/// Web Push for the widget: the payload encrypted for the subscription (RFC 8291, `aes128gcm`
/// content encoding of RFC 8188) and the request authenticated with VAPID (RFC 8292). Everything
/// cryptographic is swift-crypto's (P-256 key agreement, HMAC-SHA-256, AES-GCM) or jwt-kit's (the
/// ES256 VAPID token); what is written here is only the byte layout the RFCs define, which no listed
/// package provides.
struct WebPushSender: Sendable {
    let http: ProviderHTTP
    let vapid: VAPIDKey
    /// The push services subscriptions may point to (a subscription's endpoint comes from the
    /// browser, so a consumer could name any URL: only these hosts are ever called).
    let hosts: MediaHostAllowList
    /// `sub` of the VAPID token: how the push service can reach the operator.
    let subject: String

    enum Outcome {
        case sent
        /// The subscription expired or was removed (404, 410): delete it.
        case gone
    }

    func send(endpoint: String, keys: WebPushKeys, payload: Data, topic: String, now: Date) async throws -> Outcome {
        guard hosts.allows(endpoint), let url = URLComponents(string: endpoint), let scheme = url.scheme, let host = url.host else {
            throw JobFailure.permanent("the subscription's push service is not on PARLEY_WEBPUSH_HOSTS")
        }
        let audience = "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
        let body = try Self.encrypt(payload, for: keys)
        let token = try await vapid.token(audience: audience, subject: subject, now: now)
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers = HTTPHeaders([
            ("Authorization", "vapid t=\(token), k=\(vapid.publicKeyBase64URL)"), ("Content-Encoding", "aes128gcm"),
            ("Content-Type", "application/octet-stream"), ("TTL", "86400"), ("Urgency", "high"), ("Topic", topic),
        ])
        request.body = .bytes(ByteBuffer(data: body))
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request, maxBytes: 64 * 1024)
        } catch {
            throw JobFailure.retry("Web Push: \(error)")
        }
        switch answer.status {
        case 200..<300: return .sent
        case 404, 410: return .gone
        case 429, 500...: throw JobFailure.retry("Web Push: HTTP \(answer.status)", after: answer.retryAfter)
        default: throw JobFailure.permanent("the push service refused the notification (HTTP \(answer.status))")
        }
    }

    /// RFC 8291 section 3.4 and RFC 8188 section 2: one record, `salt || rs || idlen || keyid ||
    /// AES-128-GCM(record || 0x02)`, keyed from the ECDH secret and the subscription's auth secret.
    static func encrypt(_ plaintext: Data, for keys: WebPushKeys, salt: Data = Data((0..<16).map { _ in UInt8.random(in: 0...255) }),
        ephemeral: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey()) throws -> Data
    {
        guard let uaPublicBytes = Data(base64URL: keys.p256dh), let auth = Data(base64URL: keys.auth), auth.count == 16 else {
            throw JobFailure.permanent("the subscription's keys are not base64url")
        }
        let uaPublic = try P256.KeyAgreement.PublicKey(x963Representation: uaPublicBytes)
        let asPublic = ephemeral.publicKey.x963Representation
        let ecdh = try ephemeral.sharedSecretFromKeyAgreement(with: uaPublic).withUnsafeBytes { Data($0) }
        func hmac(_ key: Data, _ message: Data) -> Data {
            Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
        // IKM = HKDF(salt = auth, IKM = ecdh, info = "WebPush: info" || 0x00 || ua_public || as_public, L = 32)
        let prkKey = hmac(auth, ecdh)
        let ikm = hmac(prkKey, Data("WebPush: info".utf8) + [0] + uaPublicBytes + asPublic + [1])
        // CEK and nonce from the record's salt (RFC 8188).
        let prk = hmac(salt, ikm)
        let cek = hmac(prk, Data("Content-Encoding: aes128gcm".utf8) + [0, 1]).prefix(16)
        let nonce = hmac(prk, Data("Content-Encoding: nonce".utf8) + [0, 1]).prefix(12)
        let sealed = try AES.GCM.seal(plaintext + [2], using: SymmetricKey(data: cek), nonce: AES.GCM.Nonce(data: nonce))
        var header = salt
        header.append(contentsOf: [0, 0, 0x10, 0])  // record size 4096
        header.append(UInt8(asPublic.count))
        header.append(asPublic)
        return header + sealed.ciphertext + sealed.tag
    }
}

/// The server's VAPID key pair (P-256): `PARLEY_VAPID_PRIVATE_KEY` (base64url of the 32-byte
/// scalar) or, without it, `<data-dir>/vapid.key` made on first start. Every node must use the same
/// one: browsers tie subscriptions to it.
struct VAPIDKey: Sendable {
    let privateKey: P256.Signing.PrivateKey

    var publicKeyBase64URL: String { privateKey.publicKey.x963Representation.base64URLEncoded }

    static func load(_ configuration: ParleyConfiguration) throws -> VAPIDKey {
        if let text = configuration.vapidPrivateKey {
            guard let bytes = Data(base64URL: text), let key = try? P256.Signing.PrivateKey(rawRepresentation: bytes) else {
                throw ConfigurationError(setting: "PARLEY_VAPID_PRIVATE_KEY", message: "must be base64url of a 32-byte P-256 private key")
            }
            return VAPIDKey(privateKey: key)
        }
        let path = "\(configuration.dataDirectory)/vapid.key"
        if let data = FileManager.default.contents(atPath: path) {
            guard let key = try? P256.Signing.PrivateKey(rawRepresentation: data) else {
                throw ConfigurationError(setting: path, message: "must hold a 32-byte P-256 private key")
            }
            return VAPIDKey(privateKey: key)
        }
        let key = P256.Signing.PrivateKey()
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: path, contents: key.rawRepresentation, attributes: [.posixPermissions: 0o600]) else {
            throw ConfigurationError(setting: path, message: "could not be written")
        }
        return VAPIDKey(privateKey: key)
    }

    struct Claims: JWTPayload {
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var sub: SubjectClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A token for one push service, valid 12 hours (RFC 8292 allows at most 24).
    func token(audience: String, subject: String, now: Date) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation))
        return try await keys.sign(Claims(
            aud: AudienceClaim(value: audience), exp: ExpirationClaim(value: now.addingTimeInterval(12 * 3600)), sub: SubjectClaim(value: subject)))
    }
}

extension Data {
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }

    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
