import Foundation
import ParleyDomain
import ParleyMedia
import ParleyStore
import Testing

@Suite("Blob keys: one type spells them")
struct BlobKeyTests {
    @Test("keys are spelled as stored files have always been (a change would lose every stored file)")
    func layout() {
        #expect(BlobKey.voiceOriginal(brandId: "brd_a", messageId: "msg_b", fileExtension: "webm").rawValue == "voice/brd_a/msg_b/original.webm")
        #expect(BlobKey.voiceRendition(brandId: "brd_a", messageId: "msg_b", fileExtension: "ogg").rawValue == "voice/brd_a/msg_b/voice.ogg")
        #expect(BlobKey.attachment(brandId: "brd_a", messageId: "msg_b", fileExtension: "pdf").rawValue == "files/brd_a/msg_b/original.pdf")
        #expect(BlobKey.thumbnail(brandId: "brd_a", messageId: "msg_b").rawValue == "files/brd_a/msg_b/thumbnail.jpg")
        #expect(BlobKey.logo(brandId: "brd_a", version: 3).rawValue == "logos/brd_a/3.png")
        let original = BlobKey.voiceOriginal(brandId: "brd_a", messageId: "msg_b", fileExtension: "ogg")
        #expect(original.quarantined.rawValue == "quarantine/voice/brd_a/msg_b/original.ogg")
        #expect(original.quarantined.quarantined == original.quarantined && original.quarantined.isQuarantined && !original.isQuarantined)
        #expect(BlobKey.messageFolders(brandId: "brd_a", messageId: "msg_b") == ["voice/brd_a/msg_b", "quarantine/voice/brd_a/msg_b", "files/brd_a/msg_b"])
        for key in [original, original.quarantined, BlobKey.logo(brandId: "brd_a", version: 1)] {
            #expect(LocalBlobStore.isValidKey(key.rawValue))
        }
        let parsed = BlobKey.messageFolder("quarantine/voice/brd_a/msg_b")
        #expect(parsed?.kind == .quarantinedVoice && parsed?.brandId == "brd_a" && parsed?.messageId == "msg_b")
        #expect(BlobKey.messageFolder("logos/brd_a") == nil)
    }

    @Test("no other source file spells a media folder")
    func oneSpelling() throws {
        let sources = try ErrorCatalogueTests.sources(under: "Sources", ending: ".swift")
        let spelling = sources.filter { source in
            ["\"voice/", "\"files/", "\"logos/", "\"quarantine/"].contains { source.text.contains($0) }
        }.map(\.path)
        #expect(spelling == ["Sources/ParleyMedia/BlobKey.swift"])
    }

    @Test("a voice note's renditions by their one type")
    func renditions() {
        var voice = VoiceRecord(
            messageId: "msg_x", brandId: "brd_x", container: "webm", originalKey: "voice/brd_x/msg_x/original.webm", originalBytes: 10, durationMs: 1000,
            waveform: [], state: .ready, createdAt: Date(), updatedAt: Date())
        #expect(voice.rendition(.opus) == nil && voice.rendition(.aac) == nil)
        voice.setRendition(.aac, key: "voice/brd_x/msg_x/voice.m4a", bytes: 42)
        #expect(voice.rendition(.aac)?.key == "voice/brd_x/msg_x/voice.m4a" && voice.rendition(.aac)?.bytes == 42)
        #expect(voice.aacKey == "voice/brd_x/msg_x/voice.m4a" && voice.rendition(.opus) == nil)
    }
}
