import ParleyAPI

/// Saved replies, search, presence, what the widget reports, and the brand's widget look.
public enum WorkspaceRules {
    // MARK: Saved replies

    public static let maxSavedReplies = 500
    public static let maxShortcutLength = 32
    public static let maxSavedReplyLength = 4000

    public static func validateShortcut(_ shortcut: String) throws(ParleyError) {
        guard (1...maxShortcutLength).contains(shortcut.utf8.count),
            shortcut.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 })
        else {
            throw .invalidField(
                "shortcut", "'shortcut' is 1-\(maxShortcutLength) characters of lower-case letters, digits, '-' and '_' (say, 'refund-policy').")
        }
    }

    public static func validateSavedReplyText(_ text: String) throws(ParleyError) {
        if text.trimmingWhitespace.isEmpty { throw .invalidField("text", "'text' cannot be empty.") }
        if text.count > maxSavedReplyLength {
            throw ParleyError(
                .payloadTooLarge, code: .messageTooLong, message: "A saved reply is at most \(maxSavedReplyLength) characters.", field: "text")
        }
    }

    // MARK: Search

    public static let maxQueryLength = 200
    public static let maxQueryTerms = 8
    public static let maxSearchResults = 50

    /// A search query as words: letters and digits (any script), lower-cased, at most 8. Everything
    /// else separates words, so no query syntax of FTS5 or PostgreSQL can get through.
    public static func searchTerms(_ query: String) throws(ParleyError) -> (terms: [String], phrase: String) {
        let phrase = query.trimmingWhitespace
        if phrase.isEmpty { throw .invalidField("q", "'q' cannot be empty.") }
        if phrase.count > maxQueryLength { throw .invalidField("q", "'q' is at most \(maxQueryLength) characters.") }
        let words = phrase.lowercased().split { !($0.isLetter || $0.isNumber) }.map { String($0.prefix(64)) }
        var terms: [String] = []
        for word in words where !terms.contains(word) && terms.count < maxQueryTerms { terms.append(word) }
        return (terms, String(phrase))
    }

    // MARK: Customer context

    public static let maxPageURLLength = 2048
    public static let maxPageTitleLength = 300
    public static let maxBrowserLength = 400

    public static func validateVisit(_ visit: ConsumerVisitRequest) throws(ParleyError) {
        let url = visit.pageUrl
        guard url.utf8.count <= maxPageURLLength, url.hasPrefix("https://") || url.hasPrefix("http://"),
            !url.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 32 } == true })
        else {
            throw .invalidField("pageUrl", "'pageUrl' is an http or https URL of at most \(maxPageURLLength) characters.")
        }
        if let title = visit.pageTitle, title.count > maxPageTitleLength {
            throw .invalidField("pageTitle", "'pageTitle' is at most \(maxPageTitleLength) characters.")
        }
    }

    /// A visit sent as a hint with a new session: kept when its URL is one (the title cut to length),
    /// else nil; never an error.
    public static func visitHint(_ visit: ConsumerVisitRequest) -> ConsumerVisitRequest? {
        var visit = visit
        visit.pageTitle = visit.pageTitle.map { String($0.prefix(maxPageTitleLength)) }.flatMap { $0.isEmpty ? nil : $0 }
        return (try? validateVisit(visit)) != nil ? visit : nil
    }

    /// Claims that have their own place and cannot be exposed as attributes.
    public static let reservedClaims: Set<String> = ["sub", "exp", "aud", "nbf", "iat", "iss", "jti", "name", "email", "phone_number"]
    public static let maxExposedClaims = 20
    public static let maxAttributeLength = 200

    // MARK: Presence

    public static let autoAwayRange = 0...480

    /// One or two letters for an avatar: the first letters of the first and last words of a name.
    public static func initials(_ name: String) -> String {
        let words = name.split(whereSeparator: \.isWhitespace)
        let letters = [words.first?.first, words.count > 1 ? words.last?.first : nil].compactMap { $0 }
        return letters.isEmpty ? "?" : String(letters).uppercased()
    }

    // MARK: Brand settings

    public static let maxPreviewOrigins = 20

    /// `https://shop.example.com` or `http://localhost:8080`: a scheme, a host and maybe a port,
    /// nothing else; returned lower-cased and without duplicates.
    public static func origins(_ origins: [String], field: String = "previewOrigins") throws(ParleyError) -> [String] {
        if origins.count > maxPreviewOrigins {
            throw .invalidField(field, "'\(field)' has at most \(maxPreviewOrigins) sites.")
        }
        var seen: [String] = []
        for raw in origins {
            let origin = raw.lowercased()
            let rest = origin.hasPrefix("https://") ? origin.dropFirst(8) : origin.hasPrefix("http://") ? origin.dropFirst(7) : nil
            let allowed = { (byte: UInt8) in (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57) || byte == 45 || byte == 46 || byte == 58 }
            guard let rest, !rest.isEmpty, rest.count <= 253, rest.utf8.allSatisfy(allowed), !rest.hasPrefix("."), !rest.hasPrefix(":") else {
                throw .invalidField(field, "'\(raw.prefix(80))' is not a site: write its origin, such as https://shop.example.com.")
            }
            if !seen.contains(origin) { seen.append(origin) }
        }
        return seen
    }

    public static let maxWidgetTextLength = 200

    public static func validate(_ change: UpdateBrandSettingsRequest) throws(ParleyError) {
        if let minutes = change.autoAwayMinutes, !autoAwayRange.contains(minutes) {
            throw .invalidField("autoAwayMinutes", "'autoAwayMinutes' must be from 0 (never) to \(autoAwayRange.upperBound).")
        }
        if let color = change.widgetColor {
            let hex = color.utf8.dropFirst()
            guard color.utf8.count == 7, color.hasPrefix("#"),
                hex.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) })
            else { throw .invalidField("widgetColor", "'widgetColor' is a colour written #rrggbb.") }
        }
        for (field, text) in [("availableText", change.availableText), ("awayText", change.awayText)] {
            guard let text else { continue }
            if text.trimmingWhitespace.isEmpty || text.count > maxWidgetTextLength {
                throw .invalidField(field, "'\(field)' is 1-\(maxWidgetTextLength) characters.")
            }
        }
        if let claims = change.exposedClaims {
            if claims.count > maxExposedClaims {
                throw .invalidField("exposedClaims", "'exposedClaims' names at most \(maxExposedClaims) claims.")
            }
            for claim in claims {
                guard (1...64).contains(claim.utf8.count),
                    claim.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 || $0 == 46 })
                else {
                    throw .invalidField("exposedClaims", "'\(claim.prefix(64))' is not a claim name: 1-64 letters, digits, '_', '-' or '.'.")
                }
                if reservedClaims.contains(claim) {
                    throw .invalidField("exposedClaims", "'\(claim)' has its own place and cannot be listed in 'exposedClaims'.")
                }
            }
        }
    }
}

extension String {
    var trimmingWhitespace: Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? start
        return self[start..<end]
    }
}
