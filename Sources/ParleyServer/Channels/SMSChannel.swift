import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// SMS and MMS through Twilio Programmable Messaging: connecting a number, its form-encoded
/// webhooks (`X-Twilio-Signature`), MMS media, and the Messages resource with status callbacks.
///
/// The contract is Twilio's "Webhooks security" (HMAC-SHA1 of the exact URL and the sorted POST
/// parameters, base64, keyed with the auth token), "Twilio's request to your incoming message
/// Webhook URL" (`MessageSid`, `From`, `To`, `Body`, `NumMedia`, `MediaUrl{N}`,
/// `MediaContentType{N}`), the Messages resource (`POST /2010-04-01/Accounts/{sid}/Messages.json`
/// with `To`, `From`, `Body`, `MediaUrl`, `StatusCallback`) and its status callbacks
/// (`MessageStatus`, `ErrorCode`).
public struct SMSChannel: Sendable {
    let store: Store
    let connector: ChannelConnector
    let conversations: ConversationService
    let inbox: ChannelInbox
    let jobs: JobQueue
    let http: ProviderHTTP
    let links: SharedLinks
    /// `https://api.twilio.com`, or a local endpoint.
    let baseURL: String
    let mediaHosts: MediaHostAllowList
    /// `PARLEY_PUBLIC_URL`, when set: otherwise the address the admin connected from.
    let publicURL: String?
    let metrics: ParleyMetrics
    let clock: any WallClock
    let logger: Logger

    static let webhookJob = "sms.webhook"
    static let mediaJob = "sms.media"
    /// Twilio's webhooks are a few kilobytes of form fields.
    static let maxWebhookBytes = 64 * 1024
    /// The Messages resource: 10 media per message; 500 KB for media other than images.
    static let maxMedia = 10
    static let maxMMSAudioBytes = 500 * 1024
    static let maxMMSImageBytes = 5 * 1024 * 1024

    struct Secrets: Codable {
        var accountSid: String
        var authToken: String
    }

    /// Kept with the connection: the number, the address Twilio was given, and what the number can do.
    struct Settings: Codable {
        var phoneNumber: String
        var publicURL: String
        var mms: Bool?
    }

    static func webhookPath(_ appId: AppID) -> String { "/v1/webhooks/sms/\(appId)" }
    static func statusPath(_ appId: AppID) -> String { "/v1/webhooks/sms/\(appId)/status" }

    // MARK: Connecting

    /// `origin`: the address the admin's request came to (used when `PARLEY_PUBLIC_URL` is not set).
    public func connect(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectSMSRequest, origin: String) async throws -> ChannelConnectionDTO {
        let sid = request.accountSid
        guard sid.utf8.count == 34, sid.hasPrefix("AC"), sid.dropFirst(2).allSatisfy(\.isHexDigit) else {
            throw ParleyError.invalidField("accountSid", "'accountSid' is AC followed by 32 hexadecimal digits (Twilio Console → Account info).")
        }
        let phone = request.phoneNumber.filter { !" -().".contains($0) }
        guard Self.isE164(phone) else {
            throw ParleyError.invalidField("phoneNumber", "'phoneNumber' is the Twilio number in E.164, like +15557122661.")
        }
        let record = try await connector.connect(
            admin, appId: appId, channel: .sms, externalId: ("phoneNumber", String(phone.dropFirst()), "the Twilio number"),
            secrets: [("authToken", request.authToken)], sealing: Secrets(accountSid: sid, authToken: request.authToken),
            takenCode: .numberTaken)
        let earlier = Self.settings(record)
        let settings = Settings(phoneNumber: phone, publicURL: publicURL ?? origin, mms: earlier?.phoneNumber == phone ? earlier?.mms : nil)
        return Self.dto(try await save(settings, appId: appId, brandId: admin.brandId))
    }

    private func save(_ settings: Settings, appId: AppID, brandId: BrandID) async throws -> ChannelConnectionRecord {
        let text = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        return try await store.write { repo in
            guard var record = try await repo.channelConnection(appId: appId), record.brandId == brandId, record.channel == .sms else {
                throw ParleyError.notFound("Channel connection")
            }
            record.settings = text
            record.updatedAt = clock.now()
            try await repo.saveChannelConnection(record)
            return record
        }
    }

    static func isE164(_ phone: String) -> Bool {
        phone.hasPrefix("+") && (7...16).contains(phone.count) && phone.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }
            && phone.dropFirst().first != "0"
    }

    static func settings(_ record: ChannelConnectionRecord) -> Settings? {
        record.settings.flatMap { try? JSONDecoder().decode(Settings.self, from: Data($0.utf8)) }
    }

    public func connection(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelConnectionDTO {
        Self.dto(try await connector.record(admin, appId: appId, channel: .sms))
    }

    static func dto(_ record: ChannelConnectionRecord) -> ChannelConnectionDTO {
        let settings = settings(record)
        return ChannelConnectionDTO(
            appId: record.appId, channel: record.channel, externalId: settings?.phoneNumber ?? "+\(record.externalId)",
            webhookPath: webhookPath(record.appId), createdAt: record.createdAt, updatedAt: record.updatedAt,
            webhookURL: settings.map { $0.publicURL + webhookPath(record.appId) }, mms: settings?.mms)
    }

    func opened(_ appId: AppID) async throws -> (ChannelConnectionRecord, Secrets, Settings)? {
        guard let (record, secrets) = try await connector.opened(appId, channel: .sms, as: Secrets.self), let settings = Self.settings(record) else {
            return nil
        }
        return (record, secrets, settings)
    }

    func authorization(_ secrets: Secrets) -> String {
        "Basic " + Data("\(secrets.accountSid):\(secrets.authToken)".utf8).base64EncodedString()
    }

    /// "Test connection": looks the number up among the account's numbers (IncomingPhoneNumbers)
    /// and keeps whether it sends MMS.
    public func test(_ admin: AgentPrincipal, appId: AppID) async throws -> ChannelTestDTO {
        try admin.require(.admin)
        guard let (record, secrets, settings) = try await opened(appId), record.brandId == admin.brandId else {
            throw ParleyError.notFound("Channel connection")
        }
        let number = settings.phoneNumber.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? settings.phoneNumber
        var request = HTTPClientRequest(url: "\(baseURL)/2010-04-01/Accounts/\(secrets.accountSid)/IncomingPhoneNumbers.json?PhoneNumber=\(number)")
        request.headers = HTTPHeaders([("Authorization", authorization(secrets))])
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request)
        } catch {
            return ChannelTestDTO(ok: false, message: "Twilio could not be reached.", errorCode: ErrorCode.unreachable.rawValue)
        }
        guard answer.status == 200 else {
            let error = try? JSONDecoder().decode(TwilioError.self, from: answer.body)
            return ChannelTestDTO(
                ok: false, message: Self.sentence(code: error?.code, details: error?.message), errorCode: error?.code.map(String.init) ?? ErrorCode.http(answer.status).rawValue)
        }
        struct Numbers: Decodable {
            struct Number: Decodable {
                struct Capabilities: Decodable {
                    var sms: Bool?
                    var mms: Bool?
                    enum CodingKeys: String, CodingKey { case sms, mms = "mms", smsUpper = "SMS", mmsUpper = "MMS" }
                    init(from decoder: any Decoder) throws {
                        let c = try decoder.container(keyedBy: CodingKeys.self)
                        sms = try c.decodeIfPresent(Bool.self, forKey: .sms) ?? c.decodeIfPresent(Bool.self, forKey: .smsUpper)
                        mms = try c.decodeIfPresent(Bool.self, forKey: .mms) ?? c.decodeIfPresent(Bool.self, forKey: .mmsUpper)
                    }
                }
                var phoneNumber: String
                var friendlyName: String?
                var capabilities: Capabilities?
                enum CodingKeys: String, CodingKey { case phoneNumber = "phone_number", friendlyName = "friendly_name", capabilities }
            }
            var incomingPhoneNumbers: [Number]
            enum CodingKeys: String, CodingKey { case incomingPhoneNumbers = "incoming_phone_numbers" }
        }
        guard let numbers = try? JSONDecoder().decode(Numbers.self, from: answer.body),
            let found = numbers.incomingPhoneNumbers.first(where: { $0.phoneNumber == settings.phoneNumber })
        else {
            return ChannelTestDTO(
                ok: false, message: "\(settings.phoneNumber) is not a number of this Twilio account.", errorCode: ErrorCode.numberNotFound.rawValue)
        }
        guard found.capabilities?.sms != false else {
            return ChannelTestDTO(ok: false, message: "\(settings.phoneNumber) cannot send text messages.", errorCode: ErrorCode.smsNotSupported.rawValue)
        }
        let mms = found.capabilities?.mms == true
        var updated = settings
        updated.mms = mms
        _ = try await save(updated, appId: appId, brandId: admin.brandId)
        return ChannelTestDTO(
            ok: true,
            message: "Connected to \(settings.phoneNumber)"
                + (mms ? " (SMS and MMS: voice notes go as audio messages)." : " (SMS only: voice notes go as a link to a player page)."))
    }

    // MARK: Webhooks

    /// Checked, stored as a job, answered at once. `path` and `query` are what Twilio called: the
    /// signature covers the URL it was given (the connection's address with that path).
    public func receive(appId: AppID, path: String, query: String?, signature: String?, body: Data, isStatus: Bool) async throws {
        let connection = try await opened(appId)
        let parameters = FormBody.parse(body)
        let url = connection.map { $0.2.publicURL + path + (query.map { $0.isEmpty ? "" : "?\($0)" } ?? "") }
        guard let signature, let url, let (record, secrets, _) = connection,
            TwilioSignature.isValid(signature, url: url, parameters: parameters, authToken: secrets.authToken)
        else {
            logger.notice("refused a webhook without a valid signature", metadata: ["app": "\(appId)", "provider": "twilio"])
            metrics.webhooksRefused.increment()
            throw ParleyError(.unauthorized, code: .invalidSignature, message: "The X-Twilio-Signature header is missing or wrong.")
        }
        let fields = Dictionary(parameters, uniquingKeysWith: { first, _ in first })
        guard let sid = fields["MessageSid"], (1...64).contains(sid.utf8.count), fields["AccountSid"] == secrets.accountSid else {
            throw ParleyError(.badRequest, code: .invalidForm, message: "The request is not a Twilio message webhook of this account.")
        }
        let dedupe = isStatus ? "sms-status:\(sid):\(fields["MessageStatus"] ?? "")" : "sms:\(appId):\(sid)"
        try await jobs.enqueue(
            Self.webhookJob, WebhookJob(appId: appId, fields: fields, isStatus: isStatus), brandId: record.brandId, lane: "in:\(appId)",
            dedupeKey: dedupe)
    }

    struct WebhookJob: Codable, Sendable {
        var appId: AppID
        var fields: [String: String]
        var isStatus: Bool
    }

    struct MediaJob: Codable, Sendable {
        var appId: AppID
        var consumerId: ConsumerID
        /// The message's SID, with `:<index>` for media after the first item.
        var mid: String
        var kind: ChannelInbox.MediaKind
        var url: String
    }

    func process(_ job: WebhookJob) async throws {
        guard let (connection, _, _) = try await opened(job.appId) else { return }
        let fields = job.fields
        guard let sid = fields["MessageSid"] else { return }
        if job.isStatus {
            try await status(sid: sid, fields: fields)
            return
        }
        guard let from = fields["From"], Self.isE164(from) else {
            logger.notice("an SMS from a sender that is not a phone number was ignored", metadata: ["app": "\(job.appId)"])
            return
        }
        let consumer = try await inbox.consumer(
            .sms, providerUserId: from, name: nil, placeholder: Self.display(from), phone: from, connection: connection)
        let principal = ConsumerPrincipal(consumerId: consumer.id, brandId: connection.brandId, appId: connection.appId)
        let body = fields["Body"] ?? ""
        if !body.isEmpty {
            try await inbox.appendText(body, channel: .sms, providerMessageId: sid, principal)
        }
        let count = min(Int(fields["NumMedia"] ?? "0") ?? 0, Self.maxMedia)
        for index in 0..<max(0, count) {
            let mid = body.isEmpty && index == 0 ? sid : "\(sid):\(index)"
            guard let url = fields["MediaUrl\(index)"] else { continue }
            let type = (fields["MediaContentType\(index)"] ?? "").lowercased()
            let kind: ChannelInbox.MediaKind = type.hasPrefix("audio/") ? .audio : type.hasPrefix("image/") ? .image : .file
            if try await inbox.alreadyStored(consumer.id, providerMessageId: mid) { continue }
            try await jobs.enqueue(
                Self.mediaJob, MediaJob(appId: connection.appId, consumerId: consumer.id, mid: mid, kind: kind, url: url),
                brandId: connection.brandId, dedupeKey: "sms-media:\(mid)")
        }
        if body.isEmpty && count == 0 {
            try await inbox.appendText("[empty text message]", channel: .sms, providerMessageId: sid, principal)
        }
    }

    /// `+15558675310` as `+1 555 867 5310` (North American numbers), otherwise as given.
    static func display(_ phone: String) -> String {
        let digits = Array(phone.dropFirst())
        guard phone.hasPrefix("+1"), digits.count == 11 else { return phone }
        return "+1 \(String(digits[1..<4])) \(String(digits[4..<7])) \(String(digits[7...]))"
    }

    private func status(sid: String, fields: [String: String]) async throws {
        let code = fields["ErrorCode"].flatMap(Int.init)
        switch fields["MessageStatus"] ?? fields["SmsStatus"] ?? "" {
        case "delivered": try await conversations.providerStatus(channel: .sms, providerMessageId: sid, status: .delivered)
        case "read": try await conversations.providerStatus(channel: .sms, providerMessageId: sid, status: .read)
        case "undelivered", "failed":
            try await conversations.providerStatus(
                channel: .sms, providerMessageId: sid,
                status: .failed(
                    code: code.map(String.init) ?? "undelivered", message: Self.sentence(code: code, details: nil),
                    retryable: !(code.map(Self.final.contains) ?? false)))
        default: return
        }
    }

    /// MMS media: the media URL with the account's credentials (Twilio enforces HTTP Basic
    /// authentication on media), then the redirect to its CDN, each hop on the allow-list.
    func fetchMedia(_ job: MediaJob) async throws {
        guard let (connection, secrets, _) = try await opened(job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        try await inbox.ingest(
            url: job.url, headers: HTTPHeaders([("Authorization", authorization(secrets))]), allowed: mediaHosts, kind: job.kind,
            fileName: nil, cap: try await inbox.cap(job.kind, brandId: connection.brandId), channel: .sms, providerMessageId: job.mid,
            principal, redirects: 3)
    }

    func mediaLost(_ job: MediaJob, reason: String) async throws {
        guard let (connection, _, _) = try await opened(job.appId) else { return }
        let principal = ConsumerPrincipal(consumerId: job.consumerId, brandId: connection.brandId, appId: connection.appId)
        logger.warning("an MMS media item could not be fetched", metadata: ["app": "\(job.appId)", "error": "\(reason)"])
        try await inbox.appendText(
            "[MMS \(job.kind.noun) could not be fetched; ask the customer to send it again]", channel: .sms, providerMessageId: job.mid,
            principal)
    }

    // MARK: Errors

    /// Twilio's error body: `{"code": 21211, "message": "...", "more_info": "...", "status": 400}`.
    struct TwilioError: Decodable {
        var code: Int?
        var message: String?
    }

    /// Codes that mean "slow down", and refusals that sending again will not fix.
    static let throttled: Set<Int> = [20429, 14107]
    static let final: Set<Int> = [21211, 21610, 21612, 21614, 30004, 30005, 30006]

    static func sentence(code: Int?, details: String?) -> String {
        switch code {
        case 20003: "Twilio refused the account SID or auth token: an admin must reconnect SMS in Settings."
        case 21211: "This customer's phone number is not valid."
        case 21408: "Your Twilio account may not send to this customer's country: enable it in Twilio's geo permissions."
        case 21606, 21659: "This Twilio number cannot send text messages: an admin must check the number in Settings."
        case 21610: "The customer replied STOP: they receive no more texts until they reply START."
        case 21612: "This number cannot send a text to the customer's number (the carrier or country does not support it)."
        case 21614: "The customer's number is not a mobile number."
        case 30003: "The customer's phone is switched off or out of reach."
        case 30004: "The customer's number blocks this message."
        case 30005: "The customer's number is unknown or no longer in service."
        case 30006: "The customer's number is a landline or cannot receive texts."
        case 30007: "The carrier filtered this message as spam."
        case 30008: "The carrier could not deliver the message (unknown error)."
        case 20429: "Twilio's rate limit was reached."
        default: "Twilio refused the message" + (details.map { ": \($0.prefix(300))" } ?? ".")
        }
    }
}

/// `application/x-www-form-urlencoded` bodies (Twilio's webhooks): `+` is a space, then
/// percent-decoding; a key may repeat.
enum FormBody {
    static func parse(_ body: Data) -> [(String, String)] {
        String(decoding: body, as: UTF8.self).split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? { part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let key = parts.first.flatMap(decode), !key.isEmpty else { return nil }
            return (key, parts.count > 1 ? decode(parts[1]) ?? "" : "")
        }
    }

    /// The same encoding back (for requests to Twilio): unreserved characters as they are.
    static func encode(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { key, value in
            "\(key.addingPercentEncoding(withAllowedCharacters: allowed) ?? key)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)"
        }.joined(separator: "&")
    }
}

/// `X-Twilio-Signature`: base64 of HMAC-SHA1, keyed with the auth token, over the full URL Twilio
/// called followed by each POST parameter's name and value, sorted by name (then value). Twilio's
/// own validators also accept the URL with the default port added or removed, since proxies differ
/// in what they pass on; so does this one.
enum TwilioSignature {
    static func compute(url: String, parameters: [(String, String)], authToken: String) -> String {
        var text = url
        for (key, value) in parameters.sorted(by: { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }) {
            text += key + value
        }
        let code = HMAC<Insecure.SHA1>.authenticationCode(for: Data(text.utf8), using: SymmetricKey(data: Data(authToken.utf8)))
        return Data(code).base64EncodedString()
    }

    static func isValid(_ signature: String, url: String, parameters: [(String, String)], authToken: String) -> Bool {
        guard !signature.isEmpty, signature.utf8.count <= 64 else { return false }
        return variants(of: url).contains { candidate in
            Data(compute(url: candidate, parameters: parameters, authToken: authToken).utf8).constantTimeEquals(Data(signature.utf8))
        }
    }

    /// The URL as given, without its port, and with the scheme's default port.
    static func variants(of url: String) -> [String] {
        guard var components = URLComponents(string: url), let scheme = components.scheme else { return [url] }
        var variants = [url]
        if components.port != nil {
            components.port = nil
            if let plain = components.string { variants.append(plain) }
        } else {
            components.port = scheme == "https" ? 443 : 80
            if let explicit = components.string { variants.append(explicit) }
        }
        return variants
    }
}

/// The agent's side: text as `Body`; a voice note as MMS audio (the AAC rendition, a link Twilio
/// fetches) when the number sends MMS, the customer is on a North American number (where MMS
/// works) and the file is within Twilio's 500 KB for non-image media, otherwise a text with a link
/// to a player page; images likewise (up to 5 MB), other files as a link.
struct SMSOutbound: OutboundConnector {
    let channel = Channel.sms
    let sms: SMSChannel

    func send(_ message: MessageDTO, in conversation: ConversationDTO, template: ChannelSendJob.Template?) async throws -> String {
        guard let (_, secrets, settings) = try await sms.opened(conversation.appId) else {
            throw DeliveryRefused(
                code: ErrorCode.notConnected.rawValue, message: "This SMS app is not connected: an admin must connect it in Settings.", retryable: true)
        }
        let store = sms.store
        let to = try await OutboundMedia.recipient(conversation, channel: .sms, store: store)
        var fields: [(String, String)] = [
            ("To", to), ("From", settings.phoneNumber), ("StatusCallback", settings.publicURL + SMSChannel.statusPath(conversation.appId)),
        ]
        let mms = settings.mms == true && to.hasPrefix("+1")
        let brand = try await store.read { repo in try await repo.brand(id: conversation.brandId) }?.name ?? "us"
        let link = settings.publicURL + sms.links.path(brandId: conversation.brandId, messageId: message.id)
        switch message.kind {
        case .text:
            fields.append(("Body", message.text))
        case .voice:
            guard let voice = try await store.read({ repo in try await repo.voice(messageId: message.id, brandId: conversation.brandId) }) else {
                throw JobFailure.permanent("the voice note is gone")
            }
            switch voice.state {
            case .processing: throw JobFailure.notYet(after: .seconds(1))
            case .failed, .blocked:
                throw DeliveryRefused(code: ErrorCode.voiceUnavailable.rawValue, message: "The voice note could not be converted, so it was not sent.", retryable: false)
            case .ready: break
            }
            if mms, let bytes = voice.aacBytes, bytes <= SMSChannel.maxMMSAudioBytes {
                fields.append(("MediaUrl", link + "/media"))
            } else {
                let seconds = max(1, (voice.durationMs + 500) / 1000)
                fields.append(("Body", "Voice message from \(brand) (\(seconds / 60):\(String(format: "%02d", seconds % 60))): \(link)"))
            }
        case .attachment:
            guard let file = try await store.read({ repo in try await repo.attachment(messageId: message.id, brandId: conversation.brandId) }) else {
                throw JobFailure.permanent("the attachment is gone")
            }
            if mms, [.jpeg, .png, .gif].contains(file.type), file.bytes <= SMSChannel.maxMMSImageBytes {
                fields.append(("MediaUrl", link + "/media"))
            } else {
                fields.append(("Body", "\(file.fileName) from \(brand): \(link)"))
            }
        }
        var request = HTTPClientRequest(url: "\(sms.baseURL)/2010-04-01/Accounts/\(secrets.accountSid)/Messages.json")
        request.method = .POST
        request.headers = HTTPHeaders([
            ("Authorization", sms.authorization(secrets)), ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ])
        request.body = .bytes(ByteBuffer(string: FormBody.encode(fields)))
        let answer = try await sms.http.deliver(request) { answer in
            let error = try? JSONDecoder().decode(SMSChannel.TwilioError.self, from: answer.body)
            return ProviderRefusal(
                code: error?.code.map(String.init), throttled: error?.code.map(SMSChannel.throttled.contains) == true,
                final: error?.code.map(SMSChannel.final.contains) == true, sentence: SMSChannel.sentence(code: error?.code, details: error?.message))
        }
        struct Created: Decodable { var sid: String }
        guard let created = try? JSONDecoder().decode(Created.self, from: answer.body), !created.sid.isEmpty else {
            throw JobFailure.permanent("Twilio's answer has no message sid")
        }
        return created.sid
    }
}
