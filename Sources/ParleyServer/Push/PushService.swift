import AsyncHTTPClient
import Crypto
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization

/// Push notifications for consumers who are not connected: when an agent writes (a message, a
/// voice note, a call invitation) in a conversation whose consumer has no live connection on this
/// node, each of the consumer's registered devices gets a `push.send` job. A notification never
/// blocks or delays delivery: the message is stored and published first; a failed push is retried
/// with back-off, and a token the provider reports invalid is deleted.
public struct PushService: Sendable {
    /// Devices, push credentials and who a push is for.
    typealias Stores = any PushStore & IdentityStore

    let store: StoreAccess<Stores>
    let secrets: SecretBox
    let presence: any PresenceDirectory
    let jobs: JobQueue
    let limits: RateLimits
    /// The push services browsers' subscriptions may point to.
    let webPushHosts: MediaHostAllowList
    let vapidPublicKey: String
    let clock: any WallClock
    let logger: Logger

    static let jobKind = "push.send"
    /// Devices one consumer keeps registered; a further one replaces the one registered longest ago.
    static let devicesPerConsumer = 10
    /// APNs device tokens: 32 bytes today, in hex; Apple asks providers not to rely on the length, so up to 100 bytes.
    static let apnsTokenLength = 64...200
    /// FCM registration tokens: about 150-180 characters of base64url and a colon in practice.
    static let fcmTokenLength = 32...512
    static let fcmTokenCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_:")

    // MARK: Consumers' devices

    public func register(_ consumer: ConsumerPrincipal, _ request: RegisterPushRequest) async throws -> PushRegistrationDTO {
        let token = request.token.trimmingCharacters(in: .whitespaces)
        switch request.provider {
        case .apns:
            guard Self.apnsTokenLength.contains(token.count), token.allSatisfy(\.isHexDigit) else {
                throw ParleyError.invalidField("token", "An APNs device token is hexadecimal (64 digits from the device).")
            }
        case .fcm:
            guard Self.fcmTokenLength.contains(token.count), token.unicodeScalars.allSatisfy(Self.fcmTokenCharacters.contains) else {
                throw ParleyError.invalidField("token", "An FCM registration token is \(Self.fcmTokenLength.lowerBound)-\(Self.fcmTokenLength.upperBound) characters of A-Z a-z 0-9 - _ :.")
            }
        case .webpush:
            // The endpoint comes from the browser: only known push services are ever called.
            guard token.count <= 2048, webPushHosts.allows(token) else {
                throw ParleyError.invalidField("token", "The subscription's endpoint is not a push service this server sends to.")
            }
            guard let keys = request.keys, let p256dh = Data(base64URL: keys.p256dh), p256dh.count == 65, p256dh.first == 4,
                let auth = Data(base64URL: keys.auth), auth.count == 16
            else { throw ParleyError.invalidField("keys", "A Web Push subscription needs its keys: p256dh (65 bytes) and auth (16 bytes), base64url.") }
        }
        if let environment = request.environment, !["production", "sandbox"].contains(environment) {
            throw ParleyError.invalidField("environment", "'environment' is production or sandbox.")
        }
        try await limits.pushRegistrations.check(consumer.consumerId.rawValue, "push registrations")
        // A device of a provider the app cannot send through would only ever queue jobs that fail
        // (Web Push signs with the server's own key: it needs nothing from the app).
        if request.provider != .webpush,
            try await store.read({ repo in try await repo.pushCredentials(appId: consumer.appId, provider: request.provider) }) == nil
        {
            throw ParleyError(
                .conflict, code: .pushNotConfigured,
                message: "This app has no \(request.provider == .apns ? "APNs" : "FCM") credentials: the brand's admin adds them first.")
        }
        let now = clock.now()
        let saved = try await store.write { repo in
            try await repo.savePushRegistration(keepingAtMost: Self.devicesPerConsumer, PushRegistrationRecord(
                id: "push_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased(), brandId: consumer.brandId, appId: consumer.appId, consumerId: consumer.consumerId,
                provider: request.provider, token: request.provider == .apns ? token.lowercased() : token,
                environment: request.environment,
                keys: try request.keys.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }, createdAt: now, updatedAt: now))
        }
        return PushRegistrationDTO(id: saved.id, provider: saved.provider, createdAt: saved.createdAt)
    }

    public func unregister(_ consumer: ConsumerPrincipal, _ request: RegisterPushRequest) async throws {
        let token = request.provider == .apns ? request.token.lowercased() : request.token
        guard try await store.write({ repo in
            try await repo.deletePushRegistration(consumerId: consumer.consumerId, provider: request.provider, token: token)
        }) else { throw ParleyError.notFound("Push registration") }
    }

    // MARK: Apps' credentials

    struct APNsSecrets: Codable {
        var teamId: String
        var keyId: String
        var privateKey: String
    }

    struct APNsSettings: Codable {
        var topic: String
    }

    /// Another brand's app is not found, before anything about the request is said.
    private func requireApp(_ appId: AppID, of admin: AgentPrincipal) async throws {
        guard let app = try await store.read({ repo in try await repo.app(id: appId) }), app.brandId == admin.brandId else {
            throw ParleyError.notFound("App")
        }
    }

    public func connectAPNs(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectAPNsRequest) async throws -> PushConnectionDTO {
        try admin.require(.admin)
        try await requireApp(appId, of: admin)
        for (field, value) in [("teamId", request.teamId), ("keyId", request.keyId)] {
            guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
                throw ParleyError.invalidField(field, "'\(field)' is the 10 characters Apple shows (letters and digits).")
            }
        }
        guard (3...255).contains(request.topic.count), request.topic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) })
        else { throw ParleyError.invalidField("topic", "'topic' is the app's bundle id, like com.acme.shop.") }
        guard request.privateKey.count <= 4096, (try? ES256PrivateKey(pem: request.privateKey)) != nil else {
            throw ParleyError.invalidField("privateKey", "'privateKey' is the APNs auth key (.p8), PEM.")
        }
        let sealed = try secrets.seal(String(decoding: try JSONEncoder().encode(
            APNsSecrets(teamId: request.teamId, keyId: request.keyId, privateKey: request.privateKey)), as: UTF8.self))
        let settings = String(decoding: try JSONEncoder().encode(APNsSettings(topic: request.topic)), as: UTF8.self)
        let now = clock.now()
        try await store.write { repo in
            guard let app = try await repo.app(id: appId), app.brandId == admin.brandId else { throw ParleyError.notFound("App") }
            try await repo.savePushCredentials(PushCredentialsRecord(
                appId: appId, provider: .apns, brandId: admin.brandId, sealedSecrets: sealed, settings: settings, updatedAt: now))
        }
        return PushConnectionDTO(appId: appId, provider: .apns, topic: request.topic, updatedAt: now)
    }

    public func connectFCM(_ admin: AgentPrincipal, appId: AppID, _ request: ConnectFCMRequest) async throws -> PushConnectionDTO {
        try admin.require(.admin)
        try await requireApp(appId, of: admin)
        guard request.serviceAccount.utf8.count <= 16 * 1024,
            let account = try? JSONDecoder().decode(FCMSender.ServiceAccount.self, from: Data(request.serviceAccount.utf8))
        else { throw ParleyError.invalidField("serviceAccount", "'serviceAccount' is the service account key file's JSON, with project_id, client_email and private_key.") }
        guard (3...100).contains(account.projectId.count), account.projectId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw ParleyError.invalidField("serviceAccount", "The service account's project_id is not a Firebase project id.")
        }
        guard account.clientEmail.contains("@"), (try? Insecure.RSA.PrivateKey(pem: account.privateKey)) != nil else {
            throw ParleyError.invalidField("serviceAccount", "The service account's client_email or private_key is not usable.")
        }
        let sealed = try secrets.seal(String(decoding: try JSONEncoder().encode(account), as: UTF8.self))
        let settings = String(decoding: try JSONEncoder().encode(APNsSettings(topic: account.projectId)), as: UTF8.self)
        let now = clock.now()
        try await store.write { repo in
            guard let app = try await repo.app(id: appId), app.brandId == admin.brandId else { throw ParleyError.notFound("App") }
            try await repo.savePushCredentials(PushCredentialsRecord(
                appId: appId, provider: .fcm, brandId: admin.brandId, sealedSecrets: sealed, settings: settings, updatedAt: now))
        }
        return PushConnectionDTO(appId: appId, provider: .fcm, topic: account.projectId, updatedAt: now)
    }

    public func connections(_ admin: AgentPrincipal) async throws -> [PushConnectionDTO] {
        try admin.require(.admin)
        return try await store.read { repo in try await repo.pushCredentials(brandId: admin.brandId) }.map { record in
            PushConnectionDTO(
                appId: record.appId, provider: record.provider,
                topic: record.settings.flatMap { try? JSONDecoder().decode(APNsSettings.self, from: Data($0.utf8)) }?.topic,
                updatedAt: record.updatedAt)
        }
    }

    // MARK: Deciding to notify

    /// Watches what happens: an agent's message, or a call that starts ringing, for a consumer
    /// without a live connection here, becomes one job per registered device. Jobs are keyed by
    /// what they announce and the device, so every node may see the event and still only one
    /// notification goes out.
    func watch(_ bus: any EventBus) {
        bus.subscribe(domain: { event in
            let announcement: Announcement?
            switch event {
            case .messageLogged(let message, let brandId, let consumerId) where message.senderKind != .consumer:
                // A connected consumer needs no notification.
                guard !presence.isConnected(consumerId: consumerId) else { return }
                announcement = Announcement(
                    key: message.id.rawValue, brandId: brandId, consumerId: consumerId, conversationId: message.conversationId,
                    kind: message.kind == .voice ? .voice : message.kind == .attachment ? .attachment : .text,
                    text: message.kind == .text ? String(message.text.prefix(180)) : nil, badgeSeq: message.seq)
            case .callRinging(let call, let brandId, let consumerId):
                guard !presence.isConnected(consumerId: consumerId) else { return }
                announcement = Announcement(
                    key: "\(call.id.rawValue):ringing", brandId: brandId, consumerId: consumerId, conversationId: call.conversationId,
                    kind: .call, text: nil, badgeSeq: nil)
            default:
                announcement = nil
            }
            guard let announcement else { return }
            Task { await self.enqueue(announcement) }
        })
    }

    /// What a notification is about.
    struct Announcement: Codable, Sendable {
        enum Kind: String, Codable, Sendable { case text, voice, attachment, call }
        var key: String
        var brandId: BrandID
        var consumerId: ConsumerID
        var conversationId: ConversationID
        var kind: Kind
        var text: String?
        var badgeSeq: Int64?
    }

    struct Job: Codable, Sendable {
        var registrationId: String
        var announcement: Announcement
    }

    private func enqueue(_ announcement: Announcement) async {
        do {
            let (registrations, configured) = try await store.read { repo in
                (
                    try await repo.pushRegistrations(consumerId: announcement.consumerId),
                    try await repo.pushCredentials(brandId: announcement.brandId)
                )
            }
            // Only devices the app can reach: a registration whose provider lost its credentials queues nothing.
            for registration in registrations
            where registration.brandId == announcement.brandId
                && (registration.provider == .webpush || configured.contains { $0.appId == registration.appId && $0.provider == registration.provider })
            {
                try await jobs.enqueue(
                    Self.jobKind, Job(registrationId: registration.id, announcement: announcement), brandId: announcement.brandId,
                    dedupeKey: "push:\(announcement.key):\(registration.id)")
            }
        } catch {
            logger.warning("could not queue push notifications", metadata: ["error": "\(error)"])
        }
    }
}
