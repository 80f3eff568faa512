import ParleyAPI

/// Rules for the content of a text message and for the ids clients choose.
public enum MessageRules {
    /// Longest client message id accepted. Ids are opaque to Parley (UUIDs fit easily).
    public static let maxClientMessageIdLength = 128

    /// Checks a client-chosen idempotency key.
    public static func validateClientMessageId(_ id: String, field: String = "clientMessageId") throws(ParleyError) {
        if id.isEmpty {
            throw .missingField(field)
        }
        if id.utf8.count > maxClientMessageIdLength {
            throw .invalidField(field, "'\(field)' is longer than \(maxClientMessageIdLength) bytes.")
        }
        if id.unicodeScalars.contains(where: isControl) {
            throw .invalidField(field, "'\(field)' contains control characters.")
        }
    }

    /// Checks a text message for a channel and sender and returns it as it will be stored.
    ///
    /// The text is stored as sent (no trimming, no HTML processing): rendering it as text is the
    /// clients' job. Refused: empty or blank text, text over the channel's limit, and control
    /// characters other than tab, line feed and carriage return.
    public static func validateText(_ text: String, channel: Channel, sender: ParticipantKind) throws(ParleyError) -> String {
        if !hasVisibleASCII(text), text.allSatisfy({ $0.isWhitespace }) {
            throw ParleyError(.unprocessable, code: .emptyMessage, message: "A message needs some text.", field: "text")
        }
        let limit = ChannelRules.of(channel).maxText(from: sender)
        // Count cheaply first: grapheme clusters never outnumber unicode scalars.
        if text.unicodeScalars.count > limit, text.count > limit {
            throw ParleyError(
                .unprocessable, code: .messageTooLong,
                message: "The text has \(text.count) characters; \(channel.rawValue) allows at most \(limit) from \(sender == .agent ? "an agent" : "a consumer").",
                field: "text")
        }
        try refuseControlCharacters(text)
        return text
    }

    /// Longest private note, in characters.
    public static let maxNoteLength = 4000

    /// Checks an agent's private note: not blank, at most `maxNoteLength` characters, no control
    /// characters but tab and line breaks.
    public static func validateNote(_ text: String) throws(ParleyError) -> String {
        if text.allSatisfy({ $0.isWhitespace }) {
            throw ParleyError(.unprocessable, code: .emptyNote, message: "A note needs some text.", field: "text")
        }
        if text.unicodeScalars.count > maxNoteLength, text.count > maxNoteLength {
            throw ParleyError(
                .unprocessable, code: .noteTooLong, message: "The note has \(text.count) characters; at most \(maxNoteLength) fit.",
                field: "text")
        }
        try refuseControlCharacters(text)
        return text
    }

    private static func refuseControlCharacters(_ text: String) throws(ParleyError) {
        for scalar in text.unicodeScalars where isControl(scalar) {
            if scalar != "\n" && scalar != "\t" && scalar != "\r" {
                throw ParleyError(
                    .badRequest, code: .invalidCharacters,
                    message: "The text contains the control character U+\(String(scalar.value, radix: 16, uppercase: true)).",
                    field: "text")
            }
        }
    }

    /// Whether `scalar` is a control character (general category Cc). Unicode fixes that set for
    /// good (U+0000-001F and U+007F-009F, its stability policy), so the range check is exact and
    /// spares every message's scalars a lookup in the property tables. Every control-character
    /// check of the server's inputs uses it (names, emails, identity tokens' subjects too).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Whether `text` has a printable ASCII character other than a space: then it is not blank (such a
    /// character starts its grapheme cluster, or follows a prepended mark, and neither is whitespace),
    /// and the check by characters, which splits the text into grapheme clusters, is not needed.
    private static func hasVisibleASCII(_ text: String) -> Bool {
        text.utf8.contains { $0 > 0x20 && $0 < 0x7F }
    }

    /// A short single-line preview for conversation lists.
    public static func preview(of text: String, limit: Int = 120) -> String {
        // Printable ASCII within the limit has no line to join and nothing to cut.
        if text.utf8.count <= limit, text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
        let oneLine = text.split(whereSeparator: { $0.isNewline }).joined(separator: " ")
        if oneLine.count <= limit { return oneLine }
        return String(oneLine.prefix(limit - 1)) + "…"
    }
}
