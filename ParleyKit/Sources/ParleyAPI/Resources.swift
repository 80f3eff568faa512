import Foundation

/// A brand: the tenant that owns apps, agents, consumers and conversations.
public struct BrandDTO: Codable, Sendable, Hashable {
    public var id: BrandID
    public var name: String
    public var createdAt: Date

    public init(id: BrandID, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}

/// An app of a brand: a web widget or the brand's own mobile app. Consumers always belong to an app.
public struct AppDTO: Codable, Sendable, Hashable {
    public var id: AppID
    public var brandId: BrandID
    public var name: String
    public var channel: Channel
    public var createdAt: Date

    public init(id: AppID, brandId: BrandID, name: String, channel: Channel, createdAt: Date) {
        self.id = id
        self.brandId = brandId
        self.name = name
        self.channel = channel
        self.createdAt = createdAt
    }
}

/// A key the brand's backend uses to sign consumer JWTs for an app. The key material is never returned.
public struct AppKeyDTO: Codable, Sendable, Hashable {
    public var kid: String
    public var appId: AppID
    public var algorithm: String
    public var createdAt: Date

    public init(kid: String, appId: AppID, algorithm: String, createdAt: Date) {
        self.kid = kid
        self.appId = appId
        self.algorithm = algorithm
        self.createdAt = createdAt
    }
}

public struct AgentDTO: Codable, Sendable, Hashable {
    public var id: AgentID
    public var brandId: BrandID
    public var email: String
    public var name: String
    public var role: AgentRole
    public var permissions: [AgentPermission]
    public var createdAt: Date
    /// A disabled agent cannot sign in and has no session; an admin can enable them again.
    public var disabled: Bool

    public init(
        id: AgentID, brandId: BrandID, email: String, name: String, role: AgentRole,
        permissions: [AgentPermission], createdAt: Date, disabled: Bool = false
    ) {
        self.disabled = disabled
        self.id = id
        self.brandId = brandId
        self.email = email
        self.name = name
        self.role = role
        self.permissions = permissions
        self.createdAt = createdAt
    }
}

public struct ConsumerDTO: Codable, Sendable, Hashable {
    public var id: ConsumerID
    public var brandId: BrandID
    public var appId: AppID
    /// The brand's own user id (`sub` of the brand-signed JWT); nil for anonymous visitors.
    public var externalId: String?
    public var displayName: String
    public var anonymous: Bool
    /// First seen.
    public var createdAt: Date
    /// From the brand-signed JWT's `email` and `phone_number` claims.
    public var email: String?
    public var phone: String?
    /// The JWT claims the brand chose to show agents (`exposedClaims` in brand settings), as text.
    public var attributes: [String: String]?
    /// The page the widget last reported, the browser it ran in, and when.
    public var lastPageUrl: String?
    public var lastPageTitle: String?
    public var lastBrowser: String?
    public var lastSeenAt: Date?
    /// The language their automatic messages are in (from the widget or app), if known.
    public var language: String?

    public init(
        id: ConsumerID, brandId: BrandID, appId: AppID, externalId: String?, displayName: String,
        anonymous: Bool, createdAt: Date, email: String? = nil, phone: String? = nil, attributes: [String: String]? = nil,
        lastPageUrl: String? = nil, lastPageTitle: String? = nil, lastBrowser: String? = nil, lastSeenAt: Date? = nil
    ) {
        self.email = email
        self.phone = phone
        self.attributes = attributes
        self.lastPageUrl = lastPageUrl
        self.lastPageTitle = lastPageTitle
        self.lastBrowser = lastBrowser
        self.lastSeenAt = lastSeenAt
        self.id = id
        self.brandId = brandId
        self.appId = appId
        self.externalId = externalId
        self.displayName = displayName
        self.anonymous = anonymous
        self.createdAt = createdAt
    }
}

extension ConsumerDTO {
    /// The consumer's own view: without what is kept for agents (the visit and the exposed claims).
    public var ownView: ConsumerDTO {
        var own = self
        (own.attributes, own.lastPageUrl, own.lastPageTitle, own.lastBrowser, own.lastSeenAt) = (nil, nil, nil, nil, nil)
        return own
    }
}

public struct ConversationDTO: Codable, Sendable, Hashable {
    public var id: ConversationID
    public var brandId: BrandID
    public var appId: AppID
    public var consumerId: ConsumerID
    public var channel: Channel
    public var state: ConversationState
    public var assigneeId: AgentID?
    /// Highest sequence number used in this conversation (messages and stored events share it).
    public var lastSeq: Int64
    /// A short text of the last message, for lists ("Audio message 0:42" for a voice note).
    public var lastMessagePreview: String?
    /// What the last message is, so that a list can show an icon without reading the preview.
    public var lastMessageKind: MessageKind?
    public var lastMessageAt: Date?
    public var createdAt: Date
    public var updatedAt: Date
    /// When the customer last wrote (what automatic closing and channels' reply windows count from).
    public var lastConsumerMessageAt: Date?
    /// On channels with a reply window: until when agents may answer freely (after it, WhatsApp
    /// takes only templates). Absent where the channel has no window or the customer never wrote.
    public var replyWindowEndsAt: Date?
    /// The closed conversation this one continues (the customer wrote again after it closed).
    public var previousConversationId: ConversationID?
    /// Once closed: whether the customer was asked for a rating, and whether they gave it.
    public var survey: SurveyState?
    public var rating: RatingDTO?
    /// When the customer was last warned that the conversation will close on its own.
    public var closeWarnedAt: Date?
    /// An agent's first reply: when, and who (automatic messages are not replies).
    public var firstReplyAt: Date?
    public var firstReplyBy: AgentID?
    /// For the customer (their own views of it): how many of the agents' messages they have not
    /// read yet (a read receipt up to a message reads it and every one before).
    public var unread: Int?

    public init(
        id: ConversationID, brandId: BrandID, appId: AppID, consumerId: ConsumerID, channel: Channel,
        state: ConversationState, assigneeId: AgentID?, lastSeq: Int64, lastMessagePreview: String?,
        lastMessageKind: MessageKind? = nil, lastMessageAt: Date?, createdAt: Date, updatedAt: Date
    ) {
        self.lastMessageKind = lastMessageKind
        self.id = id
        self.brandId = brandId
        self.appId = appId
        self.consumerId = consumerId
        self.channel = channel
        self.state = state
        self.assigneeId = assigneeId
        self.lastSeq = lastSeq
        self.lastMessagePreview = lastMessagePreview
        self.lastMessageAt = lastMessageAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// What kind of attachment a file is, by its bytes (never by its name or declared type).
public enum AttachmentType: String, Codable, Sendable, Hashable, CaseIterable {
    case jpeg, png, gif, webp, heic, pdf, text, docx, xlsx, pptx, msOffice = "ms_office"

    /// Shown as a picture (with a thumbnail) rather than as a file.
    public var isImage: Bool { [.jpeg, .png, .gif, .webp, .heic].contains(self) }

    /// The brand's allow-list names these groups.
    public var group: AttachmentGroup {
        switch self {
        case .jpeg, .png, .gif, .webp, .heic: .images
        case .pdf: .pdf
        case .text: .text
        case .docx, .xlsx, .pptx, .msOffice: .office
        }
    }

    public var contentType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .heic: "image/heic"
        case .pdf: "application/pdf"
        case .text: "text/plain; charset=utf-8"
        case .docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        case .xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
        case .pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation"
        case .msOffice: "application/octet-stream"
        }
    }
}

/// The kinds of attachment a brand allows.
public enum AttachmentGroup: String, Codable, Sendable, Hashable, CaseIterable {
    /// JPEG, PNG, GIF, WebP and HEIC.
    case images
    case pdf
    /// Plain text (UTF-8).
    case text
    /// Word, Excel and PowerPoint (OOXML, and the older binary formats).
    case office
}

/// An image or file sent in a conversation.
public struct AttachmentDTO: Codable, Sendable, Hashable {
    public var type: AttachmentType
    /// The name the sender's device gave it (cleaned of paths and control characters).
    public var fileName: String
    public var contentType: String
    public var bytes: Int
    /// Images: their size in pixels.
    public var width: Int?
    public var height: Int?
    /// The file (Range requests; `?download` for a download).
    public var url: String
    /// Images: a JPEG at most 480 px wide, made by the server.
    public var thumbnailUrl: String?
    /// The malware scan's state: `clean`, or `unscanned` where no scanner is configured.
    public var scan: MalwareScanState

    public init(
        type: AttachmentType, fileName: String, contentType: String, bytes: Int, width: Int?, height: Int?, url: String,
        thumbnailUrl: String?, scan: MalwareScanState
    ) {
        self.type = type
        self.fileName = fileName
        self.contentType = contentType
        self.bytes = bytes
        self.width = width
        self.height = height
        self.url = url
        self.thumbnailUrl = thumbnailUrl
        self.scan = scan
    }
}

/// Where media is served from.
public enum MediaPaths {
    /// `/v1/logos/{brandId}?v=N`: a brand's logo; each new logo has a new version.
    public static func logo(brandId: BrandID, version: Int) -> String {
        "/v1/logos/\(brandId)?v=\(version)"
    }

    /// The version in a logo URL made by `logo(brandId:version:)`; 0 for none.
    public static func logoVersion(of url: String?) -> Int {
        url?.split(separator: "=").last.flatMap { Int($0) } ?? 0
    }

    /// `/v1/files/{messageId}/{variant}`: an attachment (`original`) or its thumbnail.
    public static func attachment(messageId: MessageID, thumbnail: Bool = false) -> String {
        "/v1/files/\(messageId)/\(thumbnail ? "thumbnail" : "original")"
    }

    /// `/v1/media/{messageId}/{format}`.
    public static func voice(messageId: MessageID, format: VoiceFormat) -> String {
        "/v1/media/\(messageId)/\(format.rawValue)"
    }
}

/// A voice note's files: what was uploaded, and the renditions made from it.
public enum VoiceFormat: String, Codable, Sendable, Hashable, CaseIterable {
    /// The upload as it was sent (its own container and codec).
    case original
    /// Ogg/Opus, mono: the voice-note format, and what WhatsApp takes.
    case opus
    /// AAC in M4A, for Safari and iOS.
    case aac
}

/// One playable form of a voice note.
public struct VoiceRenditionDTO: Codable, Sendable, Hashable {
    public var format: VoiceFormat
    public var contentType: String
    public var bytes: Int
    /// Where to fetch it (Range requests supported).
    public var url: String

    public init(format: VoiceFormat, contentType: String, bytes: Int, url: String) {
        self.format = format
        self.contentType = contentType
        self.bytes = bytes
        self.url = url
    }
}

/// The audio of a voice message.
public struct VoiceDTO: Codable, Sendable, Hashable {
    public var durationMs: Int
    /// Peak levels 0-255, evenly spread over the note.
    public var waveform: [UInt8]
    public var state: VoiceState
    public var failureReason: String?
    /// The malware scan's state. Only `clean` and `unscanned` notes can be played by the recipient.
    public var scan: MalwareScanState
    /// The original as uploaded, then the renditions that are ready. Empty for a blocked note.
    public var renditions: [VoiceRenditionDTO]
    /// What was said, when the brand transcribes voice notes; nil when it does not (or did not when
    /// the note arrived). It changes with a `voice_processed` event like the rest of the note.
    public var transcript: VoiceTranscriptDTO?

    public init(
        durationMs: Int, waveform: [UInt8], state: VoiceState, failureReason: String?, scan: MalwareScanState = .clean,
        renditions: [VoiceRenditionDTO], transcript: VoiceTranscriptDTO? = nil
    ) {
        self.transcript = transcript
        self.durationMs = durationMs
        self.waveform = waveform
        self.state = state
        self.failureReason = failureReason
        self.scan = scan
        self.renditions = renditions
    }
}

/// A voice note's transcript. Card numbers in it, spoken or as digits, are masked by the brand's
/// card-masking rules before it is stored.
public struct VoiceTranscriptDTO: Codable, Sendable, Hashable {
    public var state: TranscriptState
    /// What was heard; empty while pending, when unavailable, or when nothing was recognised.
    public var text: String
    /// The language it was transcribed in (ISO 639-1, `en`).
    public var language: String?
    /// The engine was unsure (music, noise, another language): show it as a guess.
    public var lowConfidence: Bool

    public init(state: TranscriptState, text: String = "", language: String? = nil, lowConfidence: Bool = false) {
        self.state = state
        self.text = text
        self.language = language
        self.lowConfidence = lowConfidence
    }
}

extension MessageDTO {
    /// A voice note's transcript, when its brand transcribes (nil otherwise, and for other kinds).
    /// It arrives after the note, with the note's `voice_processed` event (`ConversationEventDTO.message`).
    public var transcript: VoiceTranscriptDTO? { voice?.transcript }
}

public struct MessageDTO: Codable, Sendable, Hashable {
    public var id: MessageID
    public var conversationId: ConversationID
    public var seq: Int64
    public var senderKind: ParticipantKind
    public var senderId: String
    public var clientMessageId: String
    public var kind: MessageKind
    public var text: String
    public var deliveryState: DeliveryState
    public var createdAt: Date
    /// For `kind == .voice`: the audio. The `text` of a voice message is its transcript line,
    /// `[audio message m:ss]`.
    public var voice: VoiceDTO?
    /// For agents' messages: the agent's name when they sent it (what the consumer sees).
    public var senderName: String?
    /// For `kind == .attachment`: the image or file. The `text` is its transcript line, `[image]`
    /// or `[file name.pdf]`.
    public var attachment: AttachmentDTO?
    /// For agents' messages in a conversation on a messaging channel (WhatsApp, ...): its delivery
    /// through the provider. Absent on the web and in-app channels.
    public var channelDelivery: ChannelDeliveryDTO?

    public init(
        id: MessageID, conversationId: ConversationID, seq: Int64, senderKind: ParticipantKind, senderId: String,
        clientMessageId: String, kind: MessageKind, text: String, deliveryState: DeliveryState, createdAt: Date,
        voice: VoiceDTO? = nil, senderName: String? = nil
    ) {
        self.senderName = senderName
        self.voice = voice
        self.id = id
        self.conversationId = conversationId
        self.seq = seq
        self.senderKind = senderKind
        self.senderId = senderId
        self.clientMessageId = clientMessageId
        self.kind = kind
        self.text = text
        self.deliveryState = deliveryState
        self.createdAt = createdAt
    }
}

/// A stored, sequenced change to a conversation other than a message: receipts, state and assignment
/// changes, voice-processing results, call records and agents' private notes.
public struct ConversationEventDTO: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        case receipt
        case stateChanged = "state_changed"
        case assigned
        /// A voice note finished processing (ready or failed); `message` carries it as it is now.
        case voiceProcessed = "voice_processed"
        /// A call ended; `call` carries its record.
        case call
        /// An agent's private note on the conversation (`text`): agents only, never the consumer.
        case note
        /// A message's delivery through its messaging channel failed (or was retried); `message`
        /// carries it as it is now, with `channelDelivery`.
        case delivery
        /// The customer rated the closed conversation; `rating` carries it.
        case rated
        /// A co-browse offer or session ended; `cobrowse` carries its record (agents only).
        case cobrowse
    }

    public var conversationId: ConversationID
    public var seq: Int64
    public var kind: Kind
    public var actorKind: ParticipantKind
    public var actorId: String
    /// For receipts: every message of the other side with `seq <= upToSeq` is at least `deliveryState`.
    public var upToSeq: Int64?
    public var deliveryState: DeliveryState?
    public var state: ConversationState?
    public var assigneeId: AgentID?
    /// For `voiceProcessed`: the message id, and the message as it is now.
    public var messageId: MessageID?
    public var message: MessageDTO?
    /// For `call`: the call's id, and its record.
    public var callId: CallID?
    public var call: CallDTO?
    /// For `note`: its text, and the id its author's page chose (a retry returns the same note).
    public var text: String?
    public var clientNoteId: String?
    /// For `rated`: the score and comment.
    public var rating: RatingDTO?
    /// For `cobrowse`: the session's id, and its record.
    public var cobrowseId: CobrowseID?
    public var cobrowse: CobrowseSessionDTO?
    public var createdAt: Date

    public init(
        conversationId: ConversationID, seq: Int64, kind: Kind, actorKind: ParticipantKind, actorId: String,
        upToSeq: Int64? = nil, deliveryState: DeliveryState? = nil, state: ConversationState? = nil,
        assigneeId: AgentID? = nil, messageId: MessageID? = nil, message: MessageDTO? = nil, callId: CallID? = nil,
        call: CallDTO? = nil, text: String? = nil, clientNoteId: String? = nil, createdAt: Date
    ) {
        self.text = text
        self.clientNoteId = clientNoteId
        self.callId = callId
        self.call = call
        self.messageId = messageId
        self.message = message
        self.conversationId = conversationId
        self.seq = seq
        self.kind = kind
        self.actorKind = actorKind
        self.actorId = actorId
        self.upToSeq = upToSeq
        self.deliveryState = deliveryState
        self.state = state
        self.assigneeId = assigneeId
        self.createdAt = createdAt
    }
}

/// What a brand allows. Admins change it; agents and consumers read what concerns them.
public struct BrandSettingsDTO: Codable, Sendable, Hashable {
    /// Longest voice note accepted, 15-120 seconds.
    public var voiceMaxSeconds: Int
    /// Whether consumers may send voice notes to agents.
    public var voiceFromConsumers: Bool
    /// Whether agents (with the send_audio permission) may send voice notes to consumers.
    public var voiceFromAgents: Bool
    /// What happens to an upload while the malware scanner is unavailable.
    public var scanFailurePolicy: ScanFailurePolicy
    /// Masking of payment card numbers in consumers' messages.
    public var cardMasking: CardMasking
    /// How many conversations one consumer may have open (not resolved) at once in one app, 1-20.
    /// With 1 (the default) a consumer always continues their one conversation.
    public var openConversationsPerConsumer: Int
    /// Minutes without activity in the workspace after which an online agent is shown away, 1-480;
    /// 0 turns it off.
    public var autoAwayMinutes: Int
    /// Claims of the consumer JWT (beyond `sub`, `name`, `email`, `phone_number`) shown to agents in
    /// the details pane, at most 20 names. Claims not listed are never stored.
    public var exposedClaims: [String]
    /// The widget's accent colour, `#rrggbb`.
    public var widgetColor: String
    /// What the widget says while at least one agent is online, and while none is.
    public var availableText: String
    public var awayText: String
    /// Which kinds of attachment consumers and agents may send (all by default; empty: none).
    public var attachmentGroups: [AttachmentGroup]
    /// Largest attachment accepted, 1-25 MB (default 10).
    public var attachmentMaxMegabytes: Int
    /// The brand's sites (`https://shop.example.com`) whose launcher may show the first words of an
    /// answer that arrives while the chat is closed. Elsewhere the launcher shows only a count: any
    /// page can embed the widget, and message text must not reach a page the brand does not own.
    public var previewOrigins: [String]
    /// The brand's logo (`PUT /v1/brand/logo`), a PNG at most 256 px wide; nil without one. Public:
    /// the widget shows it on any page.
    public var logoUrl: String?
    /// Whether push notifications show the message's text or only that there is one.
    public var pushPreview: PushPreview = .masked
    /// Shortest voice note accepted, 0-10 seconds (default 1; 0 accepts any): shorter ones are
    /// refused with `voice_too_short`, the way messaging apps discard an accidental tap.
    public var voiceMinSeconds: Int = 1
    /// Whether agents with the `cobrowse` permission may offer to see a customer's page (on by
    /// default: nothing is seen without the customer's yes).
    public var cobrowseEnabled: Bool = true
    /// The brand's sites where co-browse may run (`https://shop.example.com`); empty: any page
    /// that embeds the chat.
    public var cobrowseOrigins: [String] = []
    /// CSS selectors of elements the customer's page masks during co-browse, beyond password and
    /// card fields and `data-parley-mask` (at most 20).
    public var cobrowseMaskSelectors: [String] = []
    /// Whether customers may share their screen during a call (off by default; agents share with
    /// the `share_screen` permission).
    public var screenShareFromConsumers: Bool = false
    /// Whether voice notes are transcribed (off by default: the embedded engine's measured word
    /// error rate on read speech is over 25%; see docs/transcription.md). Needs a transcriber on the
    /// server (`ConsumerSettings`/`GET /v1/brand/settings` say whether there is one).
    public var transcription: Bool = false
    /// The language notes are transcribed in, ISO 639-1 (default `en`).
    public var transcriptionLanguage: String = "en"
    /// Whether this server has a transcriber (`PARLEY_TRANSCRIBER`); read-only.
    public var transcriberAvailable: Bool = false

    public static let defaultWidgetColor = "#4f46e5"
    public static let defaultAvailableText = "Typically replies in a few minutes"
    public static let defaultAwayText = "We're away right now. Leave a message and we'll reply here."

    public init(
        voiceMaxSeconds: Int = 120, voiceFromConsumers: Bool = true, voiceFromAgents: Bool = true,
        scanFailurePolicy: ScanFailurePolicy = .closed, cardMasking: CardMasking = .off, openConversationsPerConsumer: Int = 1,
        autoAwayMinutes: Int = 10, exposedClaims: [String] = [], widgetColor: String = Self.defaultWidgetColor,
        availableText: String = Self.defaultAvailableText, awayText: String = Self.defaultAwayText,
        attachmentGroups: [AttachmentGroup] = AttachmentGroup.allCases, attachmentMaxMegabytes: Int = 10, previewOrigins: [String] = [],
        logoUrl: String? = nil
    ) {
        self.logoUrl = logoUrl
        self.previewOrigins = previewOrigins
        self.attachmentGroups = attachmentGroups
        self.attachmentMaxMegabytes = attachmentMaxMegabytes
        self.autoAwayMinutes = autoAwayMinutes
        self.exposedClaims = exposedClaims
        self.widgetColor = widgetColor
        self.availableText = availableText
        self.awayText = awayText
        self.voiceMaxSeconds = voiceMaxSeconds
        self.voiceFromConsumers = voiceFromConsumers
        self.voiceFromAgents = voiceFromAgents
        self.scanFailurePolicy = scanFailurePolicy
        self.cardMasking = cardMasking
        self.openConversationsPerConsumer = openConversationsPerConsumer
    }
}

/// A change to brand settings; absent fields stay as they are.
public struct UpdateBrandSettingsRequest: Codable, Sendable {
    public var voiceMaxSeconds: Int?
    public var voiceFromConsumers: Bool?
    public var voiceFromAgents: Bool?
    public var scanFailurePolicy: ScanFailurePolicy?
    public var cardMasking: CardMasking?
    public var openConversationsPerConsumer: Int?
    public var autoAwayMinutes: Int?
    public var exposedClaims: [String]?
    public var widgetColor: String?
    public var availableText: String?
    public var awayText: String?
    public var attachmentGroups: [AttachmentGroup]?
    public var attachmentMaxMegabytes: Int?
    public var previewOrigins: [String]?
    public var pushPreview: PushPreview?
    public var voiceMinSeconds: Int? = nil
    public var cobrowseEnabled: Bool? = nil
    public var cobrowseOrigins: [String]? = nil
    public var cobrowseMaskSelectors: [String]? = nil
    public var screenShareFromConsumers: Bool? = nil
    public var transcription: Bool? = nil
    public var transcriptionLanguage: String? = nil

    public init(
        voiceMaxSeconds: Int? = nil, voiceFromConsumers: Bool? = nil, voiceFromAgents: Bool? = nil,
        scanFailurePolicy: ScanFailurePolicy? = nil, cardMasking: CardMasking? = nil, openConversationsPerConsumer: Int? = nil,
        autoAwayMinutes: Int? = nil, exposedClaims: [String]? = nil, widgetColor: String? = nil, availableText: String? = nil,
        awayText: String? = nil, attachmentGroups: [AttachmentGroup]? = nil, attachmentMaxMegabytes: Int? = nil,
        previewOrigins: [String]? = nil, pushPreview: PushPreview? = nil, cobrowseEnabled: Bool? = nil, cobrowseOrigins: [String]? = nil,
        cobrowseMaskSelectors: [String]? = nil, screenShareFromConsumers: Bool? = nil, transcription: Bool? = nil,
        transcriptionLanguage: String? = nil
    ) {
        self.transcription = transcription
        self.transcriptionLanguage = transcriptionLanguage
        self.screenShareFromConsumers = screenShareFromConsumers
        self.cobrowseEnabled = cobrowseEnabled
        self.cobrowseOrigins = cobrowseOrigins
        self.cobrowseMaskSelectors = cobrowseMaskSelectors
        self.pushPreview = pushPreview
        self.previewOrigins = previewOrigins
        self.attachmentGroups = attachmentGroups
        self.attachmentMaxMegabytes = attachmentMaxMegabytes
        self.autoAwayMinutes = autoAwayMinutes
        self.exposedClaims = exposedClaims
        self.widgetColor = widgetColor
        self.availableText = availableText
        self.awayText = awayText
        self.voiceMaxSeconds = voiceMaxSeconds
        self.voiceFromConsumers = voiceFromConsumers
        self.voiceFromAgents = voiceFromAgents
        self.scanFailurePolicy = scanFailurePolicy
        self.cardMasking = cardMasking
        self.openConversationsPerConsumer = openConversationsPerConsumer
    }
}

/// What the consumer's client needs: its microphone, the brand's look, and whether anyone is there.
public struct ConsumerSettingsDTO: Codable, Sendable, Hashable {
    public var voiceEnabled: Bool
    public var voiceMaxSeconds: Int
    /// Shorter notes are refused: a recorder says so instead of sending.
    public var voiceMinSeconds: Int = 1
    public var brandName: String
    /// `#rrggbb`.
    public var widgetColor: String
    /// At least one agent of the brand is online (chose online and is connected).
    public var agentsAvailable: Bool
    /// The brand's `availableText` or `awayText`, whichever applies now.
    public var availability: String
    /// What the consumer may attach, and how large.
    public var attachmentGroups: [AttachmentGroup]
    public var attachmentMaxMegabytes: Int
    /// The brand's sites whose launcher may show a preview of an answer (see `BrandSettingsDTO`).
    public var previewOrigins: [String]
    public var logoUrl: String?

    public init(
        voiceEnabled: Bool, voiceMaxSeconds: Int, brandName: String, widgetColor: String = BrandSettingsDTO.defaultWidgetColor,
        agentsAvailable: Bool = false, availability: String = BrandSettingsDTO.defaultAwayText,
        attachmentGroups: [AttachmentGroup] = AttachmentGroup.allCases, attachmentMaxMegabytes: Int = 10, previewOrigins: [String] = [],
        logoUrl: String? = nil
    ) {
        self.logoUrl = logoUrl
        self.previewOrigins = previewOrigins
        self.attachmentGroups = attachmentGroups
        self.attachmentMaxMegabytes = attachmentMaxMegabytes
        self.widgetColor = widgetColor
        self.agentsAvailable = agentsAvailable
        self.availability = availability
        self.voiceEnabled = voiceEnabled
        self.voiceMaxSeconds = voiceMaxSeconds
        self.brandName = brandName
    }
}

/// One page of results with an opaque cursor for the next page.
public struct Page<Item: Codable & Sendable>: Codable, Sendable {
    public var items: [Item]
    public var nextCursor: String?

    public init(items: [Item], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

extension Page: Equatable where Item: Equatable {}
