import Foundation
import ParleyAPI
import ParleyDomain
import Testing

@testable import ParleyServer

/// `MessageJSON` writes a message's JSON by hand on the message path: its text must say exactly what
/// `ParleyCoders.encoder`'s says (the same object: Foundation's encoder on Linux orders an object's
/// keys differently from one call to the next, so the texts are compared parsed), with every
/// string escaped byte for byte as the encoder escapes it, and decode to the same message.
@Suite("Message JSON")
struct MessageJSONTests {
    static let created = Date(timeIntervalSince1970: 1_800_000_000.123)

    static func message(
        text: String = "Hello", senderName: String? = nil, seq: Int64 = 7, senderKind: ParticipantKind = .consumer,
        kind: MessageKind = .text, state: DeliveryState = .sent, createdAt: Date = created, clientMessageId: String = "c-1"
    ) -> MessageDTO {
        MessageDTO(
            id: MessageID(rawValue: "msg_aaaaaaaaaaaaaaaaaaaaaaaa"), conversationId: ConversationID(rawValue: "cnv_bbbbbbbbbbbbbbbbbbbbbbbb"),
            seq: seq, senderKind: senderKind, senderId: "csm_cccccccccccccccccccccccc", clientMessageId: clientMessageId, kind: kind,
            text: text, deliveryState: state, createdAt: createdAt, senderName: senderName)
    }

    static func encoded(_ value: some Encodable) throws -> String {
        String(decoding: try ParleyCoders.encoder.encode(value), as: UTF8.self)
    }

    /// Whether `message`'s hand-written text is the encoder's object and decodes to `message`.
    static func same(_ message: MessageDTO, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let written = try MessageJSON.text(message)
        let encoded = try encoded(message)
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? NSDictionary
        let expected = try JSONSerialization.jsonObject(with: Data(encoded.utf8)) as? NSDictionary
        let decoded = try ParleyCoders.decoder.decode(MessageDTO.self, from: Data(written.utf8))
        #expect(parsed != nil && parsed == expected, "written \(written)\nencoded \(encoded)", sourceLocation: sourceLocation)
        #expect(decoded == message.roundedToMilliseconds, sourceLocation: sourceLocation)
        return parsed != nil && parsed == expected && decoded == message.roundedToMilliseconds
    }

    @Test("a plain message: the encoder's text, byte for byte, with and without the sender's name")
    func plain() throws {
        for message in [Self.message(), Self.message(senderName: "Dana O'Neil", senderKind: .agent)] {
            #expect(try Self.same(message))
        }
        let written = try MessageJSON.text(Self.message())
        #expect(written.hasPrefix(#"{"id":"msg_aaaaaaaaaaaaaaaaaaaaaaaa","conversationId":"#))
        #expect(written.contains(#""createdAt":"2027-01-15T08:00:00.123Z""#))
    }

    @Test("every character below U+0020, quotes, backslashes, slashes, DEL and non-ASCII text")
    func escaping() throws {
        var texts = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) + "x" }
        texts += [
            "", "\"", "\\", "/", "a/b\\c\"d", "\u{7F}", "é", "café ☕️", "👩‍👩‍👧‍👦", "line\u{2028}sep\u{2029}", "e\u{301}",
            "\u{FEFF}bom", "tab\there\nnew\r\nline", String(repeating: "\\\"", count: 300), "end\u{0}",
        ]
        for text in texts {
            let message = Self.message(text: text, senderName: text, clientMessageId: text)
            #expect(try Self.same(message), "text: \(text.unicodeScalars.map { $0.value })")
            #expect(MessageJSON.string(text) == (try Self.encoded(text)))
        }
    }

    @Test("every kind, sender and state; sequence numbers and times at their edges")
    func fields() throws {
        let times = [0, 0.0004, 0.0005, 0.9995, 1_800_000_000.999_6, 951_782_400.5, 4_102_444_799.999, 253_402_300_799.999]
        for kind in [MessageKind.text, .voice, .attachment] {
            for sender in [ParticipantKind.consumer, .agent, .system] {
                for state in DeliveryState.allCases {
                    for seq in [0, 1, -1, Int64.max, Int64.min] {
                        let message = Self.message(seq: seq, senderKind: sender, kind: kind, state: state)
                        #expect(try Self.same(message))
                    }
                }
            }
        }
        for time in times {
            let message = Self.message(createdAt: Date(timeIntervalSince1970: time))
            #expect(try Self.same(message), "time \(time)")
        }
    }

    @Test("a thousand random messages")
    func random() throws {
        var random = SplitMix64(seed: 28)
        let pool: [Character] = Array("aZ09 \"\\/\u{0}\u{1F}\u{7F}\n\té☕️👍🏽\u{2028}") + ["\r\n"]
        func text(_ count: Int) -> String { String((0..<count).map { _ in pool[Int(random.next() % UInt64(pool.count))] }) }
        for _ in 0..<1_000 {
            let message = Self.message(
                text: text(Int(random.next() % 60)), senderName: random.next() % 2 == 0 ? nil : text(8),
                seq: Int64(bitPattern: random.next()), createdAt: Date(timeIntervalSince1970: Double(random.next() % 4_102_444_800_000) / 1000),
                clientMessageId: text(12))
            #expect(try Self.same(message))
        }
    }

    @Test("a voice note, an attachment or a channel delivery goes through the encoder")
    func others() throws {
        var voice = Self.message(kind: .voice)
        voice.voice = VoiceDTO(durationMs: 4_000, waveform: [1, 2, 3], state: .ready, failureReason: nil, renditions: [])
        var attachment = Self.message(kind: .attachment)
        attachment.attachment = AttachmentDTO(
            type: .png, fileName: "a/b.png", contentType: "image/png", bytes: 10, width: 4, height: 3, url: "/v1/media/a?x=1",
            thumbnailUrl: nil, scan: .clean)
        for message in [voice, attachment] {
            #expect(try Self.same(message))
        }
    }
}

extension MessageDTO {
    /// The message as it comes back from its JSON: times are sent in whole milliseconds.
    var roundedToMilliseconds: MessageDTO {
        var message = self
        message.createdAt = Date(timeIntervalSince1970: (createdAt.timeIntervalSince1970 * 1000).rounded() / 1000)
        return message
    }
}

/// A small seeded generator, so a failure can be run again.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
