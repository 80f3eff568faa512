/// A stable, machine-readable error code: the `code` of every error body and `error` frame, the
/// reason of a channel delivery that failed, and ParleyKit's refusals. Every code is declared once,
/// here, in `catalogue` with what it means and what a client or an operator should do about it;
/// docs/errors.md is made from the catalogue, and `ErrorCatalogueTests` checks that the server, the
/// SDK and the pages use no code outside it.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    /// For the declarations below and for comparing with a code a client received. The server's
    /// sources name the declared constants (`.callNotFound`), never a literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// ParleyKit's code for an HTTP failure without an error body (a proxy's 502, say): `http_<status>`.
    public static func http(_ status: Int) -> ErrorCode { ErrorCode(rawValue: "http_\(status)") }

    /// The code for connecting an app of another channel to `channel` (`app_not_whatsapp`...).
    public static func appNot(_ channel: Channel) -> ErrorCode {
        switch channel {
        case .whatsapp: .appNotWhatsapp
        case .messenger: .appNotMessenger
        case .apple: .appNotApple
        case .sms: .appNotSms
        case .web, .inApp: ErrorCode(rawValue: "app_not_\(channel.rawValue)")
        }
    }
}

extension ErrorCode {
    /// Where a code is met.
    public enum Surface: String, Sendable, CaseIterable {
        /// An HTTP error body or a real-time `error` frame.
        case api = "HTTP and real-time"
        /// A message that could not be delivered on a channel (shown to agents on the message), or
        /// a channel's connection test in Settings. Providers' own codes appear beside these.
        case delivery = "Channels: delivery and connection tests"
        /// ParleyKit, on the device.
        case sdk = "ParleyKit"
    }

    /// One code of the catalogue.
    public struct Entry: Sendable {
        public let code: ErrorCode
        public let surface: Surface
        /// The HTTP statuses it comes with (empty where there is no HTTP answer).
        public let http: [Int]
        public let meaning: String
        /// What the client, the user or the operator should do.
        public let action: String

        init(_ code: ErrorCode, _ surface: Surface, http: [Int], meaning: String, action: String) {
            (self.code, self.surface, self.http, self.meaning, self.action) = (code, surface, http, meaning, action)
        }
    }

    public static let agentDisabled: ErrorCode = "agent_disabled"
    public static let agentNotFound: ErrorCode = "agent_not_found"
    public static let alreadyRated: ErrorCode = "already_rated"
    public static let alreadyResolved: ErrorCode = "already_resolved"
    public static let appNotApple: ErrorCode = "app_not_apple"
    public static let appNotFound: ErrorCode = "app_not_found"
    public static let appNotMessenger: ErrorCode = "app_not_messenger"
    public static let appNotSms: ErrorCode = "app_not_sms"
    public static let appNotWhatsapp: ErrorCode = "app_not_whatsapp"
    public static let attachmentBlocked: ErrorCode = "attachment_blocked"
    public static let attachmentTooLarge: ErrorCode = "attachment_too_large"
    public static let attachmentTypeNotAllowed: ErrorCode = "attachment_type_not_allowed"
    public static let attachmentsDisabled: ErrorCode = "attachments_disabled"
    public static let automaticMessageNotFound: ErrorCode = "automatic_message_not_found"
    public static let badRequest: ErrorCode = "bad_request"
    public static let bodyTooLarge: ErrorCode = "body_too_large"
    public static let businessTaken: ErrorCode = "business_taken"
    public static let callAlreadyAnswered: ErrorCode = "call_already_answered"
    public static let callEnded: ErrorCode = "call_ended"
    public static let callInProgress: ErrorCode = "call_in_progress"
    public static let callNodeUnavailable: ErrorCode = "call_node_unavailable"
    public static let callNotAnswered: ErrorCode = "call_not_answered"
    public static let callNotFound: ErrorCode = "call_not_found"
    public static let callOnOtherDevice: ErrorCode = "call_on_other_device"
    public static let callPermissionMissing: ErrorCode = "call_permission_missing"
    public static let cobrowseControlNotGranted: ErrorCode = "cobrowse_control_not_granted"
    public static let cobrowseDisabled: ErrorCode = "cobrowse_disabled"
    public static let cobrowseInProgress: ErrorCode = "cobrowse_in_progress"
    public static let cobrowseNeedsWeb: ErrorCode = "cobrowse_needs_web"
    public static let cobrowseNotActive: ErrorCode = "cobrowse_not_active"
    public static let cobrowseNotFound: ErrorCode = "cobrowse_not_found"
    public static let cobrowseOnOtherPage: ErrorCode = "cobrowse_on_other_page"
    public static let cobrowsePermissionMissing: ErrorCode = "cobrowse_permission_missing"
    public static let cannotChangeOwnRole: ErrorCode = "cannot_change_own_role"
    public static let cannotDeleteSelf: ErrorCode = "cannot_delete_self"
    public static let cannotDisableSelf: ErrorCode = "cannot_disable_self"
    public static let channelCannotCall: ErrorCode = "channel_cannot_call"
    public static let channelNotAllowed: ErrorCode = "channel_not_allowed"
    public static let channelNotSupported: ErrorCode = "channel_not_supported"
    public static let clientMessageIdReused: ErrorCode = "client_message_id_reused"
    public static let clientNoteIdReused: ErrorCode = "client_note_id_reused"
    public static let conflict: ErrorCode = "conflict"
    public static let connectionNotFound: ErrorCode = "connection_not_found"
    public static let conversationClosed: ErrorCode = "conversation_closed"
    public static let conversationLimit: ErrorCode = "conversation_limit"
    public static let conversationResolved: ErrorCode = "conversation_resolved"
    public static let corruptAudio: ErrorCode = "corrupt_audio"
    public static let corruptImage: ErrorCode = "corrupt_image"
    public static let emailTaken: ErrorCode = "email_taken"
    public static let emptyAttachment: ErrorCode = "empty_attachment"
    public static let emptyAudio: ErrorCode = "empty_audio"
    public static let emptyMessage: ErrorCode = "empty_message"
    public static let emptyNote: ErrorCode = "empty_note"
    public static let engagementRuleLimit: ErrorCode = "engagement_rule_limit"
    public static let eventTooOld: ErrorCode = "event_too_old"
    public static let exportBusy: ErrorCode = "export_busy"
    public static let fileLost: ErrorCode = "file_lost"
    public static let forbidden: ErrorCode = "forbidden"
    public static let holdLimit: ErrorCode = "hold_limit"
    public static let identityNotConfigured: ErrorCode = "identity_not_configured"
    public static let imageTooLarge: ErrorCode = "image_too_large"
    public static let imagesUnavailable: ErrorCode = "images_unavailable"
    public static let internalError: ErrorCode = "internal_error"
    public static let invalidCharacters: ErrorCode = "invalid_characters"
    public static let invalidCredentials: ErrorCode = "invalid_credentials"
    public static let invalidDate: ErrorCode = "invalid_date"
    public static let invalidField: ErrorCode = "invalid_field"
    public static let invalidForm: ErrorCode = "invalid_form"
    public static let invalidGzip: ErrorCode = "invalid_gzip"
    public static let invalidIdentityToken: ErrorCode = "invalid_identity_token"
    public static let invalidJson: ErrorCode = "invalid_json"
    public static let invalidKey: ErrorCode = "invalid_key"
    public static let invalidSignature: ErrorCode = "invalid_signature"
    public static let invalidToken: ErrorCode = "invalid_token"
    public static let keyExists: ErrorCode = "key_exists"
    public static let lastAdmin: ErrorCode = "last_admin"
    public static let legalHold: ErrorCode = "legal_hold"
    public static let linkExpired: ErrorCode = "link_expired"
    public static let logoTooLarge: ErrorCode = "logo_too_large"
    public static let mediaUnavailable: ErrorCode = "media_unavailable"
    public static let messageTooLong: ErrorCode = "message_too_long"
    public static let methodNotAllowed: ErrorCode = "method_not_allowed"
    public static let metricsForbidden: ErrorCode = "metrics_forbidden"
    public static let metricsTokenRequired: ErrorCode = "metrics_token_required"
    public static let missingField: ErrorCode = "missing_field"
    public static let noAnswer: ErrorCode = "no_answer"
    public static let noOfferToAnswer: ErrorCode = "no_offer_to_answer"
    public static let noRecipient: ErrorCode = "no_recipient"
    public static let notAllowedInCall: ErrorCode = "not_allowed_in_call"
    public static let notConnected: ErrorCode = "not_connected"
    public static let notFound: ErrorCode = "not_found"
    public static let notResolved: ErrorCode = "not_resolved"
    public static let notRetryable: ErrorCode = "not_retryable"
    public static let notSent: ErrorCode = "not_sent"
    public static let notWaiting: ErrorCode = "not_waiting"
    public static let noteTooLong: ErrorCode = "note_too_long"
    public static let numberNotFound: ErrorCode = "number_not_found"
    public static let numberTaken: ErrorCode = "number_taken"
    public static let offerCollision: ErrorCode = "offer_collision"
    public static let originNotAllowed: ErrorCode = "origin_not_allowed"
    public static let pageTaken: ErrorCode = "page_taken"
    public static let payloadTooLarge: ErrorCode = "payload_too_large"
    public static let permissionRequired: ErrorCode = "permission_required"
    public static let phoneNumberTaken: ErrorCode = "phone_number_taken"
    public static let pushNotConfigured: ErrorCode = "push_not_configured"
    public static let rangeNotSatisfiable: ErrorCode = "range_not_satisfiable"
    public static let rateLimited: ErrorCode = "rate_limited"
    public static let ratingNotRequested: ErrorCode = "rating_not_requested"
    public static let recordingLost: ErrorCode = "recording_lost"
    public static let renditionFailed: ErrorCode = "rendition_failed"
    public static let renditionNotReady: ErrorCode = "rendition_not_ready"
    public static let replyWindowClosed: ErrorCode = "reply_window_closed"
    public static let routeNotFound: ErrorCode = "route_not_found"
    public static let savedReplyLimit: ErrorCode = "saved_reply_limit"
    public static let scanPending: ErrorCode = "scan_pending"
    public static let scanUnavailable: ErrorCode = "scan_unavailable"
    public static let screenShareNotAllowed: ErrorCode = "screen_share_not_allowed"
    public static let sequenceOutOfRange: ErrorCode = "sequence_out_of_range"
    public static let sessionExpired: ErrorCode = "session_expired"
    public static let sessionRevoked: ErrorCode = "session_revoked"
    public static let shortcutTaken: ErrorCode = "shortcut_taken"
    public static let shuttingDown: ErrorCode = "shutting_down"
    public static let smsNotSupported: ErrorCode = "sms_not_supported"
    public static let teamLimit: ErrorCode = "team_limit"
    public static let transcriberUnavailable: ErrorCode = "transcriber_unavailable"
    public static let teamNameTaken: ErrorCode = "team_name_taken"
    public static let teamNotFound: ErrorCode = "team_not_found"
    public static let templateNotFound: ErrorCode = "template_not_found"
    public static let templatesNotSupported: ErrorCode = "templates_not_supported"
    public static let tokenExpired: ErrorCode = "token_expired"
    public static let tooManyEvents: ErrorCode = "too_many_events"
    public static let tooManyFrames: ErrorCode = "too_many_frames"
    public static let tooManyUploads: ErrorCode = "too_many_uploads"
    public static let unauthenticated: ErrorCode = "unauthenticated"
    public static let unexpectedAnswer: ErrorCode = "unexpected_answer"
    public static let unreachable: ErrorCode = "unreachable"
    public static let unsupportedAlgorithm: ErrorCode = "unsupported_algorithm"
    public static let unsupportedAttachment: ErrorCode = "unsupported_attachment"
    public static let unsupportedAudio: ErrorCode = "unsupported_audio"
    public static let unsupportedFrame: ErrorCode = "unsupported_frame"
    public static let unsupportedImage: ErrorCode = "unsupported_image"
    public static let unsupportedMediaType: ErrorCode = "unsupported_media_type"
    public static let upgradeRequired: ErrorCode = "upgrade_required"
    public static let uploadIncomplete: ErrorCode = "upload_incomplete"
    public static let uploadStalled: ErrorCode = "upload_stalled"
    public static let uploadTooSlow: ErrorCode = "upload_too_slow"
    public static let verificationFailed: ErrorCode = "verification_failed"
    public static let videoNotAllowed: ErrorCode = "video_not_allowed"
    public static let voiceBlocked: ErrorCode = "voice_blocked"
    public static let voiceBusy: ErrorCode = "voice_busy"
    public static let voiceDisabled: ErrorCode = "voice_disabled"
    public static let voiceTooLarge: ErrorCode = "voice_too_large"
    public static let voiceTooLong: ErrorCode = "voice_too_long"
    public static let voiceTooShort: ErrorCode = "voice_too_short"
    public static let voiceUnavailable: ErrorCode = "voice_unavailable"
    public static let wrongBusiness: ErrorCode = "wrong_business"
    public static let wrongPassword: ErrorCode = "wrong_password"

    /// Every code, with what it means and what to do about it (docs/errors.md).
    public static let catalogue: [Entry] = [
        Entry(.agentDisabled, .api, http: [403], meaning: "This account is disabled. Ask an admin of your team to enable it.", action: "An admin enables the agent again (Settings, Agents)."),
        Entry(.agentNotFound, .api, http: [422], meaning: "There is no such agent in this brand.", action: "Choose one of the brand's agents."),
        Entry(.alreadyRated, .api, http: [409], meaning: "This conversation has been rated already.", action: "Nothing to do: the rating is kept."),
        Entry(.alreadyResolved, .api, http: [409], meaning: "This conversation is already resolved.", action: "Nothing to do."),
        Entry(.appNotApple, .api, http: [409], meaning: "The app being connected to Apple Messages for Business was created for another channel.", action: "Connect an app created for Apple Messages for Business."),
        Entry(.appNotFound, .api, http: [404, 422], meaning: "There is no such app in this brand.", action: "Check the id (another brand's ids are not found either)."),
        Entry(.appNotMessenger, .api, http: [409], meaning: "The app being connected to Messenger was created for another channel.", action: "Connect an app created for Messenger."),
        Entry(.appNotSms, .api, http: [409], meaning: "The app being connected to SMS was created for another channel.", action: "Connect an app created for SMS."),
        Entry(.appNotWhatsapp, .api, http: [409], meaning: "The app being connected to WhatsApp was created for another channel.", action: "Connect an app created for WhatsApp."),
        Entry(.attachmentBlocked, .api, http: [422], meaning: "The malware scan found something in the attachment; it is not stored.", action: "Nothing is stored; send another file."),
        Entry(.attachmentTooLarge, .api, http: [413], meaning: "Attachments are at most … MB here.", action: "Send less: the message says the limit."),
        Entry(.attachmentTypeNotAllowed, .api, http: [415], meaning: "The brand does not accept this kind of file.", action: "Send one of the accepted types the message lists."),
        Entry(.attachmentsDisabled, .api, http: [403], meaning: "This brand does not accept attachments.", action: "An admin allows attachments in the brand's settings."),
        Entry(.automaticMessageNotFound, .api, http: [404], meaning: "There is no automatic message of that kind; the message lists the kinds.", action: "Check the id (another brand's ids are not found either)."),
        Entry(.badRequest, .api, http: [400], meaning: "The request is malformed in a way no more specific code names.", action: "Fix the request; the same request fails again."),
        Entry(.bodyTooLarge, .api, http: [413], meaning: "A webhook body is at most … bytes.", action: "Send less: the message says the limit."),
        Entry(.businessTaken, .api, http: [409], meaning: "Another app is already connected to this Apple Messages for Business id.", action: "Disconnect the other app first, or connect this one to another business."),
        Entry(.callAlreadyAnswered, .api, http: [409], meaning: "This call was already answered.", action: "Another device answered; nothing to do on this one."),
        Entry(.callEnded, .api, http: [409], meaning: "This call has already ended.", action: "Nothing to do: the call is over."),
        Entry(.callInProgress, .api, http: [409], meaning: "This conversation already has a call. End it before starting another.", action: "End the current call first."),
        Entry(.callNodeUnavailable, .api, http: [503], meaning: "The server holding this call did not answer. Try again, or end the call.", action: "Retry or end the call. Operator: the node holding the call stopped answering on the bus; see its log and `/ready`."),
        Entry(.callNotAnswered, .api, http: [409], meaning: "Signalling starts once the call is answered.", action: "Wait until the call is answered."),
        Entry(.callNotFound, .api, http: [404], meaning: "There is no live call with this id.", action: "The call ended or is not yours; list the conversation's calls again."),
        Entry(.callOnOtherDevice, .api, http: [409], meaning: "This call is taking place on another device or tab.", action: "Continue on the device that answered."),
        Entry(.callPermissionMissing, .api, http: [403], meaning: "Your profile does not allow … calls (…).", action: "The signed-in user may not do this; an admin can change what their profile allows."),
        Entry(.cobrowseControlNotGranted, .api, http: [409], meaning: "The customer has not let you click and type on their page (or there is no request to answer).", action: "Ask for control; the customer answers in the chat."),
        Entry(.cobrowseDisabled, .api, http: [403], meaning: "Co-browse is off for this brand, or not allowed on this site.", action: "An admin can turn co-browse on, or add the site, in the brand's settings."),
        Entry(.cobrowseInProgress, .api, http: [409], meaning: "This conversation already has a co-browse session. End it before offering another.", action: "End the current session first."),
        Entry(.cobrowseNeedsWeb, .api, http: [422], meaning: "Co-browse needs a web conversation: it shows the page of the brand's site where the customer chats.", action: "Offer co-browse in a conversation from the web widget; in apps, use a call."),
        Entry(.cobrowseNotActive, .api, http: [409], meaning: "This co-browse session is not running (not accepted yet, or over).", action: "Wait for the customer's answer, or offer again."),
        Entry(.cobrowseNotFound, .api, http: [404], meaning: "There is no co-browse session with this id.", action: "The session ended or is not yours."),
        Entry(.cobrowseOnOtherPage, .api, http: [409], meaning: "This co-browse session is shared from another page or tab.", action: "Continue on the page that accepted, or accept again from this one."),
        Entry(.cobrowsePermissionMissing, .api, http: [403], meaning: "Your profile does not allow co-browse (cobrowse).", action: "The signed-in user may not do this; an admin can change what their profile allows."),
        Entry(.cannotChangeOwnRole, .api, http: [409], meaning: "Admins cannot change their own role; ask another admin.", action: "Ask another admin."),
        Entry(.cannotDeleteSelf, .api, http: [409], meaning: "Admins cannot delete themselves; ask another admin.", action: "Ask another admin."),
        Entry(.cannotDisableSelf, .api, http: [409], meaning: "Admins cannot disable themselves; ask another admin.", action: "Ask another admin."),
        Entry(.channelCannotCall, .api, http: [422], meaning: "Conversations on … cannot carry calls; only web and in-app conversations can.", action: "Call only in web and in-app conversations."),
        Entry(.channelNotAllowed, .api, http: [422], meaning: "This app's conversations are on the … channel; a consumer cannot choose another.", action: "Leave the channel out: the app decides it."),
        Entry(.channelNotSupported, .delivery, http: [], meaning: "The conversation's channel has no connector to send on.", action: "Operator: a message was queued for a channel this server cannot send on; answer on the conversation's own channel."),
        Entry(.clientMessageIdReused, .api, http: [409], meaning: "This client message id was already used for a different message.", action: "Give each new message a new client message id; reuse one only to send the same message again."),
        Entry(.clientNoteIdReused, .api, http: [409], meaning: "This client note id was already used for another note.", action: "Give each new note a new client note id; reuse one only to send the same note again."),
        Entry(.conflict, .api, http: [409], meaning: "Someone else changed this at the same time. Try again.", action: "Load it again and repeat the change."),
        Entry(.connectionNotFound, .api, http: [422], meaning: "connectionId must be one of your open real-time connections (from its hello frame).", action: "Pass the connectionId of an open real-time connection of yours (its hello frame)."),
        Entry(.conversationClosed, .api, http: [409], meaning: "This conversation has been closed. A new message starts a new conversation.", action: "Send a new message: it starts a new conversation."),
        Entry(.conversationLimit, .api, http: [409], meaning: "This brand allows … per customer at a time; continue one, or wait until it is resolved.", action: "Continue one of the customer's open conversations."),
        Entry(.conversationResolved, .api, http: [409], meaning: "This conversation is resolved. Reopen it before transferring it.", action: "Reopen the conversation first."),
        Entry(.corruptAudio, .api, http: [422], meaning: "The audio could not be decoded.", action: "Record or export the audio again and send it."),
        Entry(.corruptImage, .api, http: [422], meaning: "The image is damaged and cannot be shown.", action: "Send another image."),
        Entry(.emailTaken, .api, http: [409], meaning: "An agent with this email already exists.", action: "Use another email, or edit the agent who has it."),
        Entry(.emptyAttachment, .api, http: [422], meaning: "The attachment or logo upload has no bytes.", action: "Choose the file again and send it."),
        Entry(.emptyAudio, .api, http: [422], meaning: "The voice upload has no bytes.", action: "Record again and send the recording."),
        Entry(.emptyMessage, .api, http: [422], meaning: "A message needs some text.", action: "Write some text, or send a voice note or a file."),
        Entry(.emptyNote, .api, http: [422], meaning: "A note needs some text.", action: "Write some text."),
        Entry(.engagementRuleLimit, .api, http: [409], meaning: "A brand has at most … engagement rules; delete one first.", action: "Delete a rule first."),
        Entry(.eventTooOld, .api, http: [422], meaning: "Events older than 30 days are not accepted.", action: "Report events as they happen (at most 30 days late)."),
        Entry(.exportBusy, .api, http: [429], meaning: "… exports of this brand are running; try again when one is done.", action: "Retry when one of the brand's running exports is done."),
        Entry(.fileLost, .sdk, http: [], meaning: "The file is no longer on the device.", action: "The app should let the customer choose the file again."),
        Entry(.forbidden, .api, http: [403], meaning: "The signed-in user's role or profile does not allow this.", action: "The signed-in user may not do this; an admin can change what their profile allows."),
        Entry(.holdLimit, .api, http: [409], meaning: "A brand keeps at most … legal holds.", action: "Lift a hold that is no longer needed first."),
        Entry(.identityNotConfigured, .api, http: [401], meaning: "This app has no key for verifying consumer identities; register one first.", action: "An admin registers the app's identity key (Settings, Apps) before consumers sign in with tokens."),
        Entry(.imageTooLarge, .api, http: [422], meaning: "The image is … x … pixels; at most … megapixels are accepted.", action: "Send a smaller image."),
        Entry(.imagesUnavailable, .api, http: [503], meaning: "Images are unavailable: the server has no ffmpeg.", action: "Operator: install ffmpeg (scripts/install-deps.sh) or set PARLEY_FFMPEG."),
        Entry(.internalError, .api, http: [500], meaning: "Something went wrong on the server's side.", action: "Retry. Operator: the server's log has the cause."),
        Entry(.invalidCharacters, .api, http: [400], meaning: "The text contains the control character U+….", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidCredentials, .api, http: [401], meaning: "The email or the password is wrong.", action: "Check the email and password; repeated failures are rate-limited."),
        Entry(.invalidDate, .api, http: [400], meaning: "'…' is a date (2026-11-24) or an RFC 3339 time (2026-11-24T09:30:00Z), and a real one.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidField, .api, http: [400], meaning: "A field has a value that is not allowed; `field` names it.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidForm, .api, http: [400], meaning: "The request is not a Twilio message webhook of this account.", action: "Check the webhook URL set at Twilio: it names the app."),
        Entry(.invalidGzip, .api, http: [400], meaning: "The body is not valid gzip.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidIdentityToken, .api, http: [401], meaning: "The consumer identity token (JWT) is malformed, signed with another key, or outside its validity.", action: "Sign in again, or get a new token, then retry."),
        Entry(.invalidJson, .api, http: [400], meaning: "The body or frame is not valid JSON.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidKey, .api, http: [400], meaning: "The key is not a valid … key: PEM expected.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.invalidSignature, .api, http: [401], meaning: "The Authorization header's JWT is missing or wrong.", action: "Check the app's secret at the provider."),
        Entry(.invalidToken, .api, http: [401], meaning: "The token is not a Parley session token.", action: "Sign in again, or get a new token, then retry."),
        Entry(.keyExists, .api, http: [409], meaning: "The app already has a key with kid '…'.", action: "Register the new key under another kid, or delete the old one first."),
        Entry(.lastAdmin, .api, http: [409], meaning: "The agent is the brand's last enabled admin (parley admin disable).", action: "Enable or create another admin of the brand first."),
        Entry(.legalHold, .api, http: [409], meaning: "A legal hold covers this customer or one of their conversations; lift it first.", action: "A manager lifts the legal hold first (Records)."),
        Entry(.linkExpired, .api, http: [410], meaning: "This link has expired.", action: "Ask for a new one."),
        Entry(.logoTooLarge, .api, http: [413], meaning: "A logo is at most 2 MB.", action: "Send less: the message says the limit."),
        Entry(.mediaUnavailable, .api, http: [503], meaning: "Media storage is not answering. Send it again in a moment.", action: "Retry in a moment. Operator: the object store (PARLEY_S3_ENDPOINT) or the media directory is not answering; `/ready` says which."),
        Entry(.messageTooLong, .api, http: [413, 422], meaning: "The text is longer than the channel allows.", action: "Send less: the message says the limit."),
        Entry(.methodNotAllowed, .api, http: [405], meaning: "The endpoint exists but not with this HTTP method.", action: "Check the method against openapi.json."),
        Entry(.metricsForbidden, .api, http: [403], meaning: "Metrics are served to the loopback address only; set PARLEY_METRICS_TOKEN to read them from elsewhere.", action: "Operator: read /metrics from the loopback address, or set PARLEY_METRICS_TOKEN and send it."),
        Entry(.metricsTokenRequired, .api, http: [401], meaning: "Metrics need the metrics token as a bearer token.", action: "Operator: send PARLEY_METRICS_TOKEN as a bearer token."),
        Entry(.missingField, .api, http: [400], meaning: "The field '…' is required.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.noAnswer, .delivery, http: [], meaning: "The provider did not answer in time; the message may or may not have been sent.", action: "Nothing to do: the send is retried; if it keeps failing, check the provider's status."),
        Entry(.noOfferToAnswer, .api, http: [409], meaning: "There is no offer from the other side to answer.", action: "Wait for the other side's offer."),
        Entry(.noRecipient, .delivery, http: [], meaning: "This customer has no … id.", action: "The customer has no id on that channel; answer on another channel."),
        Entry(.notAllowedInCall, .api, http: [403], meaning: "This is not allowed during a call.", action: "The signed-in user may not do this; an admin can change what their profile allows."),
        Entry(.notConnected, .delivery, http: [], meaning: "The channel's app is not connected: an admin must connect it in Settings.", action: "An admin connects the channel in Settings; the message is retried."),
        Entry(.notFound, .api, http: [404], meaning: "The thing the request names does not exist (or belongs to another brand).", action: "Check the id (another brand's ids are not found either)."),
        Entry(.notResolved, .api, http: [409], meaning: "Only a resolved conversation can be reopened.", action: "Nothing to do: the conversation is open."),
        Entry(.notRetryable, .api, http: [409], meaning: "Only a failed message that can be sent again is retried.", action: "Nothing to do: the message was sent, or cannot be sent again."),
        Entry(.notSent, .delivery, http: [], meaning: "The message was given up after its last attempt.", action: "Retry it from the message (agents) once the cause the log names is fixed."),
        Entry(.notWaiting, .api, http: [409], meaning: "Only a conversation waiting for an agent has a place in the queue.", action: "Nothing to do: an agent has it, or it is closed."),
        Entry(.noteTooLong, .api, http: [422], meaning: "The note has … characters; at most … fit.", action: "Shorten the note."),
        Entry(.numberNotFound, .delivery, http: [], meaning: "The SMS number is not one of the Twilio account's numbers.", action: "Enter a number the Twilio account owns."),
        Entry(.numberTaken, .api, http: [409], meaning: "Another app is already connected to this SMS number.", action: "Disconnect the other app first, or connect this one to another number."),
        Entry(.offerCollision, .api, http: [409], meaning: "Both sides offered at once; the agent's offer stands. Roll back and answer it.", action: "Roll back the local offer and answer the agent's (the pages do)."),
        Entry(.originNotAllowed, .api, http: [403], meaning: "The request's Origin is not one this server or app allows.", action: "Operator: add the site's origin to PARLEY_ALLOWED_ORIGINS (or the app's allowed origins)."),
        Entry(.pageTaken, .api, http: [409], meaning: "Another app is already connected to this Facebook page.", action: "Disconnect the other app first, or connect this one to another page."),
        Entry(.payloadTooLarge, .api, http: [413], meaning: "The request body is too large.", action: "Send less: the message says the limit."),
        Entry(.permissionRequired, .api, http: [403], meaning: "Your profile does not allow sending voice messages (send_audio).", action: "The signed-in user may not do this; an admin can change what their profile allows."),
        Entry(.phoneNumberTaken, .api, http: [409], meaning: "Another app is already connected to this WhatsApp phone number id.", action: "Disconnect the other app first, or connect this one to another number."),
        Entry(.pushNotConfigured, .api, http: [409], meaning: "The app has no credentials for that push provider.", action: "An admin adds the app's push credentials (Settings, Apps) first."),
        Entry(.rangeNotSatisfiable, .api, http: [400], meaning: "The range is outside the … bytes of this file.", action: "Ask for a range inside the file."),
        Entry(.rateLimited, .api, http: [429], meaning: "Too many requests or frames in a short time.", action: "Wait `retryAfter` seconds (the Retry-After header), then retry."),
        Entry(.ratingNotRequested, .api, http: [409], meaning: "Only a closed conversation whose rating was asked for can be rated.", action: "Rate only when the rating is asked for."),
        Entry(.recordingLost, .sdk, http: [], meaning: "The recording is no longer on the device.", action: "The app should record the note again."),
        Entry(.renditionFailed, .api, http: [404], meaning: "This rendition of the voice note could not be made; the original can still be played.", action: "Check the id (another brand's ids are not found either)."),
        Entry(.renditionNotReady, .api, http: [409], meaning: "This rendition is still being made; try again shortly or play the original.", action: "Retry shortly, or play the original."),
        Entry(.replyWindowClosed, .api, http: [409], meaning: "The channel's reply window (WhatsApp, Messenger: 24 hours after the customer's last message) has closed.", action: "Send an approved template (WhatsApp) or wait for the customer to write."),
        Entry(.routeNotFound, .api, http: [404], meaning: "There is no such endpoint. See the OpenAPI document.", action: "Check the path against openapi.json."),
        Entry(.savedReplyLimit, .api, http: [409], meaning: "A brand has at most … saved replies; delete one first.", action: "Delete a saved reply first."),
        Entry(.scanPending, .api, http: [409], meaning: "This voice message is waiting for its malware scan; it can be played once the scan passes.", action: "Play it once the scan passes; the sender can play it already."),
        Entry(.scanUnavailable, .api, http: [503], meaning: "The malware scanner is unavailable; send the file again in a moment.", action: "Retry in a moment. Operator: clamd (PARLEY_CLAMD) is not answering; check it and its signatures."),
        Entry(.screenShareNotAllowed, .api, http: [403], meaning: "Screen sharing is not allowed for this side of the call.", action: "Agents need share_screen in their profile; customers share when an admin allows it in the brand's settings."),
        Entry(.transcriberUnavailable, .api, http: [409], meaning: "This server has no transcriber, so voice notes cannot be transcribed.", action: "Operator: set PARLEY_TRANSCRIBER (embedded, with pocketsphinx installed, or openai with an endpoint); see docs/transcription.md."),
        Entry(.sequenceOutOfRange, .api, http: [422], meaning: "'upToSeq' … is past the last sequence … of this conversation.", action: "Acknowledge only sequence numbers you received."),
        Entry(.sessionExpired, .api, http: [401], meaning: "This session has expired. Sign in again.", action: "Sign in again."),
        Entry(.sessionRevoked, .api, http: [401], meaning: "This session was signed out. Sign in again.", action: "Sign in again."),
        Entry(.shortcutTaken, .api, http: [409], meaning: "Another saved reply has the shortcut '/…'.", action: "Choose another shortcut."),
        Entry(.shuttingDown, .api, http: [503], meaning: "The server is restarting. Send it again in a moment.", action: "Retry in a moment: another node, or this one restarted, takes it."),
        Entry(.smsNotSupported, .delivery, http: [], meaning: "The Twilio number cannot send text messages.", action: "Use a number with SMS capability."),
        Entry(.teamLimit, .api, http: [409], meaning: "A brand has at most … teams.", action: "Delete a team first."),
        Entry(.teamNameTaken, .api, http: [409], meaning: "Another team is called '…'.", action: "Choose another name."),
        Entry(.teamNotFound, .api, http: [422], meaning: "There is no such team in this brand.", action: "Choose one of the brand's teams."),
        Entry(.templateNotFound, .api, http: [404], meaning: "No template '…' in … is set up for this app.", action: "Check the id (another brand's ids are not found either)."),
        Entry(.templatesNotSupported, .api, http: [422], meaning: "Templates are sent on WhatsApp only.", action: "Send a text message instead."),
        Entry(.tokenExpired, .api, http: [401], meaning: "The Authorization header's JWT is expired, older than … s, or issued in the future.", action: "The provider's clock or token age is off; check the provider's settings."),
        Entry(.tooManyEvents, .api, http: [413], meaning: "A batch has at most … events.", action: "Send less: the message says the limit."),
        Entry(.tooManyFrames, .api, http: [429], meaning: "This session sent too many real-time frames; wait … s before connecting again.", action: "Reconnect after the wait the message gives; a client should never send this fast."),
        Entry(.tooManyUploads, .api, http: [429], meaning: "Too many files are being uploaded at once; wait for one to finish.", action: "Wait for an upload to finish, then send."),
        Entry(.unauthenticated, .api, http: [401], meaning: "Sign in first: no valid session or token was given.", action: "Sign in again, or get a new token, then retry."),
        Entry(.unexpectedAnswer, .delivery, http: [], meaning: "WhatsApp answered with something Parley does not understand.", action: "Operator: the provider's answer changed; the log has it. The message is marked failed."),
        Entry(.unreachable, .delivery, http: [], meaning: "The provider could not be reached when the connection was tested.", action: "Check the server's outbound network and the provider's base URL setting, then test again."),
        Entry(.unsupportedAlgorithm, .api, http: [400], meaning: "The key's algorithm is not one Parley verifies identity tokens with; the message lists them.", action: "Fix the request as the message and `field` say; the same request fails again."),
        Entry(.unsupportedAttachment, .api, http: [415], meaning: "This kind of file is not accepted. Send an image (JPEG, PNG, GIF, WebP, HEIC), a PDF, plain text or an Office document.", action: "Send one of the accepted types the message lists."),
        Entry(.unsupportedAudio, .api, http: [415], meaning: "The upload is not audio Parley accepts.", action: "Send one of the accepted types the message lists."),
        Entry(.unsupportedFrame, .api, http: [], meaning: "A real-time frame was binary; frames are JSON text.", action: "Send JSON frames as text frames."),
        Entry(.unsupportedImage, .api, http: [415], meaning: "A logo is a PNG, JPEG, GIF or WebP image.", action: "Send one of the accepted types the message lists."),
        Entry(.unsupportedMediaType, .api, http: [415], meaning: "Send the body as application/json.", action: "Send one of the accepted types the message lists."),
        Entry(.upgradeRequired, .api, http: [400], meaning: "This endpoint speaks WebSocket: send an Upgrade request.", action: "Connect with a WebSocket client."),
        Entry(.uploadIncomplete, .api, http: [400], meaning: "The upload ended before its last byte. Send it again.", action: "Send it again."),
        Entry(.uploadStalled, .api, http: [408], meaning: "The upload stopped sending data for … s and was abandoned. Send it again.", action: "Send it again, on a steadier connection."),
        Entry(.uploadTooSlow, .api, http: [408], meaning: "The upload took longer than … s and was abandoned. Send it again on a better connection.", action: "Send it again, on a steadier connection."),
        Entry(.verificationFailed, .api, http: [403], meaning: "The verify token does not match.", action: "An admin checks the verify token set at the provider."),
        Entry(.videoNotAllowed, .api, http: [403], meaning: "Video is not allowed in this call: the inviting agent may make voice calls only.", action: "Stay on voice; an admin can allow video calls in the inviting agent's profile."),
        Entry(.voiceBlocked, .api, http: [403], meaning: "The malware scan blocked this voice message; it is never served.", action: "The note stays blocked and is never played; ask the customer for a new one."),
        Entry(.voiceBusy, .api, http: [503], meaning: "The server is processing many voice messages; send this one again in a few seconds.", action: "Retry in a few seconds. Operator: raise PARLEY_VOICE_WORKERS or add nodes if it happens at ordinary load."),
        Entry(.voiceDisabled, .api, http: [403], meaning: "This brand does not accept voice messages.", action: "An admin allows voice messages in the brand's settings."),
        Entry(.voiceTooLarge, .api, http: [413], meaning: "The voice message is larger than … MB.", action: "Send less: the message says the limit."),
        Entry(.voiceTooLong, .api, http: [422], meaning: "The voice message is …; this brand accepts at most ….", action: "Record a shorter note."),
        Entry(.voiceTooShort, .api, http: [422], meaning: "The voice message is shorter than the shortest the brand accepts.", action: "Record a longer note."),
        Entry(.voiceUnavailable, .api, http: [503], meaning: "The voice note could not be converted, so it was not sent on the channel.", action: "The voice note could not be converted; ask for it again or reply in text."),
        Entry(.wrongBusiness, .api, http: [403], meaning: "The destination-id is not this app's business.", action: "An admin checks the business id set for the app."),
        Entry(.wrongPassword, .api, http: [403], meaning: "The current password is wrong.", action: "Enter the current password again."),
    ]

    /// The catalogue's entry for this code, if it is one.
    public var entry: Entry? { Self.byCode[self] }

    private static let byCode: [ErrorCode: Entry] = Dictionary(uniqueKeysWithValues: catalogue.map { ($0.code, $0) })
}
