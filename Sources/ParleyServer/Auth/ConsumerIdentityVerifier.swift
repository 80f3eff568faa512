import ParleyAPI
import Foundation
import JWTKit
import ParleyDomain
import ParleyStore

/// The claims Parley reads from a brand-signed consumer JWT.
///
/// Required: `sub` (the brand's user id) and `exp`. Optional: `name` (shown to agents), `aud`
/// (when present it must name the app id, so a token minted for one app cannot sign in to another),
/// `nbf` (not valid before) and `iat` (issued at, which cannot lie in the future). `nbf` and `iat`
/// allow `leeway` for clocks that differ between the brand's backend and Parley.
struct ConsumerIdentityClaims: JWTPayload {
    static let leeway: TimeInterval = 60

    var sub: SubjectClaim
    var exp: ExpirationClaim
    var aud: AudienceClaim?
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?
    var name: String?
    var email: String?
    var phoneNumber: String?

    enum CodingKeys: String, CodingKey {
        case sub, exp, aud, nbf, iat, name, email
        case phoneNumber = "phone_number"
    }

    /// The claims named in `names` whose values are text, numbers or booleans, as text (at most 200
    /// characters each), read from a token that has already been verified. Other claims are never kept.
    static func exposed(_ names: [String], of token: String) -> [String: String]? {
        guard !names.isEmpty else { return nil }
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = String(parts[1]).replacing("-", with: "+").replacing("_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let object = try? JSONDecoder().decode([String: ClaimValue].self, from: data)
        else { return nil }
        var picked: [String: String] = [:]
        for name in names {
            if case .text(let text)? = object[name] { picked[name] = String(text.prefix(WorkspaceRules.maxAttributeLength)) }
        }
        return picked.isEmpty ? nil : picked
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {
        let now = Date()
        try exp.verifyNotExpired(currentDate: now)
        try nbf?.verifyNotBefore(currentDate: now.addingTimeInterval(Self.leeway))
        if let iat, iat.value > now.addingTimeInterval(Self.leeway) {
            throw JWTError.claimVerificationFailure(failedClaim: iat, reason: "issued in the future")
        }
    }
}

/// A claim's value when it is text, a number or a boolean (as text); anything else is `.other`.
private enum ClaimValue: Decodable {
    case text(String)
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self = .text(text)
        } else if let flag = try? container.decode(Bool.self) {
            self = .text(flag ? "true" : "false")
        } else if let number = try? container.decode(Int64.self) {
            self = .text(String(number))
        } else if let number = try? container.decode(Double.self) {
            self = .text(String(number))
        } else {
            self = .other
        }
    }
}

/// Verifies consumer JWTs against the keys registered on an app.
enum ConsumerIdentityVerifier {
    static let maxTokenBytes = 8 * 1024
    static let supportedAlgorithms = ["HS256", "ES256", "RS256"]

    /// Checks that key material parses for its algorithm, so that a bad key is refused when it is
    /// registered, not when a consumer tries to sign in.
    static func validateKey(algorithm: String, key: String) async throws(ParleyError) {
        do {
            let keys = JWTKeyCollection()
            try await add(to: keys, algorithm: algorithm, key: key, kid: "check")
        } catch let error as ParleyError {
            throw error
        } catch {
            throw ParleyError(.badRequest, code: .invalidKey, message: "The key is not a valid \(algorithm) key: PEM expected.", field: "key")
        }
    }

    static func verify(token: String, appId: AppID, keys records: [AppKeyRecord]) async throws(ParleyError) -> ConsumerIdentityClaims {
        if records.isEmpty {
            throw ParleyError(
                .unauthorized, code: .identityNotConfigured,
                message: "This app has no key for verifying consumer identities; register one first.")
        }
        if token.utf8.count > maxTokenBytes {
            throw ParleyError(.unauthorized, code: .invalidIdentityToken, message: "The identity token is too long.", field: "identityToken")
        }
        // JWTKit falls back to its first key when a token names a key id it does not know; a token
        // must name one of this app's keys, or (only when the app has a single key) none.
        let header = header(of: token)
        let kid = header?.kid
        if let kid, !records.contains(where: { $0.kid == kid }) {
            throw ParleyError(
                .unauthorized, code: .invalidIdentityToken,
                message: "The identity token was refused: \(describe(.unknownKID(JWKIdentifier(string: kid)))).", field: "identityToken")
        }
        if let header, header.kid == nil, records.count > 1 {
            throw ParleyError(
                .unauthorized, code: .invalidIdentityToken,
                message: "The identity token was refused: it has no key id (kid), and this app has several keys.", field: "identityToken")
        }
        let claims: ConsumerIdentityClaims
        do {
            let keys = JWTKeyCollection()
            for record in records where kid == nil || record.kid == kid {
                try await add(to: keys, algorithm: record.algorithm, key: record.keyMaterial, kid: record.kid)
            }
            claims = try await keys.verify(token, as: ConsumerIdentityClaims.self)
        } catch let error as JWTError {
            throw ParleyError(
                .unauthorized, code: .invalidIdentityToken,
                message: "The identity token was refused: \(describe(error)).", field: "identityToken")
        } catch {
            throw ParleyError(.unauthorized, code: .invalidIdentityToken, message: "The identity token was refused.", field: "identityToken")
        }
        if let aud = claims.aud, !aud.value.contains(appId.rawValue) {
            throw ParleyError(
                .unauthorized, code: .invalidIdentityToken,
                message: "The identity token's audience does not include this app.", field: "identityToken")
        }
        let subject = claims.sub.value
        if subject.isEmpty || subject.utf8.count > 255 || subject.unicodeScalars.contains(where: MessageRules.isControl) {
            throw ParleyError(
                .unauthorized, code: .invalidIdentityToken,
                message: "The identity token's subject must be 1-255 printable characters.", field: "identityToken")
        }
        return claims
    }

    struct Header: Decodable { var kid: String? }

    /// A compact JWT's header, if it decodes (else JWTKit says how the token is malformed).
    static func header(of token: String) -> Header? {
        guard let segment = token.split(separator: ".", omittingEmptySubsequences: false).first else { return nil }
        var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64) else { return nil }
        return try? JSONDecoder().decode(Header.self, from: data)
    }

    private static func add(to keys: JWTKeyCollection, algorithm: String, key: String, kid: String) async throws {
        let kid = JWKIdentifier(string: kid)
        switch algorithm {
        case "HS256":
            guard key.utf8.count >= 32 else {
                throw ParleyError(.badRequest, code: .invalidKey, message: "An HS256 secret needs at least 32 bytes.", field: "key")
            }
            await keys.add(hmac: HMACKey(from: key), digestAlgorithm: .sha256, kid: kid)
        case "ES256":
            await keys.add(ecdsa: try ES256PublicKey(pem: key), kid: kid)
        case "RS256":
            await keys.add(rsa: try Insecure.RSA.PublicKey(pem: key), digestAlgorithm: .sha256, kid: kid)
        default:
            throw ParleyError(
                .badRequest, code: .unsupportedAlgorithm,
                message: "'\(algorithm)' is not supported; use one of \(supportedAlgorithms.joined(separator: ", ")).", field: "algorithm")
        }
    }

    private static func describe(_ error: JWTError) -> String {
        switch error.errorType {
        case .claimVerificationFailure: "it has expired, is not valid yet, or a claim is invalid"
        case .signatureVerificationFailed: "the signature does not match any key of this app"
        case .unknownKID: "its key id (kid) is not registered on this app"
        case .missingKIDHeader: "it has no key id (kid)"
        case .malformedToken: "it is not a well-formed JWT"
        case .unsupportedAlgorithm: "its algorithm is not supported"
        default: "it could not be verified"
        }
    }
}
