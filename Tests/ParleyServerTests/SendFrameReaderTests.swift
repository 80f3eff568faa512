import Foundation
import ParleyAPI
import Testing

@testable import ParleyServer

/// `SendFrameReader` reads `send` frames by hand on the message path; whatever frame it reads, the
/// JSON decoder must read the same, and anything it does not read goes to the decoder unchanged.
@Suite("Send frame reader")
struct SendFrameReaderTests {
    static func decoded(_ text: String) -> ClientFrame? {
        try? ParleyCoders.decoder.decode(ClientFrame.self, from: Data(text.utf8))
    }

    @Test("the frames the widget and ParleyKit send are read, as the decoder reads them")
    func plain() throws {
        let frames = [
            #"{"type":"send","id":"a1","clientMessageId":"c9","text":"Hello"}"#,
            #"{"type":"send","id":"a1","clientMessageId":"c9","text":"Hello","conversationId":"cnv_abc"}"#,
            #"{"text":"Hi \"there\"\n\u00e9\ud83d\ude00 a\/b","channel":"in_app","conversationId":null,"clientMessageId":"c9","id":"7","type":"send"}"#,
            " {\n \"type\" : \"send\" ,\t\"id\":\"x\",\"clientMessageId\":\"\",\"text\":\"\",\"channel\":null } \n",
        ]
        for text in frames {
            let read = SendFrameReader.read(text)
            #expect(read != nil, "\(text)")
            #expect(read == Self.decoded(text), "\(text)")
        }
        let request = SendMessageRequest(clientMessageId: "c1", text: "Tab\tand \"quotes\" ☕️", conversationId: ConversationID(rawValue: "cnv_x"), channel: .web)
        let encoded = String(decoding: try ParleyCoders.encoder.encode(ClientFrame.send(id: "q", request)), as: UTF8.self)
        #expect(SendFrameReader.read(encoded) == .send(id: "q", request))
    }

    @Test("what it does not read goes to the decoder: other frames, unknown or repeated keys, other value types, invalid JSON")
    func others() {
        let frames = [
            #"{"type":"typing","conversationId":"cnv_a","isTyping":true}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"t","extra":1}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"t","text":"u"}"#,
            #"{"type":"send","id":1,"clientMessageId":"c","text":"t"}"#,
            #"{"type":"send","id":"a","clientMessageId":"c"}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":null}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"t","channel":"fax"}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"\ud800"}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"\udc00x"}"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"\x"}"#,
            "{\"type\":\"send\",\"id\":\"a\",\"clientMessageId\":\"c\",\"text\":\"line\nbreak\"}",
            #"{"type":"send","id":"a","clientMessageId":"c","text":"t"}x"#,
            #"{"type":"send","id":"a","clientMessageId":"c","text":"t",}"#,
            #"[{"type":"send"}]"#, "", "{", "{}", "null",
        ]
        for text in frames {
            #expect(SendFrameReader.read(text) == nil, "\(text)")
        }
    }

    @Test("ten thousand generated frames: whatever is read, the decoder reads the same")
    func generated() {
        var random = SplitMix64(seed: 2_811)
        func pick<T>(_ options: [T]) -> T { options[Int(random.next() % UInt64(options.count))] }
        let strings = [
            #""""#, #""plain""#, #""a\"b\\c\/d""#, #""\n\r\t\b\f""#, #""\u0041\u00e9\u20ac""#, #""\ud83d\ude00""#, #""\uD83D\uDE00""#,
            "\"caf\u{e9} \u{1F44D}\"", #""cnv_abc""#, #""in_app""#, #""web""#,
        ]
        let wrong = [#""\ud83d""#, #""\ude00""#, #""\u12""#, #""\q""#, "\"tab\there\"", "null", "1", "true", "{}", "[]", #""send""#, #""fax""#]
        let spaces = ["", "", "", " ", "\n", "\t", "\r\n "]
        var read = 0
        for _ in 0..<10_000 {
            var members = [#""type":"send""#]
            // Each key's chance in 100 of being in the frame: the three the frame needs nearly always, an unknown one seldom.
            for (key, chance) in [("id", 97), ("clientMessageId", 97), ("text", 97), ("conversationId", 50), ("channel", 50), ("other", 3), ("Text", 3)] {
                guard random.next() % 100 < chance else { continue }
                let value = random.next() % 12 == 0 ? pick(wrong) : pick(strings)
                members.append("\"\(key)\"\(pick(spaces)):\(pick(spaces))\(value)")
                if random.next() % 30 == 0 { members.append(members.last!) }
            }
            members.shuffle(using: &random)
            var text = pick(spaces) + "{" + members.map { pick(spaces) + $0 + pick(spaces) }.joined(separator: ",") + "}" + pick(spaces)
            if random.next() % 10 == 0, !text.isEmpty {
                var bytes = Array(text.utf8)
                bytes.remove(at: Int(random.next() % UInt64(bytes.count)))
                text = String(decoding: bytes, as: UTF8.self)
            }
            if let frame = SendFrameReader.read(text) {
                read += 1
                #expect(frame == Self.decoded(text), "\(text)")
            }
        }
        #expect(read > 1_000, "only \(read) of the generated frames were read by hand")
    }
}
