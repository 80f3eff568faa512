import Foundation
import ParleyAPI
import ParleyDomain
import Testing

/// The conversation list's line for a message is worded by the server (`MessageRules`,
/// `VoiceRules`, `AttachmentRules`) and, for a message that arrives live, by the workspace
/// (`previewOf` in Public/js/workspace/store.js). The server's words for a table of cases are kept
/// in e2e/message-previews.json; this test says the file is what the rules give
/// (`PARLEY_UPDATE_PREVIEWS=1` rewrites it), and `e2e/test_workspace_model.py` says the page gives
/// the same. The two had drifted: the page kept blank lines and cut long texts without "…".
@Suite("Message previews shared with the workspace")
struct MessagePreviewFixtureTests {
    struct Case: Codable, Equatable {
        var kind: MessageKind
        var text: String?
        var durationMs: Int?
        var blocked: Bool?
        /// A voice note's transcript (ready).
        var transcript: String? = nil
        var attachmentType: AttachmentType?
        var fileName: String?
        var preview: String
    }

    static func cases() -> [Case] {
        let texts = [
            "Where is my parcel?", "line one\n\nline two", "first\r\nsecond\rthird", "\n\nleading and trailing\n\n",
            String(repeating: "x", count: 119), String(repeating: "x", count: 120), String(repeating: "x", count: 121),
            String(repeating: "word ", count: 40), String(repeating: "👍🏽", count: 121), "café au lait\u{2028}et croissant",
        ]
        var cases = texts.map { Case(kind: .text, text: $0, preview: MessageRules.preview(of: $0)) }
        for duration in [0, 499, 500, 42_500, 59_600, 120_000] {
            cases.append(Case(kind: .voice, durationMs: duration, preview: VoiceRules.preview(durationMs: duration)))
        }
        cases.append(Case(kind: .voice, durationMs: 4_000, blocked: true, preview: VoiceRules.blockedPreview))
        // Transcribed: the length, then the words, cut like a text.
        for words in ["he might even have been made amiable himself", String(repeating: "parcel ", count: 30), ""] {
            let transcript = VoiceTranscriptDTO(state: .ready, text: words, language: "en")
            cases.append(Case(kind: .voice, durationMs: 11_000, transcript: words, preview: VoiceRules.preview(durationMs: 11_000, transcript: transcript)))
        }
        for (type, name) in [(AttachmentType.png, "screenshot.png"), (.heic, "IMG_0001.HEIC"), (.pdf, "Invoice 2026-042.pdf"), (.docx, "terms.docx")] {
            cases.append(Case(kind: .attachment, attachmentType: type, fileName: name, preview: AttachmentRules.preview(type: type, fileName: name)))
        }
        return cases
    }

    static var fixture: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("e2e/message-previews.json")
    }

    @Test("e2e/message-previews.json holds the server's previews")
    func fixtureIsCurrent() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let expected = try encoder.encode(Self.cases())
        if ProcessInfo.processInfo.environment["PARLEY_UPDATE_PREVIEWS"] == "1" {
            try (expected + Data("\n".utf8)).write(to: Self.fixture)
        }
        let stored = try JSONDecoder().decode([Case].self, from: Data(contentsOf: Self.fixture))
        #expect(stored == Self.cases(), "e2e/message-previews.json is out of date: run PARLEY_UPDATE_PREVIEWS=1 swift test --filter MessagePreviewFixtureTests")
    }
}
