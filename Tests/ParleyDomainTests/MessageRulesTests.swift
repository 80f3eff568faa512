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
}
