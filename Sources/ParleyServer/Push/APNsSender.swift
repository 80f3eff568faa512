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

/// Runs `push.send` jobs: through FCM for Android devices (`FCMSender`), and through the Apple
/// Push Notification service: HTTP/2 (AsyncHTTPClient
/// negotiates it), token-based authentication (an ES256 JWT with the team id as issuer and the key
/// id as `kid`, kept for 50 minutes: Apple refuses tokens older than an hour and asks providers not
/// to make new ones more often than every 20 minutes), `apns-topic`, `apns-push-type: alert`,
/// `apns-collapse-id` (one notification per conversation on the lock screen) and the badge: the
/// agents' messages the consumer has not read.
struct PushSender: JobHandler {
    let kind = PushService.jobKind
    let store: Store
    let secrets: SecretBox
    let http: ProviderHTTP
    /// Replaces Apple's two hosts (production, sandbox): a local endpoint in tests.
    let apnsURL: String?
    let tokens: APNsTokens
    let fcm: FCMSender
    let webPush: WebPushSender
    let clock: any WallClock
    let logger: Logger

    static let production = "https://api.push.apple.com"
    static let sandbox = "https://api.sandbox.push.apple.com"

    func run(_ job: JobRecord) async throws {
        let payload = try JSONDecoder().decode(PushService.Job.self, from: Data(job.payload.utf8))
        let announcement = payload.announcement
        let found = try await store.read { repo -> (PushRegistrationRecord, PushCredentialsRecord?, BrandDTO?, BrandSettingsDTO, Int)? in
            guard let registration = try await repo.pushRegistrations(consumerId: announcement.consumerId)
                .first(where: { $0.id == payload.registrationId })
            else { return nil }
            let unread = try await repo.messages(conversationId: announcement.conversationId, afterSeq: 0, limit: 500)
                .filter { $0.senderKind != .consumer && $0.deliveryState != .read }.count
            return (
                registration, try await repo.pushCredentials(appId: registration.appId, provider: registration.provider),
                try await repo.brand(id: registration.brandId), try await repo.brandSettings(brandId: registration.brandId), unread
            )
        }
        // The device unregistered since, or the app has no credentials for its provider: nothing to send.
        guard let (registration, credentials, brand, settings, unread) = found else { return }
        let alert = Self.alert(announcement, brand: brand?.name ?? "Support", preview: settings.pushPreview)
        if registration.provider == .webpush {
            // The server's own VAPID key: no app credentials needed.
            guard let keys = registration.keys.flatMap({ try? JSONDecoder().decode(WebPushKeys.self, from: Data($0.utf8)) }) else { return }
            let payload = try JSONSerialization.data(withJSONObject: [
                "title": alert.title, "body": alert.body, "conversationId": announcement.conversationId.rawValue,
                "kind": announcement.kind.rawValue, "badge": unread, "appId": registration.appId.rawValue,
            ], options: [.sortedKeys])
            let topic = Data(SHA256.hash(data: Data(announcement.conversationId.rawValue.utf8)).prefix(24)).base64URLEncoded
            if case .gone = try await webPush.send(endpoint: registration.token, keys: keys, payload: payload, topic: topic, now: clock.now()) {
                try await store.write { repo in try await repo.deletePushRegistration(id: registration.id) }
                logger.info("deleted a Web Push subscription the push service reported gone")
            }
            return
        }
        guard let credentials else { return }
        switch registration.provider {
        case .apns:
            try await sendAPNs(registration, credentials: credentials, alert: alert, announcement: announcement, badge: unread)
        case .fcm:
            let account = try JSONDecoder().decode(FCMSender.ServiceAccount.self, from: Data(try secrets.open(credentials.sealedSecrets).utf8))
            let outcome = try await fcm.send(
                token: registration.token, account: account, appId: credentials.appId, credentialsAt: credentials.updatedAt, now: clock.now(),
                alert: alert, announcement: announcement, badge: unread)
            if case .unregistered = outcome {
                try await store.write { repo in try await repo.deletePushRegistration(id: registration.id) }
                logger.info("deleted a push token FCM reported unregistered")
            }
        case .webpush:
            return
        }
    }

    /// What the notification says: the brand, and the text only where the brand chose to show it.
    static func alert(_ announcement: PushService.Announcement, brand: String, preview: PushPreview) -> (title: String, body: String) {
        switch (announcement.kind, preview) {
        case (.call, _): (brand, "Incoming call")
        case (.text, .text): (brand, announcement.text ?? "New message")
        case (.voice, .text): (brand, "🎤 Voice message")
        case (.attachment, .text): (brand, "📎 Attachment")
        case (.voice, .masked): (brand, "New voice message from \(brand)")
        case (_, .masked): (brand, "New message from \(brand)")
        }
    }

    private func sendAPNs(
        _ registration: PushRegistrationRecord, credentials: PushCredentialsRecord, alert: (title: String, body: String),
        announcement: PushService.Announcement, badge: Int
    ) async throws {
        let secrets = try JSONDecoder().decode(PushService.APNsSecrets.self, from: Data(try self.secrets.open(credentials.sealedSecrets).utf8))
        guard let topic = credentials.settings.flatMap({ try? JSONDecoder().decode(PushService.APNsSettings.self, from: Data($0.utf8)) })?.topic
        else { throw JobFailure.permanent("the APNs credentials have no topic") }
        let base = apnsURL ?? (registration.environment == "sandbox" ? Self.sandbox : Self.production)
        let token = try await tokens.token(appId: credentials.appId, updatedAt: credentials.updatedAt, secrets: secrets, now: clock.now())
        var request = HTTPClientRequest(url: "\(base)/3/device/\(registration.token)")
        request.method = .POST
        request.headers = HTTPHeaders([
            ("authorization", "bearer \(token)"), ("apns-topic", topic), ("apns-push-type", "alert"), ("apns-priority", "10"),
            ("apns-collapse-id", String(announcement.conversationId.rawValue.prefix(64))),
            ("apns-expiration", String(Int(clock.now().timeIntervalSince1970) + 24 * 3600)), ("content-type", "application/json"),
        ])
        let body: [String: Any] = [
            "aps": [
                "alert": ["title": alert.title, "body": alert.body], "sound": "default", "badge": badge,
                "thread-id": announcement.conversationId.rawValue,
            ],
            "parley": ["conversationId": announcement.conversationId.rawValue, "kind": announcement.kind.rawValue],
        ]
        request.body = .bytes(ByteBuffer(data: try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])))
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request, maxBytes: 64 * 1024)
        } catch {
            throw JobFailure.retry("APNs: \(error)")
        }
        struct Reason: Decodable { var reason: String? }
        let reason = (try? JSONDecoder().decode(Reason.self, from: answer.body))?.reason ?? "HTTP \(answer.status)"
        switch answer.status {
        case 200:
            return
        case _ where answer.status == 410 || (answer.status == 400 && ["BadDeviceToken", "DeviceTokenNotForTopic"].contains(reason)):
            // 410: the app was removed; 400 with these reasons: the token belongs elsewhere. Never again.
            try await store.write { repo in try await repo.deletePushRegistration(id: registration.id) }
            logger.info("deleted a push token APNs refused", metadata: ["reason": "\(reason)"])
        case 403 where reason == "ExpiredProviderToken" || reason == "InvalidProviderToken":
            tokens.forget(credentials.appId)
            throw JobFailure.retry("APNs: \(reason)")
        case 429, 500...:
            throw JobFailure.retry("APNs: \(reason)", after: answer.retryAfter)
        default:
            throw JobFailure.permanent("APNs refused the notification: \(reason)")
        }
    }
}

/// The APNs provider tokens, one per app, reused for 50 minutes (and made again when the app's
/// credentials change or APNs says the token expired).
final class APNsTokens: Sendable {
    private let cache = Mutex<[AppID: (token: String, issuedAt: Date, credentialsAt: Date)]>([:])
    static let lifetime: TimeInterval = 50 * 60

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func token(appId: AppID, updatedAt: Date, secrets: PushService.APNsSecrets, now: Date) async throws -> String {
        if let cached = cache.withLock({ $0[appId] }), cached.credentialsAt == updatedAt, now.timeIntervalSince(cached.issuedAt) < Self.lifetime {
            return cached.token
        }
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: secrets.privateKey), kid: JWKIdentifier(string: secrets.keyId))
        let token = try await keys.sign(Claims(iss: IssuerClaim(value: secrets.teamId), iat: IssuedAtClaim(value: now)), kid: JWKIdentifier(string: secrets.keyId))
        cache.withLock { $0[appId] = (token, now, updatedAt) }
        return token
    }

    func forget(_ appId: AppID) {
        cache.withLock { _ = $0.removeValue(forKey: appId) }
    }
}
