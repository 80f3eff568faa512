import Foundation
import ParleyAPI

/// What each channel can carry. The numbers are the channels' own limits, so that a message Parley
/// accepts is one the channel will deliver; the pages read these (`GET /v1/channels`) instead of
/// hard-coding them.
public struct ChannelRules: Sendable, Hashable {
    public var channel: Channel
    /// Maximum characters (user-perceived characters, i.e. grapheme clusters) of a text from an agent.
    public var maxTextFromAgent: Int
    /// Maximum characters of a text from a consumer.
    public var maxTextFromConsumer: Int
    /// Whether an agent can turn a conversation on this channel into a voice or video call.
    public var supportsCalls: Bool
    /// Whether agents' voice notes can be sent on this channel.
    public var voiceFromAgent: Bool = true
    /// Whether agents' images and files can be sent on this channel.
    public var attachmentsFromAgent: Bool = true
    /// Hours after the customer's last message during which agents may write freely (nil: always).
    public var replyWindowHours: Int? = nil
    /// The longer window a brand may be granted (Messenger's Human Agent permission: 7 days, sent
    /// with the `HUMAN_AGENT` message tag after the first 24 hours).
    public var extendedReplyWindowHours: Int? = nil
    /// Whether approved templates can be sent (WhatsApp: the only messages outside the window).
    public var templates: Bool = false
    /// The largest voice note the channel still shows as a voice message with a play button
    /// (WhatsApp: 512 KB); a larger one goes as a basic audio file.
    public var maxVoiceBytes: Int? = nil

    public static func of(_ channel: Channel) -> ChannelRules {
        switch channel {
        case .web:
            ChannelRules(channel: channel, maxTextFromAgent: 2000, maxTextFromConsumer: 2000, supportsCalls: true)
        case .inApp:
            ChannelRules(channel: channel, maxTextFromAgent: 2000, maxTextFromConsumer: 2000, supportsCalls: true)
        case .sms:
            // Twilio Programmable Messaging: a body of up to 1,600 characters; MMS media other than
            // images up to 500 KB (a larger voice note goes as a link to a player page).
            ChannelRules(channel: channel, maxTextFromAgent: 1600, maxTextFromConsumer: 1600, supportsCalls: false, maxVoiceBytes: 500 * 1024)
        case .messenger:
            // Messenger Platform: 640 characters per text; the standard messaging window is 24 hours.
            // With Meta's Human Agent permission, 7 days (the HUMAN_AGENT tag).
            ChannelRules(
                channel: channel, maxTextFromAgent: 640, maxTextFromConsumer: 5000, supportsCalls: false, replyWindowHours: 24,
                extendedReplyWindowHours: 7 * 24)
        case .whatsapp:
            // WhatsApp Cloud API: text body up to 4096 characters; free-form messages only within
            // 24 hours of the customer's last message ("customer service window"), templates after;
            // voice messages keep their play button up to 512 KB of Ogg/Opus.
            ChannelRules(
                channel: channel, maxTextFromAgent: 4096, maxTextFromConsumer: 4096, supportsCalls: false, replyWindowHours: 24,
                templates: true, maxVoiceBytes: 512 * 1024)
        case .apple:
            // Apple Messages for Business: 10,000 characters per text.
            ChannelRules(channel: channel, maxTextFromAgent: 10000, maxTextFromConsumer: 10000, supportsCalls: false)
        }
    }

    public func maxText(from sender: ParticipantKind) -> Int {
        sender == .agent ? maxTextFromAgent : maxTextFromConsumer
    }

    /// Until when an agent may write freely, given when the customer last wrote and the window's
    /// length for this conversation's connection (nil: no window on this channel, or the customer
    /// never wrote).
    public func replyWindowEnd(lastConsumerMessageAt: Date?, hours: Int? = nil) -> Date? {
        guard let hours = hours ?? replyWindowHours, replyWindowHours != nil, let last = lastConsumerMessageAt else { return nil }
        return last.addingTimeInterval(TimeInterval(hours * 3600))
    }

    /// Throws `reply_window_closed` when an agent's free-form message is outside the window (which
    /// ends at `windowEndsAt`, as stored when the customer last wrote).
    public func authorizeFreeForm(windowEndsAt: Date?, now: Date) throws(ParleyError) {
        guard replyWindowHours != nil else { return }
        guard let end = windowEndsAt, now < end else {
            throw ParleyError(
                .conflict, code: .replyWindowClosed,
                message: templates
                    ? "The reply window has closed (the customer has not written for \(replyWindowHours ?? 24) hours): only an approved template can be sent."
                    : "The reply window has closed: the channel accepts no reply until the customer writes again.")
        }
    }

    public var dto: ChannelRulesDTO {
        ChannelRulesDTO(
            channel: channel, maxTextFromAgent: maxTextFromAgent, voiceFromAgent: voiceFromAgent, attachmentsFromAgent: attachmentsFromAgent,
            calls: supportsCalls, replyWindowHours: replyWindowHours, templates: templates, maxVoiceBytes: maxVoiceBytes)
    }
}
