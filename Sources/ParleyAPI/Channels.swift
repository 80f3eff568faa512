import Foundation

/// An admin connects an app on the `whatsapp` channel to a WhatsApp Business phone number
/// (the Cloud API). The secrets are stored encrypted and never returned.
public struct ConnectWhatsAppRequest: Codable, Sendable {
    /// The phone number's id in Meta's WhatsApp Manager (not the number itself).
    public var phoneNumberId: String
    /// The token you choose and also enter in Meta's webhook settings (verification).
    public var verifyToken: String
    /// The Meta app's secret: webhooks are signed with it (`X-Hub-Signature-256`).
    public var appSecret: String
    /// A system user's access token, for sending (used by outbound delivery).
    public var accessToken: String

    public init(phoneNumberId: String, verifyToken: String, appSecret: String, accessToken: String) {
        self.phoneNumberId = phoneNumberId
        self.verifyToken = verifyToken
        self.appSecret = appSecret
        self.accessToken = accessToken
    }
}

/// A connected messaging channel, as the API shows it: never its secrets.
public struct ChannelConnectionDTO: Codable, Sendable, Hashable {
    public var appId: AppID
    public var channel: Channel
    /// The provider's id for the brand's account (WhatsApp: the phone number id).
    public var externalId: String
    /// The path to paste at the provider as the webhook (callback) URL, after the server's address.
    public var webhookPath: String
    public var createdAt: Date
    public var updatedAt: Date

    public init(appId: AppID, channel: Channel, externalId: String, webhookPath: String, createdAt: Date, updatedAt: Date) {
        self.appId = appId
        self.channel = channel
        self.externalId = externalId
        self.webhookPath = webhookPath
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}
