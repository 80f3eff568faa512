import Foundation

import ParleyAPI

/// Rules for the identities people type in: emails, names, passwords.
public enum IdentityRules {
    public static let minPasswordLength = 10
    /// bcrypt only reads the first 72 bytes; refuse longer so that no two passwords collide silently.
    public static let maxPasswordBytes = 72

    /// The one form of an email address used everywhere (stored, looked up, rate-limited): trimmed,
    /// in Unicode NFC, case-folded. `" Ana@X.com"`, `"ana@x.com"` and a decomposed `"ana@x.com"`
    /// are one account and one sign-in bucket.
    public static func canonicalEmail(_ email: String) -> String {
        email.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
            .folding(options: [.caseInsensitive], locale: nil)
    }

    public static func normalizeEmail(_ email: String) throws(ParleyError) -> String {
        let trimmed = canonicalEmail(email)
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."),
            !parts[1].hasSuffix("."), trimmed.utf8.count <= 254,
            !trimmed.unicodeScalars.contains(where: { $0.properties.isWhitespace || MessageRules.isControl($0) })
        else {
            throw .invalidField("email", "'\(email.prefix(80))' is not an email address.")
        }
        return trimmed
    }

    public static func validatePassword(_ password: String) throws(ParleyError) {
        if password.count < minPasswordLength {
            throw .invalidField("password", "A password needs at least \(minPasswordLength) characters.")
        }
        if password.utf8.count > maxPasswordBytes {
            throw .invalidField("password", "A password can have at most \(maxPasswordBytes) bytes.")
        }
    }

    public static func validateName(_ name: String, field: String = "name", maxLength: Int = 100) throws(ParleyError) -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty {
            throw .invalidField(field, "'\(field)' cannot be empty.")
        }
        if trimmed.count > maxLength {
            throw .invalidField(field, "'\(field)' can have at most \(maxLength) characters.")
        }
        if trimmed.unicodeScalars.contains(where: MessageRules.isControl) {
            throw .invalidField(field, "'\(field)' contains control characters.")
        }
        return trimmed
    }

    /// A friendly, stable name for an anonymous visitor: "Visitor 4821".
    public static func visitorName(for consumerId: ConsumerID) -> String {
        var hash: UInt32 = 2166136261
        for byte in consumerId.rawValue.utf8 {
            hash = (hash ^ UInt32(byte)) &* 16777619
        }
        return "Visitor \(1000 + hash % 9000)"
    }
}
