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
    /// WhatsApp: the brand's approved message templates (what agents may send outside the window).
    public var templates: [WhatsAppTemplateDTO]
    /// Messenger: whether the Human Agent window is on (agents may answer up to 7 days after the
    /// customer's last message, with the `HUMAN_AGENT` tag).
    public var humanAgent: Bool?
    /// SMS: the full URL to paste at Twilio (its signatures cover the exact URL it calls).
    public var webhookURL: String?
    /// SMS: whether the number sends MMS (from the last connection test): voice notes then go as
    /// MMS audio, otherwise as a text with a link to a player page.
    public var mms: Bool?

    public init(
        appId: AppID, channel: Channel, externalId: String, webhookPath: String, createdAt: Date, updatedAt: Date,
        templates: [WhatsAppTemplateDTO] = [], webhookURL: String? = nil, mms: Bool? = nil
    ) {
        self.templates = templates
        self.webhookURL = webhookURL
        self.mms = mms
        self.appId = appId
        self.channel = channel
        self.externalId = externalId
        self.webhookPath = webhookPath
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A message template approved in WhatsApp Manager, as the brand enters it in Parley: its name and
/// language at Meta, the body text with `{{1}}`, `{{2}}`... for its parameters (shown to agents and
/// stored as the message's text once filled in).
public struct WhatsAppTemplateDTO: Codable, Sendable, Hashable {
    public var name: String
    /// The template's language code at Meta, like `en_US`.
    public var language: String
    public var body: String

    public init(name: String, language: String, body: String) {
        self.name = name
        self.language = language
        self.body = body
    }

    /// How many `{{n}}` parameters the body takes.
    public var parameterCount: Int {
        var highest = 0
        var rest = Substring(body)
        while let open = rest.range(of: "{{") {
            rest = rest[open.upperBound...]
            guard let close = rest.range(of: "}}") else { break }
            if let n = Int(rest[..<close.lowerBound]) { highest = max(highest, n) }
            rest = rest[close.upperBound...]
        }
        return highest
    }

    /// The body with the parameters in place, in one pass (a parameter's own text is never read as
    /// a placeholder: "{{2}}" typed as the first parameter stays "{{2}}").
    public func filled(_ parameters: [String]) -> String {
        var text = ""
        var rest = Substring(body)
        while let open = rest.range(of: "{{") {
            text += rest[..<open.lowerBound]
            let after = rest[open.upperBound...]
            if let close = after.range(of: "}}"), let n = Int(after[..<close.lowerBound]), (1...parameters.count).contains(n) {
                text += parameters[n - 1]
                rest = after[close.upperBound...]
            } else {
                text += "{{"
                rest = after
            }
        }
        return text + rest
    }
}

/// `PUT /v1/apps/{appId}/whatsapp/templates`: the whole list (at most 100).
public struct WhatsAppTemplatesRequest: Codable, Sendable {
    public var templates: [WhatsAppTemplateDTO]
    public init(templates: [WhatsAppTemplateDTO]) { self.templates = templates }
}

/// `POST /v1/conversations/{id}/template`: an agent sends an approved template (WhatsApp), the only
/// message allowed once the 24-hour window has closed.
public struct SendTemplateRequest: Codable, Sendable {
    public var clientMessageId: String
    public var name: String
    public var language: String
    public var parameters: [String]

    public init(clientMessageId: String, name: String, language: String, parameters: [String] = []) {
        self.clientMessageId = clientMessageId
        self.name = name
        self.language = language
        self.parameters = parameters
    }
}

/// Where an agent's message is on its way through a messaging channel.
public enum ChannelDeliveryState: String, Codable, Sendable, Hashable {
    /// Waiting to be sent (or for its audio to be ready), or being retried.
    case queued
    /// The provider accepted it (delivered and read arrive as receipts, like on the web).
    case sent
    /// The provider refused it or it could not be sent: see the error.
    case failed
}

public struct ChannelDeliveryDTO: Codable, Sendable, Hashable {
    public var state: ChannelDeliveryState
    /// The provider's error code, like WhatsApp's `131047`.
    public var errorCode: String?
    /// A sentence for the agent.
    public var errorMessage: String?
    /// For failures: whether sending again can help (`POST /v1/messages/{id}/retry`).
    public var retryable: Bool?
    /// When the state last changed: of two copies of a message, the later delivery wins.
    public var updatedAt: Date?

    public init(
        state: ChannelDeliveryState, errorCode: String? = nil, errorMessage: String? = nil, retryable: Bool? = nil, updatedAt: Date? = nil
    ) {
        self.updatedAt = updatedAt
        self.state = state
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.retryable = retryable
    }
}

/// What a channel can carry, from ParleyDomain's channel rules (`GET /v1/channels`): the pages
/// hide or disable what a channel cannot do instead of hard-coding it.
public struct ChannelRulesDTO: Codable, Sendable, Hashable {
    public var channel: Channel
    public var maxTextFromAgent: Int
    public var voiceFromAgent: Bool
    public var attachmentsFromAgent: Bool
    public var calls: Bool
    /// Hours after the customer's last message during which agents may answer freely.
    public var replyWindowHours: Int?
    /// Whether templates can be sent (outside the window).
    public var templates: Bool
    /// Largest voice note that the channel still shows as a voice message (WhatsApp: 512 KB).
    public var maxVoiceBytes: Int?

    public init(
        channel: Channel, maxTextFromAgent: Int, voiceFromAgent: Bool, attachmentsFromAgent: Bool, calls: Bool, replyWindowHours: Int?,
        templates: Bool, maxVoiceBytes: Int?
    ) {
        (self.channel, self.maxTextFromAgent, self.voiceFromAgent, self.attachmentsFromAgent, self.calls) =
            (channel, maxTextFromAgent, voiceFromAgent, attachmentsFromAgent, calls)
        (self.replyWindowHours, self.templates, self.maxVoiceBytes) = (replyWindowHours, templates, maxVoiceBytes)
    }
}

/// `POST /v1/apps/{appId}/whatsapp/test`: what the provider answered with the stored credentials.
public struct ChannelTestDTO: Codable, Sendable, Hashable {
    public var ok: Bool
    /// "Connected to Acme Support, +1 555-078-3881", or what went wrong.
    public var message: String
    public var errorCode: String?

    public init(ok: Bool, message: String, errorCode: String? = nil) {
        self.ok = ok
        self.message = message
        self.errorCode = errorCode
    }
}

/// A durable job as admins see it (`GET /v1/jobs?state=failed`): what failed and why.
public struct JobDTO: Codable, Sendable, Hashable {
    public var id: Int64
    /// `channel.send`, `whatsapp.webhook`, `whatsapp.media`.
    public var kind: String
    /// `queued`, `running` or `failed`.
    public var state: String
    public var attempts: Int
    public var lastError: String?
    public var runAt: Date
    public var createdAt: Date
    public var updatedAt: Date

    public init(id: Int64, kind: String, state: String, attempts: Int, lastError: String?, runAt: Date, createdAt: Date, updatedAt: Date) {
        (self.id, self.kind, self.state, self.attempts, self.lastError) = (id, kind, state, attempts, lastError)
        (self.runAt, self.createdAt, self.updatedAt) = (runAt, createdAt, updatedAt)
    }
}

/// An admin connects an app on the `messenger` channel to a Facebook Page (Messenger Platform).
/// The secrets are stored encrypted and never returned.
public struct ConnectMessengerRequest: Codable, Sendable {
    /// The Facebook Page's id.
    public var pageId: String
    /// The token you choose and also enter in Meta's webhook settings (verification).
    public var verifyToken: String
    /// The Meta app's secret: webhooks are signed with it (`X-Hub-Signature-256`).
    public var appSecret: String
    /// A Page access token with `pages_messaging`, for sending.
    public var pageAccessToken: String

    public init(pageId: String, verifyToken: String, appSecret: String, pageAccessToken: String) {
        self.pageId = pageId
        self.verifyToken = verifyToken
        self.appSecret = appSecret
        self.pageAccessToken = pageAccessToken
    }
}

/// An admin connects an app on the `sms` channel to a Twilio phone number (Programmable
/// Messaging). The auth token is stored encrypted and never returned.
public struct ConnectSMSRequest: Codable, Sendable {
    /// The Twilio account's SID (`AC` and 32 hex digits).
    public var accountSid: String
    /// The account's auth token: Twilio signs its webhooks with it, and Parley sends with it.
    public var authToken: String
    /// The Twilio number customers text, in E.164 (`+15557122661`).
    public var phoneNumber: String

    public init(accountSid: String, authToken: String, phoneNumber: String) {
        self.accountSid = accountSid
        self.authToken = authToken
        self.phoneNumber = phoneNumber
    }
}

/// `PUT /v1/apps/{appId}/messenger/settings`: what the brand was granted for its Page.
public struct MessengerSettingsRequest: Codable, Sendable {
    /// Meta granted the brand's app the Human Agent permission: agents may answer up to 7 days
    /// after the customer's last message (sent with the `HUMAN_AGENT` tag after the first 24 hours).
    public var humanAgent: Bool

    public init(humanAgent: Bool) { self.humanAgent = humanAgent }
}

/// An admin connects an app on the `apple` channel to an Apple Messages for Business account, as
/// its messaging service provider. The secret is stored encrypted and never returned.
public struct ConnectAppleRequest: Codable, Sendable {
    /// The business id from Apple Business Register (the `destination-id` of customers' messages).
    public var businessId: String
    /// The messaging service provider id (CSP/MSP id): the JWTs' issuer and audience.
    public var mspId: String
    /// The Messaging API secret, base64 as Apple Business Register shows it.
    public var secret: String

    public init(businessId: String, mspId: String, secret: String) {
        self.businessId = businessId
        self.mspId = mspId
        self.secret = secret
    }
}
