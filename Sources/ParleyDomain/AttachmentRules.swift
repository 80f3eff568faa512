import ParleyAPI

/// Images and files in conversations: what a file is (from its bytes), what a brand allows, and
/// how an attachment reads in lists and transcripts.
public enum AttachmentRules {
    /// How many bytes of the start of a file `sniff` needs.
    public static let headerLength = 8192
    public static let megabytesRange = 1...25
    public static let defaultMegabytes = 10
    /// Larger images are refused before any decoder allocates them (a decompression bomb is a few
    /// kilobytes of PNG that claims 50,000 x 50,000 pixels).
    public static let maxImagePixels = 40_000_000
    public static let thumbnailWidth = 480
    public static let maxFileNameLength = 120

    /// What the file is, from its first bytes; `nil` when it is none of the accepted types.
    /// Office files are ZIP (OOXML) or OLE2 containers; OOXML is told apart by the part names near
    /// the start of the archive.
    public static func sniff(_ header: [UInt8]) -> AttachmentType? {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            header.count >= offset + bytes.count && Array(header[offset..<offset + bytes.count]) == bytes
        }
        func ascii(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if ascii("GIF87a") || ascii("GIF89a") { return .gif }
        if ascii("RIFF") && ascii("WEBP", at: 8) { return .webp }
        if ascii("ftyp", at: 4), header.count >= 16 {
            let boxSize = min(Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3]), header.count)
            let brands = stride(from: 8, to: max(8, boxSize - 3), by: 4).map { String(decoding: header[$0..<$0 + 4], as: UTF8.self) }
            if brands.contains(where: { ["heic", "heix", "heim", "heis", "hevc", "hevx"].contains($0) }) { return .heic }
            return nil
        }
        if ascii("%PDF-") { return .pdf }
        if starts([0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) { return .msOffice }
        if starts([0x50, 0x4B, 0x03, 0x04]) {
            let text = String(decoding: header, as: UTF8.self)
            if text.contains("word/") { return .docx }
            if text.contains("xl/") { return .xlsx }
            if text.contains("ppt/") { return .pptx }
            return nil
        }
        return isPlainText(header) ? .text : nil
    }

    /// UTF-8 without NUL or control characters other than tab, line feed, carriage return and form
    /// feed. The header may end inside a character; that is not held against it.
    static func isPlainText(_ header: [UInt8]) -> Bool {
        guard !header.isEmpty else { return false }
        var bytes = header[...]
        // Drop a character cut off at the end of the header.
        for back in 1...3 where bytes.count >= back {
            let byte = bytes[bytes.endIndex - back]
            if byte & 0xC0 == 0xC0 {  // a lead byte: is its sequence complete?
                let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                if length > back { bytes = bytes.dropLast(back) }
                break
            }
            if byte & 0x80 == 0 { break }
        }
        guard String(validating: bytes, as: UTF8.self) != nil else { return false }
        return !bytes.contains { $0 < 0x20 && ![0x09, 0x0A, 0x0C, 0x0D].contains($0) || $0 == 0x7F }
    }

    /// The name to keep: its last path component, without control or format characters or quotes,
    /// at most 120 characters (keeping the extension); a name from the type when nothing is left.
    ///
    /// Format characters (Unicode category Cf) are invisible and change how the rest is shown: with
    /// U+202E (right-to-left override) `invoice\u{202E}fdp.exe` is shown as "invoiceexe.pdf". They,
    /// C0 and C1 controls and line or paragraph separators are all removed.
    public static func cleanFileName(_ raw: String?, type: AttachmentType) -> String {
        let last = (raw ?? "").split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var name = String(last.unicodeScalars.filter { isShownAsIs($0) && $0 != "\"" }.map(Character.init)).trimmingCharacters(of: [" ", "."])
        if name.count > maxFileNameLength {
            let dot = name.lastIndex(of: ".").map { name.distance(from: $0, to: name.endIndex) } ?? 0
            let keep = dot > 0 && dot <= 10 ? String(name.suffix(dot)) : ""
            name = String(name.prefix(maxFileNameLength - keep.count)) + keep
        }
        return name.isEmpty ? "\(type.isImage ? "image" : "file").\(defaultExtension(type))" : name
    }

    /// False for what a name must not carry: controls, format characters (bidirectional overrides,
    /// isolates, zero-width joiners and marks), line and paragraph separators, noncharacters.
    static func isShownAsIs(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned: return false
        default: return !scalar.properties.isNoncharacterCodePoint
        }
    }

    public static func defaultExtension(_ type: AttachmentType) -> String {
        switch type {
        case .jpeg: "jpg"
        case .msOffice: "doc"
        default: type.rawValue
        }
    }

    /// `[image]` or `[file name.pdf]`: the message's text in transcripts and exports.
    public static func transcriptLine(type: AttachmentType, fileName: String) -> String {
        type.isImage ? "[image]" : "[file \(fileName)]"
    }

    /// "Image" or "File: name.pdf", for conversation lists.
    public static func preview(type: AttachmentType, fileName: String) -> String {
        type.isImage ? "Image" : "File: \(fileName)"
    }

    /// Whether `sender` may send an attachment of `type`, of `bytes`, under `settings`.
    public static func authorize(_ type: AttachmentType, bytes: Int, settings: BrandSettingsDTO) throws(ParleyError) {
        guard settings.attachmentGroups.contains(type.group) else {
            let allowed = settings.attachmentGroups.map(\.rawValue).joined(separator: ", ")
            throw ParleyError(
                .unsupportedMediaType, code: .attachmentTypeNotAllowed,
                message: allowed.isEmpty ? "This brand does not accept attachments." : "This brand accepts only these attachments: \(allowed).")
        }
        if bytes > settings.attachmentMaxMegabytes * 1024 * 1024 {
            throw tooLarge(megabytes: settings.attachmentMaxMegabytes)
        }
    }

    public static func tooLarge(megabytes: Int) -> ParleyError {
        ParleyError(.payloadTooLarge, code: .attachmentTooLarge, message: "Attachments are at most \(megabytes) MB here.")
    }

    public static func validate(_ change: UpdateBrandSettingsRequest) throws(ParleyError) {
        if let megabytes = change.attachmentMaxMegabytes, !megabytesRange.contains(megabytes) {
            throw .invalidField(
                "attachmentMaxMegabytes", "'attachmentMaxMegabytes' must be from \(megabytesRange.lowerBound) to \(megabytesRange.upperBound).")
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(of set: Set<Character>) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text = text.dropFirst() }
        while let last = text.last, set.contains(last) { text = text.dropLast() }
        return String(text)
    }
}
