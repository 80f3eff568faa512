import Foundation
import ParleyAPI
import ParleyDomain
import Testing

@Suite("Channel rules and templates")
struct ChannelRulesTests {
    @Test("a template is filled in one pass: parameters are never read as placeholders; unknown placeholders stay")
    func templateFilling() {
        let template = WhatsAppTemplateDTO(name: "order_update", language: "en_US", body: "Hello {{1}}, order {{2}} is late. {{3}} {{x}}")
        #expect(template.parameterCount == 3)
        #expect(template.filled(["{{2}}", "#12", "Sorry"]) == "Hello {{2}}, order #12 is late. Sorry {{x}}")
        #expect(template.filled(["A"]) == "Hello A, order {{2}} is late. {{3}} {{x}}")
        #expect(WhatsAppTemplateDTO(name: "n", language: "en", body: "no parameters").parameterCount == 0)
    }

    @Test("the reply window: free-form until 24 h after the customer's last message on WhatsApp and Messenger, always on the web")
    func window() throws {
        let last = Date(timeIntervalSince1970: 1_000_000)
        let whatsapp = ChannelRules.of(.whatsapp)
        #expect(whatsapp.replyWindowEnd(lastConsumerMessageAt: last) == last.addingTimeInterval(24 * 3600))
        let end = whatsapp.replyWindowEnd(lastConsumerMessageAt: last)
        #expect(throws: Never.self) { try whatsapp.authorizeFreeForm(windowEndsAt: end, now: last.addingTimeInterval(23 * 3600)) }
        #expect(throws: ParleyError.self) { try whatsapp.authorizeFreeForm(windowEndsAt: end, now: last.addingTimeInterval(24 * 3600)) }
        #expect(throws: ParleyError.self) { try ChannelRules.of(.messenger).authorizeFreeForm(windowEndsAt: nil, now: last) }
        #expect(throws: Never.self) { try ChannelRules.of(.web).authorizeFreeForm(windowEndsAt: nil, now: last) }
        // Messenger's Human Agent window: 7 days where the connection has it, never on the web.
        #expect(ChannelRules.of(.messenger).replyWindowEnd(lastConsumerMessageAt: last, hours: 168) == last.addingTimeInterval(7 * 24 * 3600))
        #expect(ChannelRules.of(.messenger).extendedReplyWindowHours == 168)
        #expect(ChannelRules.of(.web).replyWindowEnd(lastConsumerMessageAt: last, hours: 168) == nil)
        #expect(ChannelRules.of(.web).replyWindowEnd(lastConsumerMessageAt: last) == nil)
        #expect(Channel.allCases.filter(\.isMessagingApp) == [.whatsapp, .messenger, .apple, .sms])
    }
}
