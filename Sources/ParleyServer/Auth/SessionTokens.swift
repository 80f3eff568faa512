import Crypto
import Foundation
import ParleyDomain

/// Opaque session tokens. The client holds the token; the database holds only its SHA-256.
enum SessionTokens {
    static let cookieName = "parley_session"

    /// 256 bits of randomness with a recognisable prefix (secret scanners can find leaked tokens).
    static func make() -> String {
        "pst_" + Identifier.random(52)
    }

    static func hash(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Compares two secrets in time that does not depend on where they differ (their SHA-256s).
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let left = Array(SHA256.hash(data: Data(a.utf8))), right = Array(SHA256.hash(data: Data(b.utf8)))
        return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func isWellFormed(_ token: String) -> Bool {
        token.utf8.count == 56 && token.hasPrefix("pst_")
    }
}
