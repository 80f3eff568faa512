import Foundation
import ParleyAPI
import Testing

@Suite("Wire format")
struct WireFormatTests {
    let encoder = ParleyJSON.makeEncoder()
    let decoder = ParleyJSON.makeDecoder()

    @Test("client frames round-trip")
    func clientFrames() throws {
        let frames: [ClientFrame] = [
            .send(id: "1", SendMessageRequest(clientMessageId: "c1", text: "hi", conversationId: "cnv_x", channel: .web)),
            .receipt(id: "2", conversationId: "cnv_x", ReceiptRequest(upToSeq: 4, state: .read)),
            .typing(conversationId: "cnv_x", isTyping: true),
            .view(conversationId: "cnv_x"),
            .view(conversationId: nil),
            .resume(id: "3", cursors: ["cnv_x": 12]),
        ]
        for frame in frames {
            #expect(try decoder.decode(ClientFrame.self, from: encoder.encode(frame)) == frame)
        }
    }

    @Test("client frames are small JSON objects with a type")
    func clientFrameShape() throws {
        let json = #"{"type":"send","id":"a1","clientMessageId":"c9","text":"Hello"}"#
        let frame = try decoder.decode(ClientFrame.self, from: Data(json.utf8))
        #expect(frame == .send(id: "a1", SendMessageRequest(clientMessageId: "c9", text: "Hello")))
        #expect(throws: DecodingError.self) { try decoder.decode(ClientFrame.self, from: Data(#"{"type":"nope"}"#.utf8)) }
    }

    @Test("dates are ISO 8601 with milliseconds and survive a round trip")
    func dates() throws {
        let date = Date(timeIntervalSince1970: 1_795_000_000.745)
        #expect(ParleyJSON.formatDate(date) == "2026-11-18T11:06:40.745Z")
        #expect(ParleyJSON.parseDate(ParleyJSON.formatDate(date)).map { ($0.timeIntervalSince1970 * 1000).rounded() } == 1_795_000_000_745)
        #expect(ParleyJSON.formatDate(Date(timeIntervalSince1970: 0.001)) == "1970-01-01T00:00:00.001Z")
        #expect(ParleyJSON.parseDate("2026-11-18T08:26:40Z") != nil)
    }

    @Test("times from 1970 to 9999 are formatted by arithmetic exactly as ISO8601FormatStyle formats them")
    func dateArithmetic() {
        func styled(_ millis: Int64) -> String {
            let (seconds, fraction) = millis.quotientAndRemainder(dividingBy: 1000)
            let base = Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
            return String(base.dropLast()) + "." + String(String(fraction + 1000).dropFirst()) + "Z"
        }
        var state: UInt64 = 30
        var samples: [Int64] = [0, 1, 999, 86_399_999, 86_400_000, 951_782_400_000, 951_868_799_999, 4_107_542_399_999, 253_402_300_799_999]
        for _ in 0..<100_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            samples.append(Int64((state >> 11) % 253_402_300_800_000))
        }
        for millis in samples {
            #expect(ParleyJSON.formatDate(Date(timeIntervalSince1970: Double(millis) / 1000)) == styled(millis), "\(millis)")
        }
        #expect(ParleyJSON.formatDate(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }

    @Test("the error shape")
    func errorShape() throws {
        let body = ErrorBody(code: "message_too_long", message: "Too long.", field: "text")
        let object = try JSONSerialization.jsonObject(with: encoder.encode(body)) as? [String: [String: String]]
        #expect(object?["error"]?["code"] == "message_too_long")
        #expect(object?["error"]?["field"] == "text")
    }
}
