import ParleyAPI
import ParleyDomain
import Testing

@Suite("Message rules")
struct MessageRulesTests {
    @Test("each channel's limit is enforced per sender", arguments: [
        (Channel.web, ParticipantKind.consumer, 2000), (.web, .agent, 2000),
        (.inApp, .consumer, 2000), (.inApp, .agent, 2000),
        (.sms, .consumer, 1600), (.sms, .agent, 1600),
        (.messenger, .agent, 640), (.messenger, .consumer, 5000),
        (.whatsapp, .agent, 4096), (.apple, .consumer, 10000),
    ])
    func channelLimits(channel: Channel, sender: ParticipantKind, limit: Int) throws {
        // MUT + validate: exactly at the limit passes, one more fails with a stable code
        let atLimit = String(repeating: "a", count: limit)
        #expect(try MessageRules.validateText(atLimit, channel: channel, sender: sender) == atLimit)
        let error = #expect(throws: ParleyError.self) {
            try MessageRules.validateText(atLimit + "a", channel: channel, sender: sender)
        }
        #expect(error?.code == "message_too_long")
        #expect(error?.kind == .unprocessable)
        #expect(error?.field == "text")
    }

    @Test("characters are counted as people see them: an emoji family is one")
    func graphemeCounting() throws {
        let family = "👨‍👩‍👧‍👦"  // 7 unicode scalars, 1 character
        let text = String(repeating: family, count: 640)
        #expect(try MessageRules.validateText(text, channel: .messenger, sender: .agent) == text)
        #expect(throws: ParleyError.self) { try MessageRules.validateText(text + family, channel: .messenger, sender: .agent) }
    }

    @Test("blank text is refused", arguments: ["", " ", "\n\t  \n"])
    func blank(text: String) {
        let error = #expect(throws: ParleyError.self) { try MessageRules.validateText(text, channel: .web, sender: .consumer) }
        #expect(error?.code == "empty_message")
    }

    @Test("control characters other than tab and newlines are refused")
    func controlCharacters() throws {
        #expect(try MessageRules.validateText("line one\r\nline\ttwo", channel: .web, sender: .consumer) == "line one\r\nline\ttwo")
        let error = #expect(throws: ParleyError.self) { try MessageRules.validateText("bell\u{07}", channel: .web, sender: .consumer) }
        #expect(error?.code == "invalid_characters")
        #expect(throws: ParleyError.self) { try MessageRules.validateText("nul\u{00}", channel: .web, sender: .consumer) }
    }

    @Test("text is stored exactly as sent, markup included")
    func storedAsSent() throws {
        let html = "<script>alert(1)</script> &amp; <b>bold</b>"
        #expect(try MessageRules.validateText(html, channel: .web, sender: .consumer) == html)
    }

    @Test("client message ids: required, bounded, printable")
    func clientMessageIds() throws {
        try MessageRules.validateClientMessageId("7f1c1b2e-4a52-4b8e-9d43-2b1f0f0c9a11")
        #expect((#expect(throws: ParleyError.self) { try MessageRules.validateClientMessageId("") })?.code == "missing_field")
        #expect(throws: ParleyError.self) { try MessageRules.validateClientMessageId(String(repeating: "x", count: 129)) }
        #expect(throws: ParleyError.self) { try MessageRules.validateClientMessageId("a\nb") }
    }

    @Test("previews are one line and bounded")
    func previews() {
        #expect(MessageRules.preview(of: "hello\nworld") == "hello world")
        let long = MessageRules.preview(of: String(repeating: "x", count: 500))
        #expect(long.count == 120)
        #expect(long.hasSuffix("…"))
    }

    @Test("calls only on web and in-app channels")
    func callCapability() {
        #expect(Channel.allCases.filter { ChannelRules.of($0).supportsCalls } == [.web, .inApp])
    }

    @Test("the control-character check is exactly Unicode's general category Cc, over every scalar")
    func controlCategory() {
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            if MessageRules.isControl(scalar) != (scalar.properties.generalCategory == .control) {
                Issue.record("U+\(String(value, radix: 16)) is \(scalar.properties.generalCategory)")
            }
        }
    }

    @Test("blank texts are refused with or without ASCII in them; previews are the same by either path")
    func blankAndPreview() throws {
        for blank in [" ", "\n\t \r\n", "\u{3000}", "\u{A0}\u{2028}"] {
            #expect(throws: ParleyError.self, "\(blank.unicodeScalars.map(\.value))") { try MessageRules.validateText(blank, channel: .web, sender: .consumer) }
        }
        for text in [" a ", "\u{600}a", "é", "a\u{301}"] {
            #expect(try MessageRules.validateText(text, channel: .web, sender: .consumer) == text)
        }
        func byLines(_ text: String, limit: Int = 120) -> String {
            let oneLine = text.split(whereSeparator: { $0.isNewline }).joined(separator: " ")
            return oneLine.count <= limit ? oneLine : String(oneLine.prefix(limit - 1)) + "…"
        }
        for text in ["", " ", "Hello there", "  two  spaces  ", String(repeating: "x", count: 120), String(repeating: "x", count: 121), "a\nb", "\nlead", "café"] {
            #expect(MessageRules.preview(of: text) == byLines(text), "\(text)")
        }
    }
}

@Suite("Attachment rules")
struct AttachmentRulesTests {
    @Test("files are known by their bytes")
    func sniffing() {
        func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
        #expect(AttachmentRules.sniff([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]) == .jpeg)
        #expect(AttachmentRules.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]) == .png)
        #expect(AttachmentRules.sniff(bytes("GIF89a....")) == .gif)
        #expect(AttachmentRules.sniff(bytes("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ")) == .webp)
        #expect(AttachmentRules.sniff([0, 0, 0, 0x18] + bytes("ftypheic") + [0, 0, 0, 0] + bytes("mif1heic")) == .heic)
        #expect(AttachmentRules.sniff([0, 0, 0, 0x1C] + bytes("ftypmif1") + [0, 0, 0, 0] + bytes("mif1heicmiaf")) == .heic)
        // AVIF and MP4 are ftyp files too, and are not images we take.
        #expect(AttachmentRules.sniff([0, 0, 0, 0x1C] + bytes("ftypavif") + [0, 0, 0, 0] + bytes("avifmif1miaf")) == nil)
        #expect(AttachmentRules.sniff([0, 0, 0, 0x18] + bytes("ftypisom") + [0, 0, 2, 0] + bytes("isomiso2")) == nil)
        #expect(AttachmentRules.sniff(bytes("%PDF-1.7\n")) == .pdf)
        #expect(AttachmentRules.sniff([0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) == .msOffice)
        #expect(AttachmentRules.sniff([0x50, 0x4B, 0x03, 0x04] + bytes("....[Content_Types].xml....word/document.xml")) == .docx)
        #expect(AttachmentRules.sniff([0x50, 0x4B, 0x03, 0x04] + bytes("....xl/workbook.xml")) == .xlsx)
        #expect(AttachmentRules.sniff([0x50, 0x4B, 0x03, 0x04] + bytes("....ppt/presentation.xml")) == .pptx)
        #expect(AttachmentRules.sniff([0x50, 0x4B, 0x03, 0x04] + bytes("....payload.exe")) == nil)  // any other ZIP
        #expect(AttachmentRules.sniff(bytes("Plain text, ünïcode, tabs\tand\r\nlines")) == .text)
        #expect(AttachmentRules.sniff(bytes("Cut in the middle: é").dropLast()) == .text)
        #expect(AttachmentRules.sniff([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0]) == nil)  // a program
        #expect(AttachmentRules.sniff(bytes("text with a NUL\u{0}byte")) == nil)
        #expect(AttachmentRules.sniff([0xC3, 0x28, 0x41]) == nil)  // not UTF-8
        #expect(AttachmentRules.sniff([]) == nil)
    }

    @Test("names lose paths, quotes and control characters, and keep their extension when cut")
    func fileNames() {
        #expect(AttachmentRules.cleanFileName("../../etc/passwd", type: .text) == "passwd")
        #expect(AttachmentRules.cleanFileName("C:\\Users\\ana\\scan.pdf", type: .pdf) == "scan.pdf")
        #expect(AttachmentRules.cleanFileName("bad\"name\u{7}.pdf", type: .pdf) == "badname.pdf")
        #expect(AttachmentRules.cleanFileName(nil, type: .jpeg) == "image.jpg")
        // Bidirectional controls and every other format character (category Cf), C1 controls, separators.
        #expect(AttachmentRules.cleanFileName("invoice\u{202E}fdp.exe", type: .pdf) == "invoicefdp.exe")
        for scalar in [0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF, 0x061C, 0x00AD, 0x0085, 0x009B, 0x2028, 0x2029, 0xE0001] {
            let name = "scan\(Character(Unicode.Scalar(scalar)!))ned.pdf"
            #expect(AttachmentRules.cleanFileName(name, type: .pdf) == "scanned.pdf", "U+\(String(scalar, radix: 16))")
        }
        #expect(AttachmentRules.cleanFileName("résumé 履歴書 ملف.pdf", type: .pdf) == "résumé 履歴書 ملف.pdf")
        #expect(AttachmentRules.cleanFileName(" .. ", type: .pdf) == "file.pdf")
        let long = AttachmentRules.cleanFileName(String(repeating: "a", count: 300) + ".docx", type: .docx)
        #expect(long.count == AttachmentRules.maxFileNameLength && long.hasSuffix(".docx"))
        #expect(AttachmentRules.transcriptLine(type: .png, fileName: "x.png") == "[image]")
        #expect(AttachmentRules.transcriptLine(type: .pdf, fileName: "invoice.pdf") == "[file invoice.pdf]")
    }
}

@Suite("Workspace rules")
struct WorkspaceRulesTests {
    @Test("search queries become words of letters and digits, nothing else")
    func searchTerms() throws {
        #expect(try WorkspaceRules.searchTerms("  Parcel   ARRIVED?! ").terms == ["parcel", "arrived"])
        #expect(try WorkspaceRules.searchTerms("\"x\" OR y* NEAR(z) body:w").terms == ["x", "or", "y", "near", "z", "body", "w"].prefix(8).map { $0 })
        #expect(try WorkspaceRules.searchTerms("naïve café 東京 42").terms == ["naïve", "café", "東京", "42"])
        #expect(try WorkspaceRules.searchTerms("a a a b").terms == ["a", "b"])
        #expect(try WorkspaceRules.searchTerms("1 2 3 4 5 6 7 8 9 10").terms.count == 8)
        #expect(try WorkspaceRules.searchTerms("%%%").terms.isEmpty)
        #expect(throws: ParleyError.self) { try WorkspaceRules.searchTerms("   ") }
    }

    @Test("preview origins are a scheme, a host and a port, lower-cased, without duplicates")
    func origins() throws {
        #expect(try WorkspaceRules.origins(["https://Shop.Example", "http://localhost:8080", "https://shop.example"]) == ["https://shop.example", "http://localhost:8080"])
        for bad in ["shop.example", "https://shop.example/", "https://shop.example/path", "ftp://x", "https://", "https://a b", "https://.x", "javascript:alert(1)"] {
            #expect(throws: ParleyError.self, "\(bad)") { try WorkspaceRules.origins([bad]) }
        }
    }
}
