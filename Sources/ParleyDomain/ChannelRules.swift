import ParleyAPI

/// What each channel can carry. The numbers are the channels' own limits, so that a message Parley
/// accepts is one the channel will deliver.
public struct ChannelRules: Sendable, Hashable {
    public var channel: Channel
    /// Maximum characters (user-perceived characters, i.e. grapheme clusters) of a text from an agent.
    public var maxTextFromAgent: Int
    /// Maximum characters of a text from a consumer.
    public var maxTextFromConsumer: Int
    /// Whether an agent can turn a conversation on this channel into a voice or video call.
    public var supportsCalls: Bool

    public static func of(_ channel: Channel) -> ChannelRules {
        switch channel {
        case .web:
            ChannelRules(channel: channel, maxTextFromAgent: 2000, maxTextFromConsumer: 2000, supportsCalls: true)
        case .inApp:
            ChannelRules(channel: channel, maxTextFromAgent: 2000, maxTextFromConsumer: 2000, supportsCalls: true)
        case .sms:
            ChannelRules(channel: channel, maxTextFromAgent: 1600, maxTextFromConsumer: 1600, supportsCalls: false)
        case .messenger:
            ChannelRules(channel: channel, maxTextFromAgent: 640, maxTextFromConsumer: 5000, supportsCalls: false)
        case .whatsapp:
            // WhatsApp Cloud API: text body up to 4096 characters.
            ChannelRules(channel: channel, maxTextFromAgent: 4096, maxTextFromConsumer: 4096, supportsCalls: false)
        case .apple:
            // Apple Messages for Business: 10,000 characters per text.
            ChannelRules(channel: channel, maxTextFromAgent: 10000, maxTextFromConsumer: 10000, supportsCalls: false)
        }
    }

    public func maxText(from sender: ParticipantKind) -> Int {
        sender == .agent ? maxTextFromAgent : maxTextFromConsumer
    }
}
